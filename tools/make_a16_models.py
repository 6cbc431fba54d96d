#!/usr/bin/python3
"""Test models for 16-bit activations (QRL-I item 4, recipes/a16w8.qrl), random weights, seeded.

Usage: /usr/bin/python3 tools/make_a16_models.py OUTDIR

Writes to OUTDIR:
  convnet.onnx   X [N, 4, 9, 9] -> Conv (w [6, 2, 3, 3], bias, group 2, strides 2, pads [1, 0, 2, 1],
                 dilations [2, 1]) -> Relu -> MaxPool (2 x 2, stride 1) -> Conv (w [5, 6, 1, 2], no bias,
                 strides [1, 2]) -> Flatten
                 -> MatMul (w [K, 7]) -> Add (bias) -> ReduceMean (axes [1], keepdims 1, an attribute:
                 opset 13) and the Linear's output: two outputs. Weights and inputs of both signs.
  convnet_calib.npy, convnet_x.npy  calibration samples and other test samples, both signs
  attn.onnx      X [N, 6, 8] -> MatMul (X, Transpose(X)) -> Y [N, 6, 6] (a product of two activations,
                 as attention's Q.K^T), and Z = P * P with P = X @ w [8, 5] (a Mul of two activations)
  attn_calib.npy, attn_x.npy
  widek.onnx     X [N, 4096] -> MatMul (w [4096, 3], all positive) -> Y: with X in [0, 4] the u16
                 integers of X reach 65535 and the weights' 127, so a row's sum of products is about
                 4096 * 32767 * 63 = 8.5e9, past int32 (2.1e9): an int32 accumulator would wrap
  widek_calib.npy, widek_x.npy
  bigk.onnx      X [1, 33000] -> MatMul (w [33000, 2]): a sum longer than the int64 accumulator takes
  bigk_calib.npy
  block.onnx     a post-LN attention block (opset 17), for recipes that give LayerNormalization and
                 Softmax 16-bit outputs and keep the rest 8-bit: X [N, 6, 8] -> Linear -> h;
                 n = LayerNorm(h) (scale and bias of both signs, epsilon 1e-3); q, k, v = Linear(n);
                 s = (q @ k^T) * 0.35; p = Softmax(s); o = p @ v; Y = LayerNorm(o + n); Z = Linear(Y):
                 outputs Y and Z
  block_calib.npy, block_x.npy
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def f32(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def save_model(path, nodes, inits, inputs, outputs, opset=13):
    g = helper.make_graph(nodes, os.path.basename(path), inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tools/make_a16_models.py")
    m.ir_version = 7
    save(m, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1616)

    # convnet: the first Conv's output is [N, 6, 4, 4], pooled [N, 6, 3, 3]; the second's [N, 5, 3, 1]: K = 15
    w1 = rng.normal(0, 0.4, (6, 2, 3, 3))
    b1 = rng.normal(0, 0.3, 6)
    w2 = rng.normal(0, 0.3, (5, 6, 1, 2))
    wl = rng.normal(0, 0.2, (15, 7))
    bl = rng.normal(0, 0.5, 7)
    nodes = [
        helper.make_node("Conv", ["X", "w1", "b1"], ["c1"], group=2, strides=[2, 2], pads=[1, 0, 2, 1],
                         dilations=[2, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], strides=[1, 2], kernel_shape=[1, 2]),
        helper.make_node("Flatten", ["c2"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "wl"], ["m"]),
        helper.make_node("Add", ["m", "bl"], ["Y"]),
        helper.make_node("ReduceMean", ["Y"], ["Z"], axes=[1], keepdims=1),
    ]
    save_model(os.path.join(out, "convnet.onnx"), nodes,
               [f32("w1", w1), f32("b1", b1), f32("w2", w2), f32("wl", wl), f32("bl", bl)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4, 9, 9])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 7]),
                helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 1])])
    np.save(os.path.join(out, "convnet_calib.npy"), rng.normal(0.2, 1.0, (32, 4, 9, 9)).astype(np.float32))
    np.save(os.path.join(out, "convnet_x.npy"), rng.normal(0.2, 1.0, (8, 4, 9, 9)).astype(np.float32))

    # attn: the products of two activations (attention's Q.K^T, and a Mul), both operands 16-bit
    tb = rng.normal(0, 0.5, (8, 5))
    nodes = [
        helper.make_node("Transpose", ["X"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["X", "xt"], ["Y"]),
        helper.make_node("MatMul", ["X", "tb"], ["p"]),
        helper.make_node("Mul", ["p", "p"], ["Z"]),
    ]
    save_model(os.path.join(out, "attn.onnx"), nodes, [f32("tb", tb)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 6, 8])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 6, 6]),
                helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 6, 5])])
    np.save(os.path.join(out, "attn_calib.npy"), rng.normal(-0.3, 1.0, (16, 6, 8)).astype(np.float32))
    np.save(os.path.join(out, "attn_x.npy"), rng.normal(-0.3, 1.0, (4, 6, 8)).astype(np.float32))

    kd = 4096
    ww = rng.uniform(0.0, 0.1, (kd, 3))
    ww[0, :] = 0.1  # the largest weight of every column: its integer is 127
    save_model(os.path.join(out, "widek.onnx"), [helper.make_node("MatMul", ["X", "w"], ["Y"])], [f32("w", ww)],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", kd])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3])])
    calib = rng.uniform(0.0, 4.0, (8, kd)).astype(np.float32)
    calib[0, 0] = 4.0
    np.save(os.path.join(out, "widek_calib.npy"), calib)
    np.save(os.path.join(out, "widek_x.npy"), rng.uniform(2.0, 4.0, (4, kd)).astype(np.float32))

    kb = 33000
    save_model(os.path.join(out, "bigk.onnx"), [helper.make_node("MatMul", ["X", "w"], ["Y"])],
               [f32("w", rng.normal(0, 0.1, (kb, 2)))],
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, kb])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2])])
    np.save(os.path.join(out, "bigk_calib.npy"), rng.normal(0, 1, (2, kb)).astype(np.float32))

    # block: the boundaries between 16-bit and 8-bit activations in a post-LN attention block
    d = 8
    w = {k: rng.normal(0, 0.4, (d, d)) for k in ("wh", "wq", "wk", "wv", "wz")}
    b = {k: rng.normal(0, 0.3, d) for k in ("bh", "bq", "bk", "bv", "bz")}
    g1, be1 = rng.normal(0.5, 0.6, d), rng.normal(0, 0.4, d)
    g2, be2 = rng.normal(0.5, 0.6, d), rng.normal(0, 0.4, d)

    def linear(x, wn, bn, y):
        return [helper.make_node("MatMul", [x, wn], [y + "_m"]), helper.make_node("Add", [y + "_m", bn], [y])]

    nodes = linear("X", "wh", "bh", "h") + [
        helper.make_node("LayerNormalization", ["h", "g1", "be1"], ["n"], axis=-1, epsilon=1e-3)]
    nodes += linear("n", "wq", "bq", "q") + linear("n", "wk", "bk", "k") + linear("n", "wv", "bv", "v")
    nodes += [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "c"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("Add", ["o", "n"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "g2", "be2"], ["Y"], axis=-1, epsilon=1e-3),
    ] + linear("Y", "wz", "bz", "Z")
    inits = [f32(k, a) for k, a in list(w.items()) + list(b.items())]
    inits += [f32("g1", g1), f32("be1", be1), f32("g2", g2), f32("be2", be2), f32("c", 0.35)]
    save_model(os.path.join(out, "block.onnx"), nodes, inits,
               [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 6, d])],
               [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 6, d]),
                helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 6, d])], opset=17)
    np.save(os.path.join(out, "block_calib.npy"), rng.normal(0.1, 1.0, (32, 6, d)).astype(np.float32))
    np.save(os.path.join(out, "block_x.npy"), rng.normal(0.1, 1.0, (8, 6, d)).astype(np.float32))


if __name__ == "__main__":
    main()
