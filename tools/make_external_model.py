#!/usr/bin/python3
"""A model past protobuf's 2 GB, for checking import and export through ONNX external data.

Usage: /usr/bin/python3 tools/make_external_model.py OUT_DIR

OUT_DIR/big.onnx and big.onnx.data: 2.68 GB of f32 weights (10 MatMuls, 4096 x 16384 and
16384 x 4096 in turn, a Relu after each widening one; input x [n, 4096]), written one weight at a
time at 4096-byte offsets (never all in memory: about 0.6 GB of RAM); calib4.npy (4 samples) and
one.npy (1); allf32.qrl, int8.qrl's settings with a fallback no layer passes, so that qrl
quantize exports the model with its weights still in f32 (docs/distributed.md, "Models over 2 GB").
"""
import sys, os, numpy as np, onnx
from onnx import helper, TensorProto
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
D, F, L = 4096, 16384, 10
rng = np.random.default_rng(7)
inits, nodes, off = [], [], 0
h = "x"
with open(os.path.join(out, "big.onnx.data"), "wb") as f:
    for i in range(L):
        shape = (D, F) if i % 2 == 0 else (F, D)
        w = (rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[0]))).astype(np.float32)
        pad = (-off) % 4096
        f.write(b"\0" * pad); off += pad
        f.write(w.tobytes())
        t = TensorProto(); t.name = "w%d" % i; t.data_type = TensorProto.FLOAT; t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "big.onnx.data"), ("offset", str(off)), ("length", str(w.nbytes))):
            e = t.external_data.add(); e.key = k; e.value = v
        off += w.nbytes
        inits.append(t)
        del w
        y = "h%d" % i
        nodes.append(helper.make_node("MatMul", [h, "w%d" % i], [y], name="mm%d" % i))
        h = y
        if i % 2 == 0:
            nodes.append(helper.make_node("Relu", [h], [h + "r"], name="relu%d" % i))
            h = h + "r"
g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", D])],
                      [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["n", D])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "big.onnx"))
np.save(os.path.join(out, "calib4.npy"), rng.standard_normal((4, D), dtype=np.float32))
np.save(os.path.join(out, "one.npy"), rng.standard_normal((1, D), dtype=np.float32))
with open(os.path.join(out, "allf32.qrl"), "w") as f:
    f.write("""# every layer measured, then left in f32 (none reaches 1000 dB): an f32 export
import "calibrators.qrl"
import "affine.qrl"
import "patterns.qrl"

recipe allf32 {
  activation = u8 asymmetric by minmax()
  weight     = i8 symmetric per_channel by minmax(symmetric = true)
  bias       = i32
  accumulate = i32
  numerics   = onnx
  fallback   = f32 when sqnr < 1000
}
""")
print("weights", off, "bytes")
