#!/bin/sh
# One quantize, several unseen sets: bench/fallback_table.sh's row per model
# (CPU s, layers to f32, integer MACs, calibrate and validate dB) with the
# first test directory, then ONNX Runtime's SQNR of that same export on every
# test directory given (tools/ort_sqnr.js), so that a recipe is compared on
# all the looked-at sets at once without quantizing again. Each set's cell is
# pooled / mean: the pooled SQNR of the worst output (the issue's figure) and
# the mean of each sample's own SQNR (all outputs together), the steadier one
# where a few loud samples carry the pooled figure. Measures; never pass/fail.
# Usage: bench/sets_table.sh QRL RECIPE OUTDIR "DIR..." MODEL...
#   DIR: a directory holding <data>_test.npy (tools/make_real_inputs.py DIR
#   --only test; build/realmodels for the models' own *_test.npy); MODEL as
#   in bench/fallback_table.sh (tv:N for a torchvision model).
set -e
QRL=$1 RECIPE=$2 OUT=$3 DIRS=$4
shift 4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
first=${DIRS%% *}
printf 'model\tcpu_s\twall_s\tpeak_mb\tto_f32\tint_macs\tcalib_db\tvalidate_db'
for t in $DIRS; do printf '\t%s' "$(basename "$t")"; done
printf '\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    row=$(sh "$ROOT/bench/fallback_table.sh" --test-dir "$first" "$QRL" "$RECIPE" "$OUT" "$m" | sed 1d)
    case $row in *failed*) printf '%s\n' "$row"; continue ;; esac
    printf '%s' "$(printf '%s' "$row" | cut -f1-8)"
    d=$ROOT/build/realmodels
    [ -f "$d/$n.onnx" ] || d=$ROOT/build/j4
    for t in $DIRS; do
        cell=$(node "$ROOT/tools/ort_sqnr.js" "$d/$n.onnx" "$OUT/$n.onnx" "$t/${data}_test.npy" |
            /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f / %.1f" % (min(x["sqnr_db"] for x in r["outputs"]), r["sqnr_mean_db"]))')
        printf '\t%s' "$cell"
    done
    printf '\n'
done
