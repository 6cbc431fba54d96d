#!/bin/sh
# Issue 24's "done when" table: each model quantized by the PTQ ladder, one
# algorithm more per rung, each export measured by ONNX Runtime on the unseen
# sets (bench/j_sets.sh per recipe, two recipes at a time, one thread each):
#   recipes/int8.qrl                 no algorithm (the default)
#   bench/ladder/int8-eq.qrl         + cross-layer equalization
#   bench/ladder/int8-eq-bc.qrl      + empirical bias correction
#   bench/ladder/int8-eq-ada-bc.qrl  + learned rounding between the two
#   recipes/int8-best.qrl            the shipped chain (eq + bc, l2_checked ranges)
#   recipes/int8-margin.qrl          the default judged at 32 dB
# then bench/ladder_table.py prints one markdown table per model.
# Measures; never pass/fail.
# Usage: bench/j_ladder.sh QRL OUTDIR "DIR..." MODEL...   (DIR, MODEL as bench/j_sets.sh)
#   RECIPES="..." in the environment replaces the list above.
set -e
QRL=$1 OUT=$2 DIRS=$3
shift 3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RECIPES=${RECIPES:-"recipes/int8.qrl bench/ladder/int8-eq.qrl bench/ladder/int8-eq-bc.qrl bench/ladder/int8-eq-ada-bc.qrl recipes/int8-best.qrl recipes/int8-margin.qrl"}
mkdir -p "$OUT"
for r in $RECIPES; do printf '%s\n' "$r"; done |
    xargs -P 2 -I{} sh -c 'n=$(basename {} .qrl); rm -f "$2/$n/table.tsv";
        sh "$1/bench/j_sets.sh" --qrl-args "--threads 1 --profile" "$3" "$1/{}" "$2/$n" "$4" $5 > "$2/$n.out" 2>&1' \
        _ "$ROOT" "$OUT" "$QRL" "$DIRS" "$*"
# shellcheck disable=SC2086 # RECIPES: several names
/usr/bin/python3 "$ROOT/bench/ladder_table.py" "$OUT" "$DIRS" $RECIPES
