#!/bin/sh
# Runs every Criterion test binary given, prints each one's output and wall
# seconds, and ends with one line summing them all: "N passed, N failed in S s".
# Usage: tools/run-tests.sh BUILD_DIR TEST_BINARY...
B=$1
shift
export QRL_BIN="$(cd "$B" && pwd)/qrl"
export QRL_DATA="$(cd "$B" && pwd)/data"
export QRL_ROOT="$(pwd)"
export ORT_NODE_MODULE="$(cd "$B" && pwd)/npm/node_modules/onnxruntime-node"
# The test binaries turn the poison switch on for themselves and for the qrl they run
# (tu_qrl's --option poison=1, tests/support/testutil.c; docs/runtime.md, "Switches").
passed=0
failed=0
status=0
start=$(date +%s)
for t in "$@"; do
    echo "== $t"
    t0=$(date +%s)
    out=$("$t" --jobs 1 2>&1)
    rc=$?
    printf '%s\n' "$out"
    echo "== $t: $(( $(date +%s) - t0 )) s"
    line=$(printf '%s\n' "$out" | grep 'Synthesis:' | tail -n 1)
    p=$(printf '%s' "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(printf '%s' "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
    c=$(printf '%s' "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0} + ${c:-0}))
    if [ $rc -ne 0 ]; then
        status=1
        [ -z "$line" ] && failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed in $(( $(date +%s) - start )) s"
exit $status
