#!/usr/bin/python3
"""Exports torchvision ResNet-18, MobileNetV2, MobileNetV3-small and
EfficientNet-B0 to ONNX for the real-model evaluation (QRL-D), with data.

Usage: /usr/bin/python3 tools/export_torchvision.py [OUT_DIR] [--calib N] [--test N]
       (OUT_DIR defaults to build/realmodels)

Needs python3-torch and python3-torchvision (Debian: apt-get install
python3-torchvision; it is not in tools/install-deps.sh since only this
script uses it).

Weights are random (torch.manual_seed(0), torchvision's own init), with one
change so that the activations look like a trained network's: the
BatchNormalization running statistics are re-estimated on the calibration
images (train mode, cumulative average, no gradient step), so every BN
normalizes its input instead of being the identity. The state dict is saved
(NAME.pt) so tools/torch_fx_ptq.py quantizes exactly the same network.

Writes, per model NAME in resnet18, mobilenet_v2, mobilenet_v3_small,
efficientnet_b0:
  NAME.onnx        opset 13, input "input" [1,3,224,224], output "output" [1,1000]
  NAME_dyn.onnx    the same with a dynamic batch dimension ("batch")
  NAME.pt          the state dict
and the data, NCHW float32, ImageNet-normalized ((x - mean) / std with
mean 0.485,0.456,0.406 and std 0.229,0.224,0.225 on RGB in [0,1]):
  tv_calib.npy     [64,3,224,224] synthetic structured images (seed 1),
                   see tools/realmodels_data.py
  tv_test.npy      [16,3,224,224] the same generator, seed 2
"""
import os
import sys

import numpy as np

try:
    import torch
    import torchvision
except ImportError as e:
    sys.exit("export_torchvision: %s; install Debian's python3-torchvision "
             "(apt-get install python3-torchvision) and run with /usr/bin/python3" % e)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import realmodels_data  # noqa: E402

MODELS = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0")
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def build(name):
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None)


def imagenet_batch(n, seed):
    x = realmodels_data.images(n, 224, 224, seed)
    x = (x - MEAN) / STD
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)).astype(np.float32)


def recalibrate_bn(model, calib):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average
    model.train()
    with torch.no_grad():
        for s in range(0, len(calib), 16):
            model(torch.from_numpy(calib[s:s + 16]))
    model.eval()


def main():
    args = [a for a in sys.argv[1:]]
    ncal, ntest = 64, 16
    if "--calib" in args:
        i = args.index("--calib")
        ncal = int(args[i + 1])
        del args[i:i + 2]
    if "--test" in args:
        i = args.index("--test")
        ntest = int(args[i + 1])
        del args[i:i + 2]
    out = args[0] if args else "build/realmodels"
    os.makedirs(out, exist_ok=True)
    calib = imagenet_batch(ncal, 1)
    test = imagenet_batch(ntest, 2)
    np.save(os.path.join(out, "tv_calib.npy"), calib)
    np.save(os.path.join(out, "tv_test.npy"), test)
    print("data: tv_calib.npy %s, tv_test.npy %s" % (calib.shape, test.shape))
    for name in MODELS:
        model = build(name)
        recalibrate_bn(model, calib)
        torch.save(model.state_dict(), os.path.join(out, name + ".pt"))
        x = torch.from_numpy(test[:1])
        for suffix, dyn in (("", None), ("_dyn", {"input": {0: "batch"}, "output": {0: "batch"}})):
            path = os.path.join(out, name + suffix + ".onnx")
            torch.onnx.export(model, x, path, opset_version=13, input_names=["input"],
                              output_names=["output"], dynamic_axes=dyn, do_constant_folding=True)
            print("wrote %s (%.1f MB)" % (path, os.path.getsize(path) / 1e6))


if __name__ == "__main__":
    main()
