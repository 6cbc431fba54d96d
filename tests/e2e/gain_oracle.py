#!/usr/bin/python3
"""The oracle of test_quantize.c's rank tests: a chain x [8, 3, 4, 4] -> Conv 1x1 (w1, no bias) -> a ->
Conv 1x1 (w2, no bias) -> y, weights and inputs of both signs, quantized as int8.qrl quantizes (u8
asymmetric activations from the export's qparams JSON, i8 symmetric per-channel weights from min/max:
scale = max|w| / 127.5, computed here). numpy computes, for each of x, a and y:

  exact  the output SQNR with that layer alone quantized (what rank = effect measures)
  gain   rank = gain's estimate (quantizer/qmeasure.c gain_effects), from numpy's own forward passes:
         R own rounding, O error from f32 inputs, L from inputs rounded from f32, E cumulative;
         W = O - R, h = (L - O) / R_in, g = (E - L) / (E_in - R_in) (h where E_in ~ R_in);
         effect = S_y / (W F + R H), F and H the gains carried to y.

nonlin.onnx (make): x [8, 3, 6, 6] -> Conv 3x3 pads 1 -> p -> Relu -> r -> Conv 3x3 stride 2 -> s
-> Sigmoid -> z -> Conv 1x1 -> y, weights and inputs of both signs (rank = grad's first order against
rank = effect's exact runs).

deep.onnx (make): x [16, 3, 8, 8] -> 16 x (Conv 3x3 pads 1 -> Relu, Sigmoid, Tanh or Relu) -> Conv 1x1
-> y: 32 tensors for rank = grad's exact effects near the search's cut (grad_exact_near), against
rank = effect's decisions.

coh.onnx (make): x [16, 4, 4, 4] -> 40 x Conv 1x1 -> y, whose layers' weight errors add coherently
(make_coherent): rank = grad's predicted cut against the exhaustive answer (coh).

two.onnx (make): x -> Conv (two nearly equal channels) -> a -> Conv (their difference) -> b, both
outputs: pooled, a's energy hides b's error.

Usage: gain_oracle.py make DIR                 chain.onnx, chain_x.npy, two.onnx, two_x.npy, nonlin.onnx, nonlin_x.npy,
                                                deep.onnx, deep_x.npy, coh.onnx, coh_x.npy
       gain_oracle.py check DIR QPARAMS REPORT  prints one line per layer: name exact gain reported
       gain_oracle.py coh DIR REPORT DB         coh.onnx's exhaustive answer for the bound DB (coh's doc)
       gain_oracle.py two DIR REPORT N          two.onnx's exact effects on its first N samples from the
                                                report's qparams: one line per layer: name exact reported"""
import json
import sys

import numpy as np


def make(d):
    import onnx
    from onnx import numpy_helper
    from onnx import TensorProto as T
    from onnx import helper as h
    r = np.random.default_rng(5)
    w1 = (r.standard_normal((4, 3, 1, 1)) * 0.6).astype(np.float32)
    w1[1, 2, 0, 0] = 2.5  # one weight that a per-channel scale fits
    w2 = (r.standard_normal((2, 4, 1, 1)) * 0.4).astype(np.float32)
    x = (r.standard_normal((8, 3, 4, 4)) * np.array([1.0, 0.3, 2.0]).reshape(1, 3, 1, 1)).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "w1"], ["a"]), h.make_node("Conv", ["a", "w2"], ["y"])], "chain",
                     [h.make_tensor_value_info("x", T.FLOAT, [None, 3, 4, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, 2, 4, 4])],
                     [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    onnx.save(m, f"{d}/chain.onnx")
    np.save(f"{d}/chain_x.npy", x)
    # two.onnx: x -> Conv (two nearly equal channels) -> a (an output) -> Conv (their difference) -> b
    # (an output): pooled, a's energy hides b's error, which the difference amplifies
    wa = np.array([[1.0, 0.5, -0.3], [1.0, 0.5, -0.29]], np.float32).reshape(2, 3, 1, 1)
    wb = np.array([[1.0, -1.0]], np.float32).reshape(1, 2, 1, 1)
    g = h.make_graph([h.make_node("Conv", ["x", "wa"], ["a"]), h.make_node("Conv", ["a", "wb"], ["b"])], "two",
                     [h.make_tensor_value_info("x", T.FLOAT, [None, 3, 4, 4])],
                     [h.make_tensor_value_info("a", T.FLOAT, [None, 2, 4, 4]),
                      h.make_tensor_value_info("b", T.FLOAT, [None, 1, 4, 4])],
                     [numpy_helper.from_array(wa, "wa"), numpy_helper.from_array(wb, "wb")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), f"{d}/two.onnx")
    # nonlin.onnx: a chain through Relu and Sigmoid, for rank = grad against rank = effect
    c1 = (r.standard_normal((6, 3, 3, 3)) * 0.4).astype(np.float32)
    c2 = (r.standard_normal((5, 6, 3, 3)) * 0.3).astype(np.float32)
    c3 = (r.standard_normal((3, 5, 1, 1)) * 0.8).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "c1"], ["p"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["p"], ["r"]),
                      h.make_node("Conv", ["r", "c2"], ["s"], strides=[2, 2]), h.make_node("Sigmoid", ["s"], ["z"]),
                      h.make_node("Conv", ["z", "c3"], ["y"])], "nonlin",
                     [h.make_tensor_value_info("x", T.FLOAT, [None, 3, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, 3, 2, 2])],
                     [numpy_helper.from_array(c1, "c1"), numpy_helper.from_array(c2, "c2"),
                      numpy_helper.from_array(c3, "c3")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), f"{d}/nonlin.onnx")
    np.save(f"{d}/nonlin_x.npy", (r.standard_normal((8, 3, 6, 6)) * 1.5).astype(np.float32))
    np.save(f"{d}/two_x.npy", (r.standard_normal((32, 3, 4, 4)) * 2).astype(np.float32))
    make_deep(d)
    make_coherent(d)


def make_deep(d):
    import onnx
    from onnx import numpy_helper
    from onnx import TensorProto as T
    from onnx import helper as h
    r = np.random.default_rng(1)
    nodes, inits, prev, ch = [], [], "x", 8
    for i in range(16):
        w = (r.standard_normal((ch, ch if i else 3, 3, 3)) / np.sqrt(9 * (ch if i else 3)) *
             (1.6 if i % 4 != 1 else 3.0)).astype(np.float32)
        w[r.integers(ch), 0, 1, 1] *= 1 + 6 * r.random()  # a weight a per-channel scale fits, in places
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(h.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(h.make_node(["Relu", "Sigmoid", "Tanh", "Relu"][i % 4], [f"c{i}"], [f"a{i}"]))
        prev = f"a{i}"
    inits.append(numpy_helper.from_array((r.standard_normal((2, ch, 1, 1)) * 0.5).astype(np.float32), "wo"))
    nodes.append(h.make_node("Conv", [prev, "wo"], ["y"]))
    g = h.make_graph(nodes, "deep", [h.make_tensor_value_info("x", T.FLOAT, [None, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, 2, 8, 8])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), f"{d}/deep.onnx")
    np.save(f"{d}/deep_x.npy", (r.standard_normal((16, 3, 8, 8)) * 1.5).astype(np.float32))


def make_coherent(d):
    """coh.onnx: x [16, 4, 4, 4] -> 40 x Conv 1x1 (4 channels: the identity plus small off-diagonal
    weights) -> y. Each row's largest weight is its diagonal one, +1, which the i8 per-channel
    scale max|w| / 127.5 rounds to 128 and clips to 127: every layer scales the signal by the same
    127 / 127.5, so the weights' errors of the layers are one direction's multiples and add as
    amplitudes (coherently); the activations' roundings add as powers."""
    import onnx
    from onnx import numpy_helper
    from onnx import TensorProto as T
    from onnx import helper as h
    r = np.random.default_rng(3)
    nodes, inits, prev = [], [], "x"
    for i in range(COH_LAYERS):
        w = r.standard_normal((4, 4)) * 0.15
        np.fill_diagonal(w, 1.0)
        inits.append(numpy_helper.from_array(w.astype(np.float32).reshape(4, 4, 1, 1), f"w{i}"))
        nodes.append(h.make_node("Conv", [prev, f"w{i}"], [f"c{i}"]))
        prev = f"c{i}"
    g = h.make_graph(nodes, "coh", [h.make_tensor_value_info("x", T.FLOAT, [None, 4, 4, 4])],
                     [h.make_tensor_value_info(prev, T.FLOAT, [None, 4, 4, 4])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), f"{d}/coh.onnx")
    np.save(f"{d}/coh_x.npy", (r.standard_normal((16, 4, 4, 4)) * 1.5).astype(np.float32))


COH_LAYERS = 40


def coh(d, rpath, bound):
    """coh.onnx's exhaustive answer in numpy, from the report's qparams: each tensor's effect alone
    (its producer's weights quantized with it, as rank = effect measures), ranked worst first, and
    the output SQNR (pooled over the samples) with the first k of them in f32, for every k: the
    fewest k from which every larger k holds bound. Prints the answer, the ranking, each k's dB."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(f"{d}/coh.onnx")
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    x = np.load(f"{d}/coh_x.npy")
    qp = {l["value"]: l for l in json.load(open(rpath))["layers"]}
    names = ["x"] + [f"c{i}" for i in range(COH_LAYERS)]

    def run(quant):
        def fq(name, v):
            if name not in quant:
                return v
            p = qp[name]
            s, z = np.float32(p["scale"]), p["zero_point"]
            return ((np.clip(np.rint(v / s) + z, 0, 255) - z) * s).astype(np.float32)
        y = fq("x", x)
        for i in range(COH_LAYERS):
            y = fq(f"c{i}", conv(wq(w[f"w{i}"]) if f"c{i}" in quant else w[f"w{i}"], y))
        return y.astype(np.float64)

    ref = run(set())

    def db(got):
        e = ((ref - got) ** 2).sum()
        return 10 * np.log10((ref ** 2).sum() / e) if e > 0 else float("inf")

    eff = {v: db(run({v})) for v in names}
    rank = sorted(names, key=lambda v: eff[v])
    dbs = [db(run(set(rank[k:]))) for k in range(len(rank) + 1)]
    ans = len(rank)
    while ans > 0 and dbs[ans - 1] >= bound:
        ans -= 1
    print(ans, " ".join(rank), " ".join(f"{v:.2f}" for v in dbs))


def conv(w, x):
    return np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64)).astype(np.float32)


def wq(w):
    s = (np.abs(w).reshape(w.shape[0], -1).max(1) / 127.5).astype(np.float32).reshape(-1, 1, 1, 1)
    return (np.clip(np.rint(w / s), -128, 127) * s).astype(np.float32)


def check(d, qpath, rpath):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(f"{d}/chain.onnx")
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    x = np.load(f"{d}/chain_x.npy")
    qp = {a["value"]: a for a in json.load(open(qpath))["activations"]}

    def fq(name, v):
        p = qp[name]
        s, z = np.float32(p["scale"]), p["zero_point"]
        q = np.clip(np.rint(v / s) + z, p["qmin"], p["qmax"])
        return ((q - z) * s).astype(np.float32)

    def e2(a, b):
        return float(((a.astype(np.float64) - b.astype(np.float64)) ** 2).sum())

    w1, w2, q1, q2 = w["w1"], w["w2"], wq(w["w1"]), wq(w["w2"])
    a = conv(w1, x)
    y = conv(w2, a)
    S = float((y.astype(np.float64) ** 2).sum())
    db = lambda e: 10 * np.log10(S / e) if e > 0 else float("inf")
    exact = {"x": db(e2(y, conv(w2, conv(w1, fq("x", x))))),
             "a": db(e2(y, conv(w2, fq("a", conv(q1, x))))),
             "y": db(e2(y, fq("y", conv(q2, a))))}
    R = {"x": e2(x, fq("x", x)), "a": e2(a, fq("a", a)), "y": e2(y, fq("y", y))}
    O = {"a": e2(a, fq("a", conv(q1, x))), "y": e2(y, fq("y", conv(q2, a)))}
    L = {"a": e2(a, fq("a", conv(q1, fq("x", x)))), "y": e2(y, fq("y", conv(q2, fq("a", a))))}
    E = {"a": L["a"], "y": e2(y, fq("y", conv(q2, fq("a", conv(q1, fq("x", x))))))}
    h = {"a": max(0, L["a"] - O["a"]) / R["x"], "y": max(0, L["y"] - O["y"]) / R["a"]}
    g = {"a": h["a"],  # its input x is not computed: no upstream error
         "y": max(0, E["y"] - L["y"]) / (E["a"] - R["a"]) if E["a"] - R["a"] > 1e-3 * E["a"] else h["y"]}
    W = {"x": 0.0, "a": max(0, O["a"] - R["a"]), "y": max(0, O["y"] - R["y"])}
    F = {"y": 1.0}
    H = {"y": 1.0}
    F["a"], H["a"] = g["y"] * F["y"], h["y"] * F["y"]
    F["x"], H["x"] = g["a"] * F["a"], h["a"] * F["a"]
    gain = {k: db(W[k] * F[k] + R[k] * H[k]) for k in "xay"}
    rep = {l["value"]: l.get("effect_db") for l in json.load(open(rpath))["layers"]}
    for k in "xay":
        r = rep.get(k)
        print(k, f"{exact[k]:.4f}", f"{gain[k]:.4f}", "null" if r is None else f"{r:.4f}")


def two(d, rpath, n):
    """two.onnx's exact effects (rank = effect's: one layer quantized alone, its producer's weights
    too, outputs = worst) on its first n samples, from the report's qparams: one line per layer."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(f"{d}/two.onnx")
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    x = np.load(f"{d}/two_x.npy")[:n]
    qp = {l["value"]: l for l in json.load(open(rpath))["layers"]}

    def fq(name, v):
        p = qp[name]
        s, z = np.float32(p["scale"]), p["zero_point"]
        return ((np.clip(np.rint(v / s) + z, 0, 255) - z) * s).astype(np.float32)

    def db(ref, got):
        ref = ref.astype(np.float64)
        return 10 * np.log10((ref ** 2).sum() / ((ref - got.astype(np.float64)) ** 2).sum())

    a = conv(w["wa"], x)
    b = conv(w["wb"], a)
    aq = fq("a", conv(wq(w["wa"]), x))
    eff = {"a": min(db(a, aq), db(b, conv(w["wb"], aq))), "b": db(b, fq("b", conv(wq(w["wb"]), a)))}
    for k in "ab":
        print(k, f"{eff[k]:.4f}", f"{qp[k]['effect_db']:.4f}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "coh":
        coh(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif sys.argv[1] == "two":
        two(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        check(*sys.argv[2:5])
