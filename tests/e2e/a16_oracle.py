#!/usr/bin/python3
"""numpy's run of a QDQ model with 16-bit (or 8-bit) activations: the fake-quant oracle of
tests/e2e/test_a16.c, independent of QRL and of ONNX Runtime.

Usage: /usr/bin/python3 tests/e2e/a16_oracle.py MODEL.onnx X.npy OUTDIR

Every op in float64 as ONNX defines it: QuantizeLinear rounds x / scale half to even, adds the
zero point and saturates to the zero point's type (uint16, int16, uint8, int8); DequantizeLinear
is (q - zero) * scale, per tensor or per axis; Conv (group, strides, pads, dilations) as sums
over the kernel's taps; MaxPool (no pads); Relu, Flatten, Transpose, MatMul, Add, Mul, ReduceMean (axes from the attribute or the
input), LayerNormalization, Softmax. Writes OUTDIR/<output name>.npy (float32) and OUTDIR/<output name>.scale (the scale of
the QuantizeLinear that made the output: one step of its integers), and OUTDIR/info.txt: the
model's opset ("opset 21"), the activations' integer types ("activation uint16", from the
QuantizeLinear zero points) and the largest magnitude of a MatMul's exact integer sum
("max_acc N": sum (a - a_zero) (b - b_zero) over the integers of its DequantizeLinear inputs, in
int64), which says whether an int32 accumulator would have overflowed."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
          np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767)}


def attr(n, name, default=None):
    for a in n.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def per_axis(p, x, axis):
    p = np.asarray(p, np.float64)
    if p.ndim == 0:
        return p
    shape = [1] * x.ndim
    shape[axis % x.ndim] = p.size
    return p.reshape(shape)


def conv(x, w, b, n):
    group = attr(n, "group", 1)
    strides = attr(n, "strides", [1, 1])
    dil = attr(n, "dilations", [1, 1])
    pads = attr(n, "pads", [0, 0, 0, 0])
    kh, kw = w.shape[2], w.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho = (xp.shape[2] - (dil[0] * (kh - 1) + 1)) // strides[0] + 1
    wo = (xp.shape[3] - (dil[1] * (kw - 1) + 1)) // strides[1] + 1
    m, cg = w.shape[0], w.shape[1]
    mg = m // group
    y = np.zeros((x.shape[0], m, ho, wo))
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dil[0], j * dil[1]
                tap = xs[:, :, r0:r0 + strides[0] * (ho - 1) + 1:strides[0], c0:c0 + strides[1] * (wo - 1) + 1:strides[1]]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", tap, w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


def main():
    model, xfile, outdir = sys.argv[1:4]
    m = onnx.load(model)
    env = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    env[m.graph.input[0].name] = np.load(xfile).astype(np.float64)
    scale_of = {}
    ints = {}  # a DequantizeLinear's output: its integers less the zero point, int64
    qtypes = set()
    max_acc = 0
    for n in m.graph.node:
        ins = [env[i] if i else None for i in n.input]
        op = n.op_type
        if op == "QuantizeLinear":
            x, s, z = ins
            ax = attr(n, "axis", 1)
            lo, hi = RANGES[z.dtype]
            q = np.rint(x / per_axis(s, x, ax)) + per_axis(z, x, ax)
            y = np.clip(q, lo, hi).astype(z.dtype)
            scale_of[n.output[0]] = float(np.max(s))
            qtypes.add(str(z.dtype))
        elif op == "DequantizeLinear":
            q, s, z = ins
            ax = attr(n, "axis", 1)
            y = (q.astype(np.float64) - per_axis(z, q, ax)) * per_axis(s, q, ax)
            ints[n.output[0]] = q.astype(np.int64) - per_axis(z, q, ax).astype(np.int64)
            if n.input[0] in scale_of:
                scale_of[n.output[0]] = scale_of[n.input[0]]
        elif op == "Conv":
            y = conv(ins[0], ins[1], ins[2] if len(ins) > 2 else None, n)
        elif op == "MaxPool":
            (kh, kw), (sh, sw) = attr(n, "kernel_shape"), attr(n, "strides", [1, 1])
            x = ins[0]
            ho, wo = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
            y = np.full(x.shape[:2] + (ho, wo), -np.inf)
            for i in range(kh):
                for j in range(kw):
                    y = np.maximum(y, x[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw])
        elif op == "Relu":
            y = np.maximum(ins[0], 0)
        elif op == "Flatten":
            a = attr(n, "axis", 1)
            y = ins[0].reshape(int(np.prod(ins[0].shape[:a])), -1)
        elif op == "MatMul":
            y = ins[0] @ ins[1]
            if n.input[0] in ints and n.input[1] in ints:
                max_acc = max(max_acc, int(np.abs(ints[n.input[0]] @ ints[n.input[1]]).max()))
        elif op == "Add":
            y = ins[0] + ins[1]
        elif op == "Mul":
            y = ins[0] * ins[1]
        elif op == "Transpose":
            y = np.transpose(ins[0], attr(n, "perm"))
        elif op == "LayerNormalization":
            x = ins[0]
            ax = attr(n, "axis", -1) % x.ndim
            axes = tuple(range(ax, x.ndim))
            mu = x.mean(axis=axes, keepdims=True)
            var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
            y = (x - mu) / np.sqrt(var + attr(n, "epsilon", 1e-5)) * ins[1]
            if len(ins) > 2 and ins[2] is not None:
                y = y + ins[2]
        elif op == "Softmax":
            x = ins[0]
            e = np.exp(x - x.max(axis=attr(n, "axis", -1), keepdims=True))
            y = e / e.sum(axis=attr(n, "axis", -1), keepdims=True)
        elif op == "ReduceMean":
            axes = attr(n, "axes") if len(ins) < 2 or ins[1] is None else list(ins[1])
            y = np.mean(ins[0], axis=tuple(axes), keepdims=bool(attr(n, "keepdims", 1)))
        else:
            sys.exit("a16_oracle: op %s is not modelled" % op)
        env[n.output[0]] = y
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "info.txt"), "w") as f:
        opset = max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        f.write("opset %d\nactivation %s\nmax_acc %d\n" % (opset, " ".join(sorted(qtypes)), max_acc))
    for o in m.graph.output:
        np.save(os.path.join(outdir, o.name + ".npy"), env[o.name].astype(np.float32))
        with open(os.path.join(outdir, o.name + ".scale"), "w") as f:
            f.write("%.17g\n" % scale_of.get(o.name, 0.0))


if __name__ == "__main__":
    main()
