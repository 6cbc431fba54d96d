#!/usr/bin/python3
"""PyTorch's times for `make bench`: the f32 model and its FX post-training int8 version
(prepare_fx with get_default_qconfig_mapping, calibrated on the same samples as QRL, then
convert_fx; the fbgemm engine where this torch has it, else onednn), measured as `qrl bench`
measures: random inputs in [0, 1), one warm-up run, then runs until MIN_TIME seconds have
passed (at least three); median and fastest ms per batch.

Usage: /usr/bin/python3 tools/torch_bench.py NAME STATE.pt CALIB.npy BATCHES THREADS [MIN_TIME]
  NAME: a torchvision model (resnet18, mobilenet_v2, ...) or small_resnet
  (tools/make_bench_models.py); e.g. torch_bench.py resnet18 build/realmodels/resnet18.pt
  build/realmodels/tv_calib.npy 1,64 1,2 1.0
Prints one JSON object: {"engine": E, "fp32": [rows], "fx_int8": [rows]} with rows as
tools/ort_bench.js writes them.
"""
import json
import os
import sys
import time

import numpy as np
import torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def build(name):
    if name == "small_resnet":
        import make_bench_models
        return make_bench_models.build()
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


def inputs(shape):
    """Uniform in [0, 1) (numpy's generator, seed 12345: the values differ from qrl bench's, the
    times do not depend on them)."""
    return torch.from_numpy(np.random.default_rng(12345).random(shape, dtype=np.float32))


def time_model(model, x, threads, min_time):
    torch.set_num_threads(threads)
    with torch.inference_mode():
        model(x)  # warm-up: not counted
        ms = []
        start = time.perf_counter()
        while len(ms) < 3 or time.perf_counter() - start < min_time:
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    k = len(ms)
    med = ms[k // 2] if k % 2 else (ms[k // 2 - 1] + ms[k // 2]) / 2
    b = x.shape[0]
    return {"batch": b, "threads": threads, "runs": k, "ms_median": med, "ms_min": ms[0],
            "images_per_s": b * 1e3 / med}


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    name, state, calib_file, batches, threads = sys.argv[1:6]
    min_time = float(sys.argv[6]) if len(sys.argv) > 6 else 1.0
    batches = [int(v) for v in batches.split(",")]
    threads = [int(v) for v in threads.split(",")]
    engines = torch.backends.quantized.supported_engines
    engine = "fbgemm" if "fbgemm" in engines else "onednn"
    torch.backends.quantized.engine = engine
    model = build(name)
    model.load_state_dict(torch.load(state))
    model.eval()
    calib = np.load(calib_file)
    sample = tuple(calib.shape[1:])
    prepared = prepare_fx(model, get_default_qconfig_mapping(engine), (torch.from_numpy(calib[:1]),))
    with torch.inference_mode():
        for s in range(0, len(calib), 8):
            prepared(torch.from_numpy(calib[s:s + 8]))
    qmodel = convert_fx(prepared)
    out = {"engine": engine, "fp32": [], "fx_int8": []}
    for b in batches:
        x = inputs((b,) + sample)
        for t in threads:
            out["fp32"].append(time_model(model, x, t, min_time))
            try:
                out["fx_int8"].append(time_model(qmodel, x, t, min_time))
            except RuntimeError as e:  # e.g. torch 1.13's onednn on some depthwise convolutions: recorded
                out.setdefault("fx_int8_error", str(e).splitlines()[0])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
