#!/bin/sh
# The ranking's cost against its decisions per model (QRL-J, stop 47): one
# `qrl quantize --threads 1 --profile --report` per model with RECIPE; CPU s
# (user+sys), wall s and peak MB from /usr/bin/time -v, layers to f32, integer
# MACs, the calibrate and validate figures, ONNX Runtime's worst output on the
# model's unseen <data>_test.npy. The reports' "runs" (validation passes, the
# effects' part) and OUTDIR/table.tsv are read by bench/o1_compare.py.
# bench/j_sets.sh's runner (stop 48: one loop for both). Measures; never pass/fail.
# Usage: bench/o1_table.sh QRL RECIPE OUTDIR MODEL...  (MODEL as bench/cost_table.sh takes it)
set -e
[ $# -ge 3 ] || { echo "usage: $0 QRL RECIPE OUTDIR MODEL..." >&2; exit 2; }
QRL=$1 RECIPE=$2 OUT=$3
shift 3
exec sh "$(dirname "$0")/j_sets.sh" --qrl-args "--threads 1 --profile" "$QRL" "$RECIPE" "$OUT" own "$@"
