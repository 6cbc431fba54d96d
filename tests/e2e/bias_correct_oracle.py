#!/usr/bin/python3
"""The oracle of test_transform.c's bias correction tests: empirical bias correction (Nagel et
al., 2019, section 4.2) of a small model in numpy/PyTorch from the f32 model and the export's own
quantized weights: each layer's new bias is b - (W_q - W) E[x], E[x] the mean of each input
channel of the layer's input over the calibration samples (the f32 model run in PyTorch), W_q the
export's dequantized weight.

The model, x [n, 4, 8, 8] -> Conv(3x3, pads 1, bias) -> Relu -> depthwise Conv(3x3, group 8, no
bias) -> Relu -> Conv(1x1, no bias) -> Flatten -> MatMul(no bias) -> Relu -> Gemm(transB, alpha
0.5, beta 2, C) -> y: Conv with groups, Conv, MatMul and Gemm, with and without a bias. Its weights
quantize badly per tensor (a few entries 20-50x the rest), and its input channels have means of
both signs, so W_q - W leaves a shift per output channel that every sample pays.

Usage: bias_correct_oracle.py make DIR          bc.onnx, bc_calib.npy (64), bc_test.npy (32, held out)
       bias_correct_oracle.py check DIR EXPORT [N]   prints the largest distance of EXPORT's biases
                                                 from the formula's, in the bias's quantization
                                                 steps; E[x] over the first N calibration samples
                                                 (all 64 without N)"""
import sys

import numpy as np


def weights(d):
    r = np.random.default_rng(11)

    def spiky(shape, n):  # normal weights with n entries far larger: a per-tensor scale fits those
        w = r.standard_normal(shape) * 0.1
        flat = w.reshape(-1)
        flat[r.choice(flat.size, n, replace=False)] = r.choice([-1, 1], n) * r.uniform(2, 5, n)
        return w

    return {"w1": spiky((8, 4, 3, 3), 2), "b1": r.standard_normal(8) * 0.1, "w2": spiky((8, 1, 3, 3), 2),
            "w3": spiky((6, 8, 1, 1), 1), "w4": spiky((384, 10), 3), "w5": spiky((5, 10), 1),
            "c5": r.standard_normal(5) * 0.1}


def make(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    w = weights(d)
    inits = [h.make_tensor(n, T.FLOAT, a.shape, a.astype(np.float32).ravel()) for n, a in w.items()]
    inits.append(h.make_tensor("shape", T.INT64, [2], [-1, 384]))
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2"], ["c2"], name="dw", pads=[1, 1, 1, 1], group=8),
             h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("Conv", ["r2", "w3"], ["c3"], name="pw"),
             h.make_node("Reshape", ["c3", "shape"], ["f"]),
             h.make_node("MatMul", ["f", "w4"], ["m4"], name="mm"),
             h.make_node("Relu", ["m4"], ["r4"]),
             h.make_node("Gemm", ["r4", "w5", "c5"], ["y"], name="gemm", transB=1, alpha=0.5, beta=2.0)]
    g = h.make_graph(nodes, "bc", [h.make_tensor_value_info("x", T.FLOAT, ["n", 4, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["n", 5])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), d + "/bc.onnx")
    mean = np.array([1.5, -1.0, 0.5, -2.0])[None, :, None, None]  # both signs, non-zero
    np.save(d + "/bc_calib.npy", (np.random.default_rng(12).standard_normal((64, 4, 8, 8)) + mean).astype(np.float32))
    np.save(d + "/bc_test.npy", (np.random.default_rng(13).standard_normal((32, 4, 8, 8)) + mean).astype(np.float32))


def layer_inputs(d, w, n):
    """Each layer's input on the first n calibration samples, from the f32 model in PyTorch (float64)."""
    import torch
    import torch.nn.functional as F
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in w.items()}
    x = torch.tensor(np.load(d + "/bc_calib.npy")[:n], dtype=torch.float64)
    r1 = F.relu(F.conv2d(x, t["w1"], t["b1"], padding=1))
    r2 = F.relu(F.conv2d(r1, t["w2"], padding=1, groups=8))
    f = F.conv2d(r2, t["w3"]).reshape(-1, 384)
    r4 = F.relu(f @ t["w4"])
    return {"conv1": x, "dw": r1, "pw": r2, "mm": f, "gemm": r4}


def expected(d, w, wq, n):
    """The new biases as each layer adds them: b - (W_q - W) E[x], per output channel."""
    xs = layer_inputs(d, w, n)
    mean = {k: (v.mean(dim=(0, 2, 3)) if v.ndim == 4 else v.mean(dim=0)).numpy() for k, v in xs.items()}
    out = {}
    dw1 = (wq["w1"] - w["w1"]).sum(axis=(2, 3))  # [8, 4]
    out["conv1"] = w["b1"] - dw1 @ mean["conv1"]
    dw2 = (wq["w2"] - w["w2"]).sum(axis=(1, 2, 3))  # depthwise: output o reads input o
    out["dw"] = -dw2 * mean["dw"]
    out["pw"] = -(wq["w3"] - w["w3"]).sum(axis=(2, 3)) @ mean["pw"]
    out["mm"] = -mean["mm"] @ (wq["w4"] - w["w4"])
    # wq["w5"]: alpha W_q as the export's Gemm applies it (QRL folds alpha and beta on import)
    out["gemm"] = 2.0 * w["c5"] - (wq["w5"] - 0.5 * w["w5"]) @ mean["gemm"]  # beta C - (W_q - alpha W) E[x]
    return out


def check(d, export, n):
    import onnx
    from onnx import numpy_helper
    w = {k: v.astype(np.float32).astype(np.float64) for k, v in weights(d).items()}
    m = onnx.load(export)
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}

    def value(name):  # an initializer, or a DequantizeLinear of initializers, in float64
        if name in init:
            return init[name], None
        n = prod[name]
        assert n.op_type == "DequantizeLinear", (name, n.op_type)
        q, s = init[n.input[0]], init[n.input[1]]
        z = init[n.input[2]] if len(n.input) > 2 and n.input[2] else np.zeros_like(s)
        if s.ndim:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            shape = [1] * q.ndim
            shape[axis] = -1
            s, z = s.reshape(shape), z.reshape(shape)
        return (q - z) * s, s

    nodes = {n.name: n for n in m.graph.node}
    attr = {a.name: a.f for a in nodes["gemm"].attribute if a.name in ("alpha", "beta")}
    alpha, beta = attr.get("alpha", 1.0), attr.get("beta", 1.0)
    wq = {"w1": value(nodes["conv1"].input[1])[0], "w2": value(nodes["dw"].input[1])[0],
          "w3": value(nodes["pw"].input[1])[0], "w4": value(nodes["mm"].input[1])[0],
          "w5": alpha * value(nodes["gemm"].input[1])[0]}
    want = expected(d, w, wq, n)
    worst = 0.0
    for layer in ("conv1", "dw", "pw", "mm", "gemm"):
        n = nodes[layer]
        if layer == "mm":  # the Add after it holds its bias
            adds = [a for a in m.graph.node if a.op_type == "Add" and n.output[0] in a.input]
            if len(adds) != 1:
                print("no bias Add after the MatMul")
                sys.exit(1)
            a = adds[0]
            got, step = value(a.input[1] if a.input[0] == n.output[0] else a.input[0])
        elif len(n.input) < 3 or not n.input[2]:
            print("layer %s has no bias" % layer)
            sys.exit(1)
        else:
            got, step = value(n.input[2])
        f = beta if layer == "gemm" else 1.0
        got = got.reshape(-1) * f
        step = np.abs(want[layer]) * 1e-6 + 1e-7 if step is None else step.reshape(-1) * f
        worst = max(worst, float(np.max(np.abs(got - want[layer]) / step)))
    print("%.4f" % worst)


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None)
