#!/usr/bin/python3
"""Test models for W4A8 (QRL-I item 3, recipes/w4a8.qrl: per-channel int4 weights, 8-bit
activations), random weights of both signs, seeded.

Usage: /usr/bin/python3 tools/make_w4a8_models.py OUTDIR

Writes to OUTDIR:
  cnn.onnx     X [N, 4, 9, 9] -> Conv (w1 [6, 2, 3, 3], bias, group 2, strides 2, pads [1, 0, 2, 1])
               -> Relu -> Conv depthwise (w2 [6, 1, 3, 3], bias, group 6, strides [1, 2], pads
               [1, 1, 1, 1]) -> Flatten -> Gemm (w3 [7, K], transB 1, bias) -> Y [N, 7], and
               MatMul (Y, w4 [7, 5]) -> Z [N, 5]: two outputs. Each weight has channels of very
               different magnitudes (one 30 times the others), so per-channel scales matter.
  cnn_calib.npy  32 calibration samples, both signs
  cnn_x.npy      8 other samples (held out: the runs are compared on these)
  gemm_n.onnx  X [N, 12] -> Gemm (w [12, 9], transB 0, bias) -> Relu -> Y: channels along w's axis 1
  gemm_n_calib.npy, gemm_n_x.npy
  shared.onnx  X [N, 12] -> MatMul mm_a and MatMul mm_b by one weight w [12, 6] -> Add -> Y (calibrate
               on gemm_n_calib.npy)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_a16_models import f32, save_model  # noqa: E402 (opset 13 models, ir_version 7)


def weight(rng, shape, axis):
    """Normal weights whose channel 0 along axis is 30 times larger than the rest."""
    w = rng.normal(0, 0.3, shape)
    idx = [slice(None)] * len(shape)
    idx[axis] = 0
    w[tuple(idx)] *= 30
    return w


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(448)
    w1, b1 = weight(rng, (6, 2, 3, 3), 0), rng.normal(0, 0.5, 6)
    w2, b2 = weight(rng, (6, 1, 3, 3), 0), rng.normal(0, 0.5, 6)
    # H: (9 + 1 + 2 - 3) // 2 + 1 = 5, W: (9 + 0 + 1 - 3) // 2 + 1 = 4; depthwise: H (5 + 2 - 3) + 1 = 5,
    # W (4 + 2 - 3) // 2 + 1 = 2: K = 6 * 5 * 2 = 60
    k = 60
    w3, b3 = weight(rng, (7, k), 0), rng.normal(0, 0.5, 7)
    w4 = weight(rng, (7, 5), 1)
    nodes = [
        helper.make_node("Conv", ["X", "w1", "b1"], ["c1"], name="conv1", group=2, strides=[2, 2], pads=[1, 0, 2, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=6, strides=[1, 2], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Flatten", ["c2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["Y"], transB=1),
        helper.make_node("MatMul", ["Y", "w4"], ["Z"]),
    ]
    save_model(os.path.join(out, "cnn.onnx"), nodes,
               [f32("w1", w1), f32("b1", b1), f32("w2", w2), f32("b2", b2), f32("w3", w3), f32("b3", b3),
                f32("w4", w4)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4, 9, 9])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 7]),
                helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 5])])
    np.save(os.path.join(out, "cnn_calib.npy"), rng.normal(0.2, 1.0, (32, 4, 9, 9)).astype(np.float32))
    np.save(os.path.join(out, "cnn_x.npy"), rng.normal(0.2, 1.0, (8, 4, 9, 9)).astype(np.float32))

    wn, bn = weight(rng, (12, 9), 1), rng.normal(0, 0.5, 9)
    save_model(os.path.join(out, "gemm_n.onnx"),
               [helper.make_node("Gemm", ["X", "w", "b"], ["g"]), helper.make_node("Relu", ["g"], ["Y"])],
               [f32("w", wn), f32("b", bn)], [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 12])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 9])])
    np.save(os.path.join(out, "gemm_n_calib.npy"), rng.normal(-0.1, 1.0, (32, 12)).astype(np.float32))
    np.save(os.path.join(out, "gemm_n_x.npy"), rng.normal(-0.1, 1.0, (8, 12)).astype(np.float32))

    # one weight read by two MatMuls (mm_a, mm_b): `weight for "mm_a"` alone cannot type it
    ws = weight(rng, (12, 6), 1)
    save_model(os.path.join(out, "shared.onnx"),
               [helper.make_node("MatMul", ["X", "w"], ["a"], name="mm_a"),
                helper.make_node("MatMul", ["X", "w"], ["b"], name="mm_b"), helper.make_node("Add", ["a", "b"], ["Y"])],
               [f32("w", ws)], [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 12])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 6])])


if __name__ == "__main__":
    main()
