#!/usr/bin/python3
"""What each layer's i8 weights alone cost a model's outputs, every activation in f32: the floor
under any recipe whose weights are i8 per output channel (int8.qrl and those deriving from it,
whatever their activations' width), measured with ONNX Runtime, not with QRL.

Usage: /usr/bin/python3 bench/weight_alone.py MODEL.onnx CALIB.npy OUTDIR [--bits B] [--every K]
                                              [--from I] [--layers i,j,...]
For each Conv (in graph order) whose weight is a constant, a copy of the model with that weight
alone rounded to B bits (default 8) symmetric per output channel, its scale the channel's max |w|
over 2^(B-1) - 1 (int8.qrl's `weight = i8 symmetric per_channel by minmax(symmetric = true)`), then
every weight so rounded ("all"). ONNX Runtime (tools/ort_sqnr.js --run) runs each copy and the model
on the samples CALIB[I::K] (default I = 3, K = 4: the 16 of 64 that int8.qrl's validate = 0.25,
validate_from = spread holds out and judges on); printed per copy: each output's pooled SQNR
against the model's (dB), and how many elements changed between zero and non-zero (a peak map's
peaks that appeared or went). One line per copy, tab-separated, then the count of layers whose
worst output holds 25 dB.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(model, x, out):
    env = dict(os.environ)
    env.setdefault("ORT_NODE_MODULE", os.path.join(ROOT, "build", "npm", "node_modules", "onnxruntime-node"))
    subprocess.run(["node", os.path.join(ROOT, "tools", "ort_sqnr.js"), "--run", model, out, x], check=True,
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outs = []
    k = 0
    while os.path.exists(os.path.join(out, "%d.npy" % k)):
        outs.append(np.load(os.path.join(out, "%d.npy" % k)).astype(np.float64))
        os.remove(os.path.join(out, "%d.npy" % k))  # a later model with fewer outputs reads none of these
        k += 1
    return outs


def rounded(w, bits):
    qmax = 2 ** (bits - 1) - 1
    a = np.abs(w).reshape(w.shape[0], -1).max(1).reshape(-1, *([1] * (w.ndim - 1)))
    s = np.where(a > 0, a / qmax, 1)
    return (np.clip(np.round(w / s), -qmax, qmax) * s).astype(w.dtype)


def parse_opts(args, opts, doc):
    """Takes each `--name value` of opts' names out of args into opts; the three positional arguments left."""
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 3:
        sys.exit(doc)
    return args


def main():
    args = sys.argv[1:]
    opts = {"--bits": "8", "--every": "4", "--from": "3", "--layers": ""}
    args = parse_opts(args, opts, __doc__)
    model, calib, outdir = args
    bits, every, first = int(opts["--bits"]), int(opts["--every"]), int(opts["--from"])
    os.makedirs(outdir, exist_ok=True)
    x = np.load(calib, mmap_mode="r")[first::every]
    xin = os.path.join(outdir, "x.npy")
    np.save(xin, np.ascontiguousarray(x))
    m = onnx.load(model)
    names = [o.name for o in m.graph.output]
    init = {t.name: i for i, t in enumerate(m.graph.initializer)}
    convs = [n for n in m.graph.node if n.op_type == "Conv" and n.input[1] in init]
    ref = run(model, xin, os.path.join(outdir, "ref"))
    pick = [int(i) for i in opts["--layers"].split(",")] if opts["--layers"] else list(range(len(convs)))
    print("layer\tconv\tweight\t" + "\t".join("%s dB\t%s changed" % (n, n) for n in names))
    held = 0
    for k in pick + ["all"]:
        c = onnx.load(model)
        sel = convs if k == "all" else [convs[k]]
        for n in sel:
            t = c.graph.initializer[init[n.input[1]]]
            c.graph.initializer[init[n.input[1]]].CopyFrom(nh.from_array(rounded(nh.to_array(t), bits), t.name))
        path = os.path.join(outdir, "w.onnx")
        onnx.save(c, path)
        got = run(path, xin, os.path.join(outdir, "w"))
        cells, worst = [], np.inf
        for r, g in zip(ref, got):
            e2 = ((r - g) ** 2).sum()
            db = np.inf if e2 == 0 else 10 * np.log10((r ** 2).sum() / e2)
            worst = min(worst, db)
            cells.append("%.1f\t%d" % (db, int(((r != 0) != (g != 0)).sum())))
        if k != "all" and worst >= 25:
            held += 1
        label = "all" if k == "all" else str(k)
        shape = "x".join(str(d) for d in nh.to_array(m.graph.initializer[init[sel[0].input[1]]]).shape) \
            if k != "all" else "%d convs" % len(convs)
        print("%s\t%s\t%s\t%s" % (label, "-" if k == "all" else sel[0].name, shape, "\t".join(cells)), flush=True)
    print("# %d of %d layers alone hold 25 dB on every output (i%d weights, f32 activations, samples %d::%d of %s)"
          % (held, len(pick), bits, first, every, os.path.basename(calib)))


if __name__ == "__main__":
    main()
