#!/usr/bin/python3
"""Requantization ties, against numpy (tests/e2e/test_patterns_integer.c).

A Conv 3x3 (pads 1, bias) -> Clip(0, 63.75) whose scales are powers of two by
construction, so the integer graph's requantization (acc + bias) * m lands
exactly on k + 0.5 for many outputs:
  x = x_int / 8, x_int in [0, 255] with both ends in the calibration set:
      minmax u8 gives s_x = 0.125, zero 0;
  w = w_int / 4 with |w_int| <= 20, plus one +-31.875 per output channel:
      symmetric per-channel minmax (amax / 127.5) gives s_w = 0.25;
  b = b_int / 32 = b_int * s_x * s_w: the int32 bias is b_int exactly;
  y = Clip(conv, 0, 63.75), saturated both ways in the calibration set:
      s_y = 0.25, zero 0, so m = s_x * s_w / s_y = 1/8.
ONNX's QuantizeLinear rounds half to even, so the QDQ model computes
y_int = clip(round_half_even((acc + b_int) / 8), 0, 255), every step exact in
float64. A kernel that rounds half away from zero differs on every tie. The
oracle takes the integers and scales from the export (read with onnx) and
computes the Conv itself.

Usage: requant_ties_oracle.py make DIR   (ties.onnx, ties_calib.npy, ties_test.npy)
       requant_ties_oracle.py check DIR QRL_OUT.npy QDQ.onnx
"""
import sys

import numpy as np


def conv_int(x, w, b):
    """Integer Conv 3x3, pads 1, stride 1: int64 accumulators."""
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + 2, wd + 2), np.int64)
    xp[:, :, 1:-1, 1:-1] = x
    out = np.zeros((n, w.shape[0], h, wd), np.int64)
    for o in range(w.shape[0]):
        acc = np.full((n, h, wd), b[o], np.int64)
        for ci in range(c):
            for i in range(3):
                for j in range(3):
                    acc += w[o, ci, i, j] * xp[:, ci, i:i + h, j:j + wd]
        out[:, o] = acc
    return out


def weights():
    """The model's real weights and bias."""
    rng = np.random.default_rng(11)
    w = rng.integers(-20, 21, (3, 2, 3, 3)) / 4.0
    w[0, 0, 1, 1], w[1, 1, 0, 2], w[2, 0, 2, 0] = 31.875, -31.875, 31.875
    b = rng.integers(-50, 51, 3) / 32.0
    return w, b


def make(d):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w, b = weights()
    rng = np.random.default_rng(12)
    calib = rng.integers(0, 256, (16, 2, 6, 6))
    calib[0, 0, 0, 0], calib[0, 1, 0, 0] = 0, 255
    test = rng.integers(0, 256, (64, 2, 6, 6))
    inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
             numpy_helper.from_array(b.astype(np.float32), "b"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(63.75, np.float32), "hi")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    g = helper.make_graph(nodes, "ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 6, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{d}/ties.onnx")
    np.save(f"{d}/ties_calib.npy", (calib / 8.0).astype(np.float32))
    np.save(f"{d}/ties_test.npy", (test / 8.0).astype(np.float32))
    real = conv_int(calib, np.rint(w * 8).astype(np.int64), np.rint(b * 256).astype(np.int64)) / 256.0
    assert real.min() < 0 and real.max() > 63.75, "the calibration set must saturate the Clip both ways"


def export_params(qdq):
    """From the export (onnx only): x's and y's scale, w's int8 values and scales, b's int32."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(qdq)
    c = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dq = {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    q_y = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in ("x",))
    x_dq, w_dq, b_dq = dq[conv.input[0]], dq[conv.input[1]], dq[conv.input[2]]
    return (float(c[x_dq.input[1]]), c[w_dq.input[0]].astype(np.int64), c[w_dq.input[1]].astype(np.float64),
            c[b_dq.input[0]].astype(np.int64), float(c[q_y.input[1]]))


def check(d, got_path, qdq):
    sx, w_int, sw, b_int, sy = export_params(qdq)
    # the premise: the scales the construction promises (else the ties below are not ties)
    if sx != 0.125 or sy != 0.25 or not np.all(sw == 0.25):
        sys.exit(f"the export's scales are x {sx}, w {sw.tolist()}, y {sy}: the model no longer makes ties")
    x = np.rint(np.load(f"{d}/ties_test.npy").astype(np.float64) / sx).astype(np.int64)
    acc = conv_int(x, w_int, b_int)
    m = sx * float(sw[0]) / sy  # 1/8
    want = np.clip(np.round(acc * m), 0, 255) * sy  # np.round: half to even, as QuantizeLinear
    got = np.load(got_path).astype(np.float64)
    ties = int(((acc % 8 == 4) & (acc > 0) & (acc < 255 * 8)).sum())
    bad = int((got != want).sum())
    print(f"ties {ties} of {acc.size} outputs; {bad} differ from numpy")
    if ties < 20:
        sys.exit("too few ties to tell the rounding apart")
    if bad:
        i = tuple(np.argwhere(got != want)[0])
        sys.exit(f"QRL differs from numpy at {i}: {got[i]} vs {want[i]} (acc {acc[i]})")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3], sys.argv[4])
