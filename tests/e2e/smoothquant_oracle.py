#!/usr/bin/python3
"""The oracle of tests/e2e/test_smoothquant.c: SmoothQuant's rewrite of the small gpt_outliers
decoder (tools/make_transformer_models.py), computed from the paper's formula in PyTorch, never
from QRL:  s[j] = act[j]^alpha / weight[j]^(1 - alpha), act[j] the largest |LayerNorm output| of
channel j over the calibration samples (forward hooks on the PyTorch model), weight[j] the largest
|w| in input row j over the Linears reading that LayerNorm (ln1: attention's q, k and v; ln2: fc;
the final ln: the LM head); s = 1 where either is 0.

Checks QRL's export (the QDQ model) against it: each LayerNorm's scale and bias initializers are
the PyTorch ones divided by s (relative error 1e-4: QRL's f32 LayerNorm and PyTorch's round
differently), and each reader's int8 weight, dequantized, is the PyTorch weight with row j times
s[j] to within half a quantization step. Prints the number of values checked and the largest
errors; exits 1 on a mismatch.

With MODE awq (a weight-only export of recipes/w4-awq.qrl), the rewrite is AWQ's activation-aware
scaling instead: s[j] = mean[j]^alpha, mean[j] the mean |LayerNorm output| of channel j over the
calibration samples (s = 1 where it is 0), and each reader's weight is INT4 in blocks of 32 along
its input rows (symmetric, no zero point), dequantized block by block.

Usage: smoothquant_oracle.py DIR EXPORT.onnx ALPHA [TOOLS_DIR [MODE] [spread]]   (MODE smooth, the default,
or awq; spread: the statistics over the samples a recipe with validate_from = spread and validate = 0.25
calibrates on, all but the last of every four, as recipes/int8-smooth.qrl, which derives from int8.qrl)"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, sys.argv[4] if len(sys.argv) > 4 else "tools")
import make_transformer_models  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import int4_rtn_oracle  # noqa: E402  (its tensor(): an initializer as numpy, INT4 unpacked)


def main():
    d, export, alpha = sys.argv[1], sys.argv[2], float(sys.argv[3])
    awq = "awq" in sys.argv[5:]
    model = make_transformer_models.from_state("gpt_outliers", torch.load(d + "/gpt_outliers.pt"))
    calib = np.load(d + "/gpt_outliers_calib.npy")
    if "spread" in sys.argv[5:]:  # a recipe holding out the last of every four (validate_from = spread)
        calib = calib[[i for i in range(len(calib)) if i % 4 != 3]]
    calib = torch.from_numpy(calib)
    act, mean, rows = {}, {}, {}
    lns = [n for n, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm)]

    def hook(name):
        def f(_, __, out):
            o = out.detach().abs().reshape(-1, out.shape[-1]).double()
            a = o.amax(0)
            act[name] = torch.maximum(act[name], a) if name in act else a
            mean[name] = mean[name] + o.sum(0) if name in mean else o.sum(0)
            rows[name] = rows.get(name, 0) + o.shape[0]
        return f

    for n in lns:
        dict(model.named_modules())[n].register_forward_hook(hook(n))
    with torch.no_grad():
        for i in range(len(calib)):
            model(calib[i:i + 1])
    mods = dict(model.named_modules())

    def readers(ln):
        if ln == "ln":
            return ["head"]
        block = ln.rsplit(".", 1)[0]
        return [block + ".attn." + x for x in "qkv"] if ln.endswith("ln1") else [block + ".fc"]

    q = onnx.load(export)
    inits = {i.name: int4_rtn_oracle.tensor(i) for i in q.graph.initializer}
    orig = onnx.load(d + "/gpt_outliers.onnx")
    # the ONNX name of each Linear's weight: the MatMul whose output names the module
    weight_of = {}
    for node in orig.graph.node:
        if node.op_type == "MatMul" and node.input[1] in {i.name for i in orig.graph.initializer}:
            weight_of[node.output[0]] = node.input[1]
    checked, worst_ln, worst_w = 0, 0.0, 0.0
    for ln in lns:
        w = torch.stack([mods[r].weight.detach().abs().amax(0).double() for r in readers(ln)]).amax(0)
        a = act[ln]
        if awq:
            m = mean[ln] / rows[ln]
            s = torch.where(m > 0, m.pow(alpha), torch.ones_like(m)).numpy()
        else:
            s = torch.where((a > 0) & (w > 0), a.pow(alpha) / w.pow(1 - alpha), torch.ones_like(a)).numpy()
        for part in ("weight", "bias"):
            want = getattr(mods[ln], part).detach().double().numpy() / s
            got = inits[ln + "." + part].astype(np.float64)
            err = np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-12))
            worst_ln = max(worst_ln, err)
            checked += 1
            if err > 1e-4:
                print("%s.%s: relative error %.3g against PyTorch / s" % (ln, part, err))
                return 1
        for r in readers(ln):
            out = "/" + r.replace(".", "/").replace("blocks/", "blocks/blocks.", 1) + "/MatMul_output_0"
            if r == "head":
                out = "logits"
            name = weight_of[out]
            want = mods[r].weight.detach().double().numpy().T * s[:, None]
            if name + "_quantized" not in inits:  # a layer the fallback left in f32: the weight as is
                err = np.max(np.abs(inits[name] - want) / np.maximum(np.abs(want), 1e-12))
                worst_ln = max(worst_ln, err)
                checked += 1
                if err > 1e-4:
                    print("%s (%s, f32): relative error %.3g against PyTorch times s" % (r, name, err))
                    return 1
                continue
            if awq:  # INT4 blocks of 32 along the input rows: scale [blocks, out]
                wq = inits[name + "_quantized"].astype(np.float64)
                scale = np.repeat(inits[name + "_scale"].astype(np.float64), 32, axis=0)[:wq.shape[0]]
                deq = wq * scale
                err = np.max(np.abs(deq - want) / (0.5 * scale))
            else:
                wq = inits[name + "_quantized"].astype(np.float64)
                scale = inits[name + "_scale"].astype(np.float64)
                zero = inits[name + "_zero_point"].astype(np.float64)
                deq = (wq - zero) * scale  # per output channel: the last axis of [in, out]
                err = np.max(np.abs(deq - want) / (0.5 * scale[None, :]))
            worst_w = max(worst_w, err)
            checked += 1
            if err > 1.0 + 1e-3:
                print("%s (%s): dequantized weight off by %.3g half-steps from PyTorch's times s" % (r, name, err))
                return 1
    print("%d checked, LayerNorm relative error %.3g, weights %.3g half-steps" % (checked, worst_ln, worst_w))
    return 0


if __name__ == "__main__":
    sys.exit(main())
