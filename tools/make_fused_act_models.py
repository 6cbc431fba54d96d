#!/usr/bin/python3
"""Models for tests/e2e/test_fused_act.c (stdlib/patterns_fused.qrl): layers
whose output only an activation written as several nodes reads.

fused_act.onnx, input x [N, 3, 6, 6], four outputs, each one layer on x:
  y1 = HardSwish(Conv1(x))   as c * HardSigmoid(c) (alpha 1/6, as torch writes it)
  y2 = SiLU(Conv2(x))        as Sigmoid(c) * c (the operands the other way)
  y3 = HardSwish(Gemm(Flatten(x), transB = 1))
  y4 = SiLU(Gemm(Flatten(x), transB = 1))
shared.onnx: y = HardSwish(Conv(x)) and z = Relu(Conv(x)) on the same Conv
output, which two layers read, so no pattern may fuse it.
Weights and biases of both signs (a fixed seed); x.npy (32 samples) and
x_test.npy (16 samples) of both signs, normal with mean 0.3.
Usage: make_fused_act_models.py DIR
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    d = sys.argv[1]
    rng = np.random.default_rng(24)

    def const(name, a):
        return numpy_helper.from_array(np.asarray(a, np.float32), name)

    inits = [const("w1", rng.normal(0, 0.4, (5, 3, 3, 3))), const("b1", rng.normal(0, 0.5, 5)),
             const("w2", rng.normal(0, 0.4, (4, 3, 3, 3))), const("b2", rng.normal(0, 0.5, 4)),
             const("w3", rng.normal(0, 0.15, (7, 108))), const("b3", rng.normal(0, 0.5, 7)),
             const("w4", rng.normal(0, 0.15, (6, 108))), const("b4", rng.normal(0, 0.5, 6))]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", **conv),
        helper.make_node("HardSigmoid", ["c1"], ["s1"], name="hs1", alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["c1", "s1"], ["y1"], name="mul1"),
        helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], name="conv2", **conv),
        helper.make_node("Sigmoid", ["c2"], ["s2"], name="sig2"),
        helper.make_node("Mul", ["s2", "c2"], ["y2"], name="mul2"),
        helper.make_node("Flatten", ["x"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["g3"], name="gemm3", transB=1),
        helper.make_node("HardSigmoid", ["g3"], ["s3"], name="hs3", alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["g3", "s3"], ["y3"], name="mul3"),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["g4"], name="gemm4", transB=1),
        helper.make_node("Sigmoid", ["g4"], ["s4"], name="sig4"),
        helper.make_node("Mul", ["g4", "s4"], ["y4"], name="mul4"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6])
    outs = [helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["N", 5, 6, 6]),
            helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["N", 4, 6, 6]),
            helper.make_tensor_value_info("y3", TensorProto.FLOAT, ["N", 7]),
            helper.make_tensor_value_info("y4", TensorProto.FLOAT, ["N", 6])]
    g = helper.make_graph(nodes, "fused_act", [x], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, d + "/fused_act.onnx")

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv", **conv),
        helper.make_node("HardSigmoid", ["c"], ["s"], name="hs", alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["c", "s"], ["y"], name="mul"),
        helper.make_node("Relu", ["c"], ["z"], name="relu"),
    ]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5, 6, 6]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 5, 6, 6])]
    g = helper.make_graph(nodes, "shared", [x], outs, inits[:2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, d + "/shared.onnx")

    np.save(d + "/x.npy", rng.normal(0.3, 1.0, (32, 3, 6, 6)).astype(np.float32))
    np.save(d + "/x_test.npy", rng.normal(0.3, 1.0, (16, 3, 6, 6)).astype(np.float32))


if __name__ == "__main__":
    main()
