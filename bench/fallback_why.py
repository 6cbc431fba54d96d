"""Where a quantized model's Conv/Gemm/MatMul MACs ended up, and why those in f32 are there (QRL-J):
reads the model, one calibration sample's shape and `qrl quantize --report R.json` of a recipe with
`fallback = u16 then f32 when ...`, and prints each layer's MACs (onnx shape inference at batch 1)
in one of: integer at 8 bits, integer with a 16-bit input or output, f32 with its 16-bit step
closed (the op types that read its output: a reader that takes no 16 bits), f32 although its step
was open (it failed at 16 bits too: its effect at 16 bits), f32 with its output quantized (its
input left f32). A layer is the Conv/Gemm/MatMul node and the tensor it writes (the first value the
report lists along its single-reader chain: a bias Add, a fused Relu or Clip). Measures; never
pass/fail.
Usage: /usr/bin/python3 bench/fallback_why.py MODEL.onnx CALIB.npy REPORT.json [TOP]
"""
import collections
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def main(model, calib, report, top=8):
    m = onnx.load(model)
    x = np.load(calib, mmap_mode="r")
    inits = {i.name for i in m.graph.initializer}
    for inp in m.graph.input:
        if inp.name in inits:
            continue
        for d, v in zip(inp.type.tensor_type.shape.dim, (1,) + x.shape[1:]):
            d.ClearField("dim_param")
            d.dim_value = v
        break
    mi = shape_inference.infer_shapes(m)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(mi.graph.value_info) + list(mi.graph.output)}
    wdims = {i.name: list(i.dims) for i in m.graph.initializer}  # weights: initializers or Constant nodes
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == onnx.AttributeProto.TENSOR:
            wdims[n.output[0]] = list(n.attribute[0].t.dims)
    readers = collections.defaultdict(list)
    for n in m.graph.node:
        for i in n.input:
            readers[i].append(n)
    r = json.load(open(report))
    slots = {l["value"]: l for l in r["layers"]}

    def macs(n):
        out = shapes.get(n.output[0])
        if not out or not all(out):
            return 0.0
        wd = wdims.get(n.input[1]) or shapes.get(n.input[1])
        if n.op_type == "Conv":
            return float(np.prod(out)) * float(np.prod(wd[1:])) if wd else 0.0
        if n.op_type == "ConvTranspose":  # each input element: C_out / group * kernel
            xin = shapes.get(n.input[0])
            return float(np.prod(xin)) * float(np.prod(wd[1:])) if wd and xin and all(xin) else 0.0
        a = shapes.get(n.input[0])
        if n.op_type == "Gemm" and any(t.name == "transA" and t.i for t in n.attribute):
            return float(np.prod(out)) * (a[0] if a else 0)
        return float(np.prod(out)) * (a[-1] if a else 0)

    def slot_of(n):
        v = n.output[0]
        for _ in range(4):
            if v in slots:
                return v
            rd = readers.get(v, [])
            if len(rd) != 1:
                return None
            v = rd[0].output[0]
        return None

    total, by = 0.0, collections.defaultdict(float)
    closed_readers, failed16 = collections.Counter(), []
    for n in m.graph.node:
        if n.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        k = macs(n)
        total += k
        s = slot_of(n)
        l = slots.get(s) if s else None
        if l is None:
            by["f32: no quantized output"] += k
            continue
        runs = l.get("runs_as", "")
        if not l["fallback"] and runs.startswith("kernel"):
            wide = l["dtype"] in ("u16", "i16") or "wide" in runs
            by["integer, 16-bit" if wide else "integer, 8-bit"] += k
        elif not l["fallback"]:
            by["f32: its input f32, its output quantized"] += k
        elif l.get("step16_open") is False:
            by["f32: 16-bit step closed"] += k
            for rd in readers.get(s, []):
                closed_readers[rd.op_type] += k
        else:
            by["f32: failed at 16 bits too"] += k
            failed16.append((k, s, l.get("effect16_db"), l.get("sqnr_local_db")))
    print("%s: %.4g MACs a sample; integer %.1f%% (summary: %.1f%%)" % (
        model, total, 100 * (by["integer, 8-bit"] + by["integer, 16-bit"]) / total,
        100 * r["macs_int_per_sample"] / r["macs_per_sample"]))
    for key in sorted(by, key=lambda k: -by[k]):
        print("  %-44s %5.1f%%" % (key, 100 * by[key] / total))
    if closed_readers:
        print("  readers of the closed ones (MACs of the layers they read): " +
              ", ".join("%s %.1f%%" % (op, 100 * v / total) for op, v in closed_readers.most_common()))
    for k, s, e16, loc in sorted(failed16, reverse=True)[:int(top)]:
        print("  open, f32: %-40s %5.1f%% of the MACs, effect at 16 bits %s dB, local SQNR at 8 bits %s dB" % (
            s, 100 * k / total, "%.1f" % e16 if e16 is not None else "-", "%.1f" % loc if loc is not None else "-"))


if __name__ == "__main__":
    main(*sys.argv[1:])
