#!/usr/bin/python3
"""Generates tests/conformance/cases/conv_bias_*: Conv and ConvTranspose
whose bias is large next to the sum of the products, in the layout of ONNX's
own test data (model.onnx, test_data_set_0/input_0.pb, output_0.pb).

Why: M-LSD's first Conv (4 -> 32 channels, 3x3, stride 2, pads [0,0,1,1],
a BatchNorm-folded bias) was three times less accurate in QRL than in ONNX
Runtime, because QRL started each sum at the bias, so every partial sum was
rounded at the bias's magnitude; the next depthwise Conv amplifies that, and
the `offsets` output ended up to 0.05 away from ONNX Runtime's.

The data are chosen so that the exact result is known: inputs are multiples
of 2^-7 in [-1, 1], weights multiples of 2^-17 below 2^-6 in magnitude, so
every product is a multiple of 2^-24 and every partial sum of products stays
below 1 in magnitude: any order of summing the products is exact in float32.
The only rounding left is adding the bias (about 5, so its ulp is 2^-21), so
the expected output is the exact value (numpy, float64, from the ONNX spec)
rounded once to float32, and a runtime that adds the bias last must match it
bit for bit. Starting the sum at the bias rounds each step and misses it.

Usage: /usr/bin/python3 tools/make_conv_bias_cases.py [OUT_DIR]   (default tests/conformance/cases)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 11  # M-LSD's


def conv_ref(x, w, b, strides, pads):
    """ONNX Conv (group 1, dilation 1), NCHW, float64: y = sum of products + b."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho = (xp.shape[2] - kh) // strides[0] + 1
    wo = (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((n, m, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + strides[0] * (ho - 1) + 1:strides[0], j:j + strides[1] * (wo - 1) + 1:strides[1]]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def conv_transpose_ref(x, w, b, strides, pads):
    """ONNX ConvTranspose (group 1, dilation 1, no output_padding), float64:
    each input pixel adds x * w into the output window it maps to, then b."""
    n, c, h, wd = x.shape
    _, m, kh, kw = w.shape
    full = np.zeros((n, m, (h - 1) * strides[0] + kh, (wd - 1) * strides[1] + kw))
    for i in range(kh):
        for j in range(kw):
            full[:, :, i:i + strides[0] * (h - 1) + 1:strides[0], j:j + strides[1] * (wd - 1) + 1:strides[1]] += \
                np.einsum("nchw,cm->nmhw", x, w[:, :, i, j])
    y = full[:, :, pads[0]:full.shape[2] - pads[2], pads[1]:full.shape[3] - pads[3]]
    return y + b.reshape(1, -1, 1, 1)


def data(rng, xshape, wshape, nbias):
    x = rng.integers(-128, 129, xshape) / 128.0          # multiples of 2^-7 in [-1, 1]
    w = rng.integers(-2047, 2048, wshape) / 2.0 ** 17   # multiples of 2^-17, |w| < 2^-6
    b = rng.uniform(4.0, 6.0, nbias) * rng.choice([-1, 1], nbias)  # BatchNorm-folded size
    return x.astype(np.float32), w.astype(np.float32), b.astype(np.float32)


def bias_first(products, b):
    """What a kernel that starts each sum at the bias computes (float32, in order)."""
    acc = np.broadcast_to(b, products[0].shape).astype(np.float32)
    for p in products:
        acc = (acc + p.astype(np.float32)).astype(np.float32)
    return acc


def save_case(out, name, node, x, w, b, y):
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, producer_name="tools/make_conv_bias_cases.py",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for fname, arr, tname in (("input_0.pb", x, "x"), ("output_0.pb", y, "y")):
        with open(os.path.join(d, "test_data_set_0", fname), "wb") as f:
            f.write(numpy_helper.from_array(arr, tname).SerializeToString())


def check_exact(name, exact, old):
    """The expected output is exact only if every partial sum was: assert the
    bounds the construction promises, and that the old order really misses."""
    want = exact.astype(np.float32)
    missed = int(np.sum(old != want))
    print(f"{name}: {want.size} outputs, bias-first order misses {missed} "
          f"(max {np.max(np.abs(old.astype(np.float64) - want)):.3g})")
    assert missed > want.size // 10, "the case must tell the two orders apart"
    return want


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/conformance/cases"
    rng = np.random.default_rng(20261123)

    # M-LSD's first Conv: 3x3, stride 2, pads [0,0,1,1] (TF "SAME"), 4 input channels.
    x, w, b = data(rng, (1, 4, 16, 16), (8, 4, 3, 3), 8)
    strides, pads = [2, 2], [0, 0, 1, 1]
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    exact = conv_ref(xd, wd, b.astype(np.float64), strides, pads)
    products = []  # QRL's order: input channel, then kernel row, then column
    xp = np.pad(xd, ((0, 0), (0, 0), (0, 1), (0, 1)))
    for c in range(4):
        for i in range(3):
            for j in range(3):
                patch = xp[0, c, i:i + 15:2, j:j + 15:2]
                products.append(wd[:, c, i, j].reshape(-1, 1, 1) * patch[None])
    assert max(np.max(np.abs(sum(products[:k + 1]))) for k in range(len(products))) < 1
    want = check_exact("conv_bias_after_products", exact, bias_first(products, b.reshape(-1, 1, 1))[None])
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], strides=strides, pads=pads)
    save_case(out, "conv_bias_after_products", node, x, w, b, want)

    # ConvTranspose, the same bias: 4 -> 6 channels, 3x3, stride 2, pads 1.
    x, w, b = data(rng, (1, 4, 8, 8), (4, 6, 3, 3), 6)
    strides, pads = [2, 2], [1, 1, 1, 1]
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    exact = conv_transpose_ref(xd, wd, b.astype(np.float64), strides, pads)
    # Partial sums: QRL's col2im adds, for each kernel position, the sum over
    # input channels (exact) into the output; an output pixel gets 1, 2 or 4 of them.
    products = []
    for i in range(3):
        for j in range(3):
            wk = np.zeros_like(wd)
            wk[:, :, i, j] = wd[:, :, i, j]
            products.append(conv_transpose_ref(xd, wk, np.zeros(6), strides, pads)[0])
    assert max(np.max(np.abs(sum(products[:k + 1]))) for k in range(len(products))) < 1
    want = check_exact("conv_transpose_bias_after_products", exact,
                       bias_first(products, b.reshape(-1, 1, 1))[None])
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], strides=strides,
                            pads=pads)
    save_case(out, "conv_transpose_bias_after_products", node, x, w, b, want)


if __name__ == "__main__":
    main()
