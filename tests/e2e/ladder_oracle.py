"""Independent check of the fallback's 16-bit step (fallback = u16 then f32 when output_sqnr < T,
outputs = worst) on tools/make_ladder_model.py's model, for tests/e2e/test_ladder.c.

numpy simulates the model quantized as the recipe says (u8 or u16 asymmetric min/max activations,
each tensor's range from its values on the calibration samples with the quantization before it
applied; i8 symmetric per-channel weights, max |w| / 127) under each assignment of the three
layers the step can change: a (its readers: a Conv), y2 (an output) and d (read by a Sigmoid,
whose lookup table takes 8 bits: its 16-bit step is closed, which the oracle derives from the
graph: d's only reader is not a Conv, Gemm or MatMul). It finds by brute force the assignments
whose every output meets T dB, and of those the ones with the fewest layers in f32, then the
fewest at 16 bits: exactly one, which must be the export's (read from its QuantizeLinear types:
uint16, uint8, or none for a tensor left in f32). It also checks that a's 16-bit scale is the
calibration range over 65535 (the same min/max observations solved for 16 bits: against the range the report says calibration
observed, and within 3% of numpy's), and that
QRL's summary reports the counts and the share of MACs on the integers (a and y1 at 4 * 8 * 64
and 8 * 4 * 9 * 64 MACs a sample are integer; y2's and d's 4 * 4 * 64 each are not), and that its
report says which steps were open (step16_open) as the oracle derives it.

Usage: ladder_oracle.py MODEL EXPORT CALIB.npy TARGET_DB SUMMARY.txt REPORT.json
       ladder_oracle.py hs MODEL EXPORT CALIB.npy TARGET_DB REPORT.json
The second form checks ladder_hs.onnx (a Conv a read only by HardSwish as a * HardSigmoid(a), then a
Conv): numpy's output SQNR with a at u8 misses the target and at u16 meets it, so a must ship at u16
with the activation's own output u8 (its lowering qact_narrow, as the report says), all else u8,
and QRL's output SQNR (the report's) within 1 dB of numpy's.
The third form checks ladder_ho.onnx quantized by recipes/int8-a16-fallback.qrl (the 16-bit step
judged on the held-out quarter, validate = 0.25 with validate_from = spread, by
sample_balanced_lower): numpy calibrates each range on the 48 samples that are not x[3::4] (x's
raw, a's with x and the weights quantized, y's with a at u8 upstream), runs every assignment of a
and y (u8, u16, f32; x stays u8) on the 16 held-out samples, and judges each by the mean
per-sample error ratio (each sample's error energy over its own energy, at least 1% of the mean
sample's) at its one-sided 95% upper bound (mean + 1.645 standard errors). The fewest in f32, then
the fewest at 16 bits, must be unique and the export's; the model is such that the plain mean
ratio would keep everything u8 (so the bound decides), and a's 16-bit scale is the 48 samples'
range over 65535 (not the 64's).
Prints "ok ..." or raises.
"""
import itertools
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def fq(v, bits):  # asymmetric min/max over v, as the recipe's minmax() solves it
    lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
    qmax = 2 ** bits - 1
    s = (hi - lo) / qmax
    if s == 0:  # all 0 (y2's weights rounded away): 0 is exact
        return v, s
    z = np.clip(np.round(-lo / s), 0, qmax)
    return (np.clip(np.round(v / s) + z, 0, qmax) - z) * s, s


def fq_w(w):  # i8 symmetric per output channel
    s = np.abs(w).reshape(w.shape[0], -1).max(1) / 127
    s = s.reshape(-1, *([1] * (w.ndim - 1)))
    return np.clip(np.round(w / s), -128, 127) * s


def conv(x, w, b=None, pad=0):
    x = x.astype(np.float64)
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k, h, wd = w.shape[2], x.shape[2] - w.shape[2] + 1, x.shape[3] - w.shape[3] + 1
    y = sum(np.einsum("nchw,oc->nohw", x[:, :, i:i + h, j:j + wd], w[:, :, i, j].astype(np.float64))
            for i in range(k) for j in range(k))
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def sqnr(ref, got):
    return 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum())


def main(model, export, calib, target, summary, report):
    target = float(target)
    m = onnx.load(model)
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    readers = {}
    for n in m.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.op_type)
    # the 16-bit step is open where every reader is a Conv (or none: an output)
    open16 = {v: all(r == "Conv" for r in readers.get(v, [])) for v in ("a", "y2", "d")}
    assert open16 == {"a": True, "y2": True, "d": False}, open16
    x = np.load(calib).astype(np.float64)
    ref_a = np.maximum(conv(x, w["wa"], w["ba"]), 0)
    ref = {"y1": conv(ref_a, w["wc"], w["bc"], 1), "y2": conv(x, w["wb"]),
           "y3": 1 / (1 + np.exp(-conv(x, w["wd"], w["bd"])))}
    xq, _ = fq(x, 8)

    def run(a, y2, d):  # each: 8 or 16 (bits of the layer's output) or 32 (f32, its weights too)
        wq = lambda n, bits: w[n] if bits == 32 else fq_w(w[n])
        act = lambda v, bits: v if bits == 32 else fq(v, bits)[0]
        av = act(np.maximum(conv(xq, wq("wa", a), w["ba"]), 0), a)
        out = {"y1": act(conv(av, fq_w(w["wc"]), w["bc"], 1), 8), "y2": act(conv(xq, wq("wb", y2)), y2)}
        dv = act(conv(xq, wq("wd", d), w["bd"]), d)
        out["y3"] = act(1 / (1 + np.exp(-dv)), 8)
        return min(sqnr(ref[k], out[k]) for k in ref)

    choices = {v: [8, 16, 32] if open16[v] else [8, 32] for v in ("a", "y2", "d")}
    table = {}
    for a, y2, d in itertools.product(choices["a"], choices["y2"], choices["d"]):
        table[(a, y2, d)] = run(a, y2, d)
    passing = [k for k, v in table.items() if v >= target]
    assert passing, table
    best = min(passing, key=lambda k: (sum(b == 32 for b in k), sum(b == 16 for b in k)))
    ties = [k for k in passing if (sum(b == 32 for b in k), sum(b == 16 for b in k)) ==
            (sum(b == 32 for b in best), sum(b == 16 for b in best))]
    assert len(ties) == 1, ("the decision is not unique", ties, table)
    # every way of reaching the target with fewer layers in f32 fails: a alone in f32, y2 at 16 bits
    assert table[(8, 32, 32)] < target and table[(16, 16, 32)] < target, table

    e = onnx.load(export)
    ei = {i.name: i for i in e.graph.initializer}
    types = {}  # the float value each QuantizeLinear quantizes (the export names it VALUE_f32 or VALUE)
    for n in e.graph.node:
        if n.op_type == "QuantizeLinear":
            v = n.input[0][:-4] if n.input[0].endswith("_f32") else n.input[0]
            types[v] = {onnx.TensorProto.UINT8: 8, onnx.TensorProto.UINT16: 16}[ei[n.input[2]].data_type]
            if v == "a":
                scale16 = float(numpy_helper.to_array(ei[n.input[1]]))
    got = tuple(types.get(v, 32) for v in ("a", "y2", "d"))
    assert got == best, ("QRL chose", got, "numpy", best, table)
    assert types.get("x") == 8 and types.get("y1") == 8, types
    # a's 16-bit scale: the range its calibration observed (the report's) over 65535, not 255; and
    # that range numpy's (with x quantized: QRL quantizes x batch by batch while it calibrates)
    import json
    layers = {l["value"]: l for l in json.load(open(report))["layers"]}
    lo, hi = min(layers["a"]["observed_min"], 0.0), max(layers["a"]["observed_max"], 0.0)
    assert abs(scale16 - (hi - lo) / 65535) <= 1e-5 * scale16, (scale16, lo, hi)
    _, s16 = fq(np.maximum(conv(xq, fq_w(w["wa"]), w["ba"]), 0), 16)
    assert abs(scale16 - s16) <= 0.03 * s16, (scale16, s16)
    text = open(summary).read()
    nf, nw = sum(b == 32 for b in best), sum(b == 16 for b in best)
    want = "%d tensor%s fell back to f32, %d to 16 bits" % (nf, "" if nf == 1 else "s", nw)
    assert want in text, (want, text)
    macs = {"a": 8 * 4 * 64, "y1": 4 * 8 * 9 * 64, "y2": 4 * 4 * 64, "d": 4 * 4 * 64}
    integer = macs["y1"] + sum(macs[v] for v, b in zip(("a", "y2", "d"), best) if b != 32)
    share = "%.1f%% of %.3g MACs" % (100 * integer / sum(macs.values()), sum(macs.values()))
    assert share.split(" of ")[0] in text, (share, text)
    for v in ("a", "y2", "d"):
        assert layers[v]["step16_open"] == open16[v], (v, layers[v])
    print("ok a, y2, d = %s bits; %.2f dB worst output (numpy); all u8 %.2f dB" %
          (best, table[best], table[(8, 8, 8)]))


def main_hs(model, export, calib, target, report):
    import json
    target = float(target)
    m = onnx.load(model)
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    x = np.load(calib).astype(np.float64)
    hs = lambda v: v * np.clip(v / 6 + 0.5, 0, 1)
    ref = conv(hs(conv(x, w["wh"], w["bh"])), w["wy"], None, 1)
    xq, _ = fq(x, 8)
    got = {}
    for bits in (8, 16):
        h = fq(hs(fq(conv(xq, fq_w(w["wh"]), w["bh"]), bits)[0]), 8)[0]
        got[bits] = sqnr(ref, fq(conv(h, fq_w(w["wy"]), None, 1), 8)[0])
    assert got[8] < target <= got[16], got
    e = onnx.load(export)
    ei = {i.name: i for i in e.graph.initializer}
    types = {}
    for n in e.graph.node:
        if n.op_type == "QuantizeLinear":
            v = n.input[0][:-4] if n.input[0].endswith("_f32") else n.input[0]
            types[v] = {onnx.TensorProto.UINT8: 8, onnx.TensorProto.UINT16: 16}[ei[n.input[2]].data_type]
    assert types == {"x": 8, "a": 16, "h": 8, "y": 8}, types
    r = json.load(open(report))
    layers = {l["value"]: l for l in r["layers"]}
    assert layers["a"]["step16_open"] and layers["h"]["runs_as"].startswith("kernel qact_narrow<u16,u8>"), layers["h"]
    assert abs(r["output_sqnr_db"] - got[16]) < 1, (r["output_sqnr_db"], got)
    print("ok a at 16 bits; numpy %.2f dB at u8, %.2f at u16; QRL %.2f" % (got[8], got[16], r["output_sqnr_db"]))


def lower_bound_db(ref, got, bound=True):
    n = ref.shape[0]
    ref, got = ref.reshape(n, -1), got.reshape(n, -1)
    x2, e2 = (ref ** 2).sum(1), ((ref - got) ** 2).sum(1)
    r = e2 / np.maximum(x2, 0.01 * x2.mean())
    return -10 * np.log10(r.mean() + (1.645 * r.std(ddof=1) / np.sqrt(n) if bound else 0))


def main_holdout(model, export, calib, target, summary, report):
    import json
    target = float(target)
    m = onnx.load(model)
    w = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    x = np.load(calib).astype(np.float64)
    held = np.arange(len(x)) % 4 == 3  # validate = 0.25, spread: the last of every four
    cal, val = x[~held], x[held]

    def fq_r(v, lo, hi, bits):  # asymmetric over the calibrated range [lo, hi]
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        qmax = 2 ** bits - 1
        s = (hi - lo) / qmax
        z = np.clip(np.round(-lo / s), 0, qmax)
        return (np.clip(np.round(v / s) + z, 0, qmax) - z) * s

    rng = {"x": (cal.min(), cal.max())}
    a_cal = np.maximum(conv(fq_r(cal, *rng["x"], 8), fq_w(w["wa"]), w["ba"]), 0)
    rng["a"] = (a_cal.min(), a_cal.max())
    rng["y"] = None

    def run(xs, a, y):  # a, y: 8, 16 or 32 (f32, its weights too); x u8
        av = np.maximum(conv(fq_r(xs, *rng["x"], 8), w["wa"] if a == 32 else fq_w(w["wa"]), w["ba"]), 0)
        av = av if a == 32 else fq_r(av, *rng["a"], a)
        yv = conv(av, w["wy"] if y == 32 else fq_w(w["wy"]), None, 1)
        return yv if y == 32 else fq_r(yv, *rng["y"], y)

    y_cal = run(cal, 8, 32)
    rng["y"] = (y_cal.min(), y_cal.max())
    ref = conv(np.maximum(conv(val, w["wa"], w["ba"]), 0), w["wy"], None, 1)
    table, mean = {}, {}
    for a, y in itertools.product((8, 16, 32), (8, 16, 32)):
        got = run(val, a, y)
        table[(a, y)], mean[(a, y)] = lower_bound_db(ref, got), lower_bound_db(ref, got, False)
    cost = lambda k: (sum(b == 32 for b in k), sum(b == 16 for b in k))
    best = min((k for k in table if table[k] >= target), key=cost)
    ties = [k for k in table if table[k] >= target and cost(k) == cost(best)]
    assert len(ties) == 1, ("the decision is not unique", ties, table)
    best_mean = min((k for k in mean if mean[k] >= target), key=cost)
    assert best == (16, 8) and best_mean == (8, 8), ("the model no longer separates the bound from the mean",
                                                      best, best_mean, table, mean)
    e = onnx.load(export)
    ei = {i.name: i for i in e.graph.initializer}
    types = {}
    for n in e.graph.node:
        if n.op_type == "QuantizeLinear":
            v = n.input[0][:-4] if n.input[0].endswith("_f32") else n.input[0]
            types[v] = {onnx.TensorProto.UINT8: 8, onnx.TensorProto.UINT16: 16}[ei[n.input[2]].data_type]
            if v == "a":
                scale = float(numpy_helper.to_array(ei[n.input[1]]))
    got = (types.get("a", 32), types.get("y", 32))
    assert got == best and types.get("x") == 8, ("QRL chose", types, "numpy", best, table)
    # a's 16-bit scale: the 48 calibrating samples' range over 65535; the 64's would differ
    s48 = (rng["a"][1] - min(rng["a"][0], 0.0)) / 65535
    a64 = np.maximum(conv(fq_r(x, x.min(), x.max(), 8), fq_w(w["wa"]), w["ba"]), 0)
    s64 = a64.max() / 65535
    assert abs(s64 - s48) > 0.03 * s48, ("the 48 samples' range is the 64's", s48, s64)
    assert abs(scale - s48) <= 0.03 * s48, ("a's scale", scale, "numpy over the 48", s48, "over 64", s64)
    layers = {l["value"]: l for l in json.load(open(report))["layers"]}
    assert layers["a"]["dtype"] == "u16" and layers["a"]["step16_open"], layers["a"]
    text = open(summary).read()
    for want in ("0 tensors fell back to f32, 1 to 16 bits", "100.0% of", "on 16 held-out samples"):
        assert want in text, (want, text)
    print("ok a, y = %s bits: %.2f dB held-out lower bound (all u8 %.2f, its mean %.2f)" %
          (best, table[best], table[(8, 8)], mean[(8, 8)]))


if __name__ == "__main__":
    if sys.argv[1] == "holdout":
        main_holdout(*sys.argv[2:8])
    elif sys.argv[1] == "hs":
        main_hs(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
