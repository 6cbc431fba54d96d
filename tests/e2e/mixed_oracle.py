#!/usr/bin/python3
"""Numpy's check of a mixed-precision quantization (tests/e2e/test_mixed.c).

Usage: mixed_oracle.py F32.onnx EXPORT.onnx REPORT.json X.npy BLOCK

The f32 model is a chain of MatMul/Gemm (constant B), Relu and Tanh (tools/make_mixed_models.py).
From scratch, with numpy, for each weight and each of the report's choices (i4: symmetric narrow,
i8: symmetric narrow, both RTN in blocks of BLOCK along K, as tests/e2e/int4_rtn_oracle.py rounds;
f32: unchanged): its bytes (packed nibbles or bytes, one f32 scale a block, no zero point) and the
outputs' error energy with that weight alone quantized, on the samples QRL chose on (the first
choose_samples of X). Checks:
  * the report's bytes per layer and choice are numpy's, exactly; its errors within 1%;
  * a brute force over every assignment with the report's own figures picks QRL's chosen assignment
    (the knapsack's answer), and with numpy's figures an assignment whose error is QRL's within 1%;
  * the export holds the chosen types (INT4 / INT8 DequantizeLinear, or the f32 initializer), and
    its budget holds counted from the file: bytes(N) the initializers' bytes, bits(N) each layer's
    bytes * 8 / weights averaged by the layer's MACs (K * N per row; one row a sample here).
Prints "ok" and the chosen assignment, or the first failure (exit 1)."""
import itertools
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from int4_rtn_oracle import rtn  # noqa: E402


def forward(model, weights, x):
    vals = dict(weights)
    vals[model.graph.input[0].name] = x
    for n in model.graph.node:
        a = {t.name: (t.f if t.type == 1 else t.i) for t in n.attribute}
        v = vals[n.input[0]]
        if n.op_type == "MatMul":
            y = v @ vals[n.input[1]]
        elif n.op_type == "Gemm":
            w = vals[n.input[1]]
            y = a.get("alpha", 1.0) * (v @ (w.T if a.get("transB", 0) else w))
            if len(n.input) > 2:
                y = y + a.get("beta", 1.0) * vals[n.input[2]]
        elif n.op_type == "Relu":
            y = np.maximum(v, 0)
        elif n.op_type == "Tanh":
            y = np.tanh(v)
        else:
            sys.exit("the oracle runs MatMul, Gemm, Relu and Tanh only, not %s" % n.op_type)
        vals[n.output[0]] = y
    return vals[model.graph.output[0].name]


def init_bytes(t):
    if t.raw_data:
        return len(t.raw_data)
    return numpy_helper.to_array(t).nbytes


def main():
    f32, qm = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
    rep = json.load(open(sys.argv[3]))["mixed"]
    x, block = np.load(sys.argv[4]).astype(np.float64), int(sys.argv[5])
    choices, layers = rep["choices"], rep["layers"]
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in f32.graph.initializer}
    xs = x[:rep["choose_samples"]]
    ref = forward(f32, inits, xs)
    mode = {"i4": "sym", "i8": "sym8"}
    lay = [n for n in f32.graph.node if n.op_type in ("MatMul", "Gemm") and n.input[1] in inits]
    if [n.input[1] for n in lay] != [l["weight"] for l in layers]:
        sys.exit("layers: numpy %s, report %s" % ([n.input[1] for n in lay], [l["weight"] for l in layers]))
    nb_err, nb_bytes, macs, weights = [], [], [], []
    for n, l in zip(lay, layers):
        w = inits[n.input[1]].astype(np.float32)
        kax = 1 if n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute) else 0
        K, N = w.shape[kax], w.shape[1 - kax]
        weights.append(K * N)
        macs.append(K * N * int(np.prod(x.shape[1:-1])))  # one row of X a sample: K * N MACs
        errs, sizes = [], []
        for c in choices:
            if c == "f32":
                errs.append(0.0)
                sizes.append(4 * K * N)
                continue
            q, s, z = rtn(w, kax, mode[c], block)
            nbk = (K + block - 1) // block
            sizes.append(((K * N + 1) // 2 if c == "i4" else K * N) + 4 * nbk * N)
            sk = np.repeat(s, block, axis=kax).take(range(K), axis=kax)
            wq = dict(inits)
            wq[n.input[1]] = (q.astype(np.float32) * sk).astype(np.float64)
            errs.append(float(((forward(f32, wq, xs) - ref) ** 2).sum()))
        if sizes != [int(b) for b in l["bytes"]]:
            sys.exit("%s: bytes by choice: numpy %s, QRL %s" % (l["weight"], sizes, l["bytes"]))
        for c, a, b in zip(choices, errs, l["error"]):
            if abs(a - b) > 0.01 * max(a, b) + 1e-12:
                sys.exit("%s as %s: error energy numpy %.6g, QRL %.6g" % (l["weight"], c, a, b))
        nb_err.append(errs)
        nb_bytes.append(sizes)
    base = sum(init_bytes(t) for t in f32.graph.initializer if t.name not in [l["weight"] for l in layers])
    kind, budget = rep["budget"]["kind"], rep["budget"]["value"]

    def best(err):
        top, pick = None, None
        for a in itertools.product(range(len(choices)), repeat=len(layers)):
            if kind == "bytes":
                fits = base + sum(nb_bytes[i][c] for i, c in enumerate(a)) <= budget
            else:  # each layer's bits a weight, weighted by its MACs
                fits = sum(macs[i] * 8.0 * nb_bytes[i][c] / weights[i] for i, c in enumerate(a)) <= budget * sum(macs) * (1 + 1e-12)
            e = sum(err[i][c] for i, c in enumerate(a))
            if fits and (top is None or e < top):
                top, pick = e, list(a)
        return top, pick

    chosen = [p for p in rep["points"] if p["chosen"]]
    if len(chosen) != 1:
        sys.exit("%d chosen points in the report" % len(chosen))
    pick = chosen[0]["pick"]
    _, want = best([l["error"] for l in layers])
    if want != pick:
        sys.exit("brute force on QRL's figures picks %s, QRL %s" % (want, pick))
    top, npick = best(nb_err)
    mine = sum(nb_err[i][c] for i, c in enumerate(pick))
    if abs(mine - top) > 0.01 * top:
        sys.exit("numpy's best %s has error %.6g, QRL's pick %s %.6g" % (npick, top, pick, mine))
    # the export: the chosen types, and the budget counted from the file
    qinit = {t.name: t for t in qm.graph.initializer}
    prod = {o: n for n in qm.graph.node for o in n.output}
    total = sum(init_bytes(t) for t in qm.graph.initializer)
    bits = 0.0
    for i, n in enumerate(lay):
        qn = [m for m in qm.graph.node if m.op_type == n.op_type and list(m.output) == list(n.output)]
        if len(qn) != 1:
            sys.exit("%s: not in the export" % n.output[0])
        b = qn[0].input[1]
        c = choices[pick[i]]
        if c == "f32":
            if b not in qinit or qinit[b].data_type != 1:
                sys.exit("%s: chosen f32, but B is not an f32 initializer" % n.input[1])
            nbytes = init_bytes(qinit[b])
        else:
            dq = prod.get(b)
            if dq is None or dq.op_type != "DequantizeLinear":
                sys.exit("%s: chosen %s, but B is not read through a DequantizeLinear" % (n.input[1], c))
            if qinit[dq.input[0]].data_type != {"i4": 22, "i8": 3}[c]:
                sys.exit("%s: chosen %s, stored as ONNX type %d" % (n.input[1], c, qinit[dq.input[0]].data_type))
            nbytes = sum(init_bytes(qinit[v]) for v in dq.input if v)
        bits += macs[i] * 8.0 * nbytes / weights[i]
    bits /= sum(macs)
    if kind == "bytes" and total > budget:
        sys.exit("the export's initializers hold %d bytes, over the budget %g" % (total, budget))
    if kind == "bits" and bits > budget * (1 + 1e-12):
        sys.exit("the export's weights average %.6g bits, over the budget %g" % (bits, budget))
    print("ok %s bytes %d bits %.4f" % (" ".join(choices[c] for c in pick), total, bits))


if __name__ == "__main__":
    main()
