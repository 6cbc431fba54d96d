#!/usr/bin/python3
"""QRL-I's closing table: per model and precision, the output SQNR on held-out samples, the file's
bytes and the speed, in QRL and in ONNX Runtime on the same file.

Models: the GPT-layout decoder of tools/make_transformer_models.py --size bench (gpt.onnx, calibrated
on gpt_calib.npy, 32 sequences; SQNR on gpt_test.npy, 16 sequences never calibrated on, against
PyTorch's f32 logits), torchvision ResNet-18 and MobileNetV2 (random weights,
tools/export_torchvision.py: NAME_dyn.onnx, calibrated on tv_calib.npy, 64 images; SQNR on
tv_test.npy, 16 images, against ONNX Runtime's run of the f32 model). Each export is run on the
held-out samples by QRL (`qrl run`) and by ONNX Runtime (tools/ort_run.js), and timed at batch 1,
one thread, by `qrl bench` and tools/ort_bench.js (median ms of runs for --min-time seconds); the
f32 row times the f32 model. The int4 rows' ORT column is ONNX Runtime's own MatMulNBits (RTN and
GPTQ files alike: ORT's kernels on QRL's integers).

Usage: /usr/bin/python3 tools/precision_table.py TV_DIR GPT_DIR [--min-time S] [MODEL...]
  TV_DIR: build/realmodels; GPT_DIR: make_transformer_models.py's; MODEL: gpt resnet18 mobilenet_v2
Environment: QRL_BIN, ORT_NODE_MODULE (as tools/ort_run.js), BENCH_WRAP (a command prefix for the
timing runs only, e.g. one that pauses other jobs), PRECISION_TABLE_REUSE=1 (keep the exports an
earlier run left in GPT_DIR/precision_work)."""
import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from w4a8_report import QRL, ROOT, gpt_runs, outputs, run, sqnr  # noqa: E402

NODE_TOOL = os.path.join(ROOT, "tools")
WRAP = shlex.split(os.environ.get("BENCH_WRAP", ""))

# (label, recipe file, extra quantize options); None: the f32 model itself
GPT_ROWS = [
    ("f32", None, []),
    ("int8 static (int8.qrl)", "int8.qrl", []),
    ("int8 dynamic (int8-dynamic.qrl)", "int8-dynamic.qrl", []),
    ("W4 RTN, blocks of 32 (w4-rtn.qrl), MatMulNBits", "w4-rtn.qrl", ["--weight-format", "matmulnbits"]),
    ("W4 RTN, INT4 DequantizeLinear", "w4-rtn.qrl", []),
    ("W4 GPTQ (w4-gptq.qrl), MatMulNBits", "w4-gptq.qrl", ["--weight-format", "matmulnbits"]),
    ("W4 RTN + int8 activations (w4a8-dynamic.qrl)", "w4a8-dynamic.qrl", ["--weight-format", "matmulnbits"]),
    ("W4A8 static (w4a8.qrl)", "w4a8.qrl", []),
    ("mixed W4/W8, 6 bits (mixed-w48.qrl)", "mixed-w48.qrl", []),
]
CNN_ROWS = [
    ("f32", None, []),
    ("int8 (int8.qrl)", "int8.qrl", []),
    ("W4A8 (w4a8.qrl)", "w4a8.qrl", []),
    ("W4A8, first Conv and classifier i8 (weight for)", "w4a8-ends8", []),
    ("A16W8 (a16w8.qrl)", "a16w8.qrl", []),
]
# w4a8.qrl with `weight for` the model's first Conv (its node's name) and its classifier (Gemm)
FIRST_CONV = {"resnet18": "/conv1/Conv", "mobilenet_v2": "/features/features.0/features.0.0/Conv"}


def ends8_recipe(work, model):
    src = open(os.path.join(ROOT, "recipes", "w4a8.qrl")).read()
    line = '  weight for Gemm, "%s" = i8 symmetric narrow per_channel by minmax(symmetric = true)\n' % FIRST_CONV[model]
    src = re.sub(r"(\n  weight +=[^\n]*\n)", lambda m: m.group(1) + line, src, count=1)
    path = os.path.abspath(os.path.join(work, "w4a8-ends8-%s.qrl" % model))  # quantize() reads a relative name under recipes/
    open(path, "w").write(src.replace("recipe w4a8 ", "recipe w4a8_ends8 "))
    return path


def bench(model, shape, vocab, min_time, work, tag):
    """(QRL ms, ORT ms): medians at batch 1, one thread."""
    j = os.path.join(work, tag + ".bench.json")
    subprocess.run(WRAP + [QRL, "bench", model, "--batch", "1", "--threads", "1", "--min-time", str(min_time),
                           "--json", j], check=True, capture_output=True)
    q = json.load(open(j))["results"][0]["ms_median"]
    o = subprocess.run(WRAP + ["node", os.path.join(NODE_TOOL, "ort_bench.js"), model, shape, "1", "1", str(min_time),
                               str(vocab)], check=True, capture_output=True, text=True).stdout
    return q, json.loads(o.strip().splitlines()[-1])["results"][0]["ms_median"]


def weight_bits(log):
    m = re.search(r"bytes: +(\d+) of weight integers", log)
    return m.group(1) if m else ""


def row(model, label, ref, y, yo, size, fp32, ms, log):
    q_ms, o_ms = ms
    print("| %s | %s | %.2f | %.2f | %s | %.3fx | %.3f | %.3f | %.2f |" %
          (model, label, sqnr(ref, y), sqnr(ref, yo), "{:,}".format(size), size / fp32, q_ms, o_ms, o_ms / q_ms),
          flush=True)
    if os.environ.get("PRECISION_TABLE_VERBOSE"):
        print("   " + log.strip().replace("\n", "\n   "), flush=True)


def quantize(model, recipe, extra, calib, out):
    if os.environ.get("PRECISION_TABLE_REUSE") and os.path.exists(out):
        return ""  # a rerun for the timings: the export of the same recipe is already there
    path = recipe if os.path.isabs(recipe) else os.path.join(ROOT, "recipes", recipe)
    return run([QRL, "quantize", model, "--recipe", path, "--calib", calib, "-o", out] + extra)


def cnn(tv, name, work, min_time):
    model = os.path.join(tv, name + "_dyn.onnx")
    test, calib = os.path.join(tv, "tv_test.npy"), os.path.join(tv, "tv_calib.npy")
    run(["node", os.path.join(NODE_TOOL, "ort_run.js"), model, test, "-o", os.path.join(work, name + "_f32")])
    ref = outputs(os.path.join(work, name + "_f32"), "output")
    fp32 = os.path.getsize(model)
    for i, (label, recipe, extra) in enumerate(CNN_ROWS):
        q, log = model, ""
        if recipe:
            q = os.path.join(work, "%s_%d.onnx" % (name, i))
            log = quantize(model, ends8_recipe(work, name) if recipe == "w4a8-ends8" else recipe, extra, calib, q)
        qo, oo = os.path.join(work, "%s_%d_qrl" % (name, i)), os.path.join(work, "%s_%d_ort" % (name, i))
        run([QRL, "run", q, "-i", test, "-o", qo])
        run(["node", os.path.join(NODE_TOOL, "ort_run.js"), q, test, "-o", oo])
        row(name, label, ref, outputs(qo, "output"), outputs(oo, "output"), os.path.getsize(q), fp32,
            bench(q, "3,224,224", 8, min_time, work, "%s_%d" % (name, i)), log)


def gpt(d, work, min_time):
    model = os.path.join(d, "gpt.onnx")
    ids, ref = np.load(os.path.join(d, "gpt_test.npy")), np.load(os.path.join(d, "gpt_test_f32.npy"))
    fp32 = os.path.getsize(model)
    for i in range(ids.shape[0]):  # the model's batch is fixed at 1
        np.save(os.path.join(work, "ids_%d.npy" % i), ids[i:i + 1])
    for r, (label, recipe, extra) in enumerate(GPT_ROWS):
        q, log = model, ""
        if recipe:
            q = os.path.join(work, "gpt_%d.onnx" % r)
            log = quantize(model, recipe, extra, os.path.join(d, "gpt_calib.npy"), q)
        y, yo = gpt_runs(q, ids.shape[0], work, "p%d" % r, ref.shape)
        row("GPT decoder", label, ref, y, yo, os.path.getsize(q), fp32,
            bench(q, str(ids.shape[1]), 1000, min_time, work, "gpt_%d" % r), log)


def main():
    args = sys.argv[1:]
    min_time = 2.0
    if "--min-time" in args:
        k = args.index("--min-time")
        min_time = float(args[k + 1])
        del args[k:k + 2]
    tv, gd = args[0], args[1]
    which = args[2:] or ["gpt", "resnet18", "mobilenet_v2"]
    work = os.path.join(gd, "precision_work")
    os.makedirs(work, exist_ok=True)
    print("| model | precision | SQNR, QRL (dB) | SQNR, ORT (dB) | file (bytes) | / fp32 | QRL ms | ORT ms | ORT / QRL |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m in which:
        if m == "gpt":
            gpt(gd, work, min_time)
        else:
            cnn(tv, m, work, min_time)


if __name__ == "__main__":
    main()
