"""The report's per-tensor SQNRs of two Convs rederived in numpy (tests/e2e/test_quantize.c).

Usage: /usr/bin/python3 tests/e2e/gridconv_oracle.py make DIR
       /usr/bin/python3 tests/e2e/gridconv_oracle.py check DIR

make: DIR/gc.onnx, y = Conv(Relu(Conv(x, w1, b1)), w2, b2) (3x3, pads 1, 3 -> 8 -> 4 channels),
and DIR/gc_x.npy, 12 samples of [3, 8, 8].

check: reads the export DIR/gc_q.onnx for its qparams and integers (nothing else of QRL) and
DIR/gc.json for the figures. The QDQ model is computed in float64 from the export's dequantized
values, as its math says (the sums exact, rounded to f32 where a tensor is f32), against the
f32 model: each quantized tensor's cumulative SQNR (sqnr_db: every quantization upstream) and
local one (sqnr_local_db: its layer's inputs the f32 values, quantized where they are; a value
not quantized is its f32 value, so r's local error is its own rounding). Exits 1 unless every
figure is within 0.002 dB (and the integer graph's within 0.05) and the f32 pass has a time.
"""
import json
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make(d):
    r = np.random.default_rng(11)
    w1 = (r.standard_normal((8, 3, 3, 3)) * 0.4).astype(np.float32)
    b1 = (r.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (r.standard_normal((4, 8, 3, 3)) * 0.2).astype(np.float32)
    b2 = (r.standard_normal(4) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "gc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/gc.onnx")
    np.save(d + "/gc_x.npy", r.uniform(-1, 1, (12, 3, 8, 8)).astype(np.float32))


def conv(x, w, b):
    """f64 3x3 convolution with pads 1, rounded to f32 as an f32 tensor holds it."""
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, w.shape[0], h, wd)) + b.astype(np.float64)[None, :, None, None]
    for ky in range(3):
        for kx in range(3):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, ky:ky + h, kx:kx + wd], w[:, :, ky, kx].astype(np.float64))
    return y.astype(np.float32)


def sqnr(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return 10 * np.log10((a * a).sum() / ((a - b) ** 2).sum())


def check(d):
    m = onnx.load(d + "/gc_q.onnx")
    f = onnx.load(d + "/gc.onnx")
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    f32 = {i.name: numpy_helper.to_array(i) for i in f.graph.initializer}

    def dq(name):  # DequantizeLinear's f32: (q - z) * s, per output channel for a weight
        q, s = init[name + "_quantized"].astype(np.int64), init[name + "_scale"].astype(np.float32)
        z = init.get(name + "_zero_point", np.zeros_like(s, dtype=np.int64)).astype(np.int64)
        shape = (-1,) + (1,) * (q.ndim - 1) if s.ndim == 1 else ()
        return ((q - z.reshape(shape)).astype(np.float32) * s.reshape(shape)).astype(np.float32)

    def fq(v, name):  # QuantizeLinear then DequantizeLinear, u8, in f32 (round half to even)
        s, z = np.float32(init[name + "_scale"]), int(init[name + "_zero_point"])
        q = np.clip(np.round(v.astype(np.float32) / s) + z, 0, 255)
        return ((q - z).astype(np.float32) * s).astype(np.float32)

    w1, b1, w2, b2 = dq("w1"), dq("b1"), dq("w2"), dq("b2")
    x = np.load(d + "/gc_x.npy")
    r_ref = np.maximum(conv(x, f32["w1"], f32["b1"]), 0)
    y_ref = conv(r_ref, f32["w2"], f32["b2"])
    r_q = fq(np.maximum(conv(fq(x, "x"), w1, b1), 0), "r")
    y_q = fq(conv(r_q, w2, b2), "y")
    want = {("r", "sqnr_db"): sqnr(r_ref, r_q), ("y", "sqnr_db"): sqnr(y_ref, y_q),
            ("r", "sqnr_local_db"): sqnr(r_ref, fq(r_ref, "r")),
            ("y", "sqnr_local_db"): sqnr(y_ref, fq(conv(fq(r_ref, "r"), w2, b2), "y"))}
    report = json.load(open(d + "/gc.json"))
    rep = {l["value"]: l for l in report["layers"]}
    bad = not report["fp32_pass_ms"] > 0  # timed inside the local measurement
    print("fp32_pass_ms %g" % report["fp32_pass_ms"])
    for (v, k), w in want.items():
        ok = abs(rep[v][k] - w) <= 0.002
        bad += not ok
        print("%s %s: report %.4f, numpy %.4f%s" % (v, k, rep[v][k], w, "" if ok else "  <-- apart"))
    for v in "ry":
        ok = abs(rep[v]["sqnr_int_db"] - want[(v, "sqnr_db")]) <= 0.05
        bad += not ok
        print("%s sqnr_int_db: report %.4f, numpy's QDQ %.4f%s" % (v, rep[v]["sqnr_int_db"], want[(v, "sqnr_db")],
                                                                    "" if ok else "  <-- apart"))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
