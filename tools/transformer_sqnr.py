#!/usr/bin/python3
"""Accuracy of QRL-H's transformers (tools/make_transformer_models.py) next to PyTorch's
quantize_dynamic, on the 16 test samples (NAME_test.npy, never used to calibrate):

  PyTorch dynamic  torch.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
                   (tools/torch_bench.py's dynamic(): fbgemm where this torch has it, else
                   onednn, which like fbgemm quantizes activations to 7 bits; the qnnpack
                   engine's SQNR, 8-bit activations, is written next to it)
  QRL              per recipe: `qrl quantize` (1 thread: its time, the MAC share and SQNR it
                   prints, the export NAME.TAG.onnx), then the recipe's integer graph on the test
                   samples (`qrl run MODEL --recipe R --calib NAME_calib.npy -i NAME_test.npy`)
                   and ONNX Runtime on the export (tools/ort_run.js)
  QRL f32          `qrl run` of the f32 model (a check of the export and of QRL's f32 kernels)

SQNR = 10 log10(sum y^2 / sum (y - y_hat)^2) over all test outputs, y PyTorch's f32 output.
"torch MACs" is the share of the f32 model's multiply-accumulates (Conv, Gemm and MatMul,
activation x activation products included, as `qrl bench` counts them) that quantize_dynamic
runs in integers: nn.MultiheadAttention's in-projection and out_proj are not nn.Linear
modules it swaps, and attention's products stay f32.

A model whose input has a fixed batch (gpt: ids [1, seq]) runs its test samples one at a time
(QRL: one `qrl run --recipe` each, so one quantize each). A missing recipe file or a failed
quantize leaves its row's QRL columns empty with a one-line message; it never fails the run.

Usage: /usr/bin/python3 tools/transformer_sqnr.py NAME DIR [--qrl BIN] [--recipe R.qrl]...
                                                  [--json OUT.json] [--no-qrl]
  NAME  bert, gpt, vit or swin; DIR holds NAME.onnx, NAME.pt, NAME_calib.npy, NAME_test.npy as
        make_transformer_models.py DIR [--size small|bench] [--vit] [--swin] writes them
  --qrl       the qrl binary (default build/qrl)
  --recipe    a recipe (repeatable; default recipes/int8.qrl and recipes/int8-dynamic.qrl)
  --json      also writes every number to OUT.json (bench/report.py reads it)
  --no-qrl    PyTorch's numbers only
Writes DIR/NAME.TAG.onnx (TAG: the recipe's file name without .qrl), NAME.TAG.quantize.txt
(what quantize printed), NAME.TAG.quantize.json ({"quantize_s": ...}) and run outputs under
DIR/NAME.sqnr/. Needs onnxruntime-node on NODE_PATH for the ORT column (`make ort`:
build/npm/node_modules).
e.g. /usr/bin/python3 tools/make_transformer_models.py build/tf --size small
     NODE_PATH=build/npm/node_modules /usr/bin/python3 tools/transformer_sqnr.py bert build/tf
"""
import contextlib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_bench  # noqa: E402  (engine(), dynamic(), build())

DEFAULT_RECIPES = ["recipes/int8.qrl", "recipes/int8-dynamic.qrl"]


def sqnr(y, yq):
    """10 log10(sum y^2 / sum (y - yq)^2); NaN when it is undefined (y all zeros, or not finite)."""
    y = np.asarray(y, dtype=np.float64)
    e = np.sum((y - np.asarray(yq, dtype=np.float64)) ** 2)
    if not np.isfinite(e) or not np.any(y):
        return float("nan")
    return float("inf") if e == 0 else float(10 * np.log10(np.sum(y ** 2) / e))


def first_line(text):
    """The first line that says error, else the last line."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()] or ["(no message)"]
    return next((ln for ln in lines if "error" in ln), lines[-1])


def fixed_batch(onnx_path):
    """The first input's fixed first dimension, or None when it is free."""
    import onnx
    m = onnx.load(onnx_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    d = inp.type.tensor_type.shape.dim[0]
    return d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None


def only_npy(d):
    files = sorted(glob.glob(os.path.join(d, "*.npy")))
    if len(files) != 1:
        raise RuntimeError("%s: expected one output .npy, found %d" % (d, len(files)))
    return np.load(files[0])


class Model:
    def __init__(self, name, d):
        self.name, self.dir = name, d
        self.onnx = os.path.join(d, name + ".onnx")
        self.state = os.path.join(d, name + ".pt")
        self.calib = os.path.join(d, name + "_calib.npy")
        self.test_file = os.path.join(d, name + "_test.npy")
        self.work = os.path.join(d, name + ".sqnr")
        self.test = np.load(self.test_file)
        self.fixed = fixed_batch(self.onnx)
        self.chunk = self.fixed or len(self.test)
        # the test set in runs the model takes: one file for a free batch, else one per sample
        if self.chunk == len(self.test):
            self.inputs = [self.test_file]
        else:
            os.makedirs(os.path.join(self.work, "in"), exist_ok=True)
            self.inputs = []
            for k in range(0, len(self.test), self.chunk):
                p = os.path.join(self.work, "in", "test_%02d.npy" % k)
                np.save(p, self.test[k:k + self.chunk])
                self.inputs.append(p)


@contextlib.contextmanager
def quiet(on):
    """stderr (the file descriptor) to /dev/null while on: qnnpack's dynamic Linear logs, on every
    call, that it ignores reduce_range."""
    if not on:
        yield
        return
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def torch_side(m):
    """PyTorch f32 outputs, quantize_dynamic's SQNR (the default engine and qnnpack) and the
    MACs quantize_dynamic runs in integers per sample."""
    eng = torch_bench.engine()
    state = torch.load(m.state)
    f32 = torch_bench.build(m.name, state)
    x = torch.from_numpy(m.test)
    res = {"engine": eng}
    with torch.inference_mode():
        y = f32(x).numpy()
    for e in [eng] + (["qnnpack"] if eng != "qnnpack" and "qnnpack" in torch.backends.quantized.supported_engines
                      else []):
        torch.backends.quantized.engine = e
        q = torch_bench.dynamic(torch_bench.build(m.name, state))
        macs = [0]

        def hook(mod, inp, out):
            macs[0] += inp[0].numel() // mod.in_features * mod.in_features * mod.out_features

        for mod in q.modules():
            if isinstance(mod, torch.nn.quantized.dynamic.Linear):
                mod.register_forward_hook(hook)
        with torch.inference_mode(), quiet(e == "qnnpack"):
            yq = q(x).numpy()
        if e == eng:
            res["dynamic_sqnr"] = sqnr(y, yq)
            res["dynamic_int_macs_per_sample"] = macs[0] / len(m.test)
            res["dynamic_linears"] = sum(isinstance(mod, torch.nn.quantized.dynamic.Linear) for mod in q.modules())
            res["linears"] = sum(isinstance(mod, torch.nn.Linear) for mod in f32.modules())
        else:
            res["dynamic_sqnr_" + e] = sqnr(y, yq)
    torch.backends.quantized.engine = eng
    return y, res


def run(cmd, log):
    """cmd's status; its output appended to log."""
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode


def qrl_outputs(m, qrl, extra, out_dir, log):
    """`qrl run` of m (extra: the recipe options) on every test input: the outputs stacked."""
    shutil.rmtree(out_dir, ignore_errors=True)
    outs = []
    for k, inp in enumerate(m.inputs):
        od = os.path.join(out_dir, "%02d" % k)
        if run([qrl, "run", m.onnx] + extra + ["-i", inp, "-o", od], log) != 0:
            raise RuntimeError("qrl run failed (%s)" % log)
        outs.append(only_npy(od))
    return np.concatenate(outs)


def ort_outputs(m, model, out_dir, log):
    shutil.rmtree(out_dir, ignore_errors=True)
    jobs = os.path.join(out_dir + ".jobs")
    with open(jobs, "w") as f:
        for k, inp in enumerate(m.inputs):
            f.write("%s %s -o %s\n" % (model, inp, os.path.join(out_dir, "%02d" % k)))
    if run(["node", os.path.join(HERE, "ort_run.js"), "--batch", jobs], log) != 0:
        raise RuntimeError("ORT failed (%s)" % log)
    return np.concatenate([only_npy(os.path.join(out_dir, "%02d" % k)) for k in range(len(m.inputs))])


def total_macs(m, qrl, log):
    """MACs per sample of the f32 model as `qrl bench` counts them (every Conv, Gemm, MatMul)."""
    j = os.path.join(m.work, "f32_macs.json")
    if run([qrl, "bench", m.onnx, "--batch", str(m.fixed or 1), "--min-time", "0",
            "--json", j], log) != 0:
        return None
    with open(j) as f:
        r = json.load(f)["results"][0]
    return r["macs_per_image"]


QUANT_RE = re.compile(r"^output:\s+SQNR ([-0-9.infa]+) dB .*?; ([0-9.]+)% of ([0-9.e+]+) MACs per sample")


def qrl_recipe(m, qrl, recipe, y, log):
    tag = os.path.basename(recipe)[:-4] if recipe.endswith(".qrl") else os.path.basename(recipe)
    row = {"recipe": recipe, "tag": tag}
    if not os.path.exists(recipe):
        row["error"] = "%s does not exist" % recipe
        return row
    export = os.path.join(m.dir, "%s.%s.onnx" % (m.name, tag))
    qtxt = os.path.join(m.dir, "%s.%s.quantize.txt" % (m.name, tag))
    t0 = time.time()
    with open(qtxt, "w") as f:
        p = subprocess.run([qrl, "quantize", m.onnx, "--recipe", recipe, "--calib", m.calib, "-o", export,
                            "--threads", "1"], stdout=f, stderr=subprocess.STDOUT)
    row["quantize_s"] = time.time() - t0
    with open(os.path.join(m.dir, "%s.%s.quantize.json" % (m.name, tag)), "w") as f:
        json.dump({"quantize_s": row["quantize_s"], "ok": p.returncode == 0}, f)
    with open(qtxt) as f:
        text = f.read()
    if p.returncode != 0:
        row["error"] = "quantize failed: " + first_line(text)
        if os.path.exists(export):
            os.remove(export)
        return row
    for line in text.splitlines():
        mm = QUANT_RE.match(line)
        if mm:
            row["quantize_sqnr_calib"] = float(mm.group(1))
            row["mac_share"] = float(mm.group(2)) / 100
            row["qrl_macs_per_sample"] = float(mm.group(3))
    try:
        yq = qrl_outputs(m, qrl, ["--recipe", recipe, "--calib", m.calib], os.path.join(m.work, "qrl_" + tag), log)
        row["qrl_sqnr"] = sqnr(y, yq.reshape(y.shape))
    except (RuntimeError, ValueError) as e:
        row["qrl_error"] = str(e)
    try:
        yo = ort_outputs(m, export, os.path.join(m.work, "ort_" + tag), log)
        row["ort_sqnr"] = sqnr(y, yo.reshape(y.shape))
    except (RuntimeError, ValueError) as e:
        row["ort_error"] = str(e)
    return row


def fmt(v, spec="%6.1f"):
    return spec % v if isinstance(v, (int, float)) else "%6s" % "-"


def finite(v):
    """v with every NaN or infinite float as None (JSON has neither)."""
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return None if isinstance(v, float) and not np.isfinite(v) else v


def print_table(results, out=sys.stdout):
    """The table bench/report.py prints too."""
    hdr = "%-5s %-14s | %8s %8s %8s | %8s %7s | %8s %7s | %8s" % (
        "model", "recipe", "QRL dB", "ORT dB", "torch dB", "QRL MACs", "torch", "quant s", "f32 dB", "qnnpack")
    print("SQNR on the 16 test samples against PyTorch f32 (QRL: the recipe's integer graph; ORT: on QRL's export;"
          " torch: quantize_dynamic, %s); MAC shares in integers" % (
              next(iter(results.values()), {}).get("torch", {}).get("engine", "?")), file=out)
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for name, r in results.items():
        t = r.get("torch", {})
        tm = t.get("dynamic_int_macs_per_sample")
        share = tm / r["macs_per_sample"] if tm is not None and r.get("macs_per_sample") else None
        for q in r.get("recipes") or [{"tag": "-"}]:
            ms = q.get("mac_share")
            print("%-5s %-14s | %8s %8s %8s | %8s %7s | %8s %7s | %8s" % (
                name, q["tag"], fmt(q.get("qrl_sqnr")), fmt(q.get("ort_sqnr")), fmt(t.get("dynamic_sqnr")),
                fmt(100 * ms if ms is not None else None, "%7.1f%%"),
                fmt(100 * share if share is not None else None, "%6.1f%%"),
                fmt(q.get("quantize_s") if not q.get("error") else None),
                fmt(r.get("qrl_f32_sqnr")), fmt(t.get("dynamic_sqnr_qnnpack"))), file=out)
            for k in ("error", "qrl_error", "ort_error"):
                if q.get(k):
                    print("      %s %s: %s" % (name, q["tag"], q[k]), file=out)


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    name, d = args[0], args[1]
    qrl, recipes, out_json, no_qrl = "build/qrl", [], None, False
    i = 2
    while i < len(args):
        a = args[i]
        if a in ("--qrl", "--recipe", "--json") and i + 1 < len(args):
            if a == "--qrl":
                qrl = args[i + 1]
            elif a == "--recipe":
                recipes.append(args[i + 1])
            else:
                out_json = args[i + 1]
            i += 2
        elif a == "--no-qrl":
            no_qrl, i = True, i + 1
        else:
            sys.exit("transformer_sqnr: unexpected argument %s\n%s" % (a, __doc__))
    recipes = recipes or DEFAULT_RECIPES
    m = Model(name, d)
    os.makedirs(m.work, exist_ok=True)
    log = os.path.join(m.work, "log.txt")
    open(log, "w").close()
    y, tres = torch_side(m)
    res = {"model": name, "onnx": m.onnx, "test_samples": len(m.test), "torch": tres, "recipes": []}
    if not no_qrl:
        res["macs_per_sample"] = total_macs(m, qrl, log)
        try:
            res["qrl_f32_sqnr"] = sqnr(y, qrl_outputs(m, qrl, [], os.path.join(m.work, "qrl_f32"), log).reshape(y.shape))
        except (RuntimeError, ValueError) as e:
            res["qrl_f32_error"] = str(e)
        for r in recipes:
            res["recipes"].append(qrl_recipe(m, qrl, r, y, log))  # errors: printed under the table's row
    print_table({name: res})
    if out_json:
        tmp = out_json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(finite(res), f, indent=1)
        os.replace(tmp, out_json)


if __name__ == "__main__":
    main()
