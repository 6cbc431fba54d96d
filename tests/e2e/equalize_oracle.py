#!/usr/bin/python3
"""The oracle of test_smoothquant.c's equalization test: cross-layer equalization (Nagel et al.,
2019, section 4.1) of a small CNN, Conv -> Relu -> Conv -> Conv, in numpy from the f32 model's
weights: s[j] = sqrt(r1[j] / r2[j]), r1 the producer's largest |w| in output channel j, r2 the
reader's largest |w| for input channel j; producer channel j (and bias) divided by s, reader
input channel j multiplied. The pairs are equalized in graph order (the second pair sees the
first's rescaled middle Conv), as one sweep does.

Usage: equalize_oracle.py make DIR           the model (cnn.onnx) and its calibration/test data;
                                             the first Conv's output channels span 10^-2..10^1
       equalize_oracle.py check DIR EXPORT    EXPORT's dequantized weights against the rewrite:
                                             prints the largest error in half quantization steps"""
import sys

import numpy as np


def make(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    r = np.random.default_rng(7)
    w1 = r.standard_normal((8, 4, 3, 3)) * (10.0 ** r.uniform(-2, 1, 8))[:, None, None, None]
    b1 = r.standard_normal(8) * 0.1
    w2 = r.standard_normal((6, 8, 1, 1)) * (10.0 ** r.uniform(-1, 1, 6))[:, None, None, None]
    b2 = r.standard_normal(6) * 0.1
    w3 = r.standard_normal((5, 6, 1, 1))
    inits = [h.make_tensor(n, T.FLOAT, a.shape, a.astype(np.float32).ravel()) for n, a in
             (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3))]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"]), h.make_node("Conv", ["c2", "w3"], ["y"])]
    g = h.make_graph(nodes, "cnn", [h.make_tensor_value_info("x", T.FLOAT, ["n", 4, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["n", 5, 8, 8])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), d + "/cnn.onnx")
    np.save(d + "/cnn_calib.npy", r.standard_normal((32, 4, 8, 8)).astype(np.float32))
    np.save(d + "/cnn_test.npy", np.random.default_rng(8).standard_normal((16, 4, 8, 8)).astype(np.float32))


def check(d, export):
    import onnx
    from onnx import numpy_helper
    w = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(d + "/cnn.onnx").graph.initializer}
    q = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(export).graph.initializer}
    for prod, bias, reader in (("w1", "b1", "w2"), ("w2", "b2", "w3")):
        r1 = np.abs(w[prod]).reshape(w[prod].shape[0], -1).max(1)
        r2 = np.abs(w[reader]).transpose(1, 0, 2, 3).reshape(w[reader].shape[1], -1).max(1)
        s = np.sqrt(r1 / r2)
        w[prod] = w[prod] / s[:, None, None, None]
        w[bias] = w[bias] / s
        w[reader] = w[reader] * s[None, :, None, None]
    worst = 0.0
    for name in ("w1", "w2", "w3"):
        scale = q[name + "_scale"]
        scale = scale.reshape(-1, 1, 1, 1) if scale.ndim else scale
        deq = (q[name + "_quantized"] - q[name + "_zero_point"].reshape(scale.shape)) * scale
        worst = max(worst, float(np.max(np.abs(deq - w[name]) / (0.5 * scale))))
    # the biases, int32 on scale s_x * s_w, to within half a step too
    for name in ("b1", "b2"):
        deq = q[name + "_quantized"] * q[name + "_scale"]
        worst = max(worst, float(np.max(np.abs(deq - w[name]) / (0.5 * q[name + "_scale"]))))
    print("%.4f" % worst)


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2], sys.argv[3])
