#!/usr/bin/python3
"""Mixed precision on the GPT-layout decoder (QRL-I 5's measurement, docs/quantizer.md): quantizes
gpt.onnx of tools/make_transformer_models.py --size bench with recipes/mixed-w48.qrl (i4 or i8 per
weight, blocks of 32, budget = bits(6)) and, for the same-size comparison, uniform i4 in blocks of
32 (recipes/w4-rtn.qrl: 5 bits a weight) and of 16 (6 bits). The calibration file is the 32
calibration samples then the 16 test samples, and the mixed recipe holds out the last 16
(validate = 0.34): the test samples never choose. Every figure is on the test samples: QRL's
output SQNR against the f32 model, and ONNX Runtime's (tools/ort_sqnr.js, the f32 model against
the export, both in ORT). Prints the mixed front as qrl prints it, then one row per model.

Usage: /usr/bin/python3 tools/mixed_gpt_report.py DIR   (DIR from make_transformer_models.py)
Environment: QRL_BIN (default build/qrl), ORT_NODE_MODULE as tools/ort_sqnr.js reads it."""
import json
import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    d = sys.argv[1]
    qrl = os.environ.get("QRL_BIN", os.path.join(ROOT, "build", "qrl"))
    calib, test = np.load(os.path.join(d, "gpt_calib.npy")), np.load(os.path.join(d, "gpt_test.npy"))
    both = os.path.join(d, "gpt_calib_test.npy")
    np.save(both, np.concatenate([calib, test]))
    frac = (test.shape[0] + 0.5) / (calib.shape[0] + test.shape[0])  # floor(count * frac) = the test samples
    recipes = {
        "mixed-w48, bits(6)": re.sub(r"validate\s*=\s*[0-9.]+", "validate = %.4f" % frac,
                                     open(os.path.join(ROOT, "recipes", "mixed-w48.qrl")).read()),
        "uniform i4, blocks of 32": open(os.path.join(ROOT, "recipes", "w4-rtn.qrl")).read(),
        "uniform i4, blocks of 16": re.sub(r"block\s*=\s*32", "block = 16",
                                           open(os.path.join(ROOT, "recipes", "w4-rtn.qrl")).read()),
    }
    rows = []
    for i, (name, src) in enumerate(recipes.items()):
        recipe, out = os.path.join(d, "mixed_report_%d.qrl" % i), os.path.join(d, "mixed_report_%d.onnx" % i)
        open(recipe, "w").write(src)
        mixed = name.startswith("mixed")
        log = subprocess.run([qrl, "quantize", os.path.join(d, "gpt.onnx"), "--recipe", recipe, "--calib",
                              both if mixed else os.path.join(d, "gpt_test.npy"), "-o", out, "--quiet"],
                             check=True, capture_output=True, text=True).stdout
        if mixed:
            print(log)
        q = float(re.search(r"output:\s+SQNR (\S+) dB", log).group(1))
        ort = json.loads(subprocess.run(["node", os.path.join(ROOT, "tools", "ort_sqnr.js"), os.path.join(d, "gpt.onnx"),
                                         out, os.path.join(d, "gpt_test.npy")], check=True, capture_output=True,
                                        text=True).stdout.splitlines()[-1])["sqnr_db"]
        rows.append((name, os.path.getsize(out), q, ort))
    print("%-26s %12s %16s %16s" % ("model", "file bytes", "QRL SQNR (test)", "ORT SQNR (test)"))
    for r in rows:
        print("%-26s %12d %13.2f dB %13.2f dB" % r)


if __name__ == "__main__":
    main()
