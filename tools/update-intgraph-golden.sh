#!/bin/sh
# Regenerates tests/golden/zoo_int8.intgraph: the node lines of the integer
# graph recipes/int8.qrl lowers the zoo model to (tools/make_zoo_model.py),
# calibrated numbers masked (scale=* zero=*): the golden holds the structure.
# nhwc=0: the test lowers without the CLI's per-layer convolution kernels, which turn
# every convolution region channels last (quantizer/layout.c); the golden is the test's graph.
# Review the diff before committing. Usage: tools/update-intgraph-golden.sh [BUILD_DIR]
B=${1:-build}
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d) || exit 1
/usr/bin/python3 tools/make_zoo_model.py "$T" &&
QRL_STDLIB=stdlib "$B/qrl" quantize "$T/zoo.onnx" --recipe recipes/int8.qrl --calib "$T/zoo_calib.npy" \
    --batch 16 --no-cache --option nhwc=0 -o "$T/q.onnx" --int-graph "$T/int.txt" > /dev/null &&
grep '^node ' "$T/int.txt" | sed -E 's/(scale|zero)=[^ )]+/\1=*/g' > tests/golden/zoo_int8.intgraph
rc=$?
rm -rf "$T"
exit $rc
