#!/bin/sh
# Inference benchmark of `make bench` (QRL-E), in one run on this machine: for the bundled
# Fashion-MNIST CNN, a small ResNet with residual Adds (tools/make_bench_models.py) and
# torchvision ResNet-18 and MobileNetV2 (random weights, tools/export_torchvision.py):
#   QRL int8 (the recipe's export, run on QRL's integer kernels), the same with
#   QRL_ICONV_JIT=1 (kernels compiled per layer, the epilogue fused) and QRL f32 - qrl bench
#   ONNX Runtime (onnxruntime-node) on the same f32 model and on QRL's export  - tools/ort_bench.js
#   PyTorch f32 and FX post-training int8 (not for the CNN: ONNX only)         - tools/torch_bench.py
#   the u8s8 VNNI and f32 FMA peak of one core                                 - bench/peak.c
# at batch 1 and 64, 1 and 2 threads, and `qrl quantize`: its calibration pass against one f32
# pass over the same samples (as it reports them), and its whole time. bench/report.py prints the table of ratios against the targets
# and writes bench/results.json. Measures; never pass/fail.
# Usage: bench/run.sh [BUILD_DIR] [MIN_TIME_SECONDS] [MODEL...]
#   models: fmnist_cnn small_resnet resnet18 mobilenet_v2 (default: all)
set -e
B=${1:-build}
MIN=${2:-1.0}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
MODELS=${*:-fmnist_cnn small_resnet resnet18 mobilenet_v2}
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
D=$B/bench
RM=$B/realmodels
mkdir -p "$D"
export NODE_PATH=$B/npm/node_modules
$PY -c 'import torchvision' 2> /dev/null || {
    echo "bench: installing python3-torchvision (the torchvision models)" >&2
    apt-get install -y python3-torchvision > /dev/null
}
cc -O2 -Wall -Wextra -Werror bench/peak.c -o "$D/peak"
"$D/peak" > "$D/peak.json"
echo "peak (one core): $(cat "$D/peak.json")"
sh tools/check_vector_code.sh "$B"
[ -f "$D/small_resnet.onnx" ] || $PY tools/make_bench_models.py "$D" > /dev/null
[ -f "$RM/resnet18_dyn.onnx" ] && [ -f "$RM/mobilenet_v2_dyn.onnx" ] || $PY tools/export_torchvision.py "$RM" > /dev/null

# name, f32 model, calibration samples, one sample's shape, torch model (- for none), its state dict
model_row() {
    case $1 in
    fmnist_cnn) echo "examples/fmnist/fmnist_cnn.onnx $B/data/calib_images.npy 1,28,28 - -" ;;
    small_resnet) echo "$D/small_resnet.onnx $D/small_resnet_calib.npy 3,32,32 small_resnet $D/small_resnet.pt" ;;
    resnet18 | mobilenet_v2) echo "$RM/${1}_dyn.onnx $RM/tv_calib.npy 3,224,224 $1 $RM/$1.pt" ;;
    *) echo "bench: unknown model $1" >&2; exit 2 ;;
    esac
}

for name in $MODELS; do
    set -- $(model_row "$name")
    f32=$1 calib=$2 shape=$3 tname=$4 state=$5
    q8=$D/$name.int8.onnx
    echo "== $name"
    t0=$(date +%s.%N)
    # one thread, as the target and the table say (quantize defaults to every core)
    $B/qrl quantize "$f32" --recipe recipes/int8.qrl --calib "$calib" -o "$q8" --threads 1 > "$D/$name.quantize.txt"
    t1=$(date +%s.%N)
    # "calibration: N samples in X ms (one fp32 pass: Y ms, ratio R)"
    cal=$(sed -n 's/^calibration: \([0-9]*\) samples in \([0-9.]*\) ms (one fp32 pass: \([0-9.]*\) ms.*/\1 \2 \3/p' \
        "$D/$name.quantize.txt")
    set -- $cal
    echo "{\"quantize_s\": $(awk "BEGIN { print $t1 - $t0 }"), \"samples\": $1, \"calib_ms\": $2, \"fp32_pass_ms\": $3}" \
        > "$D/$name.quantize.json"
    grep -E "^(calibration|output):" "$D/$name.quantize.txt"
    $B/qrl bench "$f32" --batch 1,64 --threads 1,2 --min-time "$MIN" --json "$D/$name.qrl_f32.json"
    $B/qrl bench "$q8" --batch 1,64 --threads 1,2 --min-time "$MIN" --json "$D/$name.qrl_int8.json"
    # phase 2: kernels compiled per layer shape, the epilogue fused (compiled before the timed runs)
    QRL_ICONV_JIT=1 $B/qrl bench "$q8" --batch 1,64 --threads 1,2 --min-time "$MIN" --json "$D/$name.qrl_int8_jit.json"
    node tools/ort_bench.js "$f32" "$shape" 1,64 1,2 "$MIN" > "$D/$name.ort_f32.json"
    node tools/ort_bench.js "$q8" "$shape" 1,64 1,2 "$MIN" > "$D/$name.ort_int8.json"
    if [ "$tname" != - ]; then
        $PY tools/torch_bench.py "$tname" "$state" "$calib" 1,64 1,2 "$MIN" > "$D/$name.torch.json" ||
            echo "bench: PyTorch failed on $name (its column stays empty)" >&2
    else
        rm -f "$D/$name.torch.json"
    fi
done
$PY bench/report.py "$D" bench/results.json $MODELS
