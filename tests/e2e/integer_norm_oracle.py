#!/usr/bin/python3
"""The oracle of tests/e2e/test_patterns_integer.c: numpy's Softmax of attention scores and
LayerNorm of a residual sum, computed in f64 from the quantized inputs as the QRL --qparams JSON
gives them, then quantized to the outputs' qparams (round half to even, saturation): the integers
stdlib/patterns_integer.qrl's kernels must write. Never reads what QRL computed except its
qparams and its outputs, which it compares.

Usage: integer_norm_oracle.py make DIR        the model (attn.onnx) and calibration/test data
       integer_norm_oracle.py check DIR OUT   compares OUT/y.npy and OUT/z.npy; prints
                                              "BAD N" (elements off), "OFF1 N" (off by one)"""
import json
import sys

import numpy as np


def make(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    r = np.random.default_rng(5)
    g = r.standard_normal(8).astype(np.float32) * 0.5 + 1.0
    beta = r.standard_normal(8).astype(np.float32) * 0.3
    nodes = [h.make_node("Div", ["q", "c"], ["qd"]), h.make_node("MatMul", ["qd", "k"], ["s"]),
             h.make_node("Softmax", ["s"], ["y"], axis=3),
             h.make_node("Add", ["a", "b"], ["x"]),
             h.make_node("LayerNormalization", ["x", "g", "beta"], ["z"], axis=-1, epsilon=1e-3)]
    inits = [h.make_tensor("c", T.FLOAT, [], [2.8284271]), h.make_tensor("g", T.FLOAT, [8], g),
             h.make_tensor("beta", T.FLOAT, [8], beta)]
    ins = [h.make_tensor_value_info("q", T.FLOAT, ["n", 2, 5, 8]), h.make_tensor_value_info("k", T.FLOAT, ["n", 2, 8, 5]),
           h.make_tensor_value_info("a", T.FLOAT, ["n", 5, 8]), h.make_tensor_value_info("b", T.FLOAT, ["n", 5, 8])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, ["n", 2, 5, 5]), h.make_tensor_value_info("z", T.FLOAT, ["n", 5, 8])]
    m = h.make_model(h.make_graph(nodes, "attn", ins, outs, inits), opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, d + "/attn.onnx")
    for tag, seed, n in (("calib", 1, 32), ("test", 2, 16)):
        r = np.random.default_rng(seed)
        for name, shape, sd in (("q", (2, 5, 8), 2.0), ("k", (2, 8, 5), 2.0), ("a", (5, 8), 1.5), ("b", (5, 8), 3.0)):
            np.save("%s/%s_%s.npy" % (d, name, tag), (r.standard_normal((n,) + shape) * sd).astype(np.float32))


def quant(x, t):
    return np.clip(np.rint(x.astype(np.float64) / np.float32(t["scale"])) + t["zero_point"], 0, 255)


def real(x, t):
    return (quant(x, t) - t["zero_point"]) * np.float64(np.float32(t["scale"]))


def check(d, out):
    qp = {t["value"]: t for t in json.load(open(d + "/attn.json"))["activations"]}
    q, k, a, b = (np.load("%s/%s_test.npy" % (d, n)) for n in "qkab")
    acc = (quant(q, qp["q"]) - qp["q"]["zero_point"]) @ (quant(k, qp["k"]) - qp["k"]["zero_point"])
    m = np.float64(np.float32(qp["q"]["scale"])) * np.float64(np.float32(qp["k"]["scale"])) * (1.0 / np.float64(np.float32(2.8284271)))
    s = acc * m
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want_y = quant(p, qp["y"])
    x = real(a, qp["a"]) + real(b, qp["b"])
    import onnx
    from onnx import numpy_helper
    inits = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(d + "/attn.onnx").graph.initializer}
    mu = x.mean(-1, keepdims=True)
    v = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + np.float64(np.float32(1e-3))) * inits["g"] + inits["beta"]
    want_z = quant(v, qp["z"])
    bad = off1 = 0
    for want, name in ((want_y, "y"), (want_z, "z")):
        got = np.rint(np.load("%s/%s.npy" % (out, name)).astype(np.float64) / np.float32(qp[name]["scale"])) + qp[name]["zero_point"]
        diff = np.abs(got - want)
        bad += int((diff > 1).sum())
        off1 += int((diff == 1).sum())
    print("BAD %d OFF1 %d OF %d DISTINCT_Y %d" % (bad, off1, want_y.size + want_z.size, np.unique(want_y).size))


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2], sys.argv[3])
