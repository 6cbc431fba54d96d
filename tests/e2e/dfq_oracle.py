#!/usr/bin/python3
"""The oracle of test_transform.c's ReLU6 equalization and high-bias absorption tests (Nagel et al.,
2019, arXiv:1906.04721, sections 4.1 and 4.1.2), in numpy from the f32 model's weights and the
calibration samples:

  x -> Conv1 (3x3, pads 1) -> Clip(0, 4) -> Conv2 (1x1, 2 groups) -> Relu -> Conv3 (1x1) -> y

Equalization, one sweep in graph order: pair (Conv1, Conv2) across the Clip, pair (Conv2, Conv3)
across the Relu, s[j] = sqrt(r1[j] / r2[j]) (r1: the producer's largest |w| of output channel j,
r2: the reader's largest |w| for input channel j; Conv2's input channel j meets only its group's
output channels), producer channel j and bias divided by s, reader input channel j multiplied, and
the Clip's upper bound becomes 4 / s[j] per channel (a Min after the Clip, whose own bound becomes
the largest of them). Absorption after it: a[j] = the smallest
pre-activation of channel j on the calibration samples, at least 0 and at most the channel's bound
(4 / s[j] after the Clip, none after the Relu), b1 -= a, b2 += W2 a, the bound becomes 4 / s[j] - a[j].

Usage: dfq_oracle.py make DIR            cnn6.onnx and its calibration/test samples (both signs;
                                          Conv1's channels span 10^-2..10^1, half of them with a
                                          bias that keeps them above 0)
       dfq_oracle.py check DIR T.onnx MODE TOOLS  T.onnx (qrl quantize --transformed) against numpy's
                                          rewrite, MODE eq (equalize(relu6 = true)) or eqabs (then
                                          absorb_bias()): prints the largest relative error of its
                                          weights, biases and bounds, then the largest relative
                                          difference of its f32 outputs from the original model's
                                          on the calibration samples and on the test samples (ONNX
                                          Runtime: TOOLS/ort_run.js)"""
import sys

import numpy as np


def make(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    r = np.random.default_rng(11)
    w1 = r.standard_normal((8, 4, 3, 3)) * (10.0 ** r.uniform(-2, 1, 8))[:, None, None, None]
    b1 = r.standard_normal(8) * 0.1 + np.where(np.arange(8) % 2 == 0, 0.0, 1.0) * 3 * np.abs(w1).reshape(8, -1).sum(1)
    w2 = r.standard_normal((6, 4, 1, 1)) * (10.0 ** r.uniform(-1, 1, 6))[:, None, None, None]
    b2 = r.standard_normal(6) * 0.1 + 2.0
    w3 = r.standard_normal((5, 6, 1, 1))
    b3 = r.standard_normal(5) * 0.1
    inits = [h.make_tensor(n, T.FLOAT, a.shape, a.astype(np.float32).ravel()) for n, a in
             (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3), ("b3", b3))]
    inits += [h.make_tensor("lo", T.FLOAT, [], [0.0]), h.make_tensor("hi", T.FLOAT, [], [4.0])]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=2), h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("Conv", ["r2", "w3", "b3"], ["y"])]
    g = h.make_graph(nodes, "cnn6", [h.make_tensor_value_info("x", T.FLOAT, ["n", 4, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["n", 5, 8, 8])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), d + "/cnn6.onnx")
    np.save(d + "/cnn6_calib.npy", r.standard_normal((32, 4, 8, 8)).astype(np.float32))
    np.save(d + "/cnn6_test.npy", np.random.default_rng(12).standard_normal((16, 4, 8, 8)).astype(np.float32))


def conv(x, w, b, pad, groups):
    """ONNX Conv, stride 1, in float64."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, hh, ww = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = hh - kh + 1, ww - kw + 1
    y = np.zeros((n, o, oh, ow))
    per = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                y[:, g * per:(g + 1) * per] += np.einsum("nchw,oc->nohw", xs[:, :, i:i + oh, j:j + ow],
                                                         w[g * per:(g + 1) * per, :, i, j])
    return y + b[None, :, None, None]


def rewrite(d, mode):
    import onnx
    from onnx import numpy_helper
    w = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(d + "/cnn6.onnx").graph.initializer}
    bound = np.full(8, 4.0)
    # pair 1: Conv1 -> Clip -> Conv2 (2 groups of 4 input channels)
    r1 = np.abs(w["w1"]).reshape(8, -1).max(1)
    r2 = np.array([np.abs(w["w2"][(j // 4) * 3:(j // 4 + 1) * 3, j % 4]).max() for j in range(8)])
    s = np.sqrt(r1 / r2)
    w["w1"] = w["w1"] / s[:, None, None, None]
    w["b1"] = w["b1"] / s
    bound = bound / s
    for j in range(8):
        w["w2"][(j // 4) * 3:(j // 4 + 1) * 3, j % 4] *= s[j]
    # pair 2: Conv2 -> Relu -> Conv3
    r1 = np.abs(w["w2"]).reshape(6, -1).max(1)
    r2 = np.abs(w["w3"]).transpose(1, 0, 2, 3).reshape(6, -1).max(1)
    s = np.sqrt(r1 / r2)
    w["w2"] = w["w2"] / s[:, None, None, None]
    w["b2"] = w["b2"] / s
    w["w3"] = w["w3"] * s[None, :, None, None]
    if mode == "eqabs":
        x = np.load(d + "/cnn6_calib.npy").astype(np.float64)
        c1 = conv(x, w["w1"], w["b1"], 1, 1)
        a1 = np.clip(c1.min(axis=(0, 2, 3)), 0, bound)
        w["b1"] = w["b1"] - a1
        bound = bound - a1
        add = np.zeros(6)
        for j in range(8):
            add[(j // 4) * 3:(j // 4 + 1) * 3] += w["w2"][(j // 4) * 3:(j // 4 + 1) * 3, j % 4, 0, 0] * a1[j]
        w["b2"] = w["b2"] + add
        r = np.minimum(np.maximum(c1 - a1[None, :, None, None], 0), bound[None, :, None, None])
        c2 = conv(r, w["w2"], w["b2"], 0, 2)
        a2 = np.maximum(c2.min(axis=(0, 2, 3)), 0)
        w["b2"] = w["b2"] - a2
        w["b3"] = w["b3"] + w["w3"][:, :, 0, 0] @ a2
    return w, bound


def check(d, path, mode, tools):
    import subprocess

    import onnx
    from onnx import numpy_helper
    want, bound = rewrite(d, mode)
    m = onnx.load(path)
    got = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    conv_nodes = [n for n in m.graph.node if n.op_type == "Conv"]
    mins = [n for n in m.graph.node if n.op_type == "Min"]
    clips = [n for n in m.graph.node if n.op_type == "Clip"]
    if len(conv_nodes) != 3 or len(mins) != 1 or len(clips) != 1 or mins[0].input[0] != clips[0].output[0]:
        print("the transformed graph is not three Convs with a Min after the Clip: %s" % [n.op_type for n in m.graph.node])
        sys.exit(1)
    # the Clip keeps a scalar bound at the per-channel bounds' largest (the Min decides)
    top = float(got[clips[0].input[2]])
    if abs(top - max(bound.max(), 0)) > 1e-6 * bound.max() or float(got[clips[0].input[1]]) != 0:
        print("the Clip's bounds are %g, %g, not 0 and the per-channel bounds' largest %g"
              % (float(got[clips[0].input[1]]), top, bound.max()))
        sys.exit(1)
    worst = 0.0
    for k, n in enumerate(conv_nodes):
        for name, ref in zip(n.input[1:], ("w%d" % (k + 1), "b%d" % (k + 1))):
            err = np.abs(got[name] - want[ref]).max() / np.abs(want[ref]).max()
            worst = max(worst, err)
    kb = got[mins[0].input[1]].reshape(-1)
    worst = max(worst, float(np.abs(kb - bound).max() / np.abs(bound).max()))
    diffs = []
    for data in ("calib", "test"):
        outs = []
        for k, model in enumerate((d + "/cnn6.onnx", path)):
            out = "%s/ort_%s_%s_%d" % (d, mode, data, k)
            subprocess.run(["node", tools + "/ort_run.js", model, "%s/cnn6_%s.npy" % (d, data), "-o", out], check=True)
            outs.append(np.load(out + "/y.npy").astype(np.float64))
        diffs.append(np.abs(outs[1] - outs[0]).max() / np.abs(outs[0]).max())
    print("%.3g %.3g %.3g" % (worst, diffs[0], diffs[1]))


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
