#!/usr/bin/python3
"""PyTorch's times for `make bench`: the f32 model and its FX post-training int8 version
(prepare_fx with get_default_qconfig_mapping, calibrated on the same samples as QRL, then
convert_fx; the fbgemm engine where this torch has it, else onednn), measured as `qrl bench`
measures: random inputs in [0, 1), one warm-up run, then runs until MIN_TIME seconds have
passed (at least three); median and fastest ms per batch.
The transformers of tools/make_transformer_models.py (bert, gpt, vit) get
torch.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8) instead of FX
(dynamic(): no calibration), and an i64 input (gpt's ids) gets ids in [0, vocabulary).

Usage: /usr/bin/python3 tools/torch_bench.py NAME STATE.pt CALIB.npy BATCHES THREADS [MIN_TIME]
  NAME: a torchvision model (resnet18, mobilenet_v2, ...), small_resnet
  (tools/make_bench_models.py) or bert, gpt, vit; e.g. torch_bench.py resnet18
  build/realmodels/resnet18.pt build/realmodels/tv_calib.npy 1,64 1,2 1.0
Prints one JSON object: {"engine": E, "fp32": [rows], "fx_int8": [rows]} (transformers:
"dynamic_int8" for "fx_int8") with rows as tools/ort_bench.js writes them.
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


TRANSFORMERS = ("bert", "gpt", "gpt_outliers", "vit", "swin")


def engine():
    """fbgemm where this torch has it, else onednn (the x86 engine of torch 1.13 builds without
    fbgemm; like fbgemm, its dynamic Linear honours reduce_range, 7-bit activations), else qnnpack."""
    engines = torch.backends.quantized.supported_engines
    e = next(e for e in ("fbgemm", "onednn", "qnnpack") if e in engines)
    torch.backends.quantized.engine = e
    return e


def dynamic(model):
    """torch.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8), as PyTorch
    documents it for transformers. Only nn.Linear modules are swapped: nn.MultiheadAttention's
    packed in-projection and its out_proj (a NonDynamicallyQuantizableLinear) stay f32."""
    q = torch.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    for m in q.modules():
        # torch 1.13's fused encoder-layer fast path reads linear1.weight as a tensor, which a
        # dynamic quantized Linear does not have (AttributeError): this flag only gates that fast
        # path, so the layer runs its ordinary (quantized) modules instead
        if isinstance(m, torch.nn.TransformerEncoderLayer):
            m.activation_relu_or_gelu = 0
    return q


def build(name, state=None):
    if name in TRANSFORMERS:
        import make_transformer_models
        return make_transformer_models.from_state(name, state)
    if name == "small_resnet":
        import make_bench_models
        return make_bench_models.build()
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


def inputs(shape, vocab=None):
    """Uniform in [0, 1) (numpy's generator, seed 12345: the values differ from qrl bench's, the
    times do not depend on them); with vocab, i64 ids in [0, vocab)."""
    rng = np.random.default_rng(12345)
    if vocab:
        return torch.from_numpy(rng.integers(0, vocab, shape, dtype=np.int64))
    return torch.from_numpy(rng.random(shape, dtype=np.float32))


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
    eng = engine()
    calib = np.load(calib_file)
    sample = tuple(calib.shape[1:])
    vocab = None
    if name in TRANSFORMERS:
        model = build(name, torch.load(state))
        qmodel, key = dynamic(build(name, torch.load(state))), "dynamic_int8"
        if calib.dtype == np.int64:
            vocab = model.tok.num_embeddings
    else:
        model = build(name)
        model.load_state_dict(torch.load(state))
        model.eval()
        prepared = prepare_fx(model, get_default_qconfig_mapping(eng), (torch.from_numpy(calib[:1]),))
        with torch.inference_mode():
            for s in range(0, len(calib), 8):
                prepared(torch.from_numpy(calib[s:s + 8]))
        qmodel, key = convert_fx(prepared), "fx_int8"
    out = {"engine": eng, "fp32": [], key: []}
    for b in batches:
        x = inputs((b,) + sample, vocab)
        for t in threads:
            out["fp32"].append(time_model(model, x, t, min_time))
            try:
                out[key].append(time_model(qmodel, x, t, min_time))
            except RuntimeError as e:  # e.g. torch 1.13's onednn on some depthwise convolutions: recorded
                out.setdefault(key + "_error", str(e).splitlines()[0])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
