#!/usr/bin/python3
"""How much an unseen SQNR figure rests on which samples (QRL-J): runs the
f32 model and its quantized export in ONNX Runtime (node tools/ort_sqnr.js
--run) on the same samples and prints, per output, the pooled SQNR
(tools/ort_sqnr.js's figure: sum ref^2 / sum (ref - test)^2 over the
samples), the 5th and 95th percentiles of that pooled figure over 2000
bootstrap resamples of the samples (seed 0), the per-sample SQNRs' minimum
and median, and the pooled figure on the first K samples (--first K, e.g.
the 8 an earlier, smaller test file held).

Usage: /usr/bin/python3 tools/unseen_spread.py REF.onnx TEST.onnx X.npy [--first K]
Needs node and build/npm/node_modules (onnxruntime-node). Prints one JSON line.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(model, x, out):
    env = dict(os.environ, NODE_PATH=os.path.join(ROOT, "build", "npm", "node_modules"))
    lines = subprocess.run(["node", os.path.join(ROOT, "tools", "ort_sqnr.js"), "--run", model, out, x],
                           check=True, env=env, stdout=subprocess.PIPE, text=True).stdout.splitlines()
    names = [ln.split()[1] for ln in lines if ln.split() and ln.split()[0].endswith(".npy")]  # "K.npy NAME [dims]"
    return [np.load(os.path.join(out, "%d.npy" % i)).astype(np.float64) for i in range(len(names))], names


def db(sig, err):
    return float("inf") if err == 0 else 10 * np.log10(sig / err) if sig > 0 else float("-inf")


def main():
    args = sys.argv[1:]
    first = 0
    if "--first" in args:
        i = args.index("--first")
        first = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    ref_path, test_path, x = args
    with tempfile.TemporaryDirectory() as tmp:
        ref, names = run(ref_path, x, os.path.join(tmp, "ref"))
        test, _ = run(test_path, x, os.path.join(tmp, "test"))
    rng = np.random.default_rng(0)
    outs = []
    for name, r, t in zip(names, ref, test):
        n = r.shape[0]
        sig = (r.reshape(n, -1) ** 2).sum(1)
        err = ((r - t).reshape(n, -1) ** 2).sum(1)
        boot = []
        for _ in range(2000):
            k = rng.integers(0, n, n)
            boot.append(db(sig[k].sum(), err[k].sum()))
        per = [db(s, e) for s, e in zip(sig, err)]
        o = {"name": name, "n": n, "pooled_db": round(db(sig.sum(), err.sum()), 2),
             "boot_p5_db": round(float(np.percentile(boot, 5)), 2),
             "boot_p95_db": round(float(np.percentile(boot, 95)), 2),
             "sample_min_db": round(float(np.min(per)), 2), "sample_median_db": round(float(np.median(per)), 2)}
        if first:
            o["first_%d_db" % first] = round(db(sig[:first].sum(), err[:first].sum()), 2)
        outs.append(o)
    outs.sort(key=lambda o: o["pooled_db"])
    print(json.dumps({"outputs": outs}))


if __name__ == "__main__":
    main()
