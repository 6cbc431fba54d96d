#!/usr/bin/python3
"""test_transform.c's model whose weights are large constants (64 KiB and more: the graph keeps
them in blocks of their own, shared read-only between a graph and its copies): x [n, 32, 8, 8] ->
Conv(3x3, pads 1, bias) -> Relu -> Conv(3x3, pads 1, bias) -> y, weights [64, 32, 3, 3] (72 KiB)
and [48, 64, 3, 3] (108 KiB), the first Conv's output channels spread over two decades (so that
equalize rescales them). Inputs of both signs.

Usage: big_conv_model.py DIR   writes DIR/big.onnx and DIR/big_calib.npy (32 samples)"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

d = sys.argv[1]
r = np.random.default_rng(11)
w1 = r.standard_normal((64, 32, 3, 3)) * (10.0 ** r.uniform(-1, 1, 64))[:, None, None, None] * 0.1
b1 = r.standard_normal(64) * 0.1
w2 = r.standard_normal((48, 64, 3, 3)) * 0.05
b2 = r.standard_normal(48) * 0.1
inits = [h.make_tensor(n, T.FLOAT, a.shape, a.astype(np.float32).ravel()) for n, a in
         (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))]
nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
         h.make_node("Relu", ["c1"], ["r1"]),
         h.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
g = h.make_graph(nodes, "big", [h.make_tensor_value_info("x", T.FLOAT, ["n", 32, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["n", 48, 8, 8])], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), d + "/big.onnx")
np.save(d + "/big_calib.npy", r.standard_normal((32, 32, 8, 8)).astype(np.float32))
