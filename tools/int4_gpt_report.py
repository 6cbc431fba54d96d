#!/usr/bin/python3
"""Weight-only int4 on the GPT-layout decoder (QRL-I's measurement): quantizes gpt.onnx of
tools/make_transformer_models.py with recipes/w4-rtn.qrl at blocks of 32 and 128 (DequantizeLinear) and 32 (--weight-format
matmulnbits), and with recipes/w4-gptq.qrl (blocks of 32, both forms; GPTQ's Hessian from the calibration ids gpt_calib.npy,
never the test ids), and with recipes/w4a8-dynamic.qrl (matmulnbits, accuracy_level 4: int8 activations), runs each
export in QRL (`qrl run`, one sample at a time: the model's batch is 1) and in ONNX Runtime (tools/ort_run.js, one job per sample) on
the test ids, and prints per block size: the output SQNR against PyTorch's f32 logits
(gpt_test_f32.npy), ORT's output against QRL's (max |diff| / max |f32|), and the file size against
the fp32 model.

Usage: /usr/bin/python3 tools/int4_gpt_report.py DIR   (DIR from make_transformer_models.py)
Environment: QRL_BIN (default build/qrl), ORT_NODE_MODULE as tools/ort_run.js reads it."""
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sqnr(ref, x):
    return 10 * np.log10((ref.astype(np.float64) ** 2).sum() / ((ref.astype(np.float64) - x) ** 2).sum())


def main():
    d = sys.argv[1]
    qrl = os.environ.get("QRL_BIN", os.path.join(ROOT, "build", "qrl"))
    ids, f32 = np.load(os.path.join(d, "gpt_test.npy")), np.load(os.path.join(d, "gpt_test_f32.npy"))
    fp32_bytes = os.path.getsize(os.path.join(d, "gpt.onnx"))
    print("model: %s/gpt.onnx, %d bytes fp32; %d test samples of %d tokens" % (d, fp32_bytes, ids.shape[0], ids.shape[1]))
    jobs = []
    for i in range(ids.shape[0]):
        np.save(os.path.join(d, "ids_%d.npy" % i), ids[i:i + 1])
    for name, block, fmt in (("w4-rtn", 32, "qdq"), ("w4-rtn", 128, "qdq"), ("w4-rtn", 32, "matmulnbits"),
                             ("w4-gptq", 32, "qdq"), ("w4-gptq", 32, "matmulnbits"), ("w4a8-dynamic", 32, "matmulnbits")):
        src = open(os.path.join(ROOT, "recipes", name + ".qrl")).read()
        recipe = os.path.join(ROOT, "recipes", "%s-%d.tmp.qrl" % (name, block))  # beside the stdlib it imports
        open(recipe, "w").write(re.sub(r"block\s*=\s*32", "block = %d" % block, src))
        q = os.path.join(d, "gpt_%s_b%d_%s.onnx" % (name, block, fmt))
        log = subprocess.run([qrl, "quantize", os.path.join(d, "gpt.onnx"), "--recipe", recipe, "--calib",
                              os.path.join(d, "gpt_calib.npy"), "-o", q, "--weight-format", fmt], check=True,
                             capture_output=True, text=True)
        os.remove(recipe)
        calib_line = [l for l in log.stdout.splitlines() if l.startswith("output:")][0]
        ys = []
        for i in range(ids.shape[0]):  # the model's batch is fixed at 1
            out = os.path.join(d, "qrl_%s_b%d_%s_%d" % (name, block, fmt, i))
            subprocess.run([qrl, "run", q, "-i", os.path.join(d, "ids_%d.npy" % i), "-o", out], check=True,
                           capture_output=True)
            ys.append(np.load(os.path.join(out, "logits.npy")))
        y = np.concatenate(ys)
        jobs_file = os.path.join(d, "ort_jobs_%s_%d_%s.txt" % (name, block, fmt))
        with open(jobs_file, "w") as f:
            for i in range(ids.shape[0]):
                f.write("%s %s -o %s\n" % (q, os.path.join(d, "ids_%d.npy" % i), os.path.join(d, "ort_%s_b%d_%s_%d" % (name, block, fmt, i))))
        subprocess.run(["node", os.path.join(ROOT, "tools", "ort_run.js"), "--batch", jobs_file], check=True,
                       capture_output=True)
        yo = np.concatenate([np.load(os.path.join(d, "ort_%s_b%d_%s_%d" % (name, block, fmt, i), "logits.npy")) for i in range(ids.shape[0])])
        size = os.path.getsize(q)
        print("%-7s block %3d %-11s: SQNR %.2f dB vs f32 (QRL run), %.2f dB (ORT run); ORT vs QRL max|diff|/max|f32| %.2e; "
              "file %d bytes = %.3fx fp32; quantize's own line: %s" % (name, block, fmt, sqnr(f32, y.reshape(f32.shape)),
              sqnr(f32, yo.reshape(f32.shape)), np.abs(yo.reshape(f32.shape) - y.reshape(f32.shape)).max() /
              np.abs(f32).max(), size, size / fp32_bytes, calib_line.strip()))


if __name__ == "__main__":
    main()
