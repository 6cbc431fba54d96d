#!/usr/bin/python3
"""A small CNN for dynamic quantization of convolutions (QRL-H item 4, tests/e2e/test_dynamic.c):
a torch.onnx export (opset 17, dynamic batch) with random weights of both signs and Convs at
non-default attributes, and an oracle of its dynamic quantization written here from the ONNX
definitions, independent of QRL.

  cnn    x [batch, 3, 16, 16] -> Conv 3->8 3x3 stride 2 pads 1 (bias) -> LeakyReLU
         -> Conv 8->8 3x3 dilation 2 pads 2 group 2 (no bias) -> GELU
         -> Conv 8->16 3x1 stride (1, 2) pads (1, 0) (bias) -> (no activation: both signs)
         -> Conv 16->16 3x3 depthwise (group 16, bias) -> Conv 16->12 1x1 (no bias)
         -> mean over H, W -> Linear 12->10 -> y [batch, 10]

Usage: /usr/bin/python3 tools/make_dynamic_cnn.py OUT_DIR
Writes cnn.onnx, cnn_calib.npy (16 samples), cnn_test.npy (8 other samples), cnn_test_f32.npy
(PyTorch's f32 outputs), cnn_test_dynamic.npy: the model with every Conv and the Linear
quantized dynamically as ONNX Runtime's quantize_dynamic would (per tensor): x quantized on each
call over the whole test batch by DynamicQuantizeLinear's formula (u8, range [min(0, min x),
max(0, max x)], scale range / 255 in f32, zero point round-half-even(clip(-min / scale, 0, 255)),
x as clip(round(x / scale) + zero, 0, 255)); weights i8 symmetric per output channel (scale
max|w| / 127.5, as QRL's stdlib symmetric minmax, integers round-half-even and clipped to
[-128, 127]); the int32 accumulator summed exactly (float64 of integers), then
f32(acc) * (x_scale * w_scale[c]) + bias[c] in f32; and cnn_test_dynamic_rows.npy, the same
with the Linear's input quantized per row (recipes/int8-dynamic.qrl: Convs per tensor, Linears per
row, here a row is a sample); cnn_calib_ranges.json, the f32 range each Conv and the Linear read
on the calibration samples (one batch), in order. Prints MACS: the Conv and Linear multiply-accumulates per sample.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=True)
        self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2, bias=False)
        self.c3 = nn.Conv2d(8, 16, (3, 1), stride=(1, 2), padding=(1, 0), bias=True)
        self.c4 = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=True)
        self.c5 = nn.Conv2d(16, 12, 1, bias=False)
        self.fc = nn.Linear(12, 10)

    def forward(self, x, conv=None, linear=None):
        conv = conv or (lambda m, x: m(x))
        linear = linear or (lambda m, x: m(x))
        x = F.leaky_relu(conv(self.c1, x), 0.1)
        x = F.gelu(conv(self.c2, x))
        x = conv(self.c3, x)
        x = conv(self.c4, x)
        x = conv(self.c5, x)
        return linear(self.fc, x.mean(dim=(2, 3)))


def dyn_quant(x, rows=False):
    """DynamicQuantizeLinear in f32 (rows: on each row of the last axis): (integers as f32, scale,
    zero point)."""
    x = x.float()
    lo = torch.clamp(x.amin(dim=-1, keepdim=True) if rows else x.min(), max=0.0)
    hi = torch.clamp(x.amax(dim=-1, keepdim=True) if rows else x.max(), min=0.0)
    scale = (hi - lo) / torch.tensor(255.0)
    scale = torch.where(scale == 0.0, torch.ones_like(scale), scale)
    zero = torch.round(torch.clamp(torch.tensor(0.0) - lo / scale, 0.0, 255.0))  # torch.round: half to even
    q = torch.clamp(torch.round(x / scale) + zero, 0.0, 255.0)
    return q, scale, zero


def weight_quant(w):
    """i8 symmetric per output channel (axis 0): (integers as f32, f32 scales)."""
    amax = w.detach().double().abs().reshape(w.shape[0], -1).max(dim=1).values
    scale = torch.clamp(amax / 127.5, min=1e-12).float()
    shape = (-1,) + (1,) * (w.dim() - 1)
    q = torch.clamp(torch.round(w.detach().float() / scale.reshape(shape)), -128.0, 127.0)
    return q, scale


def conv_dynamic(m, x):
    q, xs, xz = dyn_quant(x)
    wq, ws = weight_quant(m.weight)
    acc = F.conv2d((q - xz).double(), wq.double(), None, m.stride, m.padding, m.dilation, m.groups)
    y = acc.float() * (xs * ws).reshape(1, -1, 1, 1)
    return y + m.bias.detach().reshape(1, -1, 1, 1) if m.bias is not None else y


def linear_dynamic(m, x, rows=False):
    q, xs, xz = dyn_quant(x, rows)
    wq, ws = weight_quant(m.weight)  # [out, in]: per output channel
    acc = (q - xz).double() @ wq.double().T
    return acc.float() * (xs * ws) + m.bias.detach()


def macs(model, size=16):
    total, x = 0, torch.zeros(1, 3, size, size)
    def count(m, x):
        nonlocal total
        y = m(x)
        total += y.numel() * m.weight[0].numel()
        return y
    model(x, conv=count, linear=count)
    return total


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = CNN().eval()
    with torch.no_grad():  # biases large enough to matter, of both signs
        for m in (model.c1, model.c3, model.c4, model.fc):
            m.bias.copy_(0.2 * torch.randn_like(m.bias))
    rng = np.random.default_rng(1)
    calib = rng.normal(size=(16, 3, 16, 16)).astype(np.float32)
    test = np.random.default_rng(2).normal(size=(8, 3, 16, 16)).astype(np.float32)
    torch.onnx.export(model, (torch.from_numpy(calib[:1]),), os.path.join(out, "cnn.onnx"), opset_version=17,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    np.save(os.path.join(out, "cnn_calib.npy"), calib)
    np.save(os.path.join(out, "cnn_test.npy"), test)
    with torch.no_grad():
        t = torch.from_numpy(test)
        np.save(os.path.join(out, "cnn_test_f32.npy"), model(t).numpy())
        np.save(os.path.join(out, "cnn_test_dynamic.npy"),
                model(t, conv=conv_dynamic, linear=linear_dynamic).numpy())
        np.save(os.path.join(out, "cnn_test_dynamic_rows.npy"),
                model(t, conv=conv_dynamic, linear=lambda m, x: linear_dynamic(m, x, True)).numpy())
        ranges = []  # what each Conv and the Linear read on the calibration samples, in order
        def seen(m, x):
            ranges.append({"min": float(x.min()), "max": float(x.max())})
            return m(x)
        model(torch.from_numpy(calib), conv=seen, linear=seen)
        with open(os.path.join(out, "cnn_calib_ranges.json"), "w") as f:
            json.dump(ranges, f)
        print("MACS", macs(model))


if __name__ == "__main__":
    main()
