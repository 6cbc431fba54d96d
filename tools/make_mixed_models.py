#!/usr/bin/python3
"""Mixed-precision test model and data (QRL-I 5, tests/e2e/test_mixed.c).

Usage: /usr/bin/python3 tools/make_mixed_models.py OUTDIR

Writes to OUTDIR:
  mlp.onnx  an f32 chain (opset 17) of five layers with 2-D constant weights, each K leaving a
            ragged last block of 32: X [n, 48] -> MatMul W1 [48, 64] -> Relu -> Gemm W2 [64, 40]
            + B2 -> Tanh -> Gemm W3 [24, 40] (transB 1) -> Relu -> MatMul W4 [24, 56] -> MatMul
            W5 [56, 16] -> Y; W2 and W4 hold a few large weights (outliers: their blocks lose most
            at 4 bits), so the layers differ in how much each type costs them
  x.npy     X [48, 48], N(0, 1): both signs
  res.onnx  a residual CNN (opset 17) for integer mixed precision: X [n, 3, 12, 12] -> Conv A
            (3 -> 8, 3x3, pad 1) -> Relu -> r1; r1 -> Conv B (8 -> 8) -> Relu -> Conv C (8 -> 8)
            -> Add r1 -> Relu -> GlobalAveragePool -> Flatten -> Gemm D (8 -> 10) -> Y. What A
            and C write an Add reads (no 16-bit choice for them); what B and D write, only a Conv
            and the model's output
  xr.npy    X [64, 3, 12, 12], N(0, 1)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(5)
    shapes = {"W1": (48, 64), "W2": (64, 40), "W3": (24, 40), "W4": (24, 56), "W5": (56, 16)}
    w = {k: (rng.standard_normal(s) / np.sqrt(s[0] if k != "W3" else s[1])).astype(np.float32) for k, s in shapes.items()}
    for k in ("W2", "W4"):
        w[k].flat[rng.integers(0, w[k].size, 6)] *= 10
    b2 = (0.1 * rng.standard_normal(40)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h1"]), helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("Gemm", ["r1", "W2", "B2"], ["h2"]), helper.make_node("Tanh", ["h2"], ["t2"]),
             helper.make_node("Gemm", ["t2", "W3"], ["h3"], transB=1), helper.make_node("Relu", ["h3"], ["r3"]),
             helper.make_node("MatMul", ["r3", "W4"], ["h4"]), helper.make_node("MatMul", ["h4", "W5"], ["Y"])]
    inits = [helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.ravel()) for k, v in w.items()]
    inits.append(helper.make_tensor("B2", TensorProto.FLOAT, [40], b2))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 48])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", 16])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tools/make_mixed_models.py")
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "mlp.onnx"))
    np.save(os.path.join(out, "x.npy"), rng.standard_normal((48, 48)).astype(np.float32))
    residual(out, rng)


def residual(out, rng):
    def conv_w(co, ci):
        return (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(ci * 9)).astype(np.float32)
    w = {"WA": conv_w(8, 3), "WB": conv_w(8, 8), "WC": conv_w(8, 8),
         "WD": (rng.standard_normal((10, 8)) / np.sqrt(8)).astype(np.float32)}
    w["WB"].flat[rng.integers(0, w["WB"].size, 4)] *= 8  # outliers: 4 bits cost B most
    b = {k: (0.1 * rng.standard_normal(n)).astype(np.float32) for k, n in (("BA", 8), ("BB", 8), ("BC", 8), ("BD", 10))}
    nodes = [helper.make_node("Conv", ["X", "WA", "BA"], ["a"], name="A", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r1"]),
             helper.make_node("Conv", ["r1", "WB", "BB"], ["b"], name="B", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["r2"]),
             helper.make_node("Conv", ["r2", "WC", "BC"], ["c"], name="C", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r1"], ["s"]), helper.make_node("Relu", ["s"], ["rs"]),
             helper.make_node("GlobalAveragePool", ["rs"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "WD", "BD"], ["Y"], name="D", transB=1)]
    inits = [helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.ravel()) for k, v in list(w.items()) + list(b.items())]
    g = helper.make_graph(nodes, "res", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 3, 12, 12])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", 10])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tools/make_mixed_models.py")
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "res.onnx"))
    np.save(os.path.join(out, "xr.npy"), rng.standard_normal((64, 3, 12, 12)).astype(np.float32))


if __name__ == "__main__":
    main()
