#!/bin/sh
# One quantize per model, measured on several unseen sets (QRL-J): as
# bench/fallback_table.sh (the same columns: CPU and wall seconds from
# /usr/bin/time -v, peak MB, layers to f32, integer MACs, the summary's
# calibrate and validate figures), but the export is measured by ONNX Runtime
# (tools/ort_sqnr.js) on each DIR's <data>_test.npy in turn, the worst output's
# SQNR per set, so that every set's figure is of the same graph. Each model's
# line is also appended to OUTDIR/table.tsv (bench/o1_compare.py reads it).
# bench/o1_table.sh is this runner with --qrl-args "--threads 1 --profile" and
# DIR "own". Measures; never pass/fail.
# Usage: bench/j_sets.sh [--qrl-args ARGS] [--calib-dir DIR] QRL RECIPE OUTDIR "DIR..." MODEL...
#   e.g. bench/j_sets.sh build/qrl recipes/int8.qrl /tmp/js "build/rm32 build/rm32b" ppocr_cls tv:resnet18
#   --qrl-args ARGS: more arguments for each `qrl quantize` (split on spaces).
#   --calib-dir DIR: calibrate on DIR/<data>_calib.npy (e.g. more samples,
#   tools/make_real_inputs.py DIR --only calib --calib 256) instead of the
#   model's own file.
#   DIR "own": the model's own directory (build/realmodels, or build/j4).
#   MODEL as bench/fallback_table.sh takes it (build/j4 made there).
set -e
ARGS= CALIBDIR=
if [ "$1" = --qrl-args ]; then ARGS=$2; shift 2; fi
if [ "$1" = --calib-dir ]; then CALIBDIR=$2; shift 2; fi
QRL=$1 RECIPE=$2 OUT=$3 DIRS=$4
shift 4
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
printf 'model\tcpu_s\twall_s\tpeak_mb\tto_f32\tint_macs\tcalib_db\tvalidate_db'
for t in $DIRS; do printf '\t%s' "$(basename "$t")"; done
printf '\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    d=$ROOT/build/realmodels
    [ -f "$d/$n.onnx" ] || d=$ROOT/build/j4
    log=$OUT/$n.log
    calib=$d/${data}_calib.npy
    [ -z "$CALIBDIR" ] || calib=$CALIBDIR/${data}_calib.npy
    # shellcheck disable=SC2086 # ARGS: several arguments
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$calib" $ARGS \
        -o "$OUT/$n.onnx" --report "$OUT/$n.json" > "$log" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$log"; continue; }
    cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u+s}' "$log")
    wall=$(awk -F': ' '/Elapsed/{n=split($2, t, ":"); s=0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%.1f", s}' "$log")
    mb=$(awk -F': ' '/Maximum resident/{printf "%d", $2/1024}' "$log")
    f32=$(sed -n 's/.*; \([0-9]*\) tensors\{0,1\} fell back.*/\1/p' "$log")
    # a dynamic recipe's fallback: the values quantized at run time it sent to f32 (K/N)
    [ -n "$f32" ] || f32=$(sed -n 's/.*the fallback sent \([0-9]*\) of the \([0-9]*\) values quantized.*/\1\/\2/p' "$log")
    macs=$(sed -n 's/.* dB against f32.*; \([0-9.]*%\) of .*/\1/p' "$log")
    cal=$(sed -n 's/^output: *SQNR \([-0-9.inf]*\) dB.*/\1/p' "$log") val=
    if grep -q '^validate:' "$log"; then # the output line is then the validate part's
        val=$cal cal=$(sed -n 's/^validate:.*; \([-0-9.inf]*\) dB on the .*/\1/p' "$log")
    fi
    line=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$n" "$cpu" "$wall" "$mb" "$f32" "$macs" "$cal" "${val:--}")
    for t in $DIRS; do
        [ "$t" = own ] && t=$d
        test=$t/${data}_test.npy
        [ -f "$test" ] || { line=$(printf '%s\t-' "$line"); continue; }
        db=$(node "$ROOT/tools/ort_sqnr.js" "$d/$n.onnx" "$OUT/$n.onnx" "$test" |
            /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f" % min(x["sqnr_db"] for x in r["outputs"]))' 2>/dev/null || echo -)
        line=$(printf '%s\t%s' "$line" "$db")
    done
    printf '%s\n' "$line" | tee -a "$OUT/table.tsv"
done
