#!/usr/bin/python3
"""Test models for narrow accumulators (QRL-I item 6, accumulate = iN, overflow = wrap | saturate):
random weights of both signs, seeded.

Usage: /usr/bin/python3 tools/make_acc_models.py OUTDIR

Writes to OUTDIR:
  conv.onnx    X [N, 4, 7, 6] -> Conv (w [6, 2, 3, 3], bias, group 2, strides [2, 1], pads [1, 0, 2, 1],
               dilations [1, 2]) -> Y: K = 2 * 3 * 3 = 18 per group; odd spatial sizes and padding
  conv_calib.npy, conv_x.npy   calibration samples and other samples, both signs
  mm.onnx      X [N, 3, 37] -> MatMul (w [37, 5]) -> Add (bias) -> Y: K = 37 (odd)
  mm_calib.npy, mm_x.npy
  gemm.onnx    X [N, 29] -> Gemm (w [6, 29], transB 1, bias [6]) -> Y: K = 29 (a Linear as torch exports it)
  gemm_calib.npy, gemm_x.npy
"""
import os
import sys

import numpy as np
from onnx import helper, numpy_helper, save, TensorProto


def f32(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def save_model(path, nodes, inits, inputs, outputs):
    g = helper.make_graph(nodes, os.path.basename(path), inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="tools/make_acc_models.py")
    m.ir_version = 7
    save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1414)

    w = rng.normal(0, 0.5, (6, 2, 3, 3))
    b = rng.normal(0, 0.3, 6)
    nodes = [helper.make_node("Conv", ["X", "w", "b"], ["Y"], group=2, strides=[2, 1], pads=[1, 0, 2, 1],
                              dilations=[1, 2], kernel_shape=[3, 3])]
    save_model(os.path.join(out, "conv.onnx"), nodes, [f32("w", w), f32("b", b)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4, 7, 6])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    # inputs mostly positive (a shifted normal) so that sums of one sign grow past narrow ranges
    np.save(os.path.join(out, "conv_calib.npy"), (rng.normal(0.8, 1.0, (16, 4, 7, 6))).astype(np.float32))
    np.save(os.path.join(out, "conv_x.npy"), (rng.normal(0.8, 1.0, (5, 4, 7, 6))).astype(np.float32))

    w = rng.normal(0, 0.4, (37, 5))
    b = rng.normal(0, 0.5, 5)
    nodes = [helper.make_node("MatMul", ["X", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["Y"])]
    save_model(os.path.join(out, "mm.onnx"), nodes, [f32("w", w), f32("b", b)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3, 37])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    np.save(os.path.join(out, "mm_calib.npy"), (rng.normal(0.6, 1.0, (12, 3, 37))).astype(np.float32))
    np.save(os.path.join(out, "mm_x.npy"), (rng.normal(0.6, 1.0, (4, 3, 37))).astype(np.float32))

    w = rng.normal(0, 0.5, (6, 29))
    b = rng.normal(0, 0.5, 6)
    nodes = [helper.make_node("Gemm", ["X", "w", "b"], ["Y"], transB=1)]
    save_model(os.path.join(out, "gemm.onnx"), nodes, [f32("w", w), f32("b", b)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 29])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    np.save(os.path.join(out, "gemm_calib.npy"), (rng.normal(0.7, 1.0, (20, 29))).astype(np.float32))
    np.save(os.path.join(out, "gemm_x.npy"), (rng.normal(0.7, 1.0, (6, 29))).astype(np.float32))


if __name__ == "__main__":
    main()
