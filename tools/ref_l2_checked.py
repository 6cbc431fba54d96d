"""Reference for the stdlib's `l2_checked` calibrator (stdlib/calibrators.qrl),
for tests/unit/test_jit.c: the rule written again in numpy on tools/ref_l2.py's
histogram and search. The samples (X's first axis) split by index into the
even and the odd half; each half's l2 range (widened) and its minmax range are
judged by their squared error on the other half's histogram; l2's range of
all the samples is kept when it has at most (1 - MARGIN) times minmax's error
on both halves, else minmax's range of all. Independently of the histograms,
the same four errors from the raw values (numpy's rounding and clamp) must
decide the same way, which the test's data is made for.

Usage: /usr/bin/python3 tools/ref_l2_checked.py X.npy BINS STEPS TYPE WIDEN MARGIN
TYPE: u8 or i8s (tools/ref_l2.py). Prints one line:
  scale zero chose_l2 raw_chose_l2 l2_scale minmax_scale
(chose_l2: 1 when the rule keeps l2's range; raw_chose_l2: the same rule on
the raw values' errors; l2_scale, minmax_scale: the two candidates of all.)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_l2 import asymmetric, hist_error, histogram, mse, qtype, search, symmetric  # noqa: E402


def minmax(x, qmin, qmax, sym):
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    return symmetric(max(-lo, hi), qmin, qmax) if sym else asymmetric(lo, hi, qmin, qmax)


def main():
    x = np.load(sys.argv[1]).astype(np.float64)
    bins, steps, tname = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    widen, margin = float(sys.argv[5]), float(sys.argv[6])
    qmin, qmax, sym = qtype(tname)
    halves = [x[0::2].ravel(), x[1::2].ravel()]
    fits = [(search(hv, bins, steps, tname, widen), minmax(hv, qmin, qmax, sym)) for hv in halves]
    keep = keep_raw = True
    for fit, judge in ((0, 1), (1, 0)):
        j = halves[judge]
        h, lo_edge, width = histogram(j, bins)
        err = [hist_error(h, lo_edge, width, float(j.min()), float(j.max()), s, z, qmin, qmax) for s, z in fits[fit]]
        raw = [mse(j, s, z, qmin, qmax) for s, z in fits[fit]]
        keep = keep and err[0] <= (1 - margin) * err[1]
        keep_raw = keep_raw and raw[0] <= (1 - margin) * raw[1]
    l2 = search(x.ravel(), bins, steps, tname, widen)
    mm = minmax(x.ravel(), qmin, qmax, sym)
    scale, zero = l2 if keep else mm
    print("%.17g %d %d %d %.17g %.17g" % (scale, zero, keep, keep_raw, l2[0], mm[0]))


if __name__ == "__main__":
    main()
