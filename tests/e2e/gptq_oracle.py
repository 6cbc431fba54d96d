#!/usr/bin/python3
"""Numpy's GPTQ of a weight-only export (tests/e2e/test_gptq.c): the reference implementation's
algorithm (Frantar et al. 2022, github.com/IST-DASLab/gptq, gptq.py fasterquant), written here in
numpy for layers whose input is the graph input X, so the Hessian is X's own.

Usage: gptq_oracle.py F32.onnx QUANTIZED.onnx X.npy MODE BLOCK DAMP

As fasterquant: H = 2/n X^T X (n rows of X); dead = diag(H) == 0 gets H[d, d] = 1 and W[:, d] = 0;
H[i, i] += DAMP * mean(diag(H)); Hinv = cholesky(cholesky_inverse(cholesky(H)), upper). The
columns are quantized in lazy batches of BLOCK columns (the reference's blocksize, here the group
size: then each group's qparams come from W as every earlier column left it, which is what the
reference computes when blocksize equals groupsize), within a batch
  q = quantize(w[:, i]); err = (w[:, i] - q) / Hinv[i, i]; W1[:, i:] -= err Hinv[i, i:],
and after it W[:, i2:] -= Err1 Hinv[i1:i2, i2:]. BLOCK 0 means per output channel (one group of
all K columns, its qparams from W before any update). The quantizer is QRL's minmax formula
(stdlib/qparams.qrl, written out again here): MODE sym (i4 symmetric narrow: scale max|w| / 7,
codes -7..7, no zero point) or asym (u4: range widened to hold 0, scale (hi - lo) / 15, zero
round(-lo / scale) clamped to 0..15), the scale computed in float64 and rounded to float32;
codes round half to even (torch.round).

The export's integers, scales and zero points of every MatMul/Gemm with an initializer B must be
numpy's; prints "ok N" (N layers) and the layer-wise output error of GPTQ and of round-to-nearest
(||(Wq - W) X^T||^2, which GPTQ minimizes), or the first mismatch (exit 1)."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from int4_rtn_oracle import tensor  # noqa: E402  (an initializer as numpy, INT4/UINT4 unpacked)


def qparams(g, mode):
    """Per row of g: scale (f32 value as f64), zero, qmin, qmax."""
    if mode == "sym":
        s = np.maximum(np.abs(g).max(axis=1) / 7.0, 1e-12)
        return s.astype(np.float32).astype(np.float64), np.zeros(g.shape[0]), -7.0, 7.0
    lo, hi = np.minimum(g.min(axis=1), 0), np.maximum(g.max(axis=1), 0)
    s = np.maximum((hi - lo) / 15.0, 1e-12)
    z = np.clip(np.round(0.0 - lo / s), 0, 15)
    return s.astype(np.float32).astype(np.float64), z, 0.0, 15.0


def gptq(W, X, mode, block, damp):
    """W [N, K] f64 -> codes [N, K], scales and zeros [N, groups]."""
    W = W.copy()
    N, K = W.shape
    H = 2.0 / X.shape[0] * (X.T.astype(np.float64) @ X.astype(np.float64))
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H[np.arange(K), np.arange(K)] += damp * np.mean(np.diag(H))
    L = np.linalg.cholesky(H)
    Hinv = np.linalg.inv(L).T @ np.linalg.inv(L)  # cholesky_inverse
    Hinv = np.linalg.cholesky(Hinv).T  # upper
    bs = block if block else K
    ng = (K + bs - 1) // bs
    Q = np.zeros((N, K))
    S, Z = np.zeros((N, ng)), np.zeros((N, ng))
    for i1 in range(0, K, bs):
        i2 = min(i1 + bs, K)
        s, z, qmin, qmax = qparams(W[:, i1:i2], mode)
        S[:, i1 // bs], Z[:, i1 // bs] = s, z
        W1, Err1, Hinv1 = W[:, i1:i2].copy(), np.zeros((N, i2 - i1)), Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            w, d = W1[:, i], Hinv1[i, i]
            q = np.clip(np.round(w / s) + z, qmin, qmax)
            Q[:, i1 + i] = q
            err = (w - (q - z) * s) / d
            W1[:, i:] -= np.outer(err, Hinv1[i, i:])
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    return Q, S, Z


def rtn_error(W, X, mode, block):
    N, K = W.shape
    bs = block if block else K
    Wq = np.zeros_like(W)
    for i1 in range(0, K, bs):
        g = W[:, i1:i1 + bs]
        s, z, qmin, qmax = qparams(g, mode)
        Wq[:, i1:i1 + bs] = (np.clip(np.round(g / s[:, None]) + z[:, None], qmin, qmax) - z[:, None]) * s[:, None]
    return ((Wq - W) @ X.T.astype(np.float64)) ** 2


def main():
    f32, qm, X = onnx.load(sys.argv[1]), onnx.load(sys.argv[2]), np.load(sys.argv[3])
    mode, block, damp = sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
    inits = {t.name: numpy_helper.to_array(t) for t in f32.graph.initializer}
    qinits = {t.name: tensor(t) for t in qm.graph.initializer}
    producers = {o: n for n in qm.graph.node for o in n.output}
    checked = 0
    for n in f32.graph.node:
        if n.op_type not in ("MatMul", "Gemm") or n.input[1] not in inits:
            continue
        trans = [a.i for a in n.attribute if a.name == "transB"]
        kax = 1 if (n.op_type == "Gemm" and trans and trans[0]) else 0
        W = inits[n.input[1]].astype(np.float64)
        Wn = W.T if kax == 0 else W  # [N, K]
        Q, S, Z = gptq(Wn, X, mode, block, damp)
        qn = [m for m in qm.graph.node if list(m.output) == list(n.output)][0]
        dq = producers[qn.input[1]]
        got_q = qinits[dq.input[0]].astype(np.float64)
        got_s = qinits[dq.input[1]].astype(np.float64)
        got_z = qinits[dq.input[2]].astype(np.float64) if len(dq.input) > 2 and dq.input[2] else np.zeros_like(got_s)
        if kax == 0:  # the export's layout: [K, N], blocks [groups, N]
            got_q, got_s, got_z = got_q.T, got_s.T, got_z.T
        if not block:
            got_s, got_z = got_s.reshape(-1, 1), got_z.reshape(-1, 1)
        for what, a, b in (("integers", got_q, Q), ("scales", got_s, S), ("zero points", got_z, Z)):
            if a.shape != b.shape:
                sys.exit("%s: %s of shape %s, numpy's %s" % (n.output[0], what, a.shape, b.shape))
            bad = np.argwhere(a != b)
            if bad.size:
                sys.exit("%s: %d %s differ from numpy's GPTQ; first at %s: %g vs %g" % (n.output[0], len(bad), what,
                         tuple(bad[0]), a[tuple(bad[0])], b[tuple(bad[0])]))
        K = Q.shape[1]
        Wq = (Q - np.repeat(Z, block or K, axis=1)[:, :K]) * np.repeat(S, block or K, axis=1)[:, :K]
        err_g = ((Wq - Wn) @ X.T.astype(np.float64)) ** 2
        print("%s: layer output error GPTQ %.4g, round-to-nearest %.4g" % (n.output[0], err_g.sum(),
                                                                          rtn_error(Wn, X, mode, block).sum()))
        checked += 1
    print("ok %d" % checked)


if __name__ == "__main__":
    main()
