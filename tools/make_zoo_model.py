#!/usr/bin/python3
"""Writes a small ONNX model that uses every op the stdlib quantizes, and
sample data, for the integer-graph tests (tests/unit/test_intgraph.c).

    make_zoo_model.py OUT_DIR  ->  zoo.onnx, zoo_calib.npy, zoo_test.npy,
                                   two_inputs.onnx, two_a.npy, two_b.npy, two_labels.npy,
                                   depthwise.onnx, residual.onnx, pools.onnx, pools_test.npy,
                                   wide.onnx, odd_residual.onnx

The weights are random (seeded), so the model means nothing; what the tests
check is that its integer graph computes what its QDQ simulation computes.
Ops: Conv + Clip, Conv + Relu, Conv, Sigmoid, Tanh, HardSwish, LeakyRelu,
Add, Mul, Concat, AveragePool, Pad, MaxPool, GlobalAveragePool, Flatten,
Gemm + Relu, MatMul. two_inputs.onnx has two inputs (a and b, each through
a Conv, added) for multi-input calibration. depthwise.onnx (the zoo's input
and samples) has a MobileNet block: Conv to 96 channels, depthwise 3x3 at
stride 1 (16 x 16 planes) and 2, pointwise Conv, GlobalAveragePool, Gemm.
residual.onnx (the same input) has a ResNet block: Conv + Relu, a dilated Conv
+ Relu, Conv, Add of the block's input, Relu, a strided Conv, GlobalAveragePool,
Gemm.
pools.onnx (3 x 64 x 64 inputs, pools_test.npy) has pools on planes large
enough to be split across tasks: Conv + Relu, MaxPool 3x3 stride 2, Conv +
Relu, AveragePool 3x3 with count_include_pad, MaxPool 8x8 stride 8, Flatten of
its 32 x 4 x 4, Gemm.
wide.onnx (the zoo's input) has two ResNet blocks of several 64-channel strips
each, the last one ragged: Conv to 80 channels + Relu, Conv + Relu, Conv, Add
of the first Relu's, Relu; a strided Conv to 200 channels + Relu, Conv, Add,
Relu; GlobalAveragePool, Gemm.
odd_residual.onnx (the zoo's input) has residual Adds on 21 channels over 14 x 14
pixels (a tile of 6 rows does not divide them): Conv to 21 channels without
padding + Relu, Conv + Relu, a 1 x 1 Conv, Add of the first Relu's (the Conv
its second operand), Relu, a dilated Conv, Add without a Relu (its sum may go
below the zero point), GlobalAveragePool, Gemm.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save

OPSET = 14


def save_model(path, name, nodes, inputs, classes, inits):
    """A checked model: f32 inputs [N, ...shape] by name, logits [N, classes]."""
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, ["N"] + v) for k, v in inputs.items()],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="qrl-tools")
    checker.check_model(m)
    save(m, path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    inits = []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, dtype=np.float32), name))
        return name

    def weight(name, shape):
        fan_in = int(np.prod(shape[1:]))
        return const(name, rng.normal(0, 1.5 / np.sqrt(fan_in), shape))

    def bias(name, n):
        return const(name, rng.normal(0, 0.1, n))

    N = helper.make_node
    nodes = [
        N("Conv", ["x", weight("w1", (8, 3, 3, 3)), bias("b1", 8)], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        N("Clip", ["c1", const("zero", 0.0), const("six", 6.0)], ["r1"], name="relu6"),
        N("Conv", ["r1", weight("w2", (8, 8, 1, 1)), bias("b2", 8)], ["c2"], name="conv2"),
        N("Sigmoid", ["c2"], ["s2"], name="sigmoid"),
        N("Conv", ["r1", weight("w3", (8, 8, 3, 3)), bias("b3", 8)], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        N("HardSwish", ["c3"], ["h3"], name="hardswish"),
        N("Add", ["s2", "h3"], ["a"], name="add"),
        N("Mul", ["a", "r1"], ["m"], name="mul"),
        N("Concat", ["m", "h3"], ["cat"], name="concat", axis=1),
        N("AveragePool", ["cat"], ["p"], name="avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        N("Pad", ["p", "pads"], ["pd"], name="pad", mode="constant"),
        N("Conv", ["pd", weight("w4", (16, 16, 3, 3)), bias("b4", 16)], ["c4"], name="conv4"),
        N("Relu", ["c4"], ["r4"], name="relu4"),
        N("MaxPool", ["r4"], ["mp"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2]),
        N("Tanh", ["mp"], ["t"], name="tanh"),
        N("LeakyRelu", ["t"], ["lr"], name="leakyrelu", alpha=0.01),
        N("GlobalAveragePool", ["lr"], ["g"], name="gap"),
        N("Flatten", ["g"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wf", (32, 16)), bias("bf", 32)], ["fc"], name="fc", transB=1),
        N("Relu", ["fc"], ["rf"], name="relu_fc"),
        N("MatMul", ["rf", const("wm", rng.normal(0, 1.5 / np.sqrt(32), (32, 10)))], ["logits"], name="matmul"),
    ]
    inits.append(numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64), "pads"))
    save_model(os.path.join(out, "zoo.onnx"), "zoo", nodes, {"x": [3, 16, 16]}, 10, inits)
    np.save(os.path.join(out, "zoo_calib.npy"), rng.normal(0, 1, (64, 3, 16, 16)).astype(np.float32))
    np.save(os.path.join(out, "zoo_test.npy"), rng.normal(0, 1, (32, 3, 16, 16)).astype(np.float32))

    inits.clear()
    nodes = [
        N("Conv", ["a", weight("wa", (4, 2, 3, 3)), bias("ba", 4)], ["ca"], name="conv_a", pads=[1, 1, 1, 1]),
        N("Conv", ["b", weight("wb", (4, 1, 3, 3)), bias("bb", 4)], ["cb"], name="conv_b", pads=[1, 1, 1, 1]),
        N("Add", ["ca", "cb"], ["s"], name="add"),
        N("Relu", ["s"], ["r"], name="relu"),
        N("Flatten", ["r"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wf", (5, 4 * 8 * 8)), bias("bf", 5)], ["logits"], name="fc", transB=1),
    ]
    save_model(os.path.join(out, "two_inputs.onnx"), "two_inputs", nodes, {"a": [2, 8, 8], "b": [1, 8, 8]}, 5, inits)
    np.save(os.path.join(out, "two_a.npy"), rng.normal(0, 1, (48, 2, 8, 8)).astype(np.float32))
    np.save(os.path.join(out, "two_b.npy"), rng.normal(0, 1, (48, 1, 8, 8)).astype(np.float32))
    np.save(os.path.join(out, "two_labels.npy"), rng.integers(0, 5, 48).astype(np.int64))

    inits.clear()
    nodes = [
        N("Conv", ["x", weight("wd0", (96, 3, 3, 3)), bias("bd0", 96)], ["d0"], name="conv0", pads=[1, 1, 1, 1]),
        N("Relu", ["d0"], ["r0"], name="relu0"),
        N("Conv", ["r0", weight("wd1", (96, 1, 3, 3)), bias("bd1", 96)], ["d1"], name="dw1", pads=[1, 1, 1, 1],
          group=96),
        N("Clip", ["d1", const("lo", np.array(0, np.float32)), const("hi", np.array(6, np.float32))], ["r1"],
          name="clip1"),
        N("Conv", ["r1", weight("wd2", (96, 1, 3, 3)), bias("bd2", 96)], ["d2"], name="dw2", pads=[1, 1, 1, 1],
          strides=[2, 2], group=96),
        N("Relu", ["d2"], ["r2"], name="relu2"),
        N("Conv", ["r2", weight("wd3", (16, 96, 1, 1)), bias("bd3", 16)], ["d3"], name="pw"),
        N("GlobalAveragePool", ["d3"], ["g"], name="gap"),
        N("Flatten", ["g"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wdf", (10, 16)), bias("bdf", 10)], ["logits"], name="fc", transB=1),
    ]
    save_model(os.path.join(out, "depthwise.onnx"), "depthwise", nodes, {"x": [3, 16, 16]}, 10, inits)

    inits.clear()
    nodes = [
        N("Conv", ["x", weight("wr0", (24, 3, 3, 3)), bias("br0", 24)], ["e0"], name="conv0", pads=[1, 1, 1, 1]),
        N("Relu", ["e0"], ["s0"], name="relu0"),
        N("Conv", ["s0", weight("wr1", (24, 24, 3, 3)), bias("br1", 24)], ["e1"], name="conv1", pads=[2, 2, 2, 2],
          dilations=[2, 2]),
        N("Relu", ["e1"], ["s1"], name="relu1"),
        N("Conv", ["s1", weight("wr2", (24, 24, 3, 3)), bias("br2", 24)], ["e2"], name="conv2", pads=[1, 1, 1, 1]),
        N("Add", ["e2", "s0"], ["sum"], name="add"),
        N("Relu", ["sum"], ["s2"], name="relu2"),
        N("Conv", ["s2", weight("wr3", (40, 24, 3, 3)), bias("br3", 40)], ["e3"], name="conv3", pads=[1, 1, 1, 1],
          strides=[2, 2]),
        N("Relu", ["e3"], ["s3"], name="relu3"),
        N("GlobalAveragePool", ["s3"], ["g"], name="gap"),
        N("Flatten", ["g"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wrf", (10, 40)), bias("brf", 10)], ["logits"], name="fc", transB=1),
    ]
    save_model(os.path.join(out, "residual.onnx"), "residual", nodes, {"x": [3, 16, 16]}, 10, inits)

    inits.clear()
    nodes = [
        N("Conv", ["x", weight("wp0", (32, 3, 3, 3)), bias("bp0", 32)], ["q0"], name="conv0", pads=[1, 1, 1, 1]),
        N("Relu", ["q0"], ["t0"], name="relu0"),
        N("MaxPool", ["t0"], ["m0"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        N("Conv", ["m0", weight("wp1", (32, 32, 3, 3)), bias("bp1", 32)], ["q1"], name="conv1", pads=[1, 1, 1, 1]),
        N("Relu", ["q1"], ["t1"], name="relu1"),
        N("AveragePool", ["t1"], ["a1"], name="avgpool", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
          count_include_pad=1),
        N("MaxPool", ["a1"], ["m1"], name="maxpool2", kernel_shape=[8, 8], strides=[8, 8]),
        N("Flatten", ["m1"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wpf", (10, 32 * 4 * 4)), bias("bpf", 10)], ["logits"], name="fc", transB=1),
    ]
    save_model(os.path.join(out, "pools.onnx"), "pools", nodes, {"x": [3, 64, 64]}, 10, inits)
    np.save(os.path.join(out, "pools_test.npy"), rng.normal(0, 1, (4, 3, 64, 64)).astype(np.float32))

    inits.clear()
    nodes = [
        N("Conv", ["x", weight("ww0", (80, 3, 3, 3)), bias("bw0", 80)], ["v0"], name="conv0", pads=[1, 1, 1, 1]),
        N("Relu", ["v0"], ["u0"], name="relu0"),
        N("Conv", ["u0", weight("ww1", (80, 80, 3, 3)), bias("bw1", 80)], ["v1"], name="conv1", pads=[1, 1, 1, 1]),
        N("Relu", ["v1"], ["u1"], name="relu1"),
        N("Conv", ["u1", weight("ww2", (80, 80, 3, 3)), bias("bw2", 80)], ["v2"], name="conv2", pads=[1, 1, 1, 1]),
        N("Add", ["v2", "u0"], ["sum2"], name="add2"),
        N("Relu", ["sum2"], ["u2"], name="relu2"),
        N("Conv", ["u2", weight("ww3", (200, 80, 3, 3)), bias("bw3", 200)], ["v3"], name="conv3",
          pads=[1, 1, 1, 1], strides=[2, 2]),
        N("Relu", ["v3"], ["u3"], name="relu3"),
        N("Conv", ["u3", weight("ww4", (200, 200, 3, 3)), bias("bw4", 200)], ["v4"], name="conv4",
          pads=[1, 1, 1, 1]),
        N("Add", ["v4", "u3"], ["sum4"], name="add4"),
        N("Relu", ["sum4"], ["u4"], name="relu4"),
        N("GlobalAveragePool", ["u4"], ["g"], name="gap"),
        N("Flatten", ["g"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wwf", (10, 200)), bias("bwf", 10)], ["logits"], name="fc", transB=1),
    ]
    save_model(os.path.join(out, "wide.onnx"), "wide", nodes, {"x": [3, 16, 16]}, 10, inits)

    inits.clear()
    nodes = [
        N("Conv", ["x", weight("wo0", (21, 3, 3, 3)), bias("bo0", 21)], ["o0"], name="conv0"),
        N("Relu", ["o0"], ["p0"], name="relu0"),
        N("Conv", ["p0", weight("wo1", (21, 21, 3, 3)), bias("bo1", 21)], ["o1"], name="conv1", pads=[1, 1, 1, 1]),
        N("Relu", ["o1"], ["p1"], name="relu1"),
        N("Conv", ["p1", weight("wo2", (21, 21, 1, 1)), bias("bo2", 21)], ["o2"], name="conv2"),
        N("Add", ["p0", "o2"], ["sum2"], name="add2"),
        N("Relu", ["sum2"], ["p2"], name="relu2"),
        N("Conv", ["p2", weight("wo3", (21, 21, 3, 3)), bias("bo3", 21)], ["o3"], name="conv3", pads=[2, 2, 2, 2],
          dilations=[2, 2]),
        N("Add", ["o3", "p2"], ["sum3"], name="add3"),
        N("GlobalAveragePool", ["sum3"], ["g"], name="gap"),
        N("Flatten", ["g"], ["f"], name="flatten", axis=1),
        N("Gemm", ["f", weight("wof", (10, 21)), bias("bof", 10)], ["logits"], name="fc", transB=1),
    ]
    save_model(os.path.join(out, "odd_residual.onnx"), "odd_residual", nodes, {"x": [3, 16, 16]}, 10, inits)


if __name__ == "__main__":
    main()
