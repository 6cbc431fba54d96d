#!/bin/bash
# Runs every Criterion test binary given, TEST_JOBS of them at a time (default 2; 1 runs them one
# after another), longest first; prints each one's output as one block with its wall seconds when
# it ends, and ends with one line summing them all: "N passed, N failed in S s".
# Usage: [TEST_JOBS=N] tools/run-tests.sh BUILD_DIR TEST_BINARY...
# docs/testing.md, "The runner", says how it schedules and why some binaries run alone.
B=$1
shift
export QRL_BIN="$(cd "$B" && pwd)/qrl"
export QRL_DATA="$(cd "$B" && pwd)/data"
export QRL_ROOT="$(pwd)"
export ORT_NODE_MODULE="$(cd "$B" && pwd)/npm/node_modules/onnxruntime-node"
# The test binaries turn the poison switch on for themselves and for the qrl they run
# (tu_qrl's --option poison=1, tests/support/testutil.c; docs/runtime.md, "Switches").

jobs=${TEST_JOBS:-2}
case $jobs in '' | *[!0-9]* | 0) echo "TEST_JOBS must be a positive integer, not '$jobs'" >&2; exit 2 ;; esac

# Binaries that assert on the wall clock or on memory of a process: a second binary on the
# machine could make them fail, so nothing else runs beside them. test_large_graphs and
# test_large_recipes bound load/optimize/check times in seconds; test_run_memory compares the
# peak resident sets of qrl runs.
ALONE="test_large_graphs test_large_recipes test_run_memory"

# Each binary's seconds at its last run ($B/test-times, written at the end): the longest start
# first, so that no long one starts last with the other slot idle. Without that file, stop 43's
# seconds of each binary run alone, with test_intgraph's, test_docs' and test_oom's after stop 44
# shortened them (docs/testing.md, "The runner").
TIMES=$B/test-times
DEFAULT_TIMES="test_quantize 112 test_vecmap 95 test_cli 72 test_jit 66 test_transform 47 test_docs 41
test_vjp 38 test_intgraph 34 test_op_quant 30 test_dynamic 29 test_pointwise 27 test_oom 13
test_iconv_jit 25 test_lib_exit 19 test_fuzz 18 test_accwidth 16 test_transformer 14 test_int4 13"
declare -A secs
if [ -f "$TIMES" ]; then
    while read -r s path; do secs[$path]=$s; done < "$TIMES"
else
    d=($DEFAULT_TIMES)
    for ((k = 0; k < ${#d[@]}; k += 2)); do secs[${d[k]}]=${d[k + 1]}; done
fi
alone=()
rest=()
for t in "$@"; do
    case " $ALONE " in *" $(basename "$t") "*) alone+=("$t") ;; *) rest+=("$t") ;; esac
done
# longest first; equal (or unknown: 0) seconds keep the order given
mapfile -t rest < <(for i in "${!rest[@]}"; do
    t=${rest[$i]}
    printf '%s %s %s\n' "${secs[$t]:-${secs[$(basename "$t")]:-0}}" "$i" "$t"
done | sort -k1,1nr -k2,2n | cut -d' ' -f3-)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qrl-run-tests-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
status=0
start=$(date +%s)
declare -A idx_of_pid
names=("${alone[@]}" "${rest[@]}")

# Runs binary i in the background: its output, exit status and wall seconds in $tmp/i.*.
launch() {
    local i=$1
    (
        t0=$(date +%s)
        "${names[$i]}" --jobs 1 < /dev/null > "$tmp/$i.out" 2>&1
        echo $? > "$tmp/$i.rc"
        echo $(( $(date +%s) - t0 )) > "$tmp/$i.s"
    ) &
    idx_of_pid[$!]=$i
}

# Prints binary i's block and adds its counts to the sums.
report() {
    local i=$1 t=${names[$1]} line p f c rc s
    rc=$(cat "$tmp/$i.rc")
    s=$(cat "$tmp/$i.s")
    echo "== $t"
    cat "$tmp/$i.out"
    echo "== $t: $s s"
    echo "$s $t" >> "$tmp/times"
    line=$(grep 'Synthesis:' "$tmp/$i.out" | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
    c=$(printf '%s' "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0} + ${c:-0}))
    if [ "$rc" -ne 0 ]; then
        status=1
        [ -z "$line" ] && failed=$((failed + 1))
    fi
}

# Waits for one running binary to end and reports it.
reap() {
    local pid
    wait -n -p pid
    report "${idx_of_pid[$pid]}"
    unset "idx_of_pid[$pid]"
}

# the ones that run alone first, each on its own, then the others TEST_JOBS at a time
for i in "${!names[@]}"; do
    if [ "$i" -lt "${#alone[@]}" ]; then
        launch "$i"
        reap
        continue
    fi
    while [ "${#idx_of_pid[@]}" -ge "$jobs" ]; do
        reap
    done
    launch "$i"
done
while [ "${#idx_of_pid[@]}" -gt 0 ]; do
    reap
done

# this run's seconds, and the last ones of binaries it did not run
if [ -f "$TIMES" ]; then
    while read -r s path; do
        awk -v p="$path" '$2 == p { found = 1 } END { exit !found }' "$tmp/times" || echo "$s $path" >> "$tmp/times"
    done < "$TIMES"
fi
cp "$tmp/times" "$TIMES" 2> /dev/null
echo "$passed passed, $failed failed in $(( $(date +%s) - start )) s"
exit $status
