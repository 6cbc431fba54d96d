#!/usr/bin/python3
"""Resize's arithmetic, bit for bit, in numpy (tests/e2e/test_resize.c).

  resize_oracle.py make DIR         writes DIR/<case>.onnx, DIR/<case>_x.npy and the
                                    expected DIR/<case>_y.npy of every case
  resize_oracle.py check DIR OUT    compares OUT/<case>/<output>.npy (qrl run's) with
                                    the expected, exactly; prints one line per case

The expected values follow the ONNX reference (onnx/reference/ops/op_resize.py):
per axis, each output position's input coordinate (the coordinate transformation
mode), its neighbours left and right with the weights 1 - ratio and ratio (on an
exact input index the reference takes the neighbour to the left with ratio 1),
indices clamped into the input, zero weights dropped; nearest takes floor. The
sum is done the way QRL documents it (runtime/ops/resize.c): in float64, over the
tensor product of the axes' taps with the last axis fastest, each weight the
product of the axes' weights in axis order, then rounded once to float32 (to the
nearest integer, half to even, for 8-bit data); an element with one tap of weight
1 on every axis is a copy. So the row-by-row path QRL takes for these must give
the floats its element-by-element loop gave.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name: (dims, dtype, mode, coordinate_transformation_mode, scales)
CASES = {
    "bilinear_x2": ((1, 3, 5, 7), np.float32, "linear", "half_pixel", (1, 1, 2, 2)),
    "linear_up_down": ((2, 2, 6, 7), np.float32, "linear", "half_pixel", (1, 1, 1.5, 0.6)),
    "linear_last_axis": ((2, 3, 4, 5), np.float32, "linear", "asymmetric", (1, 1, 1, 2.5)),
    "linear_outer_axis": ((2, 3, 4, 5), np.float32, "linear", "align_corners", (1, 1, 3, 1)),
    "linear_axes_0_2": ((3, 4, 5), np.float32, "linear", "pytorch_half_pixel", (2, 1, 1.75)),
    "nearest_x2": ((1, 2, 5, 6), np.float32, "nearest", "asymmetric", (1, 1, 2, 2)),
    "bilinear_u8": ((1, 2, 5, 6), np.uint8, "linear", "half_pixel", (1, 1, 2, 2)),
}


def coordinate(ctm, o, s, n):
    """Output position o's input coordinate on an axis of n inputs resized by s."""
    lr = s * n
    if ctm == "half_pixel":
        return (o + 0.5) / s - 0.5
    if ctm == "pytorch_half_pixel":
        return (o + 0.5) / s - 0.5 if lr > 1 else 0.0
    if ctm == "align_corners":
        return 0.0 if lr == 1 else o * (n - 1) / (lr - 1)
    if ctm == "asymmetric":
        return o / s
    raise ValueError(ctm)


def taps(mode, ctm, s, n, out):
    """Per output position, the list of (input index, weight)."""
    t = []
    for o in range(out):
        x = coordinate(ctm, o, s, n)
        if mode == "nearest":
            t.append([(min(max(int(np.floor(x)), 0), n - 1), 1.0)])
            continue
        base = np.floor(x)
        ratio = x - base
        if ratio == 0:
            base, ratio = base - 1, 1.0
        one = []
        for j, w in enumerate((1 - ratio, ratio)):
            if w != 0:
                one.append((min(max(int(base) + j, 0), n - 1), w))
        t.append(one)
    return t


def expected(x, mode, ctm, scales):
    s = [float(np.float32(v)) for v in scales]
    out = [int(np.floor(n * v)) for n, v in zip(x.shape, s)]
    axes = [taps(mode, ctm, v, n, m) for v, n, m in zip(s, x.shape, out)]
    y = np.zeros(out, x.dtype)
    for pos in np.ndindex(*out):
        per = [axes[d][pos[d]] for d in range(x.ndim)]
        if all(len(p) == 1 and p[0][1] == 1 for p in per):
            y[pos] = x[tuple(p[0][0] for p in per)]
            continue
        acc = 0.0
        for combo in np.ndindex(*[len(p) for p in per]):  # the last axis fastest
            w = 1.0
            for d in range(x.ndim):
                if len(per[d]) > 1:
                    w *= per[d][combo[d]][1]
            acc += w * float(x[tuple(per[d][combo[d]][0] for d in range(x.ndim))])
        if x.dtype == np.float32:
            y[pos] = np.float32(acc)
        else:
            y[pos] = np.clip(np.rint(acc), 0, 255)
    return y


def make(d):
    rng = np.random.default_rng(7)
    for name, (dims, dt, mode, ctm, scales) in CASES.items():
        if dt == np.float32:
            x = (rng.standard_normal(dims) * 3).astype(np.float32)  # both signs
        else:
            x = rng.integers(0, 256, dims).astype(dt)
        et = TensorProto.FLOAT if dt == np.float32 else TensorProto.UINT8
        y = expected(x, mode, ctm, scales)
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode,
                                coordinate_transformation_mode=ctm, nearest_mode="floor")
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", et, list(dims))],
                              [helper.make_tensor_value_info("y", et, None)],
                              [numpy_helper.from_array(np.array(scales, np.float32), "scales")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.save(m, os.path.join(d, name + ".onnx"))
        np.save(os.path.join(d, name + "_x.npy"), x)
        np.save(os.path.join(d, name + "_y.npy"), y)


def check(d, out):
    bad = 0
    for name in CASES:
        want = np.load(os.path.join(d, name + "_y.npy"))
        got = np.load(os.path.join(out, name, "y.npy"))
        same = got.shape == want.shape and got.dtype == want.dtype and \
            np.array_equal(got.view(np.uint8), want.view(np.uint8))
        diff = int(np.count_nonzero(got != want)) if got.shape == want.shape else -1
        print(f"{name} {'same' if same else 'differs'} {diff} of {want.size}")
        bad += not same
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
