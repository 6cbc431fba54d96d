#!/usr/bin/python3
"""Numpy's check of an integer recipe's mixed precision (tests/e2e/test_mixed.c).

Usage: mixed_int_oracle.py F32.onnx EXPORT.onnx REPORT.json [ACT_BITS]

Each Conv/Gemm/MatMul computes as one of the report's choices: the recipe's types (its weight
type, e.g. "i8"), another weight type ("i4"), 16-bit output activations ("a:u16") or f32. A
layer's bits (docs/quantizer.md, mixed precision): its weights' bits times the bits of the
tensor it writes over 8 (W8A8 8, W4A8 4, W8A16 16), f32 32; ACT_BITS (default 8) is the recipe's
activation width. Checks:
  * each layer's MACs a sample, recomputed from the f32 model's shapes (onnx shape inference:
    a Conv's output elements times C_in / group times its kernel; a Gemm's N times K), are the
    report's, and so are its bits under each choice open to it (an error of null: not open);
  * the 16-bit choice is open to the layers open_16's rule names, and only to them;
  * a brute force over every assignment with the report's errors and these bits picks QRL's
    chosen assignment: the least summed error whose MAC-weighted bits are within the budget
    (bytes(N): whose weights' bytes, each at its choice's weight bits, f32 4 bytes, plus the rest
    of the model as the report's uniform point gives it, are within N);
  * the export holds it: for each layer, its weight's type (an f32 initializer, or a
    DequantizeLinear of INT4 or INT8 integers) and the type of the QuantizeLinear on the
    tensor it writes (through a Relu or Clip; none: f32) are the chosen choice's, and the
    MAC-weighted bits counted from these types in the file are within the budget.
Prints "ok", the assignment and the file's bits, or the first failure (exit 1)."""
import itertools
import json
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper, shape_inference

# ONNX's element types by number (this onnx predates INT4's name): INT4 22, UINT4 21
INT_BITS = {22: 4, 21: 4, TensorProto.INT8: 8, TensorProto.UINT8: 8, TensorProto.INT16: 16, TensorProto.UINT16: 16}


def choice_bits(name, wbits, abits):
    """A choice's (weight bits, activation bits), None for f32."""
    if name == "f32":
        return None
    if name.startswith("a:"):
        return wbits, int(name[3:])
    return int(name[1:]), abits


def file_types(qm, node_name):
    """(weight bits, output activation bits) of a layer in the export, None for an f32 layer."""
    inits = {t.name: t for t in qm.graph.initializer}
    prod = {o: n for n in qm.graph.node for o in n.output}
    readers = {}
    for n in qm.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    node = [n for n in qm.graph.node if n.name == node_name]
    if len(node) != 1:
        sys.exit("%s: not in the export" % node_name)
    w = node[0].input[1]
    dq = prod.get(w)
    if dq is None and w in inits:
        wbits = None
    elif dq is not None and dq.op_type == "DequantizeLinear" and dq.input[0] in inits:
        wbits = INT_BITS[inits[dq.input[0]].data_type]
    else:
        sys.exit("%s: its weight is neither f32 nor dequantized integers" % node_name)
    v, abits = node[0].output[0], None
    for _ in range(3):  # through a fused Relu or Clip
        rs = readers.get(v, [])
        q = [r for r in rs if r.op_type == "QuantizeLinear"]
        if q:
            abits = INT_BITS[inits[q[0].input[2]].data_type]
            break
        if len(rs) != 1 or rs[0].op_type not in ("Relu", "Clip"):
            break
        v = rs[0].output[0]
    if (wbits is None) != (abits is None):
        sys.exit("%s: weight %s bits but output %s bits" % (node_name, wbits, abits))
    return None if wbits is None else (wbits, abits)


def open_16(f32, inits, node):
    """Whether the 16-bit choice is open to layer node by the rule: the tensor it writes (through a
    BatchNormalization, Relu or Clip it alone reads) is read only by Conv/Gemm/MatMul layers as
    their input by a constant weight, or by MaxPool, Flatten, Reshape or Dropout whose outputs are
    read so in turn, or by a residual Add as its first operand or where its other operand is not a
    layer's output (the Add's kernel takes one 16-bit operand; a Concat, ... needs one type)."""
    readers = {}
    for n in f32.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    v = node.output[0]
    while len(readers.get(v, [])) == 1 and readers[v][0].op_type in ("BatchNormalization", "Relu", "Clip"):
        v = readers[v][0].output[0]

    producer = {o: n for n in f32.graph.node for o in n.output}

    def layer_output(u):  # a Conv/Gemm/MatMul by a constant weight writes u, through one-input nodes
        for _ in range(4):
            n = producer.get(u)
            if n is None:
                return False
            if n.op_type in ("Conv", "Gemm", "MatMul"):
                return len(n.input) > 1 and n.input[1] in inits
            computed = [i for i in n.input if i and i not in inits]
            if len(computed) != 1:
                return False
            u = computed[0]
        return False

    def takes(v, top=True):
        for r in readers.get(v, []):
            if r.op_type in ("Conv", "Gemm", "MatMul") and r.input[0] == v and r.input[1] in inits:
                continue
            if r.op_type in ("MaxPool", "Flatten", "Reshape", "Dropout") and takes(r.output[0], False):
                continue
            # a residual Add into 8 bits takes one 16-bit operand: its first, or the one whose other
            # operand no layer writes (two layers' choices never meet in one Add)
            if top and r.op_type == "Add" and len(r.input) == 2 and r.input[0] != r.input[1]:
                at = list(r.input).index(v)
                if at == 0 or not layer_output(r.input[1 - at]):
                    continue
            return False
        return True
    return takes(v)


def main():
    f32 = shape_inference.infer_shapes(onnx.load(sys.argv[1]))
    qm, rep = onnx.load(sys.argv[2]), json.load(open(sys.argv[3]))["mixed"]
    abits = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    inits = {t.name: numpy_helper.to_array(t) for t in f32.graph.initializer}
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(f32.graph.value_info) + list(f32.graph.output)}
    macs = {}
    for n in f32.graph.node:
        if n.op_type == "Conv":
            w, out = inits[n.input[1]], shapes[n.output[0]]
            macs[n.name] = float(np.prod(out[1:])) * np.prod(w.shape[1:])
        elif n.op_type in ("Gemm", "MatMul"):
            w = inits[n.input[1]]
            macs[n.name] = float(w.size)  # one row a sample: K * N
    layers, budget, names = rep["layers"], rep["budget"]["value"], rep["choices"]
    wbits = int(names[0][1:])
    bits = [32.0 if choice_bits(c, wbits, abits) is None else
            float(np.prod(choice_bits(c, wbits, abits))) / 8 for c in names]
    closed = 0
    for l in layers:
        if l["node"] not in macs or abs(macs[l["node"]] - l["macs"]) > 1e-9 * macs[l["node"]]:
            sys.exit("%s: MACs numpy %s, QRL %s" % (l["node"], macs.get(l["node"]), l["macs"]))
        for c, b in enumerate(l.get("bits", bits)):
            if l["error"][c] is not None and b != bits[c]:
                sys.exit("%s: %s takes %s bits by the report, %s by the rule" % (l["node"], names[c], b, bits[c]))
        closed += sum(e is None for e in l["error"])
    for k, name in enumerate(names):  # which layers the 16-bit choice is open to
        for l in layers if name.startswith("a:") else []:
            node = [n for n in f32.graph.node if n.name == l["node"]][0]
            if (l["error"][k] is not None) != open_16(f32, inits, node):
                sys.exit("%s: %s %s to it, but the rule says %s" % (l["node"], name, "open" if l["error"][k] is not None
                                                                    else "not open", open_16(f32, inits, node)))
    total_macs = sum(l["macs"] for l in layers)
    by_bytes = rep["budget"]["kind"] == "bytes"
    # bytes(N): a layer's weights at its choice's weight bits (f32 4 bytes, a 16-bit output none more)
    wb = [32.0 if choice_bits(c, wbits, abits) is None else float(choice_bits(c, wbits, abits)[0]) for c in names]
    for l in layers if by_bytes else []:
        for c, b in enumerate(l["bytes"]):
            if l["error"][c] is not None and abs(b - l["weights"] * wb[c] / 8) > 0.5:
                sys.exit("%s: %s takes %s bytes by the report, %s by the rule" % (l["node"], names[c], b,
                                                                                 l["weights"] * wb[c] / 8))
    uni = [p for p in rep["points"] if p.get("uniform") == 0] if by_bytes else []
    base = uni[0]["bytes"] - sum(l["bytes"][0] for l in layers) if uni else 0  # the rest of the model
    top, want = None, None
    opens = [[c for c in range(len(names)) if l["error"][c] is not None] for l in layers]
    for a in itertools.product(*opens):
        if by_bytes:
            ok = base + sum(l["weights"] * wb[c] / 8 for l, c in zip(layers, a)) <= budget * (1 + 1e-12)
        else:
            ok = sum(l["macs"] * bits[c] for l, c in zip(layers, a)) <= budget * total_macs * (1 + 1e-12)
        err = sum(l["error"][c] for l, c in zip(layers, a))
        if ok and (top is None or err < top):
            top, want = err, list(a)
    pick = [p for p in rep["points"] if p["chosen"]][0]["pick"]
    if pick != want:
        sys.exit("brute force picks %s, QRL %s" % (want, pick))
    total = 0.0
    for l, c in zip(layers, pick):
        got, expect = file_types(qm, l["node"]), choice_bits(names[c], wbits, abits)
        if got != expect:
            sys.exit("%s: chosen %s (%s), but the export has %s" % (l["node"], names[c], expect, got))
        total += macs[l["node"]] * (32.0 if got is None else got[0] * got[1] / 8.0)
    avg = total / sum(macs[l["node"]] for l in layers)
    if by_bytes:  # the layers' weights as the file stores them
        got = base + sum(l["weights"] * (4 if file_types(qm, l["node"]) is None else file_types(qm, l["node"])[0] / 8)
                         for l in layers)
        if got > budget * (1 + 1e-12):
            sys.exit("the export's layers take %.0f bytes with the rest, over the budget %g" % (got, budget))
    elif avg > budget * (1 + 1e-12):
        sys.exit("the export's layers average %.6g bits, over the budget %g" % (avg, budget))
    print("ok %s bits %.4f closed %d" % (" ".join(names[c] for c in pick), avg, closed))


if __name__ == "__main__":
    main()
