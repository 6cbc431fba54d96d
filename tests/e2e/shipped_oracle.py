"""The report's per-tensor cumulative SQNRs of an exported QDQ model rederived in numpy
(tests/e2e/test_quantize.c, quantize/shipped_sqnrs_with_layers_in_f32_match_numpy).

Usage: /usr/bin/python3 tests/e2e/shipped_oracle.py F32.onnx EXPORT.onnx SAMPLES.npy REPORT.json K TOL

Runs the f32 model and the export (its QuantizeLinear / DequantizeLinear, per tensor or per axis,
rounding half to even, and the f32 ops of the model: MatMul, Relu, Add) in float64, over the
samples SAMPLES[K-1::K] (validate_from = spread's held-out ones, validate = 1/K), and checks each
quantized tensor's sqnr_db of REPORT.json (the measurement of what ships: the value as quantized,
every quantization upstream applied: the export's DequantizeLinear output of that name) against 10 log10(sum f32^2 / sum (f32 - qdq)^2) within TOL
dB. Reads nothing of QRL but the export and the report. Exits 1 on a mismatch.
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


def run(model, x):
    g = model.graph
    v = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    v[g.input[0].name] = x.astype(np.float64)
    for n in g.node:
        a = [v[i] if i else None for i in n.input]
        if n.op_type == "MatMul":
            y = a[0].astype(np.float64) @ a[1].astype(np.float64)
        elif n.op_type == "Relu":
            y = np.maximum(a[0], 0)
        elif n.op_type == "Add":
            y = a[0].astype(np.float64) + a[1].astype(np.float64)
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
        checked += 1
    if checked == 0:
        raise SystemExit("no quantized tensor checked")
    print("ok: %d tensors" % checked)


main()
