"""Reference ACIQ calibration in numpy, for testing examples/recipes/aciq.qrl
against an implementation that shares nothing with it.

Banner et al. 2019 ("Post-training 4-bit quantization of convolutional
networks for rapid-deployment"), eq. 5: clipping Laplace(b) data at alpha and
quantizing [-alpha, alpha] to M bits has mean squared error about
    2 b^2 exp(-alpha / b) + alpha^2 / (3 4^M);
alpha is where its derivative is 0 (found here by bisection: 2.831 b at 2
bits, 3.897 b at 3, 5.029 b at 4; the paper's table, to two decimals: 2.83,
3.89, 5.03). b is each batch's mean
|x - batch mean|, averaged over all values; the range is mean +- alpha
within the observed [min, max], or [0, min(max, mean + alpha)] with alpha for
M + 1 bits when nothing is negative (the half-range case).

Usage: /usr/bin/python3 tools/ref_aciq.py X.npy BATCH TYPE QPARAMS.json...
TYPE is u8 (asymmetric) or i8sym (i8 symmetric: the range's larger magnitude
on [-127.5, 127.5] steps, zero point 0, never the half range). X feeds
y = x * x (the test model). As QRL's calibration pass, each batch is
fake-quantized with its own qparams before it is squared. Checks every
QPARAMS.json for x and y: scale within 1e-6, zero point equal, and that
both were clipped; prints the expected qparams.
"""
import json
import sys

import numpy as np


def alpha_over_b(bits):
    """The root of d/dalpha [2 exp(-a) + a^2 / (3 4^M)] (b = 1), by bisection."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        a = (lo + hi) / 2
        if -2 * np.exp(-a) + 2 * a / (3 * 4.0**bits) > 0:
            hi = a
        else:
            lo = a
    return (lo + hi) / 2


def stats(batches):
    n = sum(b.size for b in batches)
    mean = sum(b.astype(np.float64).sum() for b in batches) / n
    dev = sum(np.abs(b.astype(np.float64) - b.astype(np.float64).mean()).sum() for b in batches) / n
    return mean, dev, min(float(b.min()) for b in batches), max(float(b.max()) for b in batches)


def qparams(lo, hi, kind):  # stdlib/qparams.qrl's asymmetric() on [0, 255], or symmetric() on i8
    if kind == "i8sym":
        return max(max(abs(lo), abs(hi)) / 127.5, 1e-12), 0
    a, b = min(lo, 0.0), max(hi, 0.0)
    s = max((b - a) / 255.0, 1e-12)
    return s, int(np.clip(np.round(0.0 - a / s), 0, 255))


def clip_range(batches, kind, bits=8):
    mean, b, lo, hi = stats(batches)
    if lo >= 0 and kind != "i8sym":
        return 0.0, min(hi, mean + alpha_over_b(bits + 1) * b)
    a = alpha_over_b(bits) * b
    return max(lo, mean - a), min(hi, mean + a)


def fake(x, s, z, kind):  # QuantizeLinear + DequantizeLinear in float32
    qmin, qmax = (-128, 127) if kind == "i8sym" else (0, 255)
    s, z = np.float32(s), np.float32(z)
    return ((np.clip(np.rint(x / s) + z, qmin, qmax) - z) * s).astype(np.float32)


def main():
    for bits, paper in ((2, 2.83), (3, 3.89), (4, 5.03)):
        assert abs(alpha_over_b(bits) - paper) < 0.01, (bits, alpha_over_b(bits), paper)
    x = np.load(sys.argv[1])
    batch, kind = int(sys.argv[2]), sys.argv[3]
    xs = np.split(x, range(batch, len(x), batch))
    ys = [np.square(fake(b, *qparams(*clip_range([b], kind), kind), kind)) for b in xs]
    want = {}
    for name, batches in (("x", xs), ("y", ys)):
        lo, hi = clip_range(batches, kind)
        _, _, olo, ohi = stats(batches)
        assert lo > olo or hi < ohi, (name, "the data should be clipped", lo, hi, olo, ohi)
        want[name] = qparams(lo, hi, kind)
    for p in sys.argv[4:]:
        got = {a["value"]: a for a in json.load(open(p))["activations"]}
        for v, (s, z) in want.items():
            g = got[v]
            assert abs(g["scale"] - s) <= 1e-6 * s and g["zero_point"] == z, (p, v, g, s, z)
    print("ok", want)


main()
