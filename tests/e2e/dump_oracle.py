#!/usr/bin/python3
"""What `qrl dump MODEL` must say, derived from onnx's own reading of the model
(an oracle independent of QRL's importer, optimizer and printer).

    dump_oracle.py MODEL.onnx DUMP.txt   (exit 0, or 1 listing what differs)

Expected, from the model by onnx and numpy: the header (graph name, opset,
producer); inputs and outputs with their shapes; the nodes of the graph after
the two rewrites every inference runtime makes (Dropout is the identity: its
readers read its input; a BatchNormalization that alone reads a Conv's output
folds into that Conv, whose output takes the BatchNormalization's name, and
whose weight and bias become new constants of the Conv's weight and bias
shapes); each node's op, inputs, output, attributes (as the model states them)
and output shape (onnx shape inference); each constant's shape, and the value
of a one-element one.
"""
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

DT = {1: "f32", 2: "u8", 3: "i8", 5: "i16", 6: "i32", 7: "i64", 9: "bool", 10: "f16", 11: "f64"}


def shape_text(t):
    dims = [d.dim_param if d.HasField("dim_param") else str(d.dim_value) for d in t.shape.dim]
    return "%s[%s]" % (DT[t.elem_type], ",".join(dims))


def attr_text(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(str(x) for x in v) + "]"
    if isinstance(v, float):
        return "%g" % v
    return str(v)


def expected(model):
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inferred = shape_inference.infer_shapes(model, strict_mode=True).graph
    shapes = {v.name: shape_text(v.type.tensor_type) for v in
              list(inferred.value_info) + list(g.input) + list(g.output)}
    nodes = list(g.node)
    readers = {}
    for n in nodes:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    rename, drop, fold = {}, set(), {}
    for n in nodes:
        if n.op_type == "Dropout":
            rename[n.output[0]] = n.input[0]
            drop.add(n.name)
        if n.op_type == "Conv" and [r.op_type for r in readers.get(n.output[0], [])] == ["BatchNormalization"]:
            bn = readers[n.output[0]][0]
            fold[n.name] = bn.output[0]
            drop.add(bn.name)
    want = []
    for n in nodes:
        if n.name in drop:
            continue
        ins = [rename.get(i, i) for i in n.input]
        out = fold.get(n.name, n.output[0])
        attrs = {a.name: attr_text(a) for a in n.attribute}
        want.append((n.name, n.op_type, ins, out, shapes[out], attrs, n.name in fold))
    consts = {k: v for k, v in inits.items()}
    return g, shapes, want, consts


def main():
    model = onnx.load(sys.argv[1])
    text = open(sys.argv[2]).read().splitlines()
    g, shapes, want, consts = expected(model)
    bad = []
    head = 'graph "%s" opset %d producer "%s"' % (g.name, model.opset_import[0].version, model.producer_name)
    if text[0] != head:
        bad.append("header: %r, expected %r" % (text[0], head))
    got_in = [l for l in text if l.startswith("input ")]
    got_out = [l for l in text if l.startswith("output ")]
    want_in = ["input  %s: %s" % (v.name, shapes[v.name]) for v in g.input if v.name not in consts]
    want_out = ["output %s: %s" % (v.name, shapes[v.name]) for v in g.output]
    if got_in != want_in or got_out != want_out:
        bad.append("inputs/outputs: %r %r, expected %r %r" % (got_in, got_out, want_in, want_out))
    dumped_consts = {}
    for l in text:
        m = re.match(r"const  (\S+): (\S+)(?: = \{(.*)\})?$", l)
        if m:
            dumped_consts[m.group(1)] = (m.group(2), m.group(3))
    node_re = re.compile(r"node   (.+?): (\w+)\((.*?)\) -> (\S+): (\S+)(?: \{(.*)\})?$")
    got = [node_re.match(l) for l in text if l.startswith("node ")]
    if None in got or len(got) != len(want):
        bad.append("%d node lines, expected %d" % (len(got), len(want)))
    for m, (name, op, ins, out, shape, attrs, folded) in zip(got, want):
        if not m:
            continue
        gname, gop, gins, gout, gshape, gattrs = m.groups()
        gins = gins.split(", ") if gins else []
        gattrs = dict(kv.split("=", 1) for kv in gattrs.split(", ")) if gattrs else {}
        what = "node %s" % name
        if (gname, gop, gout, gshape) != (name, op, out, shape):
            bad.append("%s: %s %s -> %s: %s, expected %s %s -> %s: %s" % (what, gname, gop, gout, gshape, name, op,
                                                                       out, shape))
        for k, v in attrs.items():
            if gattrs.get(k) != v:
                bad.append("%s: attribute %s=%s, expected %s" % (what, k, gattrs.get(k), v))
        if len(gins) != len(ins):
            bad.append("%s: inputs %s, expected %s" % (what, gins, ins))
            continue
        for j, (a, b) in enumerate(zip(gins, ins)):
            if b not in consts:
                if a != b:
                    bad.append("%s: input %d is %s, expected %s" % (what, j, a, b))
                continue
            # a constant: the model's own, or (folded) a new one of the same shape
            if a not in dumped_consts:
                bad.append("%s: input %s is no constant of the dump" % (what, a))
                continue
            dshape, dval = dumped_consts[a]
            wshape = "%s[%s]" % ("f32", ",".join(str(d) for d in consts[b].shape))
            if dshape != wshape or (not folded and a != b):
                bad.append("%s: constant %s: %s, expected %s: %s" % (what, a, dshape, b, wshape))
            if consts[b].size == 1 and dval is not None and not folded and \
                    not np.isclose(float(dval), float(consts[b].reshape(-1)[0]), rtol=1e-7):
                bad.append("%s: constant %s = %s, expected %r" % (what, a, dval, consts[b].reshape(-1)[0]))
    for b in bad:
        print(b)
    print("ok" if not bad else "%d differences" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
