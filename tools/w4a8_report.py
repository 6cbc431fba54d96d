#!/usr/bin/python3
"""W4A8 against int8 (QRL-I item 3's measurement): quantizes torchvision ResNet-18 and MobileNetV2
(random weights, tools/export_torchvision.py: NAME_dyn.onnx, calibrated on tv_calib.npy, 64
samples) and the GPT-layout decoder (tools/make_transformer_models.py --size bench: gpt.onnx,
gpt_calib.npy, 32 samples) with recipes/int8-minmax.qrl, recipes/w4a8.qrl and w4a8 with
per-channel RTN weights (minmax(symmetric = true)), then runs each export on held-out samples
(tv_test.npy, 16; gpt_test.npy, 16: never calibrated on) in QRL (`qrl run`: the integer graph) and
in ONNX Runtime (tools/ort_run.js), and prints per model and recipe: the output SQNR of both
against the f32 model's outputs (ONNX Runtime's run of the f32 model; PyTorch's logits for the
decoder), ORT's run against QRL's (SQNR), and the file's bytes against the fp32 model's.

Usage: /usr/bin/python3 tools/w4a8_report.py TV_DIR GPT_DIR [MODEL...]
       (TV_DIR: build/realmodels; GPT_DIR: make_transformer_models.py's; MODEL: resnet18,
       mobilenet_v2, gpt; default all three)
Environment: QRL_BIN (default build/qrl), ORT_NODE_MODULE as tools/ort_run.js reads it."""
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QRL = os.environ.get("QRL_BIN", os.path.join(ROOT, "build", "qrl"))


def sqnr(ref, x):
    ref = ref.astype(np.float64)
    return 10 * np.log10((ref ** 2).sum() / ((ref - x.astype(np.float64)) ** 2).sum())


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def recipes(work):
    src = open(os.path.join(ROOT, "recipes", "w4a8.qrl")).read()
    rtn = os.path.join(work, "w4a8-rtn.qrl")
    open(rtn, "w").write(src.replace("by mse()", "by minmax(symmetric = true)").replace("recipe w4a8", "recipe w4a8_rtn"))
    return [("int8-minmax", os.path.join(ROOT, "recipes", "int8-minmax.qrl")),
            ("w4a8", os.path.join(ROOT, "recipes", "w4a8.qrl")), ("w4a8 RTN", rtn)]


def outputs(d, name):
    return np.load(os.path.join(d, name + ".npy"))


def cnn(tv, name, work):
    model = os.path.join(tv, name + "_dyn.onnx")
    test = os.path.join(tv, "tv_test.npy")
    run(["node", os.path.join(ROOT, "tools", "ort_run.js"), model, test, "-o", os.path.join(work, name + "_f32")])
    ref = outputs(os.path.join(work, name + "_f32"), "output")
    fp32 = os.path.getsize(model)
    for tag, rec in recipes(work):
        q = os.path.join(work, "%s_%s.onnx" % (name, tag.replace(" ", "_")))
        log = run([QRL, "quantize", model, "--recipe", rec, "--calib", os.path.join(tv, "tv_calib.npy"), "-o", q])
        qo, oo = q[:-5] + "_qrl", q[:-5] + "_ort"
        run([QRL, "run", q, "-i", test, "-o", qo])
        run(["node", os.path.join(ROOT, "tools", "ort_run.js"), q, test, "-o", oo])
        report(name, tag, ref, outputs(qo, "output"), outputs(oo, "output"), os.path.getsize(q), fp32, log)


def gpt(d, work):
    model = os.path.join(d, "gpt.onnx")
    ids, ref = np.load(os.path.join(d, "gpt_test.npy")), np.load(os.path.join(d, "gpt_test_f32.npy"))
    fp32 = os.path.getsize(model)
    for i in range(ids.shape[0]):  # the model's batch is fixed at 1
        np.save(os.path.join(work, "ids_%d.npy" % i), ids[i:i + 1])
    for tag, rec in recipes(work):
        t = tag.replace(" ", "_")
        q = os.path.join(work, "gpt_%s.onnx" % t)
        log = run([QRL, "quantize", model, "--recipe", rec, "--calib", os.path.join(d, "gpt_calib.npy"), "-o", q])
        y, yo = gpt_runs(q, ids.shape[0], work, t, ref.shape)
        report("gpt", tag, ref, y, yo, os.path.getsize(q), fp32, log)


def gpt_runs(q, n, work, t, shape):
    """The decoder export q run by QRL and by ONNX Runtime on the n test sequences work/ids_I.npy
    (one at a time: the model's batch is 1): both logits, reshaped to shape."""
    ys = []
    jobs = os.path.join(work, "jobs_%s.txt" % t)
    with open(jobs, "w") as f:
        for i in range(n):
            x = os.path.join(work, "ids_%d.npy" % i)
            run([QRL, "run", q, "-i", x, "-o", os.path.join(work, "gq_%s_%d" % (t, i))])
            ys.append(outputs(os.path.join(work, "gq_%s_%d" % (t, i)), "logits"))
            f.write("%s %s -o %s\n" % (q, x, os.path.join(work, "go_%s_%d" % (t, i))))
    run(["node", os.path.join(ROOT, "tools", "ort_run.js"), "--batch", jobs])
    yo = [outputs(os.path.join(work, "go_%s_%d" % (t, i)), "logits") for i in range(n)]
    return np.concatenate(ys).reshape(shape), np.concatenate(yo).reshape(shape)


def report(name, tag, ref, y, yo, size, fp32, log):
    wb = re.search(r"bytes: +(\d+) of weight integers \((\d+) of (\d+) weights 4-bit\)", log)
    fb = re.search(r"(\d+) tensors fell back", log)
    print("%-12s %-11s | SQNR QRL %6.2f dB | ORT %6.2f dB | ORT vs QRL %6.1f dB | file %9d B = %.3fx fp32 | weights "
          "%s B, %s of %s 4-bit | %s fell back" % (name, tag, sqnr(ref, y), sqnr(ref, yo), sqnr(y, yo), size,
                                                  size / fp32, wb.group(1) if wb else "?", wb.group(2) if wb else "?",
                                                  wb.group(3) if wb else "?", fb.group(1) if fb else "?"), flush=True)


def main():
    tv, gd = sys.argv[1], sys.argv[2]
    which = sys.argv[3:] or ["resnet18", "mobilenet_v2", "gpt"]
    work = os.path.join(gd, "w4a8_work")
    os.makedirs(work, exist_ok=True)
    for m in which:
        if m == "gpt":
            gpt(gd, work)
        else:
            cnn(tv, m, work)


if __name__ == "__main__":
    main()
