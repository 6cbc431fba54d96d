#!/usr/bin/python3
"""PyTorch FX post-training static quantization of the torchvision models
tools/export_torchvision.py made (same state dicts, same calibration data),
the reference column of the real-model evaluation (QRL-D).

Usage: /usr/bin/python3 tools/torch_fx_ptq.py [DIR] [--calib-count N] [--backend onednn|qnnpack|fbgemm]
                                              [--calib-spread K] [--test X.npy]... [--json OUT.json] [MODEL...]
DIR defaults to build/realmodels and must hold NAME.pt, tv_calib.npy, tv_test.npy.
--calib-spread K leaves the last of every K calibration samples out (samples
K-1, 2K-1, ...), so FX calibrates on the samples a QRL recipe with
`validate = 1/K` and `validate_from = spread` calibrates on (int8.qrl: K = 4,
48 of 64). --test X.npy (repeatable) measures on these files instead of
DIR/tv_test.npy, each on its own line, the model calibrated once.

Per model: prepare_fx with get_default_qconfig_mapping(BACKEND) (per-channel
weights, histogram observers for activations on onednn/fbgemm), calibration
on the first N samples of tv_calib.npy (all by default), convert_fx, then the
output SQNR of the int8 model against the fp32 model on tv_test.npy:
SQNR = 10*log10(sum(ref^2) / sum((ref - q)^2)) over all outputs and samples;
"mean dB" is the mean of each test sample's own SQNR (a sample whose outputs
carry most of the energy decides the first, not this one).
"quantize time" is prepare + calibration + convert (wall clock).
Debian's torch 1.13 has no fbgemm engine; onednn (x86) is the default here.
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torchvision
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

MODELS = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0")


def sqnr(ref, q):
    ref = ref.astype(np.float64)
    err = ((ref - q.astype(np.float64)) ** 2).sum()
    return float("inf") if err == 0 else 10 * np.log10((ref ** 2).sum() / err)


def sqnr_mean(ref, q):
    return float(np.mean([sqnr(r, t) for r, t in zip(ref, q)]))


def run(model, x, batch=8):
    with torch.no_grad():
        return np.concatenate([model(torch.from_numpy(x[s:s + batch])).numpy()
                               for s in range(0, len(x), batch)])


def main():
    args = sys.argv[1:]
    opts = {"--calib-count": None, "--backend": None, "--json": None, "--calib-spread": None}
    tests = []
    while "--test" in args:
        i = args.index("--test")
        tests.append(args[i + 1])
        del args[i:i + 2]
    for k in opts:
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    d = "build/realmodels"
    if args and os.path.isdir(args[0]):
        d = args.pop(0)
    names = args or list(MODELS)
    engines = torch.backends.quantized.supported_engines
    backend = opts["--backend"] or ("fbgemm" if "fbgemm" in engines else "onednn")
    if backend not in engines:
        sys.exit("torch_fx_ptq: backend %s not in this torch (%s)" % (backend, engines))
    torch.backends.quantized.engine = backend
    torch.set_num_threads(1)
    calib = np.load(os.path.join(d, "tv_calib.npy"))
    if opts["--calib-count"]:
        calib = calib[:int(opts["--calib-count"])]
    if opts["--calib-spread"]:
        k = int(opts["--calib-spread"])
        calib = calib[[i for i in range(len(calib)) if i % k != k - 1]]
    tests = tests or [os.path.join(d, "tv_test.npy")]
    sets = [(t, np.load(t)) for t in tests]
    results = {}
    print("backend %s, %d calibration samples, test sets %s, 1 thread"
          % (backend, len(calib), ", ".join("%s (%d)" % (t, len(x)) for t, x in sets)))
    print("%-20s %10s %10s %10s  %s" % ("model", "SQNR dB", "mean dB", "time s", "test set"))
    for name in names:
        model = getattr(torchvision.models, name)(weights=None)
        model.load_state_dict(torch.load(os.path.join(d, name + ".pt")))
        model.eval()
        t0 = time.time()
        try:
            prepared = prepare_fx(model, get_default_qconfig_mapping(backend), (torch.from_numpy(calib[:1]),))
            with torch.no_grad():
                for s in range(0, len(calib), 8):
                    prepared(torch.from_numpy(calib[s:s + 8]))
            qmodel = convert_fx(prepared)
            secs = time.time() - t0
        except Exception as e:  # record, go on with the next model
            print("%-20s failed: %s" % (name, str(e).splitlines()[0]))
            results[name] = {"error": str(e).splitlines()[0]}
            continue
        for t, test in sets:
            ref = run(model, test)
            q = run(qmodel, test)
            s = sqnr(ref, q)
            sm = sqnr_mean(ref, q)
            r = {"sqnr_db": s, "sqnr_mean_db": sm, "quantize_s": secs, "nonfinite": int((~np.isfinite(q)).sum())}
            if len(sets) == 1:
                results[name] = r
            else:
                results.setdefault(name, {})[t] = r
            print("%-20s %10.2f %10.2f %10.2f  %s" % (name, s, sm, secs, t))
    if opts["--json"]:
        with open(opts["--json"], "w") as f:
            json.dump({"backend": backend, "calib": len(calib), "test": [len(x) for _, x in sets], "models": results}, f, indent=1)


if __name__ == "__main__":
    main()
