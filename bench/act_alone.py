#!/usr/bin/python3
"""What each layer's 8-bit input activation alone costs a model's outputs, every weight in f32, and
the same with 16-bit weights: whether integers with wider weights could hold where i8 weights cannot
(bench/weight_alone.py measures the weights alone). ONNX Runtime, not QRL.

Usage: /usr/bin/python3 bench/act_alone.py MODEL.onnx CALIB.npy OUTDIR [--wbits B] [--every K] [--from I]
                                           [--layers i,j,...]
The activations are int8.qrl's: u8 asymmetric from min/max (`activation = u8 asymmetric by minmax()`),
each Conv's input range observed by ONNX Runtime (a copy of the model with ReduceMin/ReduceMax of every
Conv input as outputs) on the calibration samples (every sample of CALIB but I::K: the 48 of 64
int8.qrl calibrates on), the range widened to hold 0, scale (max - min) / 255, zero point
round(-min / scale) (ONNX's QuantizeLinear rounding, half to even, and saturation). For each Conv
(graph order) whose weight is a constant, a copy of the model with a QuantizeLinear/DequantizeLinear
pair on that Conv's input alone ("a8"), then the same with that Conv's weight also rounded to B bits
(default 16) symmetric per output channel ("a8wB", bench/weight_alone.py's rounding); then every Conv's
input so quantized ("all a8") and every Conv's too with every weight at B bits ("all a8wB"), and
("held") the layers that hold 25 dB alone at a8wB, all of them together at a8wB. Judged on
the samples CALIB[I::K] (default I = 3, K = 4: the 16 int8.qrl holds out): each output's pooled SQNR
against the model's (dB). Each line: layer, Conv, MACs per sample (its weight's size times its output's spatial size), then
a8's and a8wB's dB per output. Last lines: the share of Conv MACs whose layers hold 25 dB on every
output alone (a8, a8wB).
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper as nh, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from weight_alone import parse_opts, rounded, run  # noqa: E402 (the same ORT runs and rounding)


def ranges(model, convs, calib_x, outdir):
    """Each Conv input's (min, max) over the calibration samples and each Conv's MACs per sample (its
    weight's size times its output's spatial size, the shapes as ONNX Runtime runs them), by ONNX
    Runtime."""
    m = onnx.load(model)
    names = []
    for i, n in enumerate(convs):
        for op in ("ReduceMin", "ReduceMax", "Shape"):
            o = "hJ_%s_%d" % (op, i)
            if op == "Shape":
                m.graph.node.append(helper.make_node(op, [n.output[0]], [o + "_i"]))
                m.graph.node.append(helper.make_node("Cast", [o + "_i"], [o], to=TensorProto.FLOAT))
                m.graph.output.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, [None]))
            else:
                m.graph.node.append(helper.make_node(op, [n.input[0]], [o], keepdims=0))
                m.graph.output.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, []))
            names.append(o)
    path = os.path.join(outdir, "ranges.onnx")
    onnx.save(m, path)
    outs = run(path, calib_x, os.path.join(outdir, "r"))[-len(names):]
    init = {t.name: nh.to_array(t).shape for t in m.graph.initializer}
    rng = [(float(outs[3 * i].min()), float(outs[3 * i + 1].max())) for i in range(len(convs))]
    mac = [float(np.prod(outs[3 * i + 2][0][2:]) * np.prod(init[n.input[1]])) for i, n in enumerate(convs)]
    return rng, mac


def qdq(c, tensor, lo, hi, tag):
    """A QuantizeLinear/DequantizeLinear pair on tensor for the Convs of c reading it; u8 from [lo, hi]."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    s = (hi - lo) / 255 if hi > lo else 1.0
    zp = int(np.clip(np.round(-lo / s), 0, 255))
    sn, zn, qn, dn = ["hJ_%s_%s" % (k, tag) for k in ("s", "z", "q", "d")]
    c.graph.initializer.append(nh.from_array(np.array(s, np.float32), sn))
    c.graph.initializer.append(nh.from_array(np.array(zp, np.uint8), zn))
    return [helper.make_node("QuantizeLinear", [tensor, sn, zn], [qn]),
            helper.make_node("DequantizeLinear", [qn, sn, zn], [dn])], dn


def variant(model, convs, rng, picks, wbits):
    """The model with the inputs of convs[picks] quantized (and their weights at wbits bits, if set)."""
    c = onnx.load(model)
    init = {t.name: i for i, t in enumerate(c.graph.initializer)}
    nodes = list(c.graph.node)
    by_name = {n.name: n for n in nodes}
    extra = {}
    for k in picks:
        n = by_name[convs[k].name]
        if wbits:
            t = c.graph.initializer[init[n.input[1]]]
            t.CopyFrom(nh.from_array(rounded(nh.to_array(t), wbits), t.name))
        pair, dn = qdq(c, n.input[0], *rng[k], str(k))
        extra[n.name] = pair
        n.input[0] = dn
    del c.graph.node[:]
    for n in nodes:  # each pair just before its Conv: the graph stays in topological order
        c.graph.node.extend(extra.get(n.name, []))
        c.graph.node.append(n)
    return c


def sqnr(ref, got):
    cells = []
    for r, g in zip(ref, got):
        e2 = ((r - g) ** 2).sum()
        cells.append(np.inf if e2 == 0 else 10 * np.log10((r ** 2).sum() / e2))
    return cells


def main():
    args = sys.argv[1:]
    opts = {"--wbits": "16", "--every": "4", "--from": "3", "--layers": ""}
    args = parse_opts(args, opts, __doc__)
    model, calib, outdir = args
    wbits, every, first = int(opts["--wbits"]), int(opts["--every"]), int(opts["--from"])
    os.makedirs(outdir, exist_ok=True)
    x = np.load(calib, mmap_mode="r")
    held_out = np.zeros(len(x), bool)
    held_out[first::every] = True
    xin, xcal = os.path.join(outdir, "x.npy"), os.path.join(outdir, "xcal.npy")
    np.save(xin, np.ascontiguousarray(x[held_out]))
    np.save(xcal, np.ascontiguousarray(x[~held_out]))
    m = onnx.load(model)
    names = [o.name for o in m.graph.output]
    init = {t.name for t in m.graph.initializer}
    convs = [n for n in m.graph.node if n.op_type == "Conv" and n.input[1] in init]
    for i, n in enumerate(convs):  # unnamed Convs get names: variant finds them by name
        n.name = n.name or "hJ_conv_%d" % i
    named = os.path.join(outdir, "model.onnx")
    onnx.save(m, named)
    rng, mac = ranges(named, convs, xcal, outdir)
    ref = run(named, xin, os.path.join(outdir, "ref"))
    pick = [int(i) for i in opts["--layers"].split(",")] if opts["--layers"] else list(range(len(convs)))
    print("layer\tconv\tMACs\t" + "\t".join("a8 %s dB" % n for n in names) + "\t" +
          "\t".join("a8w%d %s dB" % (wbits, n) for n in names))
    held = {0: 0.0, wbits: 0.0}
    ok = []  # the layers that hold 25 dB alone at a8wB
    path = os.path.join(outdir, "v.onnx")
    for k in pick + ["all"]:
        sel = list(range(len(convs))) if k == "all" else [k]
        row = []
        for wb in (0, wbits):
            onnx.save(variant(named, convs, rng, sel, wb), path)
            db = sqnr(ref, run(path, xin, os.path.join(outdir, "v")))
            if k != "all" and min(db) >= 25:
                held[wb] += mac[k]
                if wb:
                    ok.append(k)
            row += db
        label = "all" if k == "all" else str(k)
        print("%s\t%s\t%s\t%s" % (label, "-" if k == "all" else convs[k].name,
                                  "%.3g" % (sum(mac) if k == "all" else mac[k]), "\t".join("%.1f" % d for d in row)),
              flush=True)
    if ok:  # those layers together, a8wB: what a search could keep at best from them
        onnx.save(variant(named, convs, rng, ok, wbits), path)
        db = sqnr(ref, run(path, xin, os.path.join(outdir, "v")))
        print("held\t%d convs\t%.3g\t-\t%s" % (len(ok), sum(mac[k] for k in ok),
                                                 "\t".join("%.1f" % d for d in db)), flush=True)
    total = sum(mac[k] for k in pick)
    for wb in (0, wbits):
        print("# a8%s: layers holding 25 dB alone on every output: %.1f%% of %.3g Conv MACs (samples %d::%d of %s)"
              % ("w%d" % wb if wb else " (f32 weights)", 100 * held[wb] / total, total, first, every,
                 os.path.basename(calib)))


if __name__ == "__main__":
    main()
