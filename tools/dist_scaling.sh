#!/bin/sh
# The scaling table of docs/distributed.md: qrl quantize as one process and under
# mpirun -np 1, 2 and 4 (oversubscribed on fewer cores), each rank on one thread: wall time, peak
# RSS of every rank (/usr/bin/time -v) and whether the export, qparams and JSON report (but its
# timings) are byte-identical to the one-process run's. Do not edit the recipe or the stdlib while it runs: the export records
# their hash.
# Usage: sh tools/dist_scaling.sh MODEL.onnx RECIPE.qrl CALIB.npy OUT_DIR [BATCH] [NPS]
set -e
model=$1 recipe=$2 calib=$3 out=$4 batch=${5:-16} nps=${6:-"1 2 4"}
qrl=${QRL_BIN:-build/qrl}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
q="$qrl quantize $model --recipe $recipe --calib $calib --batch $batch --threads 1 --quiet"
now() { date +%s.%N; }
rss() { # the peak RSS (MB) in each /usr/bin/time -v file given
    for f in "$@"; do awk '/Maximum resident/ { printf "%d ", $6 / 1024 }' "$f"; done
}
cpu() { # the CPU seconds (user + system) in each
    for f in "$@"; do awk '/User time|System time/ { t += $NF } END { printf "%.1f ", t }' "$f"; done
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load:$(uptime | sed 's/.*load average://')"
echo "model: $model  recipe: $recipe  calib: $calib  batch: $batch"
cal() { sed -n 's/^calibration: .* in \([0-9]*\) ms.*/\1/p' "$1"; }
printf "%-14s %8s %10s %-22s %-22s %s\n" run "wall s" "calib ms" "peak RSS MB per rank" "CPU s per rank" "same as one process"
t0=$(now)
/usr/bin/time -v -o "$out/time.one" $q -o "$out/one.onnx" --qparams "$out/one.json" --report "$out/one.rep.json" > "$out/one.log"
t1=$(now)
printf "%-14s %8.1f %10s %-22s %-22s %s\n" "one process" "$(echo "$t1 - $t0" | bc)" "$(cal "$out/one.log")" "$(rss "$out/time.one")" "$(cpu "$out/time.one")" "-"
for n in $nps; do
    rm -f "$out"/time.np$n.*
    t0=$(now)
    mpirun --oversubscribe -np "$n" sh -c "exec /usr/bin/time -v -o $out/time.np$n.\$OMPI_COMM_WORLD_RANK $q -o $out/np$n.onnx --qparams $out/np$n.json --report $out/np$n.rep.json" > "$out/np$n.log"
    t1=$(now)
    same=no
    grep -v '_ms"' "$out/one.rep.json" > "$out/one.rep.cmp"
    grep -v '_ms"' "$out/np$n.rep.json" > "$out/np$n.rep.cmp"
    cmp -s "$out/one.onnx" "$out/np$n.onnx" && cmp -s "$out/one.json" "$out/np$n.json" &&
        cmp -s "$out/one.rep.cmp" "$out/np$n.rep.cmp" && same=yes
    printf "%-14s %8.1f %10s %-22s %-22s %s\n" "mpirun -np $n" "$(echo "$t1 - $t0" | bc)" "$(cal "$out/np$n.log")" "$(rss "$out"/time.np$n.*)" "$(cpu "$out"/time.np$n.*)" "$same"
done
