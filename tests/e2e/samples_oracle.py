"""Oracle for samples = F (tests/e2e/test_quantize.c): each sample's output SQNR of an export
against its f32 model, both run by ONNX Runtime (tools/ort_sqnr.js --run), and their reductions
in numpy, against the figures qrl's summary gave.

Usage: samples_oracle.py MODEL.onnx EXPORT.onnx X.npy TOL FN=DB...
  FN one of sample_pooled, sample_mean, sample_median, sample_p10, sample_worst,
  sample_normalized, sample_balanced, sample_balanced_lower, sample_pooled_lower; DB the
  summary's output SQNR with samples = FN. Fails when one is off by more than TOL dB.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def outputs(model, x, d):
    subprocess.run(["node", os.path.join(root, "tools", "ort_sqnr.js"), "--run", model, d, x], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, ORT_OPT_LEVEL="disabled"))
    return np.load(os.path.join(d, "0.npy")).astype(np.float64)


def main(model, export, x, tol, claims):
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        ref, got = outputs(model, x, a), outputs(export, x, b)
    n = ref.shape[0]
    ref, got = ref.reshape(n, -1), got.reshape(n, -1)
    x2 = (ref ** 2).sum(axis=1)
    e2 = ((ref - got) ** 2).sum(axis=1)
    db = 10 * np.log10(x2 / e2)
    want = {"sample_pooled": 10 * np.log10(x2.sum() / e2.sum()), "sample_mean": db.mean(),
            "sample_median": np.quantile(db, 0.5), "sample_p10": np.quantile(db, 0.1), "sample_worst": db.min(),
            "sample_normalized": 10 * np.log10(n / (e2 / x2).sum()),
            "sample_balanced": 10 * np.log10(n / (e2 / np.maximum(x2, 0.01 * x2.mean())).sum())}
    r = e2 / np.maximum(x2, 0.01 * x2.mean())  # the mean ratio's one-sided 95% upper bound
    want["sample_balanced_lower"] = -10 * np.log10(r.mean() + (1.645 * r.std(ddof=1) / np.sqrt(n) if n > 1 else 0))
    q = e2.sum() / x2.sum()  # the pooled ratio at its one-sided 95% upper bound (the delta method)
    want["sample_pooled_lower"] = -10 * np.log10(q + (1.645 * (e2 - q * x2).std(ddof=1) / np.sqrt(n) / x2.mean()
                                                      if n > 1 else 0))
    print(json.dumps({"per_sample_db": [round(v, 3) for v in db], **{k: round(v, 3) for k, v in want.items()}}))
    bad = 0
    for c in claims:
        fn, v = c.split("=")
        if abs(want[fn] - float(v)) > tol:
            print(f"{fn}: qrl {float(v):.3f} dB, numpy on ONNX Runtime's outputs {want[fn]:.3f} dB")
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]))
