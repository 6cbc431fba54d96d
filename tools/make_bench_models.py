#!/usr/bin/python3
"""The small ResNet of `make bench`: a CIFAR-style ResNet-8 (a 3x3 stem of 16 channels, three
BasicBlocks of 16, 32 and 64 channels, the last two with stride 2 and a 1x1 projection, global
average pooling, a 10-way fc) on 3x32x32 inputs: convolutions with residual Adds, small enough
to time at batch 64 in seconds.

Usage: /usr/bin/python3 tools/make_bench_models.py OUT_DIR
Writes small_resnet.onnx (opset 13, input "input" [batch,3,32,32], output "output"
[batch,10]), small_resnet.pt (its state dict, for tools/torch_bench.py) and
small_resnet_calib.npy [64,3,32,32]. Weights are random (seed 0); the BatchNormalization
statistics are re-estimated on the calibration data so every BN normalizes its input.
The calibration data: smooth random images (a 4x4 grid of N(0,1) values upsampled
bilinearly, plus N(0, 0.1) noise), seed 1.
"""
import os
import sys

import numpy as np
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (self.proj(x) if self.proj is not None else x))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def build():
    torch.manual_seed(0)
    return SmallResNet()


def calib_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    coarse = torch.randn(n, 3, 4, 4, generator=g)
    x = nn.functional.interpolate(coarse, size=(32, 32), mode="bilinear", align_corners=False)
    return (x + 0.1 * torch.randn(n, 3, 32, 32, generator=g)).numpy().astype(np.float32)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bench_models.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    calib = calib_data(64, 1)
    model = build()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.from_numpy(calib))
    model.eval()
    np.save(os.path.join(out, "small_resnet_calib.npy"), calib)
    torch.save(model.state_dict(), os.path.join(out, "small_resnet.pt"))
    path = os.path.join(out, "small_resnet.onnx")
    torch.onnx.export(model, torch.from_numpy(calib[:1]), path, opset_version=13, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                      do_constant_folding=True)
    print("wrote %s (%.1f KB), small_resnet.pt, small_resnet_calib.npy %s" %
          (path, os.path.getsize(path) / 1e3, calib.shape))


if __name__ == "__main__":
    main()
