#!/bin/sh
# Whether a recipe's transforms kept a model's f32 function: quantizes MODEL
# with RECIPE writing the transformed f32 model (qrl quantize --transformed),
# runs it and the original in ONNX Runtime (tools/ort_run.js) on the samples
# X.npy, and prints the largest |difference| of each output relative to the
# original output's largest |value|, and its SQNR in dB. Measures; never
# pass/fail.
# Usage: tools/transform_check.sh QRL RECIPE MODEL.onnx CALIB.npy X.npy OUTDIR
set -e
QRL=$1 RECIPE=$2 MODEL=$3 CALIB=$4 X=$5 OUT=$6
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ORT_NODE_MODULE=${ORT_NODE_MODULE:-$ROOT/build/npm/node_modules/onnxruntime-node}
mkdir -p "$OUT"
"$QRL" quantize "$MODEL" --recipe "$RECIPE" --calib "$CALIB" -o "$OUT/q.onnx" --transformed "$OUT/t.onnx" \
    >"$OUT/quantize.log" 2>&1 || { cat "$OUT/quantize.log"; exit 1; }
node "$ROOT/tools/ort_run.js" "$MODEL" "$X" -o "$OUT/ref" >/dev/null
node "$ROOT/tools/ort_run.js" "$OUT/t.onnx" "$X" -o "$OUT/got" >/dev/null
/usr/bin/python3 - "$OUT" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]
for f in sorted(os.listdir(d + "/ref")):
    r = np.load(d + "/ref/" + f).astype(np.float64)
    g = np.load(d + "/got/" + f).astype(np.float64)
    e = g - r
    print("%s: max |diff| / max |ref| %.3g, SQNR %.1f dB" % (f[:-4], np.abs(e).max() / np.abs(r).max(),
          10 * np.log10((r ** 2).sum() / max((e ** 2).sum(), 1e-300))))
PY
