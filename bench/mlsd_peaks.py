#!/usr/bin/python3
"""How fragile M-LSD's `scores` output is: its peak statistics on given images (ONNX Runtime).

Usage: /usr/bin/python3 bench/mlsd_peaks.py MODEL.onnx X.npy OUTDIR
M-LSD (keijiro's port, tools/fetch_mlsd.sh) ends in its decoder's peak picking:
scores = s * (s == MaxPool3x3(s)), s = Sigmoid(center). A copy of the model also outputs the
center logits (the Sigmoid's input); ONNX Runtime runs it on X. Printed: peaks per image (all, and
above 0.1), the share of the output's energy the peaks above 0.1 hold, the quantiles of the gap
between a peak above 0.1 and its best 3x3 neighbour (in score units: the change that moves it),
and what white noise on the center logits, at S dB below their RMS, leaves of the output's SQNR
(numpy's peak picking in float64 on the noisy logits against the same on the clean ones).
"""
import os
import subprocess
import sys

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peaks(lg):
    s = 1 / (1 + np.exp(-lg))
    h, w = s.shape[1:]
    p = np.pad(s, ((0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    nb = np.stack([p[:, i:i + h, j:j + w] for i in range(3) for j in range(3)])
    return s, s * (s == nb.max(0)), np.delete(nb, 4, 0).max(0)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model, x, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    m = onnx.load(model)
    sig = [n for n in m.graph.node if n.op_type == "Sigmoid"]
    if len(sig) != 1:
        sys.exit("mlsd_peaks: expected one Sigmoid (M-LSD's center map), found %d" % len(sig))
    m.graph.output.append(onnx.helper.make_tensor_value_info(sig[0].input[0], onnx.TensorProto.FLOAT, None))
    path = os.path.join(out, "logits.onnx")
    onnx.save(m, path)
    env = dict(os.environ)
    env.setdefault("ORT_NODE_MODULE", os.path.join(ROOT, "build", "npm", "node_modules", "onnxruntime-node"))
    subprocess.run(["node", os.path.join(ROOT, "tools", "ort_sqnr.js"), "--run", path, os.path.join(out, "o"), x],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    k = len(m.graph.output) - 1
    lg = np.load(os.path.join(out, "o", "%d.npy" % k)).astype(np.float64)
    lg = lg.reshape(lg.shape[0], lg.shape[-2], lg.shape[-1])
    s, ref, nb = peaks(lg)
    v = ref[ref > 0]
    strong = ref > 0.1
    print("images %d: peaks per image %.1f, above 0.1 %.1f, holding %.1f%% of the output's energy"
          % (len(lg), (ref > 0).sum() / len(lg), strong.sum() / len(lg), 100 * (v[v > 0.1] ** 2).sum() / (v ** 2).sum()))
    gap = (s - nb)[strong]
    print("gap of a peak above 0.1 to its best neighbour: 1%% %.5f, 5%% %.5f, 10%% %.5f, median %.5f"
          % tuple(np.quantile(gap, [0.01, 0.05, 0.1, 0.5])))
    rms = np.sqrt((lg ** 2).mean())
    rng = np.random.default_rng(0)
    for db in (90, 80, 75, 70, 60, 50, 40):
        _, t, _ = peaks(lg + rng.standard_normal(lg.shape) * rms * 10 ** (-db / 20))
        print("white noise on the center logits at %d dB below their RMS: scores %.1f dB"
              % (db, 10 * np.log10((ref ** 2).sum() / ((t - ref) ** 2).sum())))


if __name__ == "__main__":
    main()
