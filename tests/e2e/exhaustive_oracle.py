"""The f32 fallback's search (recipes/int8.qrl: fallback = f32 when sqnr < 20 or output_sqnr < 25,
outputs = worst, order = per_mac, judged on the held-out quarter by sample_balanced_lower) against
exhaustive search, for tests/e2e/test_quantize.c (fallback_search_decides_as_exhaustive_search).

  exhaustive_oracle.py make DIR
writes DIR/x.npy (64 samples of 9 x 8 x 8, standard normal at log-normal loudnesses, both signs; the
ninth channel 0) and five models of five or six quantized slots, every weight of both signs:
  chain.onnx     x -> a = Conv 3x3 (9 -> 9, 46.7k MACs a sample) -> b = Conv 1x1 (9 -> 9, 5.2k)
                 -> c = Conv 1x1 (9 -> 9, 5.2k) -> y = Conv 1x1 (9 -> 4, 2.3k). a, b and c carry a
                 ninth channel at a constant (their bias; its weights 1e-3 of the others, so that
                 it has a weight scale) that no reader weighs (weights 0): its u8 range, and so the
                 rounding error it adds downstream, is set by that constant, and its local SQNR
                 stays high. a's effect on y is the worst (worst first gives a back, 12.6% of the
                 MACs stay), b's and c's together about as much for a quarter of the MACs (per MAC
                 they go back, 78.6% stay).
  twoout.onnx    two outputs: x -> a = Conv 3x3 (9 -> 9) -> y1 = Conv 1x1 (9 -> 4); x -> b = Conv
                 1x1 (9 -> 9) -> y2 = Conv 1x1 (9 -> 4); a's constant so large that y1 misses 25
                 dB until a goes back, y2 meets it throughout (outputs = worst judges each).
  fork.onnx      two outputs from one trunk: x -> a = Conv 3x3 (9 -> 9) -> b = Conv 1x1 -> y1 = Conv 1x1
                 (9 -> 4), a -> c = Conv 1x1 -> y2 = Conv 1x1 (9 -> 4): six slots; a's error is the
                 worst (worst first gives a back, 7.5% of the MACs stay), c's costs 5.2k MACs and
                 holds y2 under 25 dB (per MAC c goes back, 87.8% stay).
  overshoot.onnx the chain with other constants: y's own rounding costs 2.3k MACs against a's 51.8k
                 with a thirteenth of a's error, so per MAC y goes first; a alone then meets the
                 target, but the prefix already holds y (a knapsack's greedy overshoot).
  sideways.onnx  twoout with other constants: y1 misses 25 dB until y1 goes back (2.3k MACs), but
                 each layer's effect is measured alone, as the worst output then, which for b and
                 y2 is y2's error: per MAC y2 and b go first, as if their error added to y1's (the
                 greedy's additive noise against a judge of the worst output; docs/quantizer.md).

  exhaustive_oracle.py check MODEL X.npy REPORT.json EXPORT.onnx [counter]
simulates the model in numpy under EVERY subset of its quantized slots sent to f32 (2^5 or 2^6), at
the qparams qrl's report gives each slot (u8 scale and zero point, solved on the calibrating samples),
weights i8 symmetric per output channel in numpy's own rounding (max |w| / 127.5, stdlib/qparams.qrl's
symmetric()), biases i32 at input scale x weight scale on a Conv whose input and output are
quantized, else f32; a slot in f32 is not rounded and its producer's weights stay f32 (what the
export ships: ONNX Runtime's outputs of qrl's export agree with numpy's simulation of qrl's choice
far below the rounding error, and qrl's reported figure is numpy's within 0.5 dB). Each subset is
judged on the held-out samples (validate = 0.25, spread: x[3::4]) as the recipe says: per output,
each sample's error energy over its own energy (at least 1% of the mean sample's), the mean ratio at
its one-sided 95% upper bound (+1.645 standard errors), in dB; the worst output (outputs = worst). A
subset is allowed when it holds every Conv output whose local SQNR is under 20 dB (as qrl measures
it: the f32 input rounded at its qparams, the Conv's weights and bias as on the integers, its output
rounded, pooled over the held-out samples), and passes when it meets 25 dB. The objective: the most
MACs on the integers (a Conv is when its input and output slots are both quantized). The tie rule:
subsets that keep the same Convs on the integers are one decision (they differ in slots whose every
Conv is in f32 already, which qrl's prefix holds or not as its order places them), and the optimum
must be one such Conv set, passing by 0.3 dB with every subset that keeps more MACs failing by 0.3
dB (numpy's figures and qrl's differ by about 0.01 dB). Without `counter` qrl's choice (the report's
`fallback` flags) must keep that Conv set and pass in numpy too; with `counter` it must keep
another, and the script prints both.
Prints "ok ..." or raises.
"""
import itertools
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def conv_weights(r, o, i, k):
    """A Conv's weights [o, i, k, k], unit output variance; the ninth input channel (the constant)
    weighed by no reader."""
    v = r.standard_normal((o, i, k, k)) / np.sqrt(i * k * k)
    v[:, -1] = 0
    return v.astype(np.float32)

def save(g, path):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def chain(rng, name, spikes, out):
    """x -> a (3x3) -> b -> c -> y; spikes: the constant of a's, b's and c's ninth channel."""
    def w(o, i, k):
        return conv_weights(rng, o, i, k)

    def bias(o, spike):
        b = 0.1 * rng.standard_normal(o)
        b[-1] = spike
        return b.astype(np.float32)
    wa, ba = w(9, 9, 3), bias(9, spikes[0])
    wa[-1] *= 1e-3  # the spike channel is nearly its bias alone (weights of 0 would have no scale)
    wb, bb = w(9, 9, 1), bias(9, spikes[1])
    wb[-1] *= 1e-3
    wc, bc = w(9, 9, 1), bias(9, spikes[2])
    wc[-1] *= 1e-3
    wy, by = w(4, 9, 1), (0.1 * rng.standard_normal(4)).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for v, n in
             ((wa, "wa"), (ba, "ba"), (wb, "wb"), (bb, "bb"), (wc, "wc"), (bc, "bc"), (wy, "wy"), (by, "by"))]
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "wb", "bb"], ["b"]),
             helper.make_node("Conv", ["b", "wc", "bc"], ["c"]),
             helper.make_node("Conv", ["c", "wy", "by"], ["y"])]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 9, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])], inits)
    save(g, f"{out}/{name}.onnx")


def twoout(r, name, spikes, out):
    """x -> a (3x3) -> y1, x -> b -> y2; spikes: the constant of a's and b's ninth channel."""

    def w(o, i, k):
        return conv_weights(r, o, i, k)
    wa, wb, w1, w2 = w(9, 9, 3), w(9, 9, 1), w(4, 9, 1), w(4, 9, 1)
    wa[-1] = 1e-3 * wa[0]
    wb[-1] = 1e-3 * wb[0]
    ba = (0.1 * r.standard_normal(9)).astype(np.float32)
    bb = ba.copy()
    ba[-1], bb[-1] = spikes
    inits = [numpy_helper.from_array(v, n) for v, n in ((wa, "wa"), (ba, "ba"), (wb, "wb"), (bb, "bb"),
                                                         (w1, "w1"), (w2, "w2"))]
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w1"], ["y1"]),
             helper.make_node("Conv", ["x", "wb", "bb"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["y2"])]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 9, 8, 8])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4, 8, 8]) for n in ("y1", "y2")],
                          inits)
    save(g, f"{out}/{name}.onnx")


def fork(r, name, spikes, out):
    """x -> a (3x3) -> b -> y1, a -> c -> y2; spikes: the constant of a's, b's and c's ninth channel."""
    def w(o, i, k):
        return conv_weights(r, o, i, k)
    wa, wb, wc, w1, w2 = w(9, 9, 3), w(9, 9, 1), w(9, 9, 1), w(4, 9, 1), w(4, 9, 1)
    bs = []
    for v, spike in zip((wa, wb, wc), spikes):
        v[-1] = 1e-3 * v[0]
        b = (0.1 * r.standard_normal(9)).astype(np.float32)
        b[-1] = spike
        bs.append(b)
    inits = [numpy_helper.from_array(v, n) for v, n in ((wa, "wa"), (bs[0], "ba"), (wb, "wb"), (bs[1], "bb"),
                                                         (wc, "wc"), (bs[2], "bc"), (w1, "w1"), (w2, "w2"))]
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "wb", "bb"], ["b"]),
             helper.make_node("Conv", ["b", "w1"], ["y1"]),
             helper.make_node("Conv", ["a", "wc", "bc"], ["c"]),
             helper.make_node("Conv", ["c", "w2"], ["y2"])]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 9, 8, 8])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4, 8, 8]) for n in ("y1", "y2")],
                          inits)
    save(g, f"{out}/{name}.onnx")


def make(out):
    rng = np.random.default_rng(24)
    x = rng.standard_normal((64, 9, 8, 8))
    x *= np.exp(0.3 * rng.standard_normal((64, 1, 1, 1)))  # samples of several loudnesses
    x[:, -1] = 0  # the channel the Convs' ninth input weighs with 0 (x's range is the data's)
    np.save(f"{out}/x.npy", x.astype(np.float32))
    chain(np.random.default_rng(1), "chain", (28.0, 19.0, 16.0), out)
    chain(np.random.default_rng(1), "overshoot", (40.0, 2.0, 2.0), out)
    twoout(np.random.default_rng(2), "twoout", (60.0, 3.0), out)
    twoout(np.random.default_rng(2), "sideways", (25.0, 10.0), out)
    fork(np.random.default_rng(3), "fork", (20.0, 10.0, 22.0), out)


def conv(x, w, b, pads):
    p = pads[0] if pads else 0
    if p:
        x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    k, h, wd = w.shape[2], x.shape[2] - w.shape[2] + 1, x.shape[3] - w.shape[3] + 1
    y = sum(np.einsum("nchw,oc->nohw", x[:, :, i:i + h, j:j + wd], w[:, :, i, j]) for i in range(k) for j in range(k))
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def fq(v, s, z):  # u8 with qrl's scale and zero point, round half to even
    return (np.clip(np.round(v / s) + z, 0, 255) - z) * s


def wq(w):
    """i8 symmetric per output channel: stdlib/qparams.qrl's symmetric(), max |w| over 127.5, in
    float32 as the model holds w, so that the largest weight is the tie 127.5 (half to even: -128
    for a negative one, 128 clipped to 127 for a positive one)."""
    w = w.astype(np.float32)
    s = (np.abs(w).reshape(w.shape[0], -1).max(1) / np.float32(127.5)).astype(np.float32)
    s = s.reshape(-1, *([1] * (w.ndim - 1)))
    return np.clip(np.round(w / s), -128, 127).astype(np.float64) * s, s.reshape(-1).astype(np.float64)


def judge(ref, got):  # sample_balanced_lower, in dB
    n = ref.shape[0]
    ref, got = ref.reshape(n, -1), got.reshape(n, -1)
    x2, e2 = (ref ** 2).sum(1), ((ref - got) ** 2).sum(1)
    r = e2 / np.maximum(x2, 0.01 * x2.mean())
    bound = r.mean() + 1.645 * r.std(ddof=1) / np.sqrt(n)
    return np.inf if bound <= 0 else -10 * np.log10(bound)  # every slot in f32: no error


def ort_outputs(export, x, n):
    """The export's outputs in ONNX Runtime (tools/ort_sqnr.js --run), in the model's order."""
    with tempfile.TemporaryDirectory() as d:
        np.save(f"{d}/x.npy", x.astype(np.float32))
        subprocess.run(["node", os.path.join(root, "tools", "ort_sqnr.js"), "--run", export, f"{d}/o", f"{d}/x.npy"],
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, ORT_OPT_LEVEL="disabled"))
        return [np.load(f"{d}/o/{k}.npy").astype(np.float64) for k in range(n)]


def check(model, xpath, report, export, counter=False):
    m = onnx.load(model)
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    convs = [n for n in m.graph.node]
    assert all(n.op_type == "Conv" for n in convs)
    slots = [m.graph.input[0].name] + [n.output[0] for n in convs]
    outs = [o.name for o in m.graph.output]
    rep = json.load(open(report))
    layers = {l["value"]: l for l in rep["layers"]}
    assert set(layers) == set(slots), (sorted(layers), slots)
    qp = {v: (layers[v]["scale"], layers[v]["zero_point"]) for v in slots}
    assert all(layers[v]["dtype"] == "u8" for v in slots), layers
    x = np.load(xpath).astype(np.float64)
    val = x[np.arange(len(x)) % 4 == 3]  # validate = 0.25, validate_from = spread
    # MACs a sample: weights x output pixels (every Conv here keeps the 8 x 8 of its input)
    macs = {n.output[0]: int(np.prod(init[n.input[1]].shape)) * val.shape[2] * val.shape[3] for n in convs}

    def run(f32):
        v = {slots[0]: val if slots[0] in f32 else fq(val, *qp[slots[0]])}
        for n in convs:
            o, i = n.output[0], n.input[0]
            pads = [a.ints for a in n.attribute if a.name == "pads"]
            wgt, ws = (init[n.input[1]], None) if o in f32 else wq(init[n.input[1]])
            b = init[n.input[2]] if len(n.input) > 2 else None
            if b is not None and o not in f32 and i not in f32:  # i32 at the input's scale x the weight's
                bs = qp[i][0] * ws
                b = np.round(b / bs) * bs
            r = conv(v[i], wgt, b, pads[0] if pads else None)
            v[o] = r if o in f32 else fq(r, *qp[o])
        return v

    ref = run(set(slots))
    # a Conv's local SQNR as qrl measures it (docs/quantizer.md, step 4): its f32 input rounded at the
    # input's qparams, its weights and bias as on the integers, its output rounded, against f32
    local = {}
    for n in convs:
        s, i = n.output[0], n.input[0]
        pads = [a.ints for a in n.attribute if a.name == "pads"]
        wgt, ws = wq(init[n.input[1]])
        b = init[n.input[2]] if len(n.input) > 2 else None
        if b is not None:
            b = np.round(b / (qp[i][0] * ws)) * (qp[i][0] * ws)
        got = fq(conv(fq(ref[i], *qp[i]), wgt, b, pads[0] if pads else None), *qp[s])
        local[s] = 10 * np.log10((ref[s] ** 2).sum() / ((ref[s] - got) ** 2).sum())
    forced = {s for s in local if local[s] < 20}
    assert all(abs(local[s] - 20) > 0.5 for s in local), ("a local SQNR within 0.5 dB of 20", local)
    table = {}  # subset of slots in f32 -> (worst output's figure, the Convs on the integers)
    for k in range(len(slots) + 1):
        for sub in itertools.combinations(slots, k):
            f32 = set(sub)
            if not forced <= f32:
                continue
            got = run(f32)
            db = min(judge(ref[o], got[o]) for o in outs)
            table[frozenset(f32)] = (db, frozenset(n.output[0] for n in convs
                                                   if n.output[0] not in f32 and n.input[0] not in f32))
    integer = lambda s: sum(macs[o] for o in table[s][1])
    passing = [s for s, (db, _) in table.items() if db >= 25]
    assert passing, table
    # The decision is which Convs stay on the integers: the most MACs. Subsets that differ only in
    # slots no integer Conv reads or writes (free: every Conv at them is in f32 already) are one
    # decision: qrl's prefix holds such a slot or not as its order places it. The optimum must be
    # one Conv set.
    top = max(integer(s) for s in passing)
    best_sets = {table[s][1] for s in passing if integer(s) == top}
    assert len(best_sets) == 1, ("the optimum is not unique", best_sets)
    best = max((s for s in passing if integer(s) == top), key=lambda s: table[s][0])  # its best member
    fell = frozenset(v for v in slots if layers[v]["fallback"])
    name = lambda s: "{" + ",".join(v for v in slots if v in s) + "}"
    # numpy's figures and qrl's differ by about 0.02 dB here (float32 sums, rounding ties): the
    # decision must not hang on them. The best subset that keeps more MACs must fail by a margin too.
    more = [s for s in table if integer(s) > top]
    closest = max(more, key=lambda s: table[s][0]) if more else None
    margin = min(table[best][0] - 25, 25 - table[closest][0] if closest else 9)
    info = ("optimum %s: %.2f dB, %d integer MACs a sample of %d (%s on the integers); best with more MACs %s "
            "%.2f dB; qrl %s: %.2f dB (numpy), %d MACs; all u8 %.2f dB; local %s" %
            (name(best), table[best][0], top, sum(macs.values()), name(table[best][1]),
             name(closest) if closest else "-", table[closest][0] if closest else float("nan"), name(fell),
             table[fell][0] if fell in table else float("nan"), integer(fell) if fell in table else -1,
             table[frozenset(forced)][0], ", ".join("%s %.1f" % (s, local[s]) for s in local)))
    assert fell in table, ("qrl kept a slot the sqnr < 20 rule sends", info)
    # the simulation is what ships: ONNX Runtime's outputs of qrl's export on the judged samples are
    # numpy's of qrl's subset far below the rounding error (the figures within 0.3 dB), and qrl's
    # figure is numpy's
    sim = run(fell)
    ort = ort_outputs(export, val, len(outs))
    for o, got in zip(outs, ort):
        got = got.reshape(sim[o].shape)
        agree = 10 * np.log10((sim[o] ** 2).sum() / max(((sim[o] - got) ** 2).sum(), 1e-30))
        assert agree > 40 and abs(judge(ref[o], got) - judge(ref[o], sim[o])) < 0.3, (o, agree, info)
    assert abs(rep["output_sqnr_db"] - table[fell][0]) < 0.5, (rep["output_sqnr_db"], info)
    if counter:
        assert table[fell][1] != table[best][1], ("qrl found the optimum", info)
        print("counter-example " + info)
    else:
        assert margin >= 0.3, ("the optimum is within 0.3 dB of the target's other side", info)
        assert table[fell][1] == table[best][1] and table[fell][0] >= 25, (
            "qrl chose", name(fell), "exhaustive search", info)
        assert abs(rep["macs_int_per_sample"] - top) <= 0.5, (rep["macs_int_per_sample"], top)
        print("ok " + info)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], len(sys.argv) > 6 and sys.argv[6] == "counter")
