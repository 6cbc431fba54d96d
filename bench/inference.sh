#!/bin/sh
# Inference benchmark on the bundled Fashion-MNIST model over the 10000 test
# images (batch 100, one thread), QRL against ONNX Runtime (onnxruntime-node,
# the same run): fp32, the int8 QDQ export as each runtime loads it, and QRL's
# integer graph of recipes/int8.qrl's own kernels. Ratios are QRL time / ORT
# time (lower is better; QRL-D's target is <= 1). Never pass/fail.
# Usage: bench/inference.sh [BUILD_DIR]
B=${1:-build}
cd "$(dirname "$0")/.." || exit 1
D=$B/data
M=examples/fmnist/fmnist_cnn.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ort() { NODE_PATH=$B/npm/node_modules node tools/ort_eval.js "$1" $D/test_images.npy $D/test_labels.npy |
    sed -n 's/.*"accuracy":\([0-9.]*\),"ms":\([0-9]*\).*/\1 \2/p'; }
"$B/qrl" quantize $M --recipe recipes/int8.qrl --calib $D/calib_images.npy -o "$tmp/q8.onnx" > /dev/null || exit 1
q32=$("$B/qrl" eval $M --data $D/test_images.npy --labels $D/test_labels.npy | sed -n 's/^time: *\([0-9.]*\) s.*/\1/p')
qdq=$("$B/qrl" eval "$tmp/q8.onnx" --data $D/test_images.npy --labels $D/test_labels.npy |
    sed -n 's/^time: *\([0-9.]*\) s.*/\1/p')
qint=$("$B/qrl" eval $M --data $D/test_images.npy --labels $D/test_labels.npy --recipe recipes/int8.qrl \
    --calib $D/calib_images.npy 2> /dev/null | sed -n 's/^time: *[0-9.]*s *\([0-9.]*\)s.*/\1/p')
o32=$(ort $M | cut -d' ' -f2)
o8=$(ort "$tmp/q8.onnx" | cut -d' ' -f2)
awk -v q32="$q32" -v qdq="$qdq" -v qint="$qint" -v o32="$o32" -v o8="$o8" 'BEGIN {
    printf "10000 images, batch 100, 1 thread          QRL        ORT     ratio\n"
    printf "fp32                                  %8.0f ms %8.0f ms  %6.2f\n", q32 * 1000, o32, q32 * 1000 / o32
    printf "int8 QDQ export (as loaded)           %8.0f ms %8.0f ms  %6.2f\n", qdq * 1000, o8, qdq * 1000 / o8
    printf "int8 integer graph (recipe kernels)   %8.0f ms %8.0f ms  %6.2f\n", qint * 1000, o8, qint * 1000 / o8
}'
