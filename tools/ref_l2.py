"""Reference for the stdlib's `l2` calibrator (stdlib/calibrators.qrl), for
tests/unit/test_jit.c: the same search written again in numpy, and an
independent check of what it finds, from the raw values rather than the
histogram: the mean squared error of quantizing X (numpy's round half to
even, clamp) with the chosen qparams, with minmax's, and the least of a
brute-force grid of ranges.

Usage: /usr/bin/python3 tools/ref_l2.py X.npy BINS STEPS TYPE [SCALE ZERO [WIDEN]]
TYPE: u8 (asymmetric) or i8s (i8 symmetric). Prints one line:
  scale zero mse_of(SCALE, ZERO) mse_minmax mse_grid_best
(scale, zero: the reference search's, each end then moved WIDEN of the way
back to the observed one; mse_of: of the qparams given, else of the
reference's.)
"""
import math
import sys

import numpy as np


def qtype(name):
    return {"u8": (0, 255, False), "i8s": (-128, 127, True)}[name]


def asymmetric(lo, hi, qmin, qmax):
    a, b = min(lo, 0.0), max(hi, 0.0)
    scale = max((b - a) / (qmax - qmin), 1e-12)
    zero = int(min(max(np.round(qmin - a / scale), qmin), qmax))
    return scale, zero


def symmetric(amax, qmin, qmax):
    scale = max(abs(amax) / ((qmax - qmin) / 2.0), 1e-12)
    return scale, 0 if qmin < 0 else (qmin + qmax + 1) // 2


def histogram(x, bins):
    """QRL's signed histogram: [-2^e, 2^e] with e the least such that max|x| < 2^e
    (or == for a power of two), `bins` equal bins, floor((v - lo) / width)."""
    amax = float(np.max(np.abs(x)))
    m, e = math.frexp(amax)
    if m == 0.5:
        e -= 1
    hi = math.ldexp(1.0, e)
    width = 2 * hi / bins
    idx = np.clip(np.floor((x.astype(np.float64) + hi) / width), 0, bins - 1).astype(np.int64)
    return np.bincount(idx, minlength=bins).astype(np.float64), -hi, width


def spread_error(a, b, n, s, kmin, kmax):
    """n values spread evenly over [a, b), each rounded to k*s, k clamped to [kmin, kmax]."""
    ka = min(max(math.floor(a / s + 0.5), kmin), kmax)
    kb = min(max(math.floor(b / s + 0.5), kmin), kmax)
    e = 0.0
    for k in range(int(ka), int(kb) + 1):
        level = k * s
        lo = a if k <= kmin else max(a, level - s / 2)
        hi = b if k >= kmax else min(b, level + s / 2)
        if hi > lo:
            e += ((hi - level) ** 3 - (lo - level) ** 3) / 3
    return e * n / (b - a)


def hist_error(h, lo_edge, width, xmin, xmax, scale, zero, qmin, qmax):
    first = min(max(int(math.floor((xmin - lo_edge) / width)), 0), len(h) - 1)
    last = min(max(int(math.floor((xmax - lo_edge) / width)), 0), len(h) - 1)
    kmin, kmax = qmin - zero, qmax - zero
    e = 0.0
    for b in range(first, last + 1):
        if h[b] > 0:
            a = max(lo_edge + b * width, xmin)
            z = min(lo_edge + b * width + width, xmax)
            if z > a:
                e += spread_error(a, z, h[b], scale, kmin, kmax)
            else:
                d = a - min(max(np.round(a / scale), kmin), kmax) * scale
                e += h[b] * d * d
    return e


def search(x, bins, steps, tname, widen=0.0):
    qmin, qmax, sym = qtype(tname)
    h, lo_edge, width = histogram(x, bins)
    xmin, xmax = float(x.min()), float(x.max())
    lo0, hi0 = min(xmin, 0.0), max(xmax, 0.0)

    def cand(lo, hi):
        return symmetric(max(-lo, hi), qmin, qmax) if sym else asymmetric(lo, hi, qmin, qmax)

    def best_fraction(make):
        best, best_err, step, start = 1.0, math.inf, 1.0 / steps, 1.0 / steps
        for _ in range(2):
            for k in range(steps + 1):
                f = start + k * step
                if 0 < f <= 1:
                    s, z = make(f)
                    err = hist_error(h, lo_edge, width, xmin, xmax, s, z, qmin, qmax)
                    if err < best_err:
                        best, best_err = f, err
            start, step = best - step, 2 * step / steps
        return best

    if sym:
        reach = max(hi0, -lo0)
        f = best_fraction(lambda f: cand(-f * reach, f * reach))
        return symmetric((f + widen * (1 - f)) * reach, qmin, qmax)
    lo, hi = lo0, hi0
    top_first = hi0 >= -lo0
    for i in range(3):
        if ((i % 2 == 0) == top_first) and hi0 > 0:
            hi = best_fraction(lambda f: cand(lo, f * hi0)) * hi0
        elif ((i % 2 == 0) != top_first) and lo0 < 0:
            lo = -best_fraction(lambda f: cand(-f * -lo0, hi)) * -lo0
    return asymmetric(lo + widen * (lo0 - lo), hi + widen * (hi0 - hi), qmin, qmax)


def mse(x, scale, zero, qmin, qmax):
    q = np.clip(np.round(x / scale) + zero, qmin, qmax)
    return float(np.mean((x - (q - zero) * scale) ** 2))


def main():
    x = np.load(sys.argv[1]).astype(np.float64).ravel()
    bins, steps, tname = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    qmin, qmax, sym = qtype(tname)
    widen = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    scale, zero = search(x, bins, steps, tname, widen)
    given = (float(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (scale, zero)
    lo, hi = min(x.min(), 0.0), max(x.max(), 0.0)
    if sym:
        mm = symmetric(max(-lo, hi), qmin, qmax)
        grid = [symmetric(max(-lo, hi) * k / 200, qmin, qmax) for k in range(1, 201)]
    else:
        mm = asymmetric(lo, hi, qmin, qmax)
        grid = [asymmetric(lo * i / 50, hi * j / 50, qmin, qmax) for i in range(1, 51) for j in range(1, 51)]
    best = min(mse(x, s, z, qmin, qmax) for s, z in grid)
    print("%.17g %d %.17g %.17g %.17g" % (scale, zero, mse(x, *given, qmin, qmax), mse(x, *mm, qmin, qmax), best))


if __name__ == "__main__":
    main()
