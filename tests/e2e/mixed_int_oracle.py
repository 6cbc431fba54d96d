#!/usr/bin/python3
"""Numpy's check of an integer recipe's mixed precision (tests/e2e/test_mixed.c).

Usage: mixed_int_oracle.py F32.onnx EXPORT.onnx REPORT.json

For a recipe with candidate = f32 and budget = bits(N), each Conv/Gemm/MatMul computes in the
recipe's weight type (8 bits) or in f32 (32). Checks:
  * each layer's MACs a sample, recomputed from the f32 model's shapes (onnx shape inference:
    a Conv's output elements times C_in / group times its kernel; a Gemm's N times K), are the
    report's;
  * a brute force over every assignment with the report's figures (each layer's error share,
    its MACs) picks QRL's chosen assignment: the least summed error whose MAC-weighted bits are
    within N;
  * the export holds it (a chosen-f32 layer reads its f32 initializer, the others a
    DequantizeLinear), and its MAC-weighted bits, counted from the file, are within N.
Prints "ok" and the assignment, or the first failure (exit 1)."""
import itertools
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def main():
    f32 = shape_inference.infer_shapes(onnx.load(sys.argv[1]))
    qm, rep = onnx.load(sys.argv[2]), json.load(open(sys.argv[3]))["mixed"]
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
    layers, budget = rep["layers"], rep["budget"]["value"]
    for l in layers:
        if l["node"] not in macs or abs(macs[l["node"]] - l["macs"]) > 1e-9 * macs[l["node"]]:
            sys.exit("%s: MACs numpy %s, QRL %s" % (l["node"], macs.get(l["node"]), l["macs"]))
    bits = (8.0, 32.0)
    top, want = None, None
    for a in itertools.product((0, 1), repeat=len(layers)):
        cost = sum(l["macs"] * bits[c] for l, c in zip(layers, a))
        err = sum(l["error"][c] for l, c in zip(layers, a))
        if cost <= budget * sum(l["macs"] for l in layers) * (1 + 1e-12) and (top is None or err < top):
            top, want = err, list(a)
    pick = [p for p in rep["points"] if p["chosen"]][0]["pick"]
    if pick != want:
        sys.exit("brute force picks %s, QRL %s" % (want, pick))
    prod = {o: n for n in qm.graph.node for o in n.output}
    qinit = {t.name for t in qm.graph.initializer}
    total = 0.0
    for l, c in zip(layers, pick):
        node = [n for n in qm.graph.node if n.name == l["node"]]
        if len(node) != 1:
            sys.exit("%s: not in the export" % l["node"])
        w = node[0].input[1]
        f32_here = w in qinit and w not in prod
        dq = prod.get(w) is not None and prod[w].op_type == "DequantizeLinear"
        if (c == 1) != f32_here or (c == 0) != dq:
            sys.exit("%s: chosen %s, but the export reads its weight %s" % (l["node"], ("i8", "f32")[c],
                                                                          "as f32" if f32_here else "dequantized"))
        total += macs[l["node"]] * (32.0 if f32_here else 8.0)
    avg = total / sum(macs[l["node"]] for l in layers)
    if avg > budget * (1 + 1e-12):
        sys.exit("the export's layers average %.6g bits, over the budget %g" % (avg, budget))
    print("ok %s bits %.4f" % (" ".join(("i8", "f32")[c] for c in pick), avg))


if __name__ == "__main__":
    main()
