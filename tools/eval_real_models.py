#!/usr/bin/python3
"""Real-model evaluation (QRL-D "Real models quantize well"): quantizes each
model with `qrl quantize` and measures the export against fp32.

Usage: /usr/bin/python3 tools/eval_real_models.py [--dir build/realmodels] [--recipe recipes/int8.qrl]
           [--calib-count N] [--no-fx] [--timeout S] [MODEL...]
Run bench/real_models.sh, which first makes the models and data
(tools/export_torchvision.py, tools/fetch_real_models.sh, tools/make_real_inputs.py).

Per model:
  quantize  build/qrl quantize M --recipe R --calib M_calib.npy -o out/M_int8.onnx --report out/M.json
            (wall time). A model whose batch dimension is fixed at 1 is refused by
            qrl quantize (the calibration .npy holds N samples); that is recorded, and
            the model is quantized again as M_nb: the same file with its inputs' first
            dimension made symbolic, with --batch 1.
  ORT       fp32 and the export in ONNX Runtime 1.30 (node tools/ort_sqnr.js --run), one
            sample at a time: output SQNR of int8 against fp32, non-finite outputs.
  qrl run   build/qrl run on fp32 and on the export, one sample at a time: SQNR of the
            export against qrl's fp32 (and qrl fp32 against ORT fp32, a runtime check).
  MACs      Conv, ConvTranspose, Gemm and MatMul of the export (shapes from one ORT run);
            "in int" = both data inputs come from DequantizeLinear (a QDQ group ORT can
            fuse into an integer kernel). QRL's report does not give this share.
  FX        tools/torch_fx_ptq.py (PyTorch FX PTQ, onednn) for the torchvision models.
SQNR = 10*log10(sum(ref^2)/sum((ref-q)^2)) over all outputs and samples.
Writes DIR/out/results.json and DIR/out/results.md; prints the table.
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import helper

QUANTIZE_TIMEOUT = None  # --quantize-timeout S
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QRL = os.path.join(ROOT, "build", "qrl")
NODE_ENV = dict(os.environ, NODE_PATH=os.path.join(ROOT, "build", "npm", "node_modules"))
ORT_JS = os.path.join(ROOT, "tools", "ort_sqnr.js")

TV = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0")
# name -> (model file, data prefix, FX key)
MODELS = {}
for _n in ("ppocr_det", "ppocr_rec", "ppocr_cls", "blazeface", "mlsd_tiny", "oww_melspec", "oww_embedding",
           "oww_hey_jarvis", "oww_hey_mycroft"):
    MODELS[_n] = (_n + ".onnx", _n, None)
for _n in TV:
    MODELS[_n] = (_n + ".onnx", "tv", _n)
    MODELS[_n + "_dyn"] = (_n + "_dyn.onnx", "tv", _n)


def sqnr(ref, q):
    ref = np.asarray(ref, np.float64)
    q = np.asarray(q, np.float64)
    ok = np.isfinite(ref) & np.isfinite(q)
    err = ((ref[ok] - q[ok]) ** 2).sum()
    return 999.0 if err == 0 else float(10 * np.log10((ref[ok] ** 2).sum() / err))


def first_error(text):
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line.strip()
    return lines[-1].strip() if lines else "(no message)"


def run(cmd, timeout, env=None):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired:
        return -1, "", "timeout after %d s" % timeout, time.time() - t0


def free_batch(src, dst):
    """A copy of src whose graph inputs have a symbolic first dimension."""
    m = onnx.load(src)
    inits = {i.name for i in m.graph.initializer}
    for v in m.graph.input:
        if v.name in inits:
            continue
        dims = v.type.tensor_type.shape.dim
        if len(dims):
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "N"
    onnx.save(m, dst)


def file_name_for(name):
    """qrl run's output file name for a graph output (cli/cmd_run.c)."""
    ok = lambda k, c: c.isascii() and (c.isalnum() or c in "_-" or (c == "." and k > 0))  # noqa: E731
    return "".join(c if ok(k, c) else "_" for k, c in enumerate(name[:255])) or "output"


def with_preact(src, dst, names=None):
    """A copy of src that also outputs the inputs of the Sigmoid/Softmax nodes producing its graph
    outputs (the logits: a saturated probability hides quantization error). With names, adds those
    values instead. Returns the names added."""
    m = onnx.load(src)
    g = m.graph
    outs = {o.name for o in g.output}
    produced = {o for n in g.node for o in n.output}
    if names is None:
        names = [n.input[0] for n in g.node if n.op_type in ("Sigmoid", "Softmax") and n.output[0] in outs]
    names = [v for v in names if v in produced and v not in outs]
    for v in names:
        g.output.append(helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
    onnx.save(m, dst)
    return names


def opset(path):
    return max((o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx")), default=0)


def upgrade_opset13(src, dst, test, timeout):
    """The user's workaround for an old opset: onnx.version_converter to opset 13. Softmax's
    adapter needs the rank of its input, which shape inference cannot give after a computed
    Reshape: the ranks come from one ORT run (dims left symbolic)."""
    m = onnx.load(src)
    sm = [n.input[0] for n in m.graph.node if n.op_type == "Softmax"]
    if sm:
        probe = dst + ".probe.onnx"
        p = onnx.load(src)
        outs = {o.name for o in p.graph.output}
        for v in sm:
            if v not in outs:
                p.graph.output.append(helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
        onnx.save(p, probe)
        rc, out, err, _ = run(["node", ORT_JS, "--shapes", probe, test], timeout, NODE_ENV)
        if rc != 0:
            return "shape probe: " + first_error(err or out)
        shapes = json.loads(out.strip().splitlines()[-1])
        for v in sm:
            if v in shapes and v not in outs:
                m.graph.value_info.append(helper.make_tensor_value_info(
                    v, onnx.TensorProto.FLOAT, ["%s_d%d" % (v, k) for k in range(len(shapes[v]))]))
    try:
        from onnx import version_converter
        onnx.save(version_converter.convert_version(m, 13), dst)
    except Exception as e:  # noqa: BLE001
        return "onnx version_converter: " + str(e).splitlines()[0]
    return None


def ort_dump(model, outdir, inputs, timeout):
    shutil.rmtree(outdir, ignore_errors=True)
    rc, out, err, secs = run(["node", ORT_JS, "--run", model, outdir] + inputs, timeout, NODE_ENV)
    if rc != 0:
        return None, first_error(err or out)
    outs = []
    for line in out.splitlines():
        f, name = line.split(" ")[:2]
        outs.append((name, np.load(os.path.join(outdir, f))))
    return outs, None


def qrl_dump(model, outdir, test, names, timeout):
    """qrl run one sample at a time; returns [(name, stacked array)] in names' order."""
    x = np.load(test)
    per = {n: [] for n in names}
    for i in range(len(x)):
        d = os.path.join(outdir, str(i))
        shutil.rmtree(d, ignore_errors=True)
        xi = os.path.join(outdir, "x%d.npy" % i)
        os.makedirs(outdir, exist_ok=True)
        np.save(xi, x[i:i + 1])
        rc, out, err, _ = run([QRL, "run", model, "-i", xi, "-o", d], timeout)
        if rc != 0:
            return None, first_error(err or out)
        for n in names:
            f = os.path.join(d, file_name_for(n) + ".npy")
            if not os.path.exists(f):
                files = sorted(os.listdir(d))
                return None, "qrl run wrote %s, no %s.npy" % (files, n)
            per[n].append(np.load(f))
    return [(n, np.stack(per[n])) for n in names], None


def compare(ref, test, npre=0):
    res = compare1(ref[:len(ref) - npre], test[:len(test) - npre])
    if npre:
        res["preact_sqnr_db"] = compare1(ref[-npre:], test[-npre:]).get("sqnr_db")
    return res


def compare1(ref, test):
    r = np.concatenate([a.ravel() for _, a in ref])
    t = np.concatenate([a.ravel() for _, a in test])
    if r.size != t.size:
        return {"error": "output sizes differ: %d vs %d" % (r.size, t.size)}
    per = {n: round(sqnr(a, b), 2) for (n, a), (_, b) in zip(ref, test)}
    return {"sqnr_db": round(sqnr(r, t), 2), "per_output": per, "nonfinite_ref": int((~np.isfinite(r)).sum()),
            "nonfinite": int((~np.isfinite(t)).sum())}


def macs(export, test, workdir, timeout, fp32=None):
    """MACs of Conv/ConvTranspose/Gemm/MatMul in the export; share whose inputs are DequantizeLinear."""
    m = onnx.load(export)
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    inits = {i.name: i for i in g.initializer}
    compute = [n for n in g.node if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")]
    if not compute:
        return {"total": 0, "int": 0, "share": None, "nodes": 0, "int_nodes": 0}
    have = {o.name for o in g.output}
    want = []
    for n in compute:
        for v in list(n.input[:2]) + [n.output[0]]:
            if v not in inits and v not in have and v not in want:
                want.append(v)
    for v in want:
        g.output.append(helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
    probe = os.path.join(workdir, "probe.onnx")
    onnx.save(m, probe)
    rc, out, err, _ = run(["node", ORT_JS, "--shapes", probe, test], timeout, NODE_ENV)
    note = None
    if rc != 0 and fp32:  # ORT rejects the export: take the shapes from the fp32 model
        note = "shapes from the fp32 model (ORT rejects the export)"
        m32 = onnx.load(fp32)
        known = {o for n in m32.graph.node for o in n.output} - {o.name for o in m32.graph.output}
        for v in want:
            if v in known:
                m32.graph.output.append(helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, None))
        onnx.save(m32, probe)
        rc, out, err, _ = run(["node", ORT_JS, "--shapes", probe, test], timeout, NODE_ENV)
    if rc != 0:
        return {"error": "shape probe: " + first_error(err or out)}
    shapes = json.loads(out.strip().splitlines()[-1])
    for name, t in inits.items():
        shapes.setdefault(name, list(t.dims))
    for n in g.node:  # weights: the dims of the quantized initializer
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            shapes.setdefault(n.output[0], list(inits[n.input[0]].dims))
    total = integer = nint = 0
    for n in compute:
        x, w, y = (shapes.get(v) for v in (n.input[0], n.input[1], n.output[0]))
        if x is None or w is None or y is None:
            continue
        if n.op_type == "Conv":
            k = int(np.prod(y)) * int(np.prod(w[1:]))
        elif n.op_type == "ConvTranspose":
            k = int(np.prod(x)) * int(np.prod(w[1:]))
        elif n.op_type == "Gemm":
            ta = any(a.name == "transA" and a.i for a in n.attribute)
            k = int(np.prod(y)) * (x[0] if ta else x[-1])
        else:
            k = int(np.prod(y)) * x[-1]
        total += k
        dq = all(v in producer and producer[v].op_type == "DequantizeLinear" for v in n.input[:2])
        if dq:
            integer += k
            nint += 1
    return {"total": total, "int": integer, "share": integer / total if total else None, "nodes": len(compute),
            "int_nodes": nint, "note": note}


def quantize(model, calib, out, report, recipe, extra, timeout):
    """qrl quantize under /usr/bin/time -v (when present): wall time and peak RSS."""
    cmd = [QRL, "quantize", model, "--recipe", recipe, "--calib", calib, "-o", out, "--report", report] + extra
    timed = (["/usr/bin/time", "-v"] if os.path.exists("/usr/bin/time") else []) + cmd
    rc, so, se, secs = run(timed, timeout)
    rss = None
    keep = []
    for line in se.splitlines():
        if "Maximum resident set size" in line:
            rss = int(line.rsplit(":", 1)[1])
        elif line.startswith("\t") or line.startswith("Command "):
            continue  # the rest of time -v's report
        else:
            keep.append(line)
    se = "\n".join(line for line in keep if not line.startswith("Command exited with non-zero status"))
    return cmd, rc, so, se, secs, rss


def ort_compare(fp32, export, test, timeout, level=None):
    """node tools/ort_sqnr.js FP32 EXPORT TEST.npy (ORT_OPT_LEVEL=level when given)."""
    env = dict(NODE_ENV)
    if level:
        env["ORT_OPT_LEVEL"] = level
    rc, out, err, _ = run(["node", ORT_JS, fp32, export, test], timeout, env)
    if rc != 0:
        return {"error": first_error(err or out)}
    r = json.loads(out.strip().splitlines()[-1])
    return {"sqnr_db": round(r["sqnr_db"], 2), "nonfinite": sum(o["nonfinite_test"] for o in r["outputs"]),
            "per_output": {o["name"]: round(o["sqnr_db"], 2) for o in r["outputs"]}}


def summary_lines(stdout):
    keep = {}
    for line in stdout.splitlines():
        k = line.split(":", 1)[0].strip()
        if k in ("nodes", "tensors", "lowered", "calibration", "sqnr", "output"):
            keep[k] = line.split(":", 1)[1].strip()
    return keep


def eval_model(name, d, recipe, ccount, timeout):
    file, prefix, fxkey = MODELS[name]
    model = os.path.join(d, file)
    calib = os.path.join(d, prefix + "_calib.npy")
    test = os.path.join(d, prefix + "_test.npy")
    od = os.path.join(d, "out", name)
    os.makedirs(od, exist_ok=True)
    res = {"model": name, "file": file, "failures": []}
    if name.endswith("_op13") and not os.path.exists(model):
        err = upgrade_opset13(os.path.join(d, name[:-5] + ".onnx"), model, test, timeout)
        if err:
            res["failures"].append("opset 13 conversion: " + err)
            return res
    if not os.path.exists(model):
        res["failures"].append("missing %s (run tools/fetch_real_models.sh / export_torchvision.py)" % model)
        return res
    extra = ["--calib-count", str(ccount)] if ccount else []
    out = os.path.join(od, name + "_int8.onnx")
    rel = lambda p: os.path.relpath(p, ROOT)  # noqa: E731
    cmd, rc, so, se, secs, rss = quantize(model, calib, out, os.path.join(od, "report.json"), recipe, extra,
                                          QUANTIZE_TIMEOUT or timeout)
    res["quantize_rss_mb"] = None if rss is None else round(rss / 1024)
    res["quantize_cmd"] = " ".join(rel(c) if os.path.isabs(c) else c for c in cmd)
    if rc != 0:
        res["failures"].append("quantize: %s  [%s]" % (first_error(se or so), res["quantize_cmd"]))
        if name in TV:  # the fixed-batch torchvision export: its _dyn twin is measured instead
            res["quantize_s"] = round(secs, 2)
            res["quantize_rc"] = rc
            return res
        if "does not fit" in (se + so) and "expected" in (se + so):
            nb = os.path.join(od, name + "_nb.onnx")
            free_batch(model, nb)
            cmd, rc, so, se, secs, rss = quantize(nb, calib, out, os.path.join(od, "report.json"), recipe,
                                                  extra + ["--batch", "1"], QUANTIZE_TIMEOUT or timeout)
            res["quantize_rss_mb"] = None if rss is None else round(rss / 1024)
            res["quantize_cmd_nb"] = " ".join(rel(c) if os.path.isabs(c) else c for c in cmd)
            res["batch_freed"] = True
            if rc != 0:
                res["failures"].append("quantize (batch freed, --batch 1): %s  [%s]" %
                                       (first_error(se or so), res["quantize_cmd_nb"]))
    res["quantize_s"] = round(secs, 2)
    res["quantize_rc"] = rc
    res["summary"] = summary_lines(so)
    if rc == 0:
        rep = os.path.join(od, "report.json")
        try:
            r = json.load(open(rep))
            res["fallbacks"] = r.get("fallbacks")
            res["nodes"] = r.get("nodes")
            for k in ("output_sqnr_db", "output_nonfinite", "macs_per_sample", "macs_int_per_sample"):
                res["report_" + k] = r.get(k)
            low = [x for x in r.get("layers", []) if x.get("sqnr_db") is not None]
            res["n_layers"] = len(low)
        except Exception as e:  # noqa: BLE001
            res["failures"].append("report.json unreadable: %s" % e)
    if rc == 0:  # ORT on the export as written, against the fp32 model: default and unoptimized graphs
        res["ort_direct"] = ort_compare(model, out, test, timeout)
        res["ort_direct_disabled"] = ort_compare(model, out, test, timeout, "disabled")
        for k in ("ort_direct", "ort_direct_disabled"):
            if "error" in res[k]:
                res["failures"].append("%s: %s  [node tools/ort_sqnr.js %s %s %s]" % (
                    k, res[k]["error"], rel(model), rel(out), rel(test)))
    m32 = os.path.join(od, "fp32_eval.onnx")
    pre = with_preact(model, m32)
    res["preact_outputs"] = pre
    ref, err = ort_dump(m32, os.path.join(od, "ort_fp32"), [test], timeout)
    if err:
        res["failures"].append("ORT fp32: %s" % err)
        return res
    names = [n for n, _ in ref]
    qrl32, err = qrl_dump(m32, os.path.join(od, "qrl_fp32"), test, names, timeout)
    if err:
        res["failures"].append("qrl run fp32: %s  [build/qrl run %s -i X.npy]" % (err, rel(model)))
    else:
        res["qrl_fp32_vs_ort"] = compare(ref, qrl32, len(res["preact_outputs"]))
    if rc != 0:
        return res
    m8 = os.path.join(od, "int8_eval.onnx")
    if with_preact(out, m8, pre) != pre:
        res["failures"].append("export lacks the pre-activation values %s" % pre)
        m8, pre = out, []
        ref = ref[:len(ref) - len(res["preact_outputs"])]
        names = [n for n, _ in ref]
        qrl32 = qrl32[:len(names)] if qrl32 else qrl32
    q8, err = ort_dump(m8, os.path.join(od, "ort_int8"), [test], timeout)
    if err:
        res["failures"].append("ORT int8: %s  [node tools/ort_sqnr.js %s %s %s]" % (err, rel(model), rel(out),
                                                                                  rel(test)))
    else:
        res["ort"] = compare(ref, q8, len(pre))
        if res["ort"].get("nonfinite"):
            res["failures"].append("ORT int8: %d non-finite outputs" % res["ort"]["nonfinite"])
    if qrl32 is not None:
        qq, err = qrl_dump(m8, os.path.join(od, "qrl_int8"), test, names, timeout)
        if err:
            res["failures"].append("qrl run int8 export: %s  [build/qrl run %s -i X.npy]" % (err, rel(out)))
        else:
            res["qrl"] = compare(qrl32, qq, len(pre))
            if res["qrl"].get("nonfinite"):
                res["failures"].append("qrl run int8: %d non-finite outputs" % res["qrl"]["nonfinite"])
    res["macs"] = macs(out, test, od, timeout, model)
    if "error" in res["macs"]:
        res["failures"].append("MACs: " + res["macs"]["error"])
    return res


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def table2(results, fx):
    """The closing-note table: QRL's own numbers (report.json / the `output:` line), ORT on the export
    as written (default optimizations and ORT_OPT_LEVEL=disabled), qrl run of the export, PyTorch FX."""
    head = ("model", "opset", "quantize wall s", "peak RSS MB", "QRL output SQNR (int graph)", "MACs in int (QRL)",
            "fell back", "ORT SQNR (opt all)", "ORT SQNR (opt disabled)", "qrl run SQNR", "FX SQNR", "FX s")
    rows = []
    for r in results:
        fxr = fx.get(r.get("fxkey") or "", {}) if fx else {}
        ok = r.get("quantize_rc") == 0
        m, mi = r.get("report_macs_per_sample"), r.get("report_macs_int_per_sample")
        share = "-" if not m else "%.1f%% of %.3g" % (100.0 * (mi or 0) / m, m)
        o = lambda k: ("-" if k not in r else r[k].get("error") and "ERR" or fmt(r[k].get("sqnr_db")) +  # noqa: E731
                       (" (%d non-finite)" % r[k]["nonfinite"] if r[k].get("nonfinite") else ""))
        q = r.get("qrl", {})
        qs = "-" if not q else fmt(q.get("sqnr_db")) + ("" if q.get("preact_sqnr_db") is None else
                                                        " (logits %.1f)" % q["preact_sqnr_db"])
        rows.append((r["model"], str(r.get("opset", "-")),
                     fmt(r.get("quantize_s")) + ("" if ok else (" TIMEOUT" if r.get("quantize_rc") == -1 else " FAIL")),
                     fmt(r.get("quantize_rss_mb"), "%d"), (fmt(r.get("report_output_sqnr_db")) if r.get("report_output_sqnr_db") is not None
                                                        else "inf") if ok else "-",
                     share if ok else "-", str(r.get("fallbacks", "-")) if ok else "-",
                     o("ort_direct"), o("ort_direct_disabled"), qs,
                     fmt(fxr.get("sqnr_db")), fmt(fxr.get("quantize_s"))))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def table(results, fx):
    head = ("model", "ORT int8 SQNR", "qrl run int8 SQNR", "MAC share int", "quantize s", "FX SQNR", "FX s",
            "qrl fp32 vs ORT")
    rows = []
    for r in results:
        fxr = fx.get(r.get("fxkey") or "", {}) if fx else {}
        ort = r.get("ort", {}).get("sqnr_db")
        q = r.get("qrl", {}).get("sqnr_db")
        pre = lambda k: ("" if r.get(k, {}).get("preact_sqnr_db") is None  # noqa: E731
                         else " (logits %.1f)" % r[k]["preact_sqnr_db"])
        share = r.get("macs", {}).get("share")
        name = r["model"] + (" (batch freed)" if r.get("batch_freed") else "")
        rows.append((name, fmt(ort) + pre("ort") + (" NaN" if r.get("ort", {}).get("nonfinite") else ""),
                     fmt(q) + pre("qrl") + (" NaN" if r.get("qrl", {}).get("nonfinite") else ""),
                     "-" if share is None else "%.1f%%" % (100 * share),
                     fmt(r.get("quantize_s")) + ("" if r.get("quantize_rc") == 0 else " FAIL"),
                     fmt(fxr.get("sqnr_db")), fmt(fxr.get("quantize_s")),
                     fmt(r.get("qrl_fp32_vs_ort", {}).get("sqnr_db")) + pre("qrl_fp32_vs_ort")))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    opts = {"--dir": os.path.join(ROOT, "build", "realmodels"), "--recipe": os.path.join(ROOT, "recipes", "int8.qrl"),
            "--calib-count": None, "--timeout": "1800", "--tag": "", "--quantize-timeout": None}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    nofx = "--no-fx" in args
    noop13 = "--no-auto-op13" in args  # only the models named: no opset-13 twin added for an older opset
    args = [a for a in args if a not in ("--no-fx", "--no-auto-op13", "--merge")]
    global QUANTIZE_TIMEOUT
    QUANTIZE_TIMEOUT = int(opts["--quantize-timeout"]) if opts["--quantize-timeout"] else None
    names = args or list(MODELS)
    for n in ([] if noop13 else list(names)):  # models before opset 13 again, converted to 13 (per-axis DequantizeLinear)
        f = os.path.join(opts["--dir"], MODELS[n][0]) if n in MODELS else None
        if f and os.path.exists(f) and opset(f) < 13 and n + "_op13" not in names:
            names.insert(names.index(n) + 1, n + "_op13")
    for n in names:
        if n.endswith("_op13") and n not in MODELS:
            b = MODELS[n[:-5]]
            MODELS[n] = (n + ".onnx", b[1], b[2])
    d = opts["--dir"]
    timeout = int(opts["--timeout"])
    fx = {}
    fxfile = os.path.join(d, "out", "fx.json")
    os.makedirs(os.path.join(d, "out"), exist_ok=True)
    if not nofx and any(MODELS[n][2] for n in names):
        cmd = [sys.executable, os.path.join(ROOT, "tools", "torch_fx_ptq.py"), d, "--json", fxfile]
        if opts["--calib-count"]:
            cmd += ["--calib-count", opts["--calib-count"]]
        cmd += sorted({MODELS[n][2] for n in names if MODELS[n][2]})
        rc, so, se, _ = run(cmd, timeout)
        print(so, end="")
        if rc != 0:
            print("torch_fx_ptq failed: " + first_error(se), file=sys.stderr)
    if os.path.exists(fxfile):
        fx = json.load(open(fxfile))["models"]
    results = []
    merge = opts["--tag"] and "--merge" in sys.argv  # the tables again from out/results_<model>.json
    for n in (names if merge else []):
        results += json.load(open(os.path.join(d, "out", "results_%s.json" % n)))
    for n in ([] if merge else names):
        t0 = time.time()
        r = eval_model(n, d, opts["--recipe"], opts["--calib-count"], timeout)
        r["fxkey"] = MODELS[n][2]
        f = os.path.join(d, MODELS[n][0])
        r["opset"] = opset(f) if os.path.exists(f) else None
        results.append(r)
        print("%-22s done in %.0f s; ORT %s, qrl %s, failures: %s" % (
            n, time.time() - t0, r.get("ort", {}).get("sqnr_db"), r.get("qrl", {}).get("sqnr_db"),
            "; ".join(r["failures"]) or "none"), flush=True)
        json.dump(results, open(os.path.join(d, "out", "results%s.json" % opts["--tag"]), "w"), indent=1)
    if merge:
        json.dump(results, open(os.path.join(d, "out", "results%s.json" % opts["--tag"]), "w"), indent=1)
    t = table2(results, fx) + "\n\n" + table(results, fx)
    fails = ["* %s: %s" % (r["model"], f) for r in results for f in r["failures"]]
    summ = ["* %s: %s" % (r["model"], " | ".join("%s: %s" % kv for kv in r.get("summary", {}).items()))
            for r in results if r.get("summary")]
    text = t + "\n\nFailures and symptoms:\n" + ("\n".join(fails) or "none") + "\n\nqrl quantize summaries:\n" + \
        "\n".join(summ) + "\n"
    open(os.path.join(d, "out", "results%s.md" % opts["--tag"]), "w").write(text)
    print()
    print(text)


if __name__ == "__main__":
    main()
