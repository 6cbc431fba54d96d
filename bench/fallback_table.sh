#!/bin/sh
# The fallback search's cost and result per model (QRL-J): qrl quantize's CPU
# seconds (user+sys), wall seconds and peak RSS from /usr/bin/time -v, the layers sent to
# f32, the integer MAC share and the output SQNR the summary prints (on the
# calibration samples, and on the validate part when the recipe sets one),
# then ONNX Runtime's SQNR of the export against the f32 model on the unseen
# *_test.npy samples (tools/ort_sqnr.js; each output, the worst first).
# Measures; never pass/fail. Prints one tab-separated line per model.
# Usage: bench/fallback_table.sh [--test-dir DIR] QRL RECIPE OUTDIR MODEL...
#   --test-dir DIR: the unseen samples from DIR/<data>_test.npy instead of
#   the model's own directory (e.g. more of them, made with
#   tools/make_real_inputs.py DIR --only test --test 32); models and
#   calibration files stay where they are.
#   MODEL: a name N with N.onnx, N_calib.npy and N_test.npy in build/realmodels
#   (bench/real_models.sh makes them), blazeface_back or mlsd_large (the
#   packages' other models, made here in build/j4 from build/realmodels/pkgs:
#   BlazeFace back on 256x256 images made as for front, M-LSD large on M-LSD
#   tiny's inputs), or tv:N for a torchvision model (N.onnx with tv_calib.npy
#   and tv_test.npy).
set -e
TESTDIR=
if [ "$1" = --test-dir ]; then TESTDIR=$2; shift 2; fi
QRL=$1 RECIPE=$2 OUT=$3
shift 3
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
R=$ROOT/build/realmodels J=$ROOT/build/j4
if [ ! -f "$J/blazeface_back_test.npy" ] || [ ! -f "$J/mlsd_large.onnx" ]; then
    mkdir -p "$J"
    cp "$R/pkgs/blazeface/package/ONNX/face_detection_back_256x256_barracuda.onnx" "$J/blazeface_back.onnx"
    cp "$R/pkgs/mlsd/package/ONNX/mlsd_320x320_large.onnx" "$J/mlsd_large.onnx"
    ln -sf "$R/mlsd_tiny_calib.npy" "$J/mlsd_large_calib.npy"
    ln -sf "$R/mlsd_tiny_test.npy" "$J/mlsd_large_test.npy"
    (cd "$ROOT/tools" && /usr/bin/python3 -c "
import numpy as np, realmodels_data as rd
for split, n, seed in (('calib', 64, 1000), ('test', 8, 2000)):  # make_real_inputs.py's seeds for front
    np.save('$J/blazeface_back_%s.npy' % split, (rd.images(n, 256, 256, seed + 400) * 2 - 1).astype(np.float32))
")
fi
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
printf 'model\tcpu_s\twall_s\tpeak_mb\tto_f32\tint_macs\tcalib_db\tvalidate_db\tunseen_db\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    d=$ROOT/build/realmodels
    [ -f "$d/$n.onnx" ] || d=$ROOT/build/j4
    log=$OUT/$n.log
    test=${TESTDIR:-$d}/${data}_test.npy
    [ -f "$test" ] || { printf '%s\tfailed (no %s)\n' "$n" "$test"; continue; }
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$d/${data}_calib.npy" \
        -o "$OUT/$n.onnx" --report "$OUT/$n.json" > "$log" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$log"; continue; }
    cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u+s}' "$log")
    wall=$(awk -F': ' '/Elapsed/{n=split($2, t, ":"); s=0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%.1f", s}' "$log")
    mb=$(awk -F': ' '/Maximum resident/{printf "%d", $2/1024}' "$log")
    f32=$(sed -n 's/.*; \([0-9]*\) tensors\{0,1\} fell back.*/\1/p' "$log")
    macs=$(sed -n 's/.* dB against f32.*; \([0-9.]*%\) of .*/\1/p' "$log")
    cal=$(sed -n 's/^output: *SQNR \([-0-9.inf]*\) dB.*/\1/p' "$log") val=
    if grep -q '^validate:' "$log"; then # the output line is then the validate part's
        val=$cal cal=$(sed -n 's/^validate:.*; \([-0-9.inf]*\) dB on the .*/\1/p' "$log")
    fi
    unseen=$(node "$ROOT/tools/ort_sqnr.js" "$d/$n.onnx" "$OUT/$n.onnx" "$test" |
        /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); o=sorted(r["outputs"], key=lambda x: x["sqnr_db"]); print(" ".join("%.1f" % x["sqnr_db"] for x in o))')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$cpu" "$wall" "$mb" "$f32" "$macs" "$cal" "${val:--}" "$unseen"
done
