#!/bin/sh
# Compile-time benchmark: the whole stdlib as one module, cold (empty cache)
# and cached, as `qrl check --time` reports them. Targets: cold <= 300 ms,
# cached load <= 10 ms (medians). Usage: bench/compile.sh [BUILD_DIR] [RUNS]
B=${1:-build}
RUNS=${2:-5}
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
all="$tmp/all.qrl"
for f in stdlib/*.qrl; do echo "import \"$(pwd)/$f\""; done > "$all"
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
cold=""
warm=""
i=0
while [ $i -lt "$RUNS" ]; do
    rm -rf "$tmp/cache"
    out=$(XDG_CACHE_HOME="$tmp/cache" "$B/qrl" check "$all" --time) || { echo "$out"; exit 1; }
    cold="$cold $(echo "$out" | sed -n 's/.*check \([0-9.]*\) ms, jit \([0-9.]*\) ms, load \([0-9.]*\) ms.*/\1 \2 \3/p' |
        awk '{print $1 + $2 + $3}')"
    i=$((i + 1))
done
i=0
while [ $i -lt $((RUNS * 2)) ]; do
    out=$(XDG_CACHE_HOME="$tmp/cache" "$B/qrl" check "$all" --time) || exit 1
    warm="$warm $(echo "$out" | sed -n 's/.*cache load \([0-9.]*\) ms (hit).*/\1/p')"
    i=$((i + 1))
done
front=$(echo "$out" | sed -n 's/.*lex \([0-9.]*\) ms, parse \([0-9.]*\) ms, check \([0-9.]*\) ms.*/\1 \2 \3/p' |
    awk '{print $1 + $2 + $3}')
nfiles=$(ls stdlib/*.qrl | wc -l)
c=$(echo $cold | tr ' ' '\n' | median)
w=$(echo $warm | tr ' ' '\n' | median)
echo "stdlib: $nfiles files, $(cat stdlib/*.qrl | wc -l) lines"
awk -v c="$c" -v w="$w" 'BEGIN {
    printf "cold compile (check + jit + load): %8.1f ms   target 300 ms   ratio %.2f\n", c, c / 300
    printf "cached load:                       %8.3f ms   target  10 ms   ratio %.3f\n", w, w / 10
}'
printf 'front end on a cache hit (lex + parse + check): %.3f ms\n' "$front"
