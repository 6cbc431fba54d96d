"""Reference entropy (KL) calibration, as NVIDIA's pytorch-quantization
computes it (calib/histogram.py, _compute_amax_entropy), for testing the
stdlib's `entropy` calibrator against an independent implementation.

Usage: /usr/bin/python3 tools/ref_entropy.py X.npy BINS LEVELS
Histograms |X| over [0, 2^ceil(log2(max|X|))] in BINS bins (QRL's histogram
range) and prints the chosen threshold (amax).
"""
import sys
from collections import Counter

import numpy as np


def kl(p, q):
    p = p / p.sum()
    q = q / q.sum()
    m = p > 0
    if np.any(q[m] == 0):
        return np.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def amax_entropy(bins, edges, nbins, start):
    bins = bins.astype(np.float64).copy()
    bins[0] = bins[1]
    divergences, arguments = [], []
    for i in range(start, len(bins) + 1):
        space = np.linspace(0, i, num=nbins + 1)
        digitized = np.digitize(range(i), space) - 1
        digitized[bins[:i] == 0] = -1
        counts = np.zeros(nbins)
        for idx, d in enumerate(digitized):
            if d != -1:
                counts[d] += bins[idx]
        for key, val in Counter(digitized).items():
            if key != -1:
                counts[key] /= val
        new = np.zeros(i)
        for idx, d in enumerate(digitized):
            if d != -1:
                new[idx] = counts[d]
        ref = bins[:i].copy()
        ref[-1] += bins[i:].sum()
        divergences.append(kl(ref, new))
        arguments.append(i)
    divergences = np.array(divergences)
    last = len(divergences) - 1 - int(np.argmin(divergences[::-1]))
    return float(edges[arguments[last]])


def main():
    x = np.abs(np.load(sys.argv[1]).astype(np.float64).ravel())
    nbins, levels = int(sys.argv[2]), int(sys.argv[3])
    hi = 2.0 ** np.ceil(np.log2(x.max()))
    bins, edges = np.histogram(x, bins=nbins, range=(0, hi))
    print(repr(amax_entropy(bins, edges, levels, levels)))


if __name__ == "__main__":
    main()
