#!/usr/bin/python3
"""The oracle of test_transform.c's rounding optimizer tests: stdlib/transforms.qrl's adaround()
in numpy, from the f32 model and the export's own weight scales. Per output channel of each layer,
with x the layer's input rows on the calibration samples (a Conv's im2col patches, from PyTorch's
unfold on the f32 model's values), H = E[x x^T] and mu = E[x] in float64, it starts from
round-to-nearest (half to even) and sweeps over the channel's weights in order, moving one to its
other rounding (floor or ceil of w / s, none within 1/1000 of a step of the grid) when the move
lowers the layer's error by more than damp times the move's own size:
    change = 2 d (H dw)_i + d^2 H_ii,  mean = 2 d mu_i (dw . mu) + d^2 mu_i^2,  size = d^2 H_ii
    gain = mean - change (centered) or -change;  move when gain > damp * size
for at most iters sweeps (the layer-wise objective of AdaRound, Nagel et al., 2020,
arXiv:2004.10568, solved by coordinate descent). Never QRL's numbers but the export's scales.

The model, x [n, 4, 9, 9] (channel means of both signs) -> Conv(6 out, 3x3, group 2, strides
(2, 2), pads (1, 0, 2, 1), dilations (1, 2), bias) -> Reshape [n, 90] -> MatMul(W [90, 5]) -> y.

Usage: adaround_oracle.py make DIR                      ar.onnx, ar_calib.npy (64), ar_test.npy (32)
       adaround_oracle.py check DIR EXPORT PLAIN ITERS DAMP CENTERED
           (PLAIN: the same recipe's export without the transform, for its round-to-nearest integers)
           prints: the weights whose integer differs from numpy's choice, the weights, the
           layers' error E[(dw . x)^2] summed over channels with numpy's choice, with the export's,
           and with round-to-nearest"""
import sys

import numpy as np

PADS = [1, 0, 2, 1]  # top, left, bottom, right
STRIDES, DILATIONS, GROUP = [2, 2], [1, 2], 2


def weights():
    r = np.random.default_rng(21)
    return {"w1": r.standard_normal((6, 2, 3, 3)) * 0.3, "b1": r.standard_normal(6) * 0.1,
            "w2": r.standard_normal((90, 5)) * 0.2}


def make(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    w = weights()
    inits = [h.make_tensor(n, T.FLOAT, a.shape, a.astype(np.float32).ravel()) for n, a in w.items()]
    inits.append(h.make_tensor("shape", T.INT64, [2], [-1, 90]))
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv", pads=[PADS[0], PADS[1], PADS[2], PADS[3]],
                         strides=STRIDES, dilations=DILATIONS, group=GROUP),
             h.make_node("Reshape", ["c1", "shape"], ["f"]),
             h.make_node("MatMul", ["f", "w2"], ["y"], name="mm")]
    g = h.make_graph(nodes, "ar", [h.make_tensor_value_info("x", T.FLOAT, ["n", 4, 9, 9])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["n", 5])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), d + "/ar.onnx")
    mean = np.array([0.8, -0.5, 0.3, -1.2])[None, :, None, None]
    for name, seed, n in (("calib", 22, 64), ("test", 23, 32)):
        x = np.random.default_rng(seed).standard_normal((n, 4, 9, 9)) + mean
        np.save("%s/ar_%s.npy" % (d, name), x.astype(np.float32))


def rows(d, w):
    """Each layer's input rows per group: the Conv's patches (row-major positions of every
    sample), the MatMul's input vectors; from the f32 model in PyTorch (float64)."""
    import torch
    import torch.nn.functional as F
    x = torch.tensor(np.load(d + "/ar_calib.npy"), dtype=torch.float64)
    xp = F.pad(x, (PADS[1], PADS[3], PADS[0], PADS[2]))
    cols = F.unfold(xp, (3, 3), dilation=DILATIONS, stride=STRIDES)  # [n, 4 * 9, L], channel-major
    n, ck, npos = cols.shape
    patches = cols.permute(0, 2, 1).reshape(n * npos, ck).numpy()
    k = ck // GROUP
    conv = [patches[:, g * k:(g + 1) * k] for g in range(GROUP)]
    t = {k2: torch.tensor(v, dtype=torch.float64) for k2, v in w.items()}
    c1 = F.conv2d(F.pad(x, (PADS[1], PADS[3], PADS[0], PADS[2])), t["w1"], t["b1"], stride=STRIDES,
                  dilation=DILATIONS, groups=GROUP)
    return conv, [c1.reshape(n, -1).numpy()]


def optimize(wrow, s, near, X, iters, damp, centered):
    """The rounding of one channel (weights wrow, step s, its round-to-nearest integers near):
    integers, by coordinate descent. A weight within 1/1000 of a step of the grid, or at an end of
    the channel's range (its smallest or largest w or |w|), has no other rounding."""
    H = X.T @ X / X.shape[0]
    mu = X.mean(axis=0)
    v = wrow / s
    q = near.copy()
    a = np.abs(wrow)
    end = (wrow == wrow.min()) | (wrow == wrow.max()) | (a == abs(wrow.min())) | (a == abs(wrow.max()))
    other = np.where(end | (np.abs(v - q) < 1e-3), q, np.where(v > q, q + 1, q - 1))
    other = np.clip(other, -128, 127)
    dw = (q * s - wrow)
    g = H @ dw
    m = dw @ mu
    for sweep in range(iters):
        moved = 0
        for i in range(len(wrow)):
            alt = other[i] if q[i] == near[i] else near[i]
            if alt == q[i]:
                continue
            dd = (alt - q[i]) * s
            change = 2 * dd * g[i] + dd * dd * H[i, i]
            dm = 2 * dd * mu[i] * m + dd * dd * mu[i] * mu[i]
            gain = dm - change if centered else -change
            if gain > damp * dd * dd * H[i, i]:
                g += dd * H[:, i]
                m += dd * mu[i]
                q[i] = alt
                moved += 1
        if not moved:
            break
    return q, near, H


def check(d, export, plain, iters, damp, centered):
    import onnx
    from onnx import numpy_helper
    w = {k: v.astype(np.float32).astype(np.float64) for k, v in weights().items()}
    m = onnx.load(export)
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    nodes = {n.name: n for n in m.graph.node}

    def quantized(name):  # the integers and per-channel scales of a DequantizeLinear'd weight
        n = prod[name]
        assert n.op_type == "DequantizeLinear", (name, n.op_type)
        return init[n.input[0]], init[n.input[1]]

    conv_rows, mm_rows = rows(d, w)
    q1, s1 = quantized(nodes["conv"].input[1])
    q2, s2 = quantized(nodes["mm"].input[1])
    m = onnx.load(plain)  # round-to-nearest as the recipe rounds (half to even, in its precision)
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    p1, p2 = quantized(nodes["conv"].input[1])[0], quantized(nodes["mm"].input[1])[0]
    layers = []  # (weights per channel, scale, nearest, rows, export's integers)
    per = 6 // GROUP
    for o in range(6):
        layers.append((w["w1"][o].reshape(-1), s1[o], p1[o].reshape(-1), conv_rows[o // per], q1[o].reshape(-1)))
    for o in range(5):
        layers.append((w["w2"][:, o], s2[o], p2[:, o], mm_rows[0], q2[:, o]))
    diff = total = 0
    obj = np.zeros(3)  # numpy's choice, the export's, nearest
    for wrow, s, near, X, got in layers:
        q, near, H = optimize(wrow, s, near, X, iters, damp, centered)
        diff += int(np.sum(q != got))
        total += len(q)
        for j, c in enumerate((q, got, near)):
            dw = c * s - wrow
            obj[j] += dw @ H @ dw
    print("%d %d %.6g %.6g %.6g" % (diff, total, obj[0], obj[1], obj[2]))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6]), sys.argv[7] == "1")
