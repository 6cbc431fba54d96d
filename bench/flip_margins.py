#!/usr/bin/python3
"""How well a Gaussian noise model fitted on the held-out samples predicts the
argmax flips of a model whose output is probabilities along the last axis
(QRL-J, stop 59: PP-OCRv4 rec's misses are a few rows whose argmax flips).

For every row of the output (a time step of a text line), with f32's top two
probabilities p1 > p2 and d = log p1 - log p2, the export moves d by delta.
sigma is delta's standard deviation over the held-out rows (VAL.npy); a row
flips with probability Phi(-d / sigma) under that model. Per set it prints the
pooled output SQNR ONNX Runtime measures, the SQNR the model predicts (the
held-out rows' non-flip error ratio plus each row's expected flip error,
2 (p1 - p2)^2 Phi(-d / sigma)), and the flips seen and expected, all and
harmful ones (p1 - p2 > 0.3), and how many samples' greedy CTC text (argmax per
row, repeats merged, class 0 the blank: PP-OCR rec's decoder) differs from
f32's. Measures; never pass/fail.

Usage: /usr/bin/python3 bench/flip_margins.py F32.onnx EXPORT.onnx VAL.npy SET.npy...
  e.g. VAL.npy = the calibration file's held-out quarter, x[3::4]
"""
import os
import sys
import tempfile
from math import erf, sqrt

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from unseen_spread import run  # noqa: E402


def ctc_text(p):
    best = p.argmax(-1)
    return tuple(int(c) for k, c in enumerate(best) if c != 0 and (k == 0 or c != best[k - 1]))


def rows(ref, test, x):
    with tempfile.TemporaryDirectory() as t:
        (r,), _ = run(ref, x, os.path.join(t, "r"))
        (u,), _ = run(test, x, os.path.join(t, "q"))
    c = r.shape[-1]
    texts = sum(ctc_text(a) != ctc_text(b) for a, b in zip(r.reshape(len(r), -1, c), u.reshape(len(u), -1, c)))
    r = r.reshape(-1, r.shape[-1])
    u = u.reshape(-1, u.shape[-1])
    top = np.argsort(-r, 1)[:, :2]
    i = np.arange(len(r))
    p1, p2 = r[i, top[:, 0]], r[i, top[:, 1]]
    d = np.log(p1 + 1e-12) - np.log(p2 + 1e-12)
    delta = np.log(u[i, top[:, 0]] + 1e-12) - np.log(u[i, top[:, 1]] + 1e-12) - d
    return p1, p2, d, delta, u.argmax(1) != r.argmax(1), ((r - u) ** 2).sum(1), (r ** 2).sum(1), texts


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    ref, test, val = sys.argv[1:4]
    phi = np.vectorize(lambda z: 0.5 * (1 + erf(z / sqrt(2))))
    _, _, _, delta, flip, err, sig, _ = rows(ref, test, val)
    sigma = delta.std()
    base = err[~flip].sum() / sig[~flip].sum()
    print("sigma %.4f on %d held-out rows (%d flips); their non-flip SQNR %.1f dB" % (sigma, len(delta), flip.sum(),
                                                                                       10 * np.log10(1 / base)))
    for x in [val] + sys.argv[4:]:
        p1, p2, d, delta, flip, err, sig, texts = rows(ref, test, x)
        pf = 1 - phi(d / sigma)
        want = base * sig.sum() + (pf * 2 * (p1 - p2) ** 2).sum()
        harm = (p1 - p2) > 0.3
        print("%s: measured %.1f dB, predicted %.1f; flips %d (expected %.1f), harmful %d (expected %.2f); noise spread %.3f;"
              " CTC text differs on %d samples"
              % (x, 10 * np.log10(sig.sum() / err.sum()), 10 * np.log10(sig.sum() / want), flip.sum(), pf.sum(),
                 (flip & harm).sum(), (pf * harm).sum(), delta.std(), texts))


if __name__ == "__main__":
    main()
