#!/usr/bin/python3
"""Per tensor a `qrl quantize --qparams` JSON keeps quantized: its f32 values on SAMPLES (ONNX Runtime
on the f32 model with those tensors as extra outputs, tools/ort_run.js), and for this JSON's range
and a second JSON's (another recipe's, same names): the share of values outside it, the tensor's
SQNR under that range (rounding and clipping) and the SQNR of its clipping alone. Measures; never
pass/fail (docs/quantizer.md, "PP-OCRv4 det with l2, traced").
Usage: /usr/bin/python3 tools/clip_stats.py F32.onnx SAMPLES.npy Q1.json Q2.json WORKDIR
"""
import sys, os, json, subprocess
import numpy as np, onnx
from onnx import helper, TensorProto
f32, samples, q1, q2, wd = sys.argv[1:6]
os.makedirs(wd, exist_ok=True)
A = {a["value"]: a for a in json.load(open(q1))["activations"] if not a["fallback"]}
B = {a["value"]: a for a in json.load(open(q2))["activations"]}
m = onnx.load(f32)
names = [v for v in A if v not in [o.name for o in m.graph.output] and v not in [i.name for i in m.graph.input]]
for v in names:
    m.graph.output.append(helper.make_tensor_value_info(v, TensorProto.FLOAT, None))
onnx.save(m, f"{wd}/probe.onnx")
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
subprocess.run(["nice", "-n", "19", "node", f"{root}/tools/ort_run.js", f"{wd}/probe.onnx", samples, "-o", f"{wd}/vals"],
               check=True, env=dict(os.environ, ORT_NODE_MODULE=f"{root}/build/npm/node_modules/onnxruntime-node"),
               stdout=subprocess.DEVNULL)
def fname(n):
    import re
    s = re.sub(r"[^A-Za-z0-9_.-]", "_", n)
    return ("_" + s[1:]) if s.startswith(".") else s
def stat(x, a):
    s, z, lo, hi = a["scale"], a["zero_point"], a["qmin"], a["qmax"]
    q = (np.clip(np.rint(x / s) + z, lo, hi) - z) * s
    e = x.astype(np.float64)
    clip = (x < (lo - z - 0.5) * s) | (x > (hi - z + 0.5) * s)
    err = ((e - q) ** 2)
    return (float(clip.mean()), 10 * np.log10((e ** 2).sum() / max(err.sum(), 1e-30)),
            10 * np.log10((e ** 2).sum() / max(err[clip].sum(), 1e-30)) if clip.any() else float("inf"), (lo - z) * s, (hi - z) * s)
print("%-32s %-17s %-17s %-17s %-28s %-28s" % ("tensor", "observed(samples)", "range Q1", "range Q2", "Q1: clip share, dB, clip dB", "Q2: same"))
for v in names + [v for v in A if v not in names]:
    p = f"{wd}/vals/{fname(v)}.npy"
    if not os.path.exists(p):
        continue
    x = np.load(p)
    s1 = stat(x, A[v])
    s2 = stat(x, B[v]) if v in B else None
    print("%-32s %7.2f %8.2f  %7.2f %8.2f  %s  %.2e %5.1f %5.1f   %s" % (
        v[-32:], x.min(), x.max(), s1[3], s1[4], ("%7.2f %8.2f" % (s2[3], s2[4])) if s2 else "      -         -",
        s1[0], s1[1], s1[2], ("%.2e %5.1f %5.1f" % s2[:3]) if s2 else "-"))
