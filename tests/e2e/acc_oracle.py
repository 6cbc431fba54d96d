#!/usr/bin/python3
"""numpy oracle for narrow accumulators (tests/e2e/test_accwidth.c): the integer graph QRL should
run for a QDQ export of one Conv, one Gemm or one MatMul (+ Add bias), every partial sum of the accumulator
kept to BITS bits, wrapping or saturating, summed k ascending as docs/quantizer.md defines it
(Conv: input channel of the group, then the kernel position row-major; Gemm, MatMul: K), then the
stdlib's qlinear requantization in f32 (round half to even).

Usage: acc_oracle.py MODEL.q.onnx X.npy BITS wrap|saturate OUT.npy
Prints "sums S overflows O"; writes the dequantized output to OUT.npy.
Written from the ONNX definitions of Conv and MatMul, not from QRL's code.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def step(acc, p, bits, sat):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    s = acc + p
    if lo <= s <= hi:
        return s, 0
    if sat:
        return (hi if s > hi else lo), 1
    return ((s - lo) % (1 << bits)) + lo, 1


def main():
    path, xpath, bits, mode, out = sys.argv[1:6]
    bits, sat = int(bits), mode == "saturate"
    m = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    nodes = m.graph.node
    prod = {o: n for n in nodes for o in n.output}

    def dq(name):  # a DequantizeLinear's integer input, scale and zero point
        n = prod[name]
        assert n.op_type == "DequantizeLinear", name
        return init[n.input[0]].astype(np.int64), init[n.input[1]], init[n.input[2]].astype(np.int64)

    core = [n for n in nodes if n.op_type in ("Conv", "MatMul", "Gemm")][0]
    sx, zx = init["X_scale"], int(init["X_zero_point"])
    sy, zy = init["Y_scale"], int(init["Y_zero_point"])
    wq, sw, zw = dq(core.input[1])
    if core.op_type == "Gemm":  # Y = X W^T + C (transB) or X W + C; alpha and beta are 1
        at = {a.name: onnx.helper.get_attribute_value(a) for a in core.attribute}
        assert at.get("transA", 0) == 0 and at.get("alpha", 1.0) == 1.0 and at.get("beta", 1.0) == 1.0
        if at.get("transB", 0):
            wq = wq.T
        bq = dq(core.input[2])[0]
    elif core.op_type == "Conv":
        bq = dq(core.input[2])[0] if len(core.input) > 2 else np.zeros(wq.shape[0], np.int64)
    else:
        add = [n for n in nodes if n.op_type == "Add"][0]
        bq = dq(add.input[1])[0]
    x = np.load(xpath).astype(np.float32)
    # QuantizeLinear in f32: x / scale rounded half to even, plus the zero point, saturated to u8
    xq = np.clip(np.rint(x / np.float32(sx)).astype(np.int64) + zx, 0, 255)
    xc = xq - zx
    sums = over = 0
    if core.op_type == "Conv":
        at = {a.name: onnx.helper.get_attribute_value(a) for a in core.attribute}
        group = at.get("group", 1)
        st, dl, pads = at["strides"], at["dilations"], at["pads"]
        N, C, H, W = xc.shape
        M, Cg, KH, KW = wq.shape
        OH = (H + pads[0] + pads[2] - dl[0] * (KH - 1) - 1) // st[0] + 1
        OW = (W + pads[1] + pads[3] - dl[1] * (KW - 1) - 1) // st[1] + 1
        wc = wq - zw.reshape(-1, 1, 1, 1)
        acc = np.zeros((N, M, OH, OW), np.int64)
        for n in range(N):
            for mo in range(M):
                g = mo // (M // group)
                for oh in range(OH):
                    for ow in range(OW):
                        a = 0
                        for c in range(Cg):
                            for kh in range(KH):
                                for kw in range(KW):
                                    ih, iw = oh * st[0] - pads[0] + kh * dl[0], ow * st[1] - pads[1] + kw * dl[1]
                                    v = xc[n, g * Cg + c, ih, iw] if 0 <= ih < H and 0 <= iw < W else 0
                                    a, o = step(a, int(v) * int(wc[mo, c, kh, kw]), bits, sat)
                                    over += o
                                    sums += 1
                        acc[n, mo, oh, ow] = a
        ch_axis = 1
    else:
        K, Nn = wq.shape
        wc = wq - zw.reshape(1, -1)
        lead = xc.shape[:-1]
        xr = xc.reshape(-1, K)
        acc = np.zeros((xr.shape[0], Nn), np.int64)
        for r in range(xr.shape[0]):
            for j in range(Nn):
                a = 0
                for k in range(K):
                    a, o = step(a, int(xr[r, k]) * int(wc[k, j]), bits, sat)
                    over += o
                    sums += 1
                acc[r, j] = a
        acc = acc.reshape(*lead, Nn)
        ch_axis = acc.ndim - 1
    # the stdlib's qlinear: m = x_scale * w_scale[c] / y_scale, round_even(f32(acc + bias) * m) + y_zero
    shape = [1] * acc.ndim
    shape[ch_axis] = -1
    mult = ((np.float32(sx) * sw.astype(np.float32)) / np.float32(sy)).astype(np.float32).reshape(shape)
    t = (acc + bq.reshape(shape)).astype(np.float32) * mult
    yq = np.clip(np.rint(t).astype(np.float32) + np.float32(zy), 0, 255)
    y = ((yq - np.float32(zy)) * np.float32(sy)).astype(np.float32)
    np.save(out, y)
    print("sums %d overflows %d" % (sums, over))


if __name__ == "__main__":
    main()
