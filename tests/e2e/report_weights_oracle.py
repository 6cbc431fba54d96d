#!/usr/bin/python3
"""Checks the quantization report's weights and charts (tests/e2e/test_quantize.c).

Usage: report_weights_oracle.py MODEL.onnx REPORT.json REPORT.html

The JSON's "weights": for every Conv and Gemm weight of MODEL (an initializer), the recipe's rule
int8.qrl states, `i8 symmetric per_channel by minmax(symmetric = true)`, computed here with numpy
from the model's own weights: one scale per output channel, max|w| / 127.5 (the stdlib's
symmetric scale over i8's full range [-128, 127]; Conv: axis 0; Gemm: axis 0 of B when transB,
else axis 1), zero points 0, dtype i8, the axis. The report's entry is
found by the weight's name (the QDQ graph names the DequantizeLinear's output after it).

A Conv's BatchNormalization is folded into its weight first (w gamma / sqrt(var + eps) per
output channel), as QRL's graph optimizer does before quantizing.

The HTML (structure only): a chart of the scales per quantized weight with two labelled axes
(the channel, the scale), as many points as channels; a per-layer sensitivity chart with a
labelled axis and a bar or mark per layer the JSON gives an effect_db or sqnr_local_db; the
Ranges chart with a labelled axis.
Prints "ok N" (N weights checked) or exits with the first difference."""
import json
import sys
from html.parser import HTMLParser

import numpy as np
import onnx
from onnx import numpy_helper


# stdlib/qparams.qrl's symmetric(amax, t): scale = amax / ((qmax - qmin) / 2); i8 without
# `narrow` is [-128, 127], so 127.5 (a narrow [-127, 127] would give 127)
HALF = (127 - (-128)) / 2


def expected(model):
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    readers = {}
    for n in model.graph.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
    want = {}
    for n in model.graph.node:
        if n.op_type not in ("Conv", "Gemm") or n.input[1] not in inits:
            continue
        w = inits[n.input[1]].astype(np.float64)
        axis = 0
        if n.op_type == "Gemm":
            tb = [a.i for a in n.attribute if a.name == "transB"]
            axis = 0 if tb and tb[0] else 1
        r = readers.get(n.output[0], [])
        if n.op_type == "Conv" and len(r) == 1 and r[0].op_type == "BatchNormalization":
            # the BatchNormalization after a Conv is folded into its weight (QRL's graph optimizer,
            # as every int8 flow does): w * gamma / sqrt(var + eps) per output channel
            bn = r[0]
            eps = [a.f for a in bn.attribute if a.name == "epsilon"]
            gamma, var = (inits[bn.input[k]].astype(np.float64) for k in (1, 4))
            w = w * (gamma / np.sqrt(var + (eps[0] if eps else 1e-5))).reshape((-1,) + (1,) * (w.ndim - 1))
        red = tuple(d for d in range(w.ndim) if d != axis)
        want[n.input[1]] = (axis, (np.abs(w).max(axis=red) / HALF).astype(np.float32))
    return want


class Svg(HTMLParser):
    """Each <svg>: its aria-label, its axis labels' texts, its polylines' point counts, its rects."""

    def __init__(self):
        super().__init__()
        self.svgs, self.cur, self.in_label = [], None, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.cur = {"label": a.get("aria-label", ""), "axes": [], "points": [], "rects": 0, "axis_groups": 0}
            self.svgs.append(self.cur)
        elif self.cur is not None:
            if tag == "text" and a.get("class") == "axis-label":
                self.in_label = True
                self.cur["axes"].append("")
            elif tag == "polyline":
                self.cur["points"].append(len(a["points"].split()))
            elif tag == "rect":
                self.cur["rects"] += 1
            elif tag == "g" and a.get("class") == "axis":
                self.cur["axis_groups"] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
        elif tag == "text":
            self.in_label = False

    def handle_data(self, data):
        if self.in_label and self.cur is not None:
            self.cur["axes"][-1] += data


def main():
    model, rep = onnx.load(sys.argv[1]), json.load(open(sys.argv[2]))
    got = {w["value"]: w for w in rep["weights"]}
    want = expected(model)
    if not want:
        sys.exit("no Conv or Gemm weight in the model")
    for name, (axis, scales) in want.items():
        g = [w for k, w in got.items() if k == name or k.startswith(name + "_")]
        if len(g) != 1:
            sys.exit("%s: %d entries in the report's weights (%s)" % (name, len(g), sorted(got)))
        g = g[0]
        s = np.array(g["scale"], np.float32)
        if g["dtype"] != "i8" or g["axis"] != axis or s.shape != scales.shape:
            sys.exit("%s: dtype %s axis %s %d scales; want i8, axis %d, %d scales" %
                     (name, g["dtype"], g["axis"], s.size, axis, scales.size))
        # the JSON's %.9g of a float32 reads back as that float32; the fold and the rule computed in
        # f32 are within a few ulps of numpy's in f64
        if not np.allclose(s, scales, rtol=1e-6, atol=0):
            k = int(np.argmax(np.abs(s - scales) / scales))
            sys.exit("%s: channel %d scale %.9g, numpy max|w|/127 %.9g" % (name, k, s[k], scales[k]))
        if any(z != 0 for z in g["zero_point"]):
            sys.exit("%s: zero points %s, want 0" % (name, g["zero_point"]))
    p = Svg()
    p.feed(open(sys.argv[3]).read())
    charts = {s["label"]: s for s in p.svgs}
    for name, (axis, scales) in want.items():
        c = [s for s in p.svgs if s["label"].startswith("scales of " + name)]
        if len(c) != 1:
            sys.exit("%s: %d scale charts" % (name, len(c)))
        c = c[0]
        if c["points"] != [scales.size] or c["axis_groups"] != 2:
            sys.exit("%s: the chart has %s points and %d axes; want %d points, 2 axes" %
                     (name, c["points"], c["axis_groups"], scales.size))
        if c["axes"] != ["channel (index along axis %d)" % axis, "scale"]:
            sys.exit("%s: axis labels %s" % (name, c["axes"]))
    sens = charts.get("sensitivity per layer")
    measured = [l for l in rep["layers"] if l["effect_db"] is not None or l["sqnr_local_db"] is not None]
    if not sens or not measured:
        sys.exit("no sensitivity chart, or no layer's effect or local SQNR in the JSON (%d)" % len(measured))
    if sens["axis_groups"] != 1 or not sens["axes"][0].startswith("SQNR (dB)"):
        sys.exit("sensitivity chart's axis: %s" % sens["axes"])
    if sens["rects"] < len(measured):
        sys.exit("sensitivity chart: %d bars for %d measured layers" % (sens["rects"], len(measured)))
    rng = charts.get("ranges per tensor")
    if not rng or rng["axis_groups"] != 1 or rng["axes"] != ["real value of the tensor"]:
        sys.exit("ranges chart's axis: %s" % (rng and rng["axes"]))
    print("ok", len(want))


if __name__ == "__main__":
    main()
