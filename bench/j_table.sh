#!/bin/sh
# QRL-J's per-model table: bench/fallback_table.sh for each recipe given, one
# block per recipe, so that each PTQ step (the fallback's order, equalization
# and bias correction, learned rounding) is a row of its own per model: CPU and
# wall seconds, peak MB, layers to f32, integer MACs, the summary's output SQNR
# on the calibration samples (and on the validate part when the recipe sets
# one) and ONNX Runtime's on the unseen *_test.npy samples. Measures; never
# pass/fail.
# Usage: bench/j_table.sh [--test-dir DIR] QRL OUTDIR "RECIPE..." MODEL...
#   --test-dir DIR: the unseen samples from DIR (bench/fallback_table.sh)
#   e.g. bench/j_table.sh build/qrl /tmp/j "recipes/int8.qrl recipes/int8-best.qrl" ppocr_det blazeface
set -e
TD=
if [ "$1" = --test-dir ]; then TD="--test-dir $2"; shift 2; fi
QRL=$1 OUT=$2 RECIPES=$3
shift 3
here=$(dirname "$0")
for r in $RECIPES; do
    name=$(basename "$r" .qrl)
    sh "$here/fallback_table.sh" $TD "$QRL" "$r" "$OUT/$name" "$@" 2>/dev/null |
        awk -v r="$name" 'NR == 1 && !done { print "recipe\t" $0; done = 1; next } NR > 1 { print r "\t" $0 }' |
        { [ "$r" = "${RECIPES%% *}" ] && cat || grep -v '^recipe'; }
done
