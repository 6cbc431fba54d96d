#!/bin/sh
# QRL-J's cost and memory bounds per model (issue 24, "a search that scales":
# at most 3x one fp32 pass over the calibration samples plus a logarithmic
# number of validation passes; peak at most 2x the fp32 run's). For each
# model: `qrl quantize` with RECIPE at one thread, and `qrl run` of the f32
# model over the same calibration file at the batch the quantize summary
# names, one thread; CPU seconds (user+sys) and peak RSS of each from
# /usr/bin/time -v, and the two ratios. The quantize runs twice on a module
# cache of its own (XDG_CACHE_HOME=OUTDIR/cache.MODEL, emptied first): the
# first (cold_cpu_s, cold_peak_mb) compiles the kernels its shapes need
# (libgccjit, in the process), the second finds them there and is the one the
# ratios take. Measures; never pass/fail. CPU seconds move
# with the machine's load: run it on free cores.
# Usage: bench/cost_table.sh QRL RECIPE OUTDIR MODEL...
#   MODEL as bench/fallback_table.sh takes it (a name in build/realmodels,
#   blazeface_back or mlsd_large from build/j4, tv:N for torchvision); run
#   bench/fallback_table.sh once first so that build/j4 exists.
set -e
QRL=$1 RECIPE=$2 OUT=$3
shift 3
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cpu_of() { awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.2f", u+s}' "$1"; }
peak_of() { awk -F': ' '/Maximum resident/{printf "%.1f", $2/1000}' "$1"; }
printf 'model\tbatch\tcold_cpu_s\tcold_peak_mb\tquantize_cpu_s\tf32_pass_cpu_s\tcost_ratio\tquantize_peak_mb\tf32_peak_mb\tpeak_ratio\n'
for m in "$@"; do
    case $m in
    tv:*) n=${m#tv:} data=tv ;;
    *) n=$m data=$m ;;
    esac
    d=$ROOT/build/realmodels
    [ -f "$d/$n.onnx" ] || d=$ROOT/build/j4
    c=$OUT/$n.cold.log q=$OUT/$n.quantize.log f=$OUT/$n.f32.log
    rm -rf "$OUT/cache.$n"
    export XDG_CACHE_HOME="$OUT/cache.$n"
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$d/${data}_calib.npy" \
        -o "$OUT/$n.onnx" --threads 1 > "$c" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$c"; continue; }
    /usr/bin/time -v "$QRL" quantize "$d/$n.onnx" --recipe "$RECIPE" --calib "$d/${data}_calib.npy" \
        -o "$OUT/$n.onnx" --threads 1 > "$q" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$q"; continue; }
    b=$(sed -n 's/^calibration:.*; batch \([0-9]*\)).*/\1/p' "$q")
    # a model whose inputs fix the batch at 1 runs the file's samples as a
    # copy whose first axis is free (the f32 function is the same per sample)
    src=$d/$n.onnx
    if [ "$b" != "" ] && /usr/bin/python3 - "$src" "$OUT/$n.dyn.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
init = {i.name for i in m.graph.initializer}
fixed = [i for i in m.graph.input if i.name not in init and i.type.tensor_type.shape.dim[0].dim_value == 1]
for i in fixed:
    i.type.tensor_type.shape.dim[0].dim_param = "N"
if fixed:
    onnx.save(m, sys.argv[2])
sys.exit(0 if fixed else 1)
PY
    then src=$OUT/$n.dyn.onnx; fi
    rm -rf "$OUT/$n.out"
    /usr/bin/time -v "$QRL" run "$src" -i "$d/${data}_calib.npy" -o "$OUT/$n.out" \
        --batch "${b:-1}" --threads 1 > "$f" 2>&1 || { printf '%s\tfailed (%s)\n' "$n" "$f"; continue; }
    rm -rf "$OUT/$n.out" "$OUT/$n.dyn.onnx" "$OUT/cache.$n"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "${b:-?}" "$(cpu_of "$c")" "$(peak_of "$c")" "$(cpu_of "$q")" "$(cpu_of "$f")" \
        "$(awk -v a="$(cpu_of "$q")" -v b="$(cpu_of "$f")" 'BEGIN{printf "%.2f", a/b}')" \
        "$(peak_of "$q")" "$(peak_of "$f")" \
        "$(awk -v a="$(peak_of "$q")" -v b="$(peak_of "$f")" 'BEGIN{printf "%.2f", a/b}')"
done
