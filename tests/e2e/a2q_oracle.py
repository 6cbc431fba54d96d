#!/usr/bin/python3
"""numpy's oracle for stdlib/accumulator.qrl's a2q (A2Q's l1 bound per output channel, after
training): tests/e2e/test_accwidth.c.

Usage: /usr/bin/python3 tests/e2e/a2q_oracle.py F32.onnx QUANTIZED.onnx ACC_BITS X_MAX

For every Conv, Gemm and MatMul of F32.onnx whose weight is an initializer, QUANTIZED.onnx must
read it through an int8 DequantizeLinear per output channel (zero point 0) whose scale is, bit for
bit, numpy's float32 of
  max(own, bound),  own = max|w| / 127.5 (i8 symmetric: half of 255 levels, at least 1e-12)
  bound = min(2 l1 / B, l1 / (B - n / 2) when B > n / 2) * (1 + 1e-6)
with l1 = sum |w|, n the channel's count and B = (2^(ACC_BITS - 1) - 1) / X_MAX, computed in
float64, and whose integers are clip(rint(w / scale), -128, 127) (w / scale in float32). Then
each channel's sum |q| * X_MAX must be at most 2^(ACC_BITS - 1) - 1: no partial sum of
(x - x_zero) q with |x - x_zero| <= X_MAX can leave the accumulator. Prints "ok N" (weights
checked) and the largest sum |q| * X_MAX, or the first mismatch (exit 1)."""
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from w4a8_oracle import check_weights  # noqa: E402 (per-channel weights checked bit for bit)


def main():
    f32, qm = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
    bits, x_max = int(sys.argv[3]), float(sys.argv[4])
    limit = 2.0 ** (bits - 1) - 1
    bound = limit / x_max

    def scales(wc):
        a = np.abs(wc.astype(np.float64))
        own = np.maximum(a.max(axis=1) / 127.5, 1e-12)
        l1, n = a.sum(axis=1), wc.shape[1]
        s = 2 * l1 / bound
        if bound > n / 2:
            s = np.minimum(s, l1 / (bound - n / 2))
        return np.maximum(own, s * (1 + 1e-6)).astype(np.float32)

    qs = check_weights(f32, qm, scales, onnx_type=3, qmin=-128, qmax=127, min_opset=13)
    worst = 0.0
    for name, (q, axis) in qs.items():
        l1 = np.abs(np.moveaxis(q, axis, 0)).reshape(q.shape[axis], -1).sum(axis=1)
        worst = max(worst, float(l1.max()) * x_max)
        if l1.max() * x_max > limit:
            sys.exit("%s: a channel's sum |q| * x_max is %g, past %g" % (name, l1.max() * x_max, limit))
    print("ok %d worst %g of %g" % (len(qs), worst, limit))


if __name__ == "__main__":
    main()
