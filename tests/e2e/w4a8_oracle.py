#!/usr/bin/python3
"""numpy's oracle for W4A8 exports (tests/e2e/test_w4a8.c): per-channel int4 weights, 8-bit
activations, independent of QRL and of ONNX Runtime.

Usage: /usr/bin/python3 tests/e2e/w4a8_oracle.py F32.onnx QUANTIZED.onnx X.npy OUTDIR

1. The weights. For every Conv, Gemm and MatMul of F32.onnx whose weight is an initializer,
   QUANTIZED.onnx must read it through a DequantizeLinear of ONNX INT4 (type 22) on the output
   channel's axis (Conv and Gemm transB=1: 0; MatMul and Gemm transB=0: 1) whose integers, scales
   and zero points are numpy's per-channel RTN, bit for bit: scale = max|w| / 7 over the channel
   (float64, then float32; at least 1e-12), q = clip(rint(w / scale), -7, 7) with w / scale in
   float32 (rint: half to even), zero point 0. The nibbles are unpacked here (low nibble first,
   sign-extended, tests/e2e/int4_rtn_oracle.py). The model must declare opset 21.
2. The integer reference. The export's graph run on integers: QuantizeLinear of X (round half to
   even, saturate to the zero point's type); a Conv, Gemm or MatMul reading two DequantizeLinears
   sums (x - x_zero) * (w - w_zero) over the integers exactly (int64), adds the bias's int32
   integers, and where a QuantizeLinear takes its output (through a Relu: floor at y's zero point)
   requantizes as ONNX's QLinearConv does in float32: the multiplier x_scale * w_scale / y_scale,
   y = sat(rint(float32(acc + bias) * m) + y_zero). Flatten moves integers; a Relu that no product
   precedes is max(q, zero) on its input's integers. Every output is
   written as OUTDIR/<name>.npy, dequantized ((q - zero) * scale in float32), with its step
   OUTDIR/<name>.scale.
With --int8 W1,W2,... (a recipe's `weight for`): those weights (initializer names) must instead be
ONNX INT8 (type 3) with numpy's per-channel RTN of i8 symmetric narrow: scale = max|w| / 127,
q = clip(rint(w / scale), -127, 127).
Prints "ok N" (N weights checked), or the first mismatch (exit 1)."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from a16_oracle import attr, conv  # noqa: E402 (the oracles' attributes and Conv over taps)
from int4_rtn_oracle import tensor  # noqa: E402 (INT4/UINT4 initializers unpacked by numpy)

RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


def out_axis(n):
    if n.op_type == "Conv" or (n.op_type == "Gemm" and attr(n, "transB", 0)):
        return 0
    return 1


def rtn4(wc):
    """Per-channel RTN scales of i4 symmetric narrow for the channels' rows of wc (float32)."""
    return np.maximum(np.abs(wc.astype(np.float64)).max(axis=1) / 7, 1e-12).astype(np.float32)


def per_channel(w, axis, scale_fn, qmin, qmax):
    """w quantized per channel along axis with scale_fn's scales: q (int64), scale (float32)."""
    wc = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    s = scale_fn(wc)
    q = np.clip(np.rint(wc / s[:, None]), qmin, qmax).astype(np.int64)  # float32 / float32
    q = np.moveaxis(q.reshape((w.shape[axis],) + tuple(np.delete(w.shape, axis))), 0, axis)
    return q, s


def rtn8(wc):
    """Per-channel RTN scales of i8 symmetric narrow."""
    return np.maximum(np.abs(wc.astype(np.float64)).max(axis=1) / 127, 1e-12).astype(np.float32)


def check_weights(f32, qm, scale_fn=rtn4, onnx_type=22, qmin=-7, qmax=7, min_opset=21, int8=()):
    """Every Conv, Gemm and MatMul weight of f32 read in qm through a DequantizeLinear of ONNX type
    onnx_type whose integers, scales and zero points (0) are numpy's per channel with scale_fn's
    scales (the weights named in int8: INT8 by rtn8); returns {weight name: (its integers, its
    output channels' axis)}."""
    inits = {t.name: numpy_helper.to_array(t) for t in f32.graph.initializer}
    qinit = {t.name: t for t in qm.graph.initializer}
    producers = {o: n for n in qm.graph.node for o in n.output}
    opset = [o.version for o in qm.opset_import if o.domain in ("", "ai.onnx")][0]
    if opset < min_opset:
        sys.exit("the export declares opset %d, not %d" % (opset, min_opset))
    checked = {}
    for n in f32.graph.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or n.input[1] not in inits:
            continue
        qn = [m for m in qm.graph.node if m.op_type == n.op_type and m.input[1] == n.input[1]]  # the DQ keeps w's name
        if len(qn) != 1:
            sys.exit("%s: no %s reads %s in the export" % (n.output[0], n.op_type, n.input[1]))
        dq = producers.get(qn[0].input[1])
        if dq is None or dq.op_type != "DequantizeLinear":
            sys.exit("%s: its weight is not read through a DequantizeLinear" % n.output[0])
        axis = out_axis(n)
        if attr(dq, "axis", 1) != axis:
            sys.exit("%s: DequantizeLinear axis %s, expected %d" % (n.output[0], attr(dq, "axis", 1), axis))
        t = qinit[dq.input[0]]
        want = (rtn8, 3, -127, 127) if n.input[1] in int8 else (scale_fn, onnx_type, qmin, qmax)
        if t.data_type != want[1]:
            sys.exit("%s: integers of ONNX type %d, expected %d" % (n.output[0], t.data_type, want[1]))
        q, s = per_channel(inits[n.input[1]], axis, want[0], want[2], want[3])
        got_q, got_s = tensor(t), tensor(qinit[dq.input[1]])
        got_z = tensor(qinit[dq.input[2]]) if len(dq.input) > 2 and dq.input[2] else np.zeros_like(s)
        if len(dq.input) > 2 and dq.input[2] and qinit[dq.input[2]].data_type != want[1]:
            sys.exit("%s: zero points of ONNX type %d, expected %d" % (n.output[0], qinit[dq.input[2]].data_type,
                                                                      want[1]))
        for what, a, b in (("integers", got_q, q), ("scales", got_s, s), ("zero points", got_z, np.zeros_like(s))):
            if a.shape != b.shape or not np.array_equal(a.astype(np.float64), b.astype(np.float64)):
                bad = np.argwhere(a != b)[0] if a.shape == b.shape else None
                sys.exit("%s: %s differ from numpy's (shape %s vs %s; first at %s)" % (n.output[0], what, a.shape,
                                                                                       b.shape, bad))
        checked[n.input[1]] = (q, axis)
    return checked


def per_axis(p, ndim, axis):
    p = np.asarray(p)
    if p.ndim == 0:
        return p
    shape = [1] * ndim
    shape[axis % ndim] = p.size
    return p.reshape(shape)


def conv_int(x, w, n):
    """sum over taps of x * w on int64 integers (x already less its zero point, so pads are 0):
    a16_oracle's Conv, exact in float64 for these sums."""
    return conv(x, w, None, n).astype(np.int64)


def run_integers(qm, x, outdir):
    init = {t.name: tensor(t) for t in qm.graph.initializer}
    ints = {}    # a quantized tensor: (integers int64, scale float32 per axis, zero int64 per axis, dtype)
    acc = {}     # a product's output: (int64 accumulator less nothing, its real scale per channel, bias ints, relu)
    deq = {}     # a DequantizeLinear's output name -> the quantized tensor it reads
    for n in qm.graph.node:
        op = n.op_type
        if op == "QuantizeLinear":
            s, z = init[n.input[1]], init[n.input[2]]
            lo, hi = RANGES[z.dtype]
            if n.input[0] == qm.graph.input[0].name:
                v = np.clip(np.rint(x / np.float32(s)) + int(z), lo, hi).astype(np.int64)
            elif n.input[0] in acc:
                a, xs, ws, b, relu, ch_axis = acc[n.input[0]]
                m = per_axis((np.float32(xs) * ws.astype(np.float32)) / np.float32(s), a.ndim, ch_axis)
                r = np.rint((a + per_axis(b, a.ndim, ch_axis)).astype(np.float32) * m) + np.float32(z)
                if relu:
                    r = np.maximum(r, np.float32(z))
                v = np.clip(r, lo, hi).astype(np.int64)
            elif n.input[0] in ints:  # an affine op's integers (Flatten, Relu): on the same scale, or no oracle
                v, s0, z0, _ = ints[n.input[0]]
                if s0 != np.float32(s) or z0 != int(z):
                    sys.exit("w4a8_oracle: %s is requantized, which is not modelled" % n.input[0])
            else:
                sys.exit("w4a8_oracle: QuantizeLinear of %s, which is no product" % n.input[0])
            ints[n.output[0]] = (v, np.float32(s), int(z), z.dtype)
        elif op == "DequantizeLinear":
            src = n.input[0]
            if src in ints:
                deq[n.output[0]] = ints[src]
            else:  # a constant: weight (per axis) or int32 bias
                q = init[src]
                s = init[n.input[1]]
                z = init[n.input[2]] if len(n.input) > 2 and n.input[2] else np.zeros_like(s, np.int64)
                deq[n.output[0]] = (q.astype(np.int64) - per_axis(z, q.ndim, attr(n, "axis", 1)).astype(np.int64), s,
                                    0, None)
        elif op in ("Conv", "Gemm", "MatMul"):
            xq, xs, xz, _ = deq[n.input[0]]
            wq, ws, _, _ = deq[n.input[1]]
            xi = xq - xz
            if op == "Conv":
                a, ch = conv_int(xi, wq, n), 1
            else:
                w = wq.T if (op == "Gemm" and attr(n, "transB", 0)) else wq
                a, ch = xi @ w, -1
            b = deq[n.input[2]][0] if len(n.input) > 2 and n.input[2] else np.zeros(1, np.int64)
            acc[n.output[0]] = (a, xs, np.asarray(ws, np.float32), b, False, ch)
        elif op == "Relu" and n.input[0] in acc:  # fused into the product's requantization
            a = acc[n.input[0]]
            acc[n.output[0]] = a[:4] + (True, a[5])
        elif op == "Relu":  # on integers: real 0 is the zero point
            q, s, z, t = deq[n.input[0]]
            ints[n.output[0]] = (np.maximum(q, z), s, z, t)
        elif op == "Flatten":
            q, s, z, t = ints[n.input[0]] if n.input[0] in ints else deq[n.input[0]]
            ints[n.output[0]] = (q.reshape(q.shape[0], -1), s, z, t)
            deq[n.output[0]] = ints[n.output[0]]
        else:
            sys.exit("w4a8_oracle: op %s is not modelled" % op)
    os.makedirs(outdir, exist_ok=True)
    for o in qm.graph.output:
        src = [n for n in qm.graph.node if o.name in n.output][0]
        q, s, z, _ = deq[o.name] if src.op_type == "DequantizeLinear" else ints[o.name]
        np.save(os.path.join(outdir, o.name + ".npy"), ((q - z).astype(np.float32) * np.float32(s)).astype(np.float32))
        with open(os.path.join(outdir, o.name + ".scale"), "w") as f:
            f.write("%.17g\n" % float(s))


def main():
    args = sys.argv[1:]
    int8 = ()
    if "--int8" in args:
        k = args.index("--int8")
        int8 = tuple(args[k + 1].split(","))
        del args[k:k + 2]
    f32, qm = onnx.load(args[0]), onnx.load(args[1])
    checked = check_weights(f32, qm, int8=int8)
    run_integers(qm, np.load(args[2]).astype(np.float32), args[3])
    print("ok %d" % len(checked))


if __name__ == "__main__":
    main()
