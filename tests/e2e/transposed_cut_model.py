#!/usr/bin/env python3
"""Two models for the run counter's test of the effects' cut runs (stop 53), written to DIR:
tA.onnx, x [n, 6, 4] -> Transpose(1, 0, 2) -> t [6, n, 4] -> MatMul -> a -> Relu -> r ->
Transpose(1, 0, 2) -> u [n, 6, 4] -> MatMul -> y, and tB.onnx, the same with both Transposes
(0, 1, 2): the same nodes and numbers, the values between in [n, 6, 4]. A cut run that starts from
t or r starts from a value whose first axis is 6 in tA, the batch n in tB. t_x.npy: 8 samples.
Usage: transposed_cut_model.py DIR"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

d = sys.argv[1]
r = np.random.default_rng(5)
w1 = r.standard_normal((4, 4)).astype(np.float32)
w2 = r.standard_normal((4, 4)).astype(np.float32)
for name, perm in (("tA", [1, 0, 2]), ("tB", [0, 1, 2])):
    ws = [h.make_tensor("w1", T.FLOAT, [4, 4], w1.ravel()), h.make_tensor("w2", T.FLOAT, [4, 4], w2.ravel())]
    nodes = [
        h.make_node("Transpose", ["x"], ["t"], perm=perm),
        h.make_node("MatMul", ["t", "w1"], ["a"]),
        h.make_node("Relu", ["a"], ["r"]),
        h.make_node("Transpose", ["r"], ["u"], perm=perm),
        h.make_node("MatMul", ["u", "w2"], ["y"]),
    ]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["n", 6, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["n", 6, 4])], ws)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), "%s/%s.onnx" % (d, name))
np.save("%s/t_x.npy" % d, r.standard_normal((8, 6, 4)).astype(np.float32))
