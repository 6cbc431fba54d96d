#!/usr/bin/python3
"""The GPTQ test model (QRL-I): two layers reading the graph input, so that each layer's Hessian
is the input's own X^T X, which numpy (tests/e2e/gptq_oracle.py) and QRL then sum exactly.

Usage: /usr/bin/python3 tools/make_gptq_models.py OUTDIR

Writes to OUTDIR:
  gptq_layers.onnx  X [64, 40] -> MatMul W1 [40, 24] -> Y1, and Gemm(X, W2 [7, 40], b [7], transB 1) -> Y2
                    (opset 17); weights of both signs, normal with a few large ones
  x.npy             X: multiples of 1/4 in -2 .. 2, so every product and every partial sum of X^T X
                    is exact in f32; column 5 is all zero (an input no row reaches: GPTQ's dead column)
  x_test.npy        16 other rows of the same distribution, never calibrated on
  x_few.npy         X's first 8 rows: fewer than the 40 inputs, so X^T X is singular"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

M, K, N1, N2 = 64, 40, 24, 7


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    # correlated inputs (as a layer's are), so error feedback has something to work with
    mix = rng.normal(size=(K, K)) * 0.3 + np.eye(K)

    def rows(m):
        x = rng.normal(size=(m, K)) @ mix
        x = np.clip(np.round(x * 2) / 4, -2, 2).astype(np.float32)
        x[:, 5] = 0
        return x

    x, xt = rows(M), rows(16)
    w1 = rng.normal(size=(K, N1)).astype(np.float32)
    w1[3, 2], w1[17, 9], w1[33, 20] = 4.5, -5.25, 3.75
    w2 = rng.normal(size=(N2, K)).astype(np.float32) * 0.5
    w2[1, 38], w2[6, 0] = -3.0, 2.5
    b2 = rng.normal(size=N2).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["Y1"], name="mm"),
             helper.make_node("Gemm", ["X", "W2", "B2"], ["Y2"], name="gemm", transB=1)]
    g = helper.make_graph(nodes, "gptq_layers", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["m", K])],
                          [helper.make_tensor_value_info("Y1", TensorProto.FLOAT, ["m", N1]),
                           helper.make_tensor_value_info("Y2", TensorProto.FLOAT, ["m", N2])],
                          initializer=[numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"),
                                       numpy_helper.from_array(b2, "B2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tools/make_gptq_models.py")
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "gptq_layers.onnx"))
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "x_test.npy"), xt)
    np.save(os.path.join(out, "x_few.npy"), x[:8])


if __name__ == "__main__":
    main()
