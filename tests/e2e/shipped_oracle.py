"""The report's per-tensor cumulative SQNRs of an exported QDQ model rederived in numpy
(tests/e2e/test_quantize.c, quantize/shipped_sqnrs_with_layers_in_f32_match_numpy,
quantize/shipped_sqnrs_with_quantized_weights_on_an_f32_input_match_numpy and
quantize/shipped_runs_take_the_f32_prefix_from_the_f32_run).

Usage: /usr/bin/python3 tests/e2e/shipped_oracle.py F32.onnx EXPORT.onnx SAMPLES.npy REPORT.json K TOL [INT_TOL]

Runs the f32 model and the export (its QuantizeLinear / DequantizeLinear, per tensor or per axis,
rounding half to even, and the f32 ops of the model: MatMul, Conv, Relu, Add, Sin, Cos) in float64, over the
samples SAMPLES[K-1::K] (validate_from = spread's held-out ones, validate = 1/K), and checks each
quantized tensor's sqnr_db of REPORT.json (the measurement of what ships: the value as quantized,
every quantization upstream applied: the export's DequantizeLinear output of that name) against 10 log10(sum f32^2 / sum (f32 - qdq)^2) within TOL
dB. With INT_TOL, each sqnr_int_db too (the integer graph's run in the same measurement: its
integers requantized in integer arithmetic, so within INT_TOL of the QDQ figure, not TOL). Reads
nothing of QRL but the export and the report. Exits 1 on a mismatch.
"""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def attr(n, name, default):
    for a in n.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def per_axis(p, x, axis):
    if p.ndim == 0 or p.size == 1:
        return p.reshape(())
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    return p.reshape(shape)


def conv(n, x, w, b):
    """ONNX Conv (2-D, NCHW; pads, strides, dilations, group) in float64, by kernel tap."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    kh, kw = w.shape[2:]
    pads = attr(n, "pads", [0, 0, 0, 0])
    sh, sw = attr(n, "strides", [1, 1])
    dh, dw = attr(n, "dilations", [1, 1])
    group = attr(n, "group", 1)
    if attr(n, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise SystemExit("Conv auto_pad not in the oracle")
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    cg, mg = w.shape[1], w.shape[0] // group
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for gi in range(group):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, gi * cg:(gi + 1) * cg, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                y[:, gi * mg:(gi + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, w[gi * mg:(gi + 1) * mg, :, i, j])
    if b is not None:
        y += b.astype(np.float64).reshape(1, -1, 1, 1)
    return y


def run(model, x):
    g = model.graph
    v = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    v[g.input[0].name] = x.astype(np.float64)
    for n in g.node:
        a = [v[i] if i else None for i in n.input]
        if n.op_type == "MatMul":
            y = a[0].astype(np.float64) @ a[1].astype(np.float64)
        elif n.op_type == "Conv":
            y = conv(n, a[0], a[1], a[2] if len(a) > 2 else None)
        elif n.op_type == "Relu":
            y = np.maximum(a[0], 0)
        elif n.op_type == "Add":
            y = a[0].astype(np.float64) + a[1].astype(np.float64)
        elif n.op_type == "Sin":
            y = np.sin(a[0].astype(np.float64))
        elif n.op_type == "Cos":
            y = np.cos(a[0].astype(np.float64))
        elif n.op_type == "QuantizeLinear":
            ax = attr(n, "axis", 1)
            s, z = per_axis(a[1].astype(np.float64), a[0], ax), per_axis(a[2], a[0], ax)
            info = np.iinfo(a[2].dtype)
            y = np.clip(np.round(a[0] / s) + z.astype(np.float64), info.min, info.max).astype(a[2].dtype)
        elif n.op_type == "DequantizeLinear":
            ax = attr(n, "axis", 1)
            s = per_axis(a[1].astype(np.float64), a[0], ax)
            z = per_axis(a[2], a[0], ax).astype(np.float64) if len(a) > 2 and a[2] is not None else 0.0
            y = (a[0].astype(np.float64) - z) * s
        else:
            raise SystemExit("op %s not in the oracle" % n.op_type)
        v[n.output[0]] = y
    return v, g


def main():
    f32, export, samples, report, k, tol = sys.argv[1:7]
    k, tol = int(k), float(tol)
    int_tol = float(sys.argv[7]) if len(sys.argv) > 7 else None
    x = np.load(samples)[k - 1::k]
    ref, _ = run(onnx.load(f32), x)
    got, g = run(onnx.load(export), x)
    # the value as it ships: the export names the DequantizeLinear's output as the model named it
    dq = {n.output[0] for n in g.node if n.op_type == "DequantizeLinear"}
    layers = json.load(open(report))["layers"]
    checked = 0
    for l in layers:
        name, db = l["value"], l.get("sqnr_db")
        if db is None or name not in dq or name not in ref:
            continue
        r, q = ref[name], got[name]
        want = 10 * np.log10((r * r).sum() / ((r - q) ** 2).sum())
        print("%s: report %.3f dB, numpy %.3f dB" % (name, db, want))
        if abs(db - want) > tol:
            raise SystemExit("%s: the report's %.3f dB against numpy's %.3f" % (name, db, want))
        if int_tol is not None:
            idb = l.get("sqnr_int_db")
            print("%s: integer graph %s dB" % (name, "none" if idb is None else "%.3f" % idb))
            if idb is None or abs(idb - want) > int_tol:
                raise SystemExit("%s: the integer graph's %s dB against numpy's %.3f" % (name, idb, want))
        checked += 1
    if checked == 0:
        raise SystemExit("no quantized tensor checked")
    print("ok: %d tensors" % checked)


main()
