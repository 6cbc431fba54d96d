#!/usr/bin/python3
"""For a QDQ export: each activation's QuantizeLinear/DequantizeLinear pair's effect on the output
SQNR on SAMPLES, by ONNX Runtime (tools/ort_run.js --batch) on copies of the export with only that
pair taken out, and with only that pair kept (weights stay quantized in both; "none" keeps no
activation pair). Measures; never pass/fail (docs/quantizer.md, "PP-OCRv4 det with l2, traced").
Usage: /usr/bin/python3 tools/qdq_effects.py F32.onnx EXPORT.onnx SAMPLES.npy WORKDIR
"""
import sys, os, subprocess, json
import numpy as np, onnx
from onnx import helper
f32, exp, test, wd = sys.argv[1:5]
os.makedirs(wd, exist_ok=True)
m = onnx.load(exp)
g = m.graph
inits = {t.name for t in g.initializer}
prod = {o: n for n in g.node for o in n.output}
pairs = []  # (value name, Q node, DQ nodes)
for n in g.node:
    if n.op_type == "QuantizeLinear" and n.input[0] not in inits:
        dqs = [d for d in g.node if d.op_type == "DequantizeLinear" and d.input[0] == n.output[0]]
        pairs.append((n.input[0], n, dqs))
print(len(pairs), "activation pairs", file=sys.stderr)

def variant(keep):
    mm = onnx.ModelProto(); mm.CopyFrom(m)
    gg = mm.graph
    names = {p[0] for i, p in enumerate(pairs) if not keep(i)}
    nodes = []
    for n in gg.node:
        if n.op_type == "QuantizeLinear" and n.input[0] in names:
            continue
        if n.op_type == "DequantizeLinear" and n.input[0] in prod and prod[n.input[0]].op_type == "QuantizeLinear" \
                and prod[n.input[0]].input[0] in names:
            nodes.append(helper.make_node("Identity", [prod[n.input[0]].input[0]], list(n.output), name=n.name + "_id"))
            continue
        nodes.append(n)
    del gg.node[:]
    gg.node.extend(nodes)
    return mm

jobs = []
def add(tag, keep):
    p = f"{wd}/{tag}.onnx"
    onnx.save(variant(keep), p)
    jobs.append((tag, p))
add("none", lambda i: False)
add("all", lambda i: True)
for i in range(len(pairs)):
    add(f"drop{i}", lambda j, i=i: j != i)
    add(f"only{i}", lambda j, i=i: j == i)
with open(f"{wd}/jobs.txt", "w") as f:
    f.write(f"{f32} {test} -o {wd}/out_ref\n")
    for tag, p in jobs:
        f.write(f"{p} {test} -o {wd}/out_{tag}\n")
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
subprocess.run(["nice", "-n", "19", "node", f"{root}/tools/ort_run.js", "--batch", f"{wd}/jobs.txt"], check=True,
               env=dict(os.environ, ORT_NODE_MODULE=f"{root}/build/npm/node_modules/onnxruntime-node"))
ref_dir = f"{wd}/out_ref"
outs = sorted(os.listdir(ref_dir))
def sq(tag):
    num = den = 0.0; per = []
    for o in outs:
        r = np.load(f"{ref_dir}/{o}").astype(np.float64); t = np.load(f"{wd}/out_{tag}/{o}").astype(np.float64)
        num += (r ** 2).sum(); den += ((r - t) ** 2).sum()
        per = [10 * np.log10((r[i] ** 2).sum() / max(((r[i] - t[i]) ** 2).sum(), 1e-30)) for i in range(len(r))]
    return 10 * np.log10(num / max(den, 1e-30)), per
res = {}
print("none %.2f  all %.2f" % (sq("none")[0], sq("all")[0]))
rows = []
for i, p in enumerate(pairs):
    d, dp = sq(f"drop{i}"); o, op = sq(f"only{i}")
    rows.append((d, o, p[0], op))
rows.sort(key=lambda r: -r[0])
print("%-8s %-8s %s" % ("drop", "only", "value  (only: per image)"))
for d, o, v, op in rows:
    print("%8.2f %8.2f %s  %s" % (d, o, v, " ".join("%.1f" % x for x in op)))
