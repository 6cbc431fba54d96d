#!/usr/bin/python3
"""Numpy's RTN of a weight-only export (tests/e2e/test_int4.c).

Usage: int4_rtn_oracle.py F32.onnx QUANTIZED.onnx MODE BLOCK [X.npy Y.npy]

MODE: sym (i4 symmetric narrow: scale = max|w| / 7 per group, q = clip(rint(w / scale), -7, 7), no
zero point), asym (u4 asymmetric: lo = min(min w, 0), hi = max(max w, 0), scale = (hi - lo) / 15,
zero = clip(rint(-lo / scale), 0, 15), q = clip(rint(w / scale) + zero, 0, 15)), or sym8 (i8
symmetric narrow, scale max|w| / 127). A group is BLOCK weights along K (the last block shorter), or
with BLOCK 0 a whole output channel. Scales are computed in float64 and rounded to float32, w / scale
in float32 (numpy's rint: half to even), as ONNX's QuantizeLinear would. MODE may end in
,OP=MODE2 overrides (a recipe's `weight for OP = ...`): the weights of OP's nodes take MODE2.

For every MatMul and Gemm of F32.onnx whose B is an initializer (a Gemm's alpha folded into B first
when the export's Gemm has none, as QRL's optimizer does), QUANTIZED.onnx must read it through
a DequantizeLinear (axis K, block_size BLOCK) whose integers, scales and zero points are numpy's,
bit for bit; the nibbles are unpacked here with numpy (low nibble first). With X.npy, the f32
model's ops are run by numpy on the dequantized weights and the outputs written to Y.npy (the
oracle QRL's and ONNX Runtime's runs of QUANTIZED.onnx are compared with). Prints "ok" and the
number of weights checked, or the first mismatch (exit 1)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def unpack4(raw, n, signed):
    b = np.frombuffer(raw, np.uint8)
    v = np.empty(b.size * 2, np.int16)
    v[0::2] = b & 15
    v[1::2] = b >> 4
    v = v[:n]
    if signed:
        v = np.where(v >= 8, v - 16, v)
    return v


def tensor(t):
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    if t.data_type in (21, 22):  # UINT4, INT4 (this onnx predates them)
        return unpack4(t.raw_data, n, t.data_type == 22).reshape(tuple(t.dims))
    return numpy_helper.to_array(t)


def rtn(w, kax, mode, block):
    """w [K, N] (kax 0) or [N, K] (kax 1) -> q, scale, zero with scale's shape as DequantizeLinear's."""
    wk = w if kax == 0 else w.T  # [K, N]
    K, N = wk.shape
    bs = block if block else K
    nb = (K + bs - 1) // bs
    q = np.zeros((K, N), np.int64)
    sc = np.zeros((nb, N), np.float32)
    zp = np.zeros((nb, N), np.int64)
    for b in range(nb):
        g = wk[b * bs:(b + 1) * bs].astype(np.float64)
        if mode in ("sym", "sym8"):
            qmax = 7 if mode == "sym" else 127
            s = np.maximum(np.abs(g).max(axis=0) / qmax, 1e-12).astype(np.float32)
            z = np.zeros(N, np.int64)
            lo, hi = -qmax, qmax
        else:
            lo_r, hi_r = np.minimum(g.min(axis=0), 0), np.maximum(g.max(axis=0), 0)
            s = np.maximum((hi_r - lo_r) / 15, 1e-12).astype(np.float32)
            z = np.clip(np.rint(0 - lo_r / s.astype(np.float64)), 0, 15).astype(np.int64)
            lo, hi = 0, 15
        qq = np.rint(wk[b * bs:(b + 1) * bs] / s).astype(np.int64) + z
        q[b * bs:(b + 1) * bs] = np.clip(qq, lo, hi)
        sc[b], zp[b] = s, z
    if not block:
        sc, zp = sc[0], zp[0]
    elif kax == 1:
        sc, zp = sc.T, zp.T
    return (q if kax == 0 else q.T), sc, zp


def main():
    f32, qm, modes, block = onnx.load(sys.argv[1]), onnx.load(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
    by_op = dict(m.split("=") for m in modes[1:])
    inits = {t.name: numpy_helper.to_array(t) for t in f32.graph.initializer}
    qinits = {t.name: tensor(t) for t in qm.graph.initializer}
    producers = {o: n for n in qm.graph.node for o in n.output}
    deq = dict(inits)
    opset = [o.version for o in qm.opset_import if o.domain in ("", "ai.onnx")][0]
    if opset < 21:
        sys.exit("the export declares opset %d, not 21" % opset)
    checked = 0
    alphas = {}
    for n in f32.graph.node:
        if n.op_type not in ("MatMul", "Gemm") or n.input[1] not in inits:
            continue
        mode = by_op.get(n.op_type, modes[0])
        trans = [a.i for a in n.attribute if a.name == "transB"]
        kax = 1 if (n.op_type == "Gemm" and trans and trans[0]) else 0
        qn = [m for m in qm.graph.node if m.op_type == n.op_type and list(m.output) == list(n.output)]
        if len(qn) != 1:
            sys.exit("%s: no %s writes %s in the export" % (n.output[0], n.op_type, n.output[0]))
        dq = producers.get(qn[0].input[1])
        if dq is None or dq.op_type != "DequantizeLinear":
            sys.exit("%s: B is not read through a DequantizeLinear" % n.output[0])
        attrs = {a.name: a.i for a in dq.attribute}
        if block and (attrs.get("axis") != kax or attrs.get("block_size") != block):
            sys.exit("%s: DequantizeLinear axis %s block_size %s, expected %d and %d" % (n.output[0], attrs.get("axis"),
                     attrs.get("block_size"), kax, block))
        w = inits[n.input[1]]
        alpha = [a.f for a in n.attribute if a.name == "alpha"]
        if alpha and alpha[0] != 1 and not [a for a in qn[0].attribute if a.name == "alpha"]:
            w = (np.float32(alpha[0]) * w).astype(np.float32)  # QRL's optimizer folds alpha into B first
            alphas[n.output[0]] = 1.0
        q, s, z = rtn(w, kax, mode, block)
        got_q, got_s = qinits[dq.input[0]], qinits[dq.input[1]]
        got_z = qinits[dq.input[2]] if len(dq.input) > 2 and dq.input[2] else np.zeros_like(z)
        want_type = {"sym": 22, "asym": 21, "sym8": 3}[mode]
        qtype = [t.data_type for t in qm.graph.initializer if t.name == dq.input[0]][0]
        if qtype != want_type:
            sys.exit("%s: integers of ONNX type %d, expected %d" % (n.output[0], qtype, want_type))
        for what, a, b in (("integers", got_q, q), ("scales", got_s, s), ("zero points", got_z, z)):
            if a.shape != b.shape or not np.array_equal(a.astype(np.float64), b.astype(np.float64)):
                bad = np.argwhere(a.reshape(b.shape) != b)[0] if a.size == b.size else None
                sys.exit("%s: %s differ from numpy's (shape %s vs %s; first at %s)" % (n.output[0], what, a.shape, b.shape,
                                                                                       bad))
        zk = z if not block else (np.repeat(z, block, axis=kax).take(range(q.shape[kax]), axis=kax))
        sk = s if not block else (np.repeat(s, block, axis=kax).take(range(q.shape[kax]), axis=kax))
        if not block:  # per output channel: axis 1 - kax
            zk, sk = (z[None, :], s[None, :]) if kax == 0 else (z[:, None], s[:, None])
        deq[n.input[1]] = ((q - zk).astype(np.float32) * sk).astype(np.float32)
        checked += 1
    if len(sys.argv) > 6:
        vals = dict(deq)
        vals[f32.graph.input[0].name] = np.load(sys.argv[5]).astype(np.float64)
        for n in f32.graph.node:
            a = {x.name: (x.f if x.type == 1 else x.i) for x in n.attribute}
            x, w = vals[n.input[0]], vals[n.input[1]].astype(np.float64)
            if n.op_type == "MatMul":
                y = x @ w
            elif n.op_type == "Gemm":
                y = alphas.get(n.output[0], a.get("alpha", 1.0)) * (x @ (w.T if a.get("transB", 0) else w))
                if len(n.input) > 2:
                    y = y + a.get("beta", 1.0) * vals[n.input[2]]
            else:
                sys.exit("the oracle runs MatMul and Gemm only, not %s" % n.op_type)
            vals[n.output[0]] = y
        np.save(sys.argv[6], vals[f32.graph.output[0].name].astype(np.float32))
    print("ok %d" % checked)


if __name__ == "__main__":
    main()
