#!/bin/sh
# The fallback search's cost and result per model (QRL-J): qrl quantize's CPU
# seconds (user+sys) and peak RSS from /usr/bin/time -v, the layers sent to
# f32, the integer MAC share and the output SQNR the summary prints (on the
# calibration samples, and on the validate part when the recipe sets one),
# then ONNX Runtime's SQNR of the export against the f32 model on the unseen
# *_test.npy samples (tools/ort_sqnr.js; each output, the worst first).
# Measures; never pass/fail. Prints one tab-separated line per model.
# Usage: bench/fallback_table.sh QRL RECIPE OUTDIR MODEL...
#   MODEL: a name N with N.onnx, N_calib.npy and N_test.npy in build/realmodels
#   or build/j4 (BlazeFace back and M-LSD large: see docs/quantizer.md), or
#   tv:N for a torchvision model (N.onnx with tv_calib.npy and tv_test.npy).
set -e
QRL=$1 RECIPE=$2 OUT=$3
shift 3
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
printf 'model\tcpu_s\tpeak_mb\tto_f32\tint_macs\tcalib_db\tvalidate_db\tunseen_db\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    d=$ROOT/build/realmodels
    [ -f "$d/$n.onnx" ] || d=$ROOT/build/j4
    log=$OUT/$n.log
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$d/${data}_calib.npy" \
        -o "$OUT/$n.onnx" --report "$OUT/$n.json" > "$log" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$log"; continue; }
    cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u+s}' "$log")
    mb=$(awk -F': ' '/Maximum resident/{printf "%d", $2/1024}' "$log")
    f32=$(sed -n 's/.*; \([0-9]*\) tensors\{0,1\} fell back.*/\1/p' "$log")
    macs=$(sed -n 's/.* dB against f32.*; \([0-9.]*%\) of .*/\1/p' "$log")
    cal=$(sed -n 's/^output: *SQNR \([-0-9.inf]*\) dB.*/\1/p' "$log") val=
    if grep -q '^validate:' "$log"; then # the output line is then the validate part's
        val=$cal cal=$(sed -n 's/^validate:.*; \([-0-9.inf]*\) dB on the .*/\1/p' "$log")
    fi
    unseen=$(node "$ROOT/tools/ort_sqnr.js" "$d/$n.onnx" "$OUT/$n.onnx" "$d/${data}_test.npy" |
        /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); o=sorted(r["outputs"], key=lambda x: x["sqnr_db"]); print(" ".join("%.1f" % x["sqnr_db"] for x in o))')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$cpu" "$mb" "$f32" "$macs" "$cal" "${val:--}" "$unseen"
done
