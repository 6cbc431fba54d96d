#!/usr/bin/python3
"""The numpy oracle of tests/unit/test_fake_quant.c: ONNX QuantizeLinear then DequantizeLinear of
float32 values, with one scale, zero point and integer range, in float32 as the ONNX reference
computes them: x / scale divided in float32 (IEEE, correctly rounded), NaN taken as 0, rounded
half to even (numpy.rint), plus the zero point, saturated to [qmin, qmax], then (q - zero) *
scale in float32.

Usage: fake_quant_ref.py X.npy SCALE ZERO QMIN QMAX OUT.npy   (SCALE as a float32 in hex, as C's %a)"""
import sys

import numpy as np


def main():
    x = np.load(sys.argv[1]).astype(np.float32)
    s = np.float32(float.fromhex(sys.argv[2]))
    z, lo, hi = (np.float32(int(a)) for a in sys.argv[3:6])
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        q = x / s
    q = np.where(np.isnan(q), np.float32(0), q).astype(np.float32)
    q = (np.rint(q) + z).astype(np.float32)
    q = np.clip(q, lo, hi).astype(np.float32)
    y = ((q - z) * s).astype(np.float32)
    np.save(sys.argv[6], y)


if __name__ == "__main__":
    main()
