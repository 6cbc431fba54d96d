#!/bin/sh
# The ranking's cost against its decisions per model (QRL-J, stop 47): one
# `qrl quantize --threads 1 --profile --report` per model with RECIPE; CPU s
# (user+sys) and peak MB from /usr/bin/time -v, layers to f32, integer MACs,
# the validate figure, ONNX Runtime's worst output on the model's unseen
# <data>_test.npy. The reports' "runs" (validation passes, the effects' part)
# are read by bench/o1_compare.py. Measures; never pass/fail.
# Usage: bench/o1_table.sh QRL RECIPE OUTDIR MODEL...  (MODEL as bench/cost_table.sh takes it)
set -e
QRL=$1 RECIPE=$2 OUT=$3
shift 3
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
printf 'model\tcpu_s\tpeak_mb\tto_f32\tint_macs\tvalidate_db\tunseen_db\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    d=$ROOT/build/realmodels
    [ -f "$d/$n.onnx" ] || d=$ROOT/build/j4
    log=$OUT/$n.log
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$d/${data}_calib.npy" --threads 1 \
        --profile -o "$OUT/$n.onnx" --report "$OUT/$n.json" > "$log" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$log"; continue; }
    cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u+s}' "$log")
    mb=$(awk -F': ' '/Maximum resident/{printf "%d", $2/1024}' "$log")
    f32=$(sed -n 's/.*; \([0-9]*\) tensors\{0,1\} fell back.*/\1/p' "$log")
    macs=$(sed -n 's/.* dB against f32.*; \([0-9.]*%\) of .*/\1/p' "$log")
    val=$(sed -n 's/^output: *SQNR \([-0-9.inf]*\) dB.*/\1/p' "$log")
    unseen=$(node "$ROOT/tools/ort_sqnr.js" "$d/$n.onnx" "$OUT/$n.onnx" "$d/${data}_test.npy" |
        /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f" % min(x["sqnr_db"] for x in r["outputs"]))' 2>/dev/null || echo -)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$cpu" "$mb" "$f32" "$macs" "$val" "$unseen" | tee -a "$OUT/table.tsv"
done
