#!/usr/bin/python3
"""The float64 oracle of tests/unit/test_f32_rows.c: Softmax, LogSoftmax and LayerNormalization on
the last axis, Erf, Tanh, GELU (both forms), MatMul, Gemm, Where, Transpose and Slice, as numpy computes them from their ONNX
definitions (math.erf for Erf).

Usage: f32_rows_ref.py softmax|logsoftmax X.npy OUT.npy
       f32_rows_ref.py layernorm X.npy SCALE.npy BIAS.npy EPS OUT.npy MEAN.npy INVSTD.npy
       f32_rows_ref.py erf|tanh X.npy OUT.npy
       f32_rows_ref.py gelu|gelu_tanh X.npy OUT.npy   (0.5 x (1 + erf(x / sqrt 2)), the tanh form)
       f32_rows_ref.py matmul A.npy B.npy OUT.npy BOUND.npy
       f32_rows_ref.py matmul_t X.npy PX Y.npy PY PO OUT.npy BOUND.npy [DIV]   (transpose(transpose(X,
           PX) / DIV @ transpose(Y, PY), PO), a perm a comma list: the attention's Transposes around
           its MatMul; DIV 1 when absent)
       f32_rows_ref.py gemm A.npy B.npy C.npy ALPHA BETA TRANSB OUT.npy BOUND.npy
       f32_rows_ref.py where C.npy X.npy Y.npy OUT.npy
       f32_rows_ref.py transpose X.npy OUT.npy P0,P1,...
       f32_rows_ref.py slice X.npy OUT.npy STARTS ENDS AXES STEPS   (comma lists)
Outputs are float64 (the test rounds nothing: it measures its f32 results against them);
matmul's BOUND is K * 2^-23 * sum |a||b| per output, an f32 dot product's error bound."""
import math
import sys

import numpy as np


def softmax(x, log):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = x - x.max(axis=-1, keepdims=True)  # all -inf or +inf rows: NaN, as ONNX's reference
        s = np.exp(d).sum(axis=-1, keepdims=True)
        return d - np.log(s) if log else np.exp(d) / s


def main(a):
    op = a[0]
    if op in ("softmax", "logsoftmax"):
        np.save(a[2], softmax(np.load(a[1]), op == "logsoftmax"))
    elif op == "layernorm":
        x = np.load(a[1]).astype(np.float64)
        sc, b, eps = np.load(a[2]).astype(np.float64), np.load(a[3]).astype(np.float64), float(a[4])
        mean = x.mean(axis=-1, keepdims=True)
        inv = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
        np.save(a[5], (x - mean) * inv * sc + b)
        np.save(a[6], mean)
        np.save(a[7], inv)
    elif op == "erf":
        x = np.load(a[1]).astype(np.float64)
        np.save(a[2], np.vectorize(math.erf, otypes=[np.float64])(x))
    elif op == "tanh":
        np.save(a[2], np.tanh(np.load(a[1]).astype(np.float64)))
    elif op in ("gelu", "gelu_tanh"):
        x = np.load(a[1]).astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # -inf: -inf * 0 = NaN, as the f32 nodes
            if op == "gelu":
                t = np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2.0))
            else:
                t = np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))
            np.save(a[2], 0.5 * x * (1.0 + t))
    elif op == "matmul":
        A, B = np.load(a[1]).astype(np.float64), np.load(a[2]).astype(np.float64)
        np.save(a[3], np.matmul(A, B))
        np.save(a[4], A.shape[-1] * 2.0 ** -23 * np.matmul(np.abs(A), np.abs(B)))
    elif op == "matmul_t":
        perm = lambda v: [int(p) for p in v.split(",")]
        A = np.load(a[1]).astype(np.float64).transpose(perm(a[2])) / (float(a[8]) if len(a) > 8 else 1.0)
        B = np.load(a[3]).astype(np.float64).transpose(perm(a[4]))
        po = perm(a[5])
        with np.errstate(invalid="ignore", over="ignore"):
            np.save(a[6], np.ascontiguousarray(np.matmul(A, B).transpose(po)))
            bound = A.shape[-1] * 2.0 ** -23 * np.matmul(np.abs(A), np.abs(B))
        np.save(a[7], np.ascontiguousarray(bound.transpose(po)))
    elif op == "gemm":
        A, B, Cm = (np.load(f).astype(np.float64) for f in a[1:4])
        alpha, beta = float(a[4]), float(a[5])
        B = B.T if int(a[6]) else B
        np.save(a[7], alpha * (A @ B) + beta * Cm)
        np.save(a[8], A.shape[-1] * 2.0 ** -23 * abs(alpha) * (np.abs(A) @ np.abs(B)) + 2.0 ** -23 * np.abs(beta * Cm))
    elif op == "where":
        c, x, y = (np.load(f) for f in a[1:4])
        np.save(a[4], np.where(c, x, y).astype(np.float64))
    elif op == "transpose":
        x = np.load(a[1]).astype(np.float64)
        np.save(a[2], np.ascontiguousarray(x.transpose([int(v) for v in a[3].split(",")])))
    elif op == "slice":
        x = np.load(a[1]).astype(np.float64)
        starts, ends, axes, steps = ([int(v) for v in l.split(",")] for l in a[3:7])
        idx = [slice(None)] * x.ndim
        for s_, e_, ax, st in zip(starts, ends, axes, steps):
            idx[ax] = slice(s_, e_, st)
        np.save(a[2], np.ascontiguousarray(x[tuple(idx)]))
    else:
        sys.exit("unknown op " + op)


if __name__ == "__main__":
    main(sys.argv[1:])
