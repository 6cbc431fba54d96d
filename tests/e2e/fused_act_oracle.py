#!/usr/bin/python3
"""Independent check of stdlib/patterns_fused.qrl's export and integer kernels, for
tests/e2e/test_fused_act.c, on tools/make_fused_act_models.py's fused_act.onnx.

From the export alone (its QuantizeLinear/DequantizeLinear scales and zero points, the
stored int8 weights and int32 biases) numpy computes each output as the fused layer must:
x quantized to u8 (round half to even), the integer accumulator sum (x_q - x_zero) * w_q
plus the int32 bias, its real value times x_scale * w_scale[c], the activation on that
(HardSwish: v * clamp(alpha v + beta, 0, 1) with the HardSigmoid's attributes; SiLU:
v / (1 + exp(-v))), one rounding half to even onto y's scale. It checks the export's
structure first: the Conv's or Gemm's output goes to the activation's two nodes and nothing
else, with no QuantizeLinear on it (the fusion), and the activation's output to a
QuantizeLinear. QRL's and ONNX Runtime's outputs must each be within one step of y's scale
of numpy's everywhere and equal on at least 97% of the elements (ORT runs the Conv on real
values in float, numpy in f64: ties may round apart).

Usage: fused_act_oracle.py EXPORT X_TEST.npy QRL_OUT_DIR ORT_OUT_DIR
Prints "ok ..." or raises.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def conv(x, w, pad):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k, h, wd = w.shape[2], x.shape[2] - w.shape[2] + 1, x.shape[3] - w.shape[3] + 1
    return sum(np.einsum("nchw,oc->nohw", x[:, :, i:i + h, j:j + wd], w[:, :, i, j].astype(np.float64))
               for i in range(k) for j in range(k))


def main():
    export, xfile, qdir, odir = sys.argv[1:5]
    m = onnx.load(export)
    g = m.graph
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)

    def dq(name):  # (integers, scale, zero point) of a DequantizeLinear's output
        n = prod[name]
        assert n.op_type == "DequantizeLinear", "%s is not dequantized (%s)" % (name, n.op_type)
        z = init[n.input[2]] if len(n.input) > 2 and n.input[2] else np.zeros((), np.int32)
        return n, init.get(n.input[0]), init[n.input[1]].astype(np.float64), z.astype(np.int64)

    def act_q(name):  # the QuantizeLinear that reads name: its scale and zero point
        qs = [r for r in readers.get(name, []) if r.op_type == "QuantizeLinear"]
        assert len(qs) == 1, "%s: %d QuantizeLinear readers" % (name, len(qs))
        q = qs[0]
        return float(init[q.input[1]]), int(init[q.input[2]])

    x = np.load(xfile).astype(np.float64)
    sx, zx = act_q("x")
    xq = np.clip(np.rint(x / sx) + zx, 0, 255) - zx
    checked = []
    for out in ("y1", "y2", "y3", "y4"):
        n, yq_int, sy, zy = dq(out)
        qn = prod[n.input[0]]
        assert qn.op_type == "QuantizeLinear", out
        mul = prod[qn.input[0]]
        assert mul.op_type == "Mul", "%s: %s before its QuantizeLinear" % (out, mul.op_type)
        sy, zy = float(sy), int(zy)
        a, b = (prod[i] for i in mul.input)
        layer = a if a.op_type in ("Conv", "Gemm") else b
        act = b if layer is a else a
        c = layer.output[0]
        assert act.op_type in ("HardSigmoid", "Sigmoid") and act.input[0] == c, out
        kinds = sorted(r.op_type for r in readers[c])
        assert kinds == sorted(["Mul", act.op_type]), "%s: the layer's output %s is read by %s (not fused)" % (
            out, c, kinds)
        _, wq, sw, zw = dq(layer.input[1])
        _, bq, _, _ = dq(layer.input[2])
        assert wq.dtype == np.int8 and bq.dtype == np.int32 and not zw.any(), out
        if layer.op_type == "Conv":
            acc = conv(xq, wq, 1) + bq.reshape(1, -1, 1, 1)
            real = acc * (sx * sw).reshape(1, -1, 1, 1)
        else:
            acc = xq.reshape(len(xq), -1) @ wq.astype(np.float64).T + bq
            real = acc * (sx * sw).reshape(1, -1)
        if act.op_type == "HardSigmoid":
            at = {t.name: t.f for t in act.attribute}
            y = real * np.clip(at.get("alpha", 0.2) * real + at.get("beta", 0.5), 0, 1)
        else:
            y = real / (1 + np.exp(-real))
        want = np.clip(np.rint(y / sy) + zy, 0, 255)
        assert (real < 0).mean() > 0.2 and (real > 0).mean() > 0.2, "%s: both signs before the activation" % out
        for who, d in (("QRL", qdir), ("ORT", odir)):
            got = np.load("%s/%s.npy" % (d, out)).astype(np.float64) / sy + zy
            steps = np.abs(got - want)
            assert steps.max() < 1.01, "%s: %s is %.2f steps of y's scale from numpy's" % (out, who, steps.max())
            same = (steps < 0.01).mean()
            assert same >= 0.97, "%s: %s equals numpy on %.1f%% only" % (out, who, 100 * same)
        checked.append("%s %s+%s" % (out, layer.op_type, "HardSwish" if act.op_type == "HardSigmoid" else "SiLU"))
    print("ok", ", ".join(checked))


if __name__ == "__main__":
    main()
