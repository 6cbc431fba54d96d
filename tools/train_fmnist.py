"""Train the small Fashion-MNIST CNN bundled as examples/fmnist/fmnist_cnn.onnx.

Usage:
    /usr/bin/python3 tools/train_fmnist.py OUT.onnx [--epochs N] [--seed S]

Reads the Debian Fashion-MNIST IDX files (see tools/fmnist_data.py), trains
with 2 CPU threads and fixed seeds, prints the torch top-1 accuracy on the
10000 test images, and exports ONNX (opset 13, all weights inside the file):

    input   float32 [N,1,28,28], values in [0,1] (N is a dynamic batch dim)
    logits  float32 [N,10]

The graph does its own normalization first ((x - MEAN) / STD as Sub, Div) and
keeps its BatchNormalization nodes (not folded into the convs) and one
inference-mode Dropout node, so that a consumer's BN folding and Dropout
removal get exercised.
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_data import load_images, load_labels  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training-set pixel mean / std
OPSET = 13


def conv_block(cin, cout, pool):
    layers = [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
    return layers + [nn.MaxPool2d(2)] if pool else layers


class FmnistCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.full((1, 1, 1, 1), MEAN))
        self.register_buffer("std", torch.full((1, 1, 1, 1), STD))
        self.features = nn.Sequential(*conv_block(1, 16, True), *conv_block(16, 32, True),
                                      *conv_block(32, 32, False))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.3), nn.Linear(32 * 7 * 7, 64),
                                        nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.classifier(self.features((x - self.mean) / self.std))


def accuracy(model, x, y, bs=1000):
    model.eval()
    with torch.no_grad():
        pred = torch.cat([model(x[i:i + bs]).argmax(1) for i in range(0, len(x), bs)])
    return (pred == y).float().mean().item()


def add_dropout(model, ratio):
    """torch drops Dropout from inference exports; put an inference-mode one
    (no training_mode input, so it is the identity) back after Flatten."""
    g = model.graph
    idx, flat = next((i, n) for i, n in enumerate(g.node) if n.op_type == "Flatten")
    old, new = flat.output[0], flat.output[0] + "_predrop"
    flat.output[0] = new
    g.initializer.append(numpy_helper.from_array(np.array(ratio, np.float32), "dropout_ratio"))
    g.node.insert(idx + 1, helper.make_node("Dropout", [new, "dropout_ratio"], [old],
                                            name="Dropout_classifier"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()

    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)

    xtr, ytr = torch.from_numpy(load_images("train")), torch.from_numpy(load_labels("train"))
    xte, yte = torch.from_numpy(load_images("t10k")), torch.from_numpy(load_labels("t10k"))

    model = FmnistCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=2e-3, total_steps=args.epochs * ((len(xtr) + args.batch - 1) // args.batch))
    lossf = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)
    for ep in range(args.epochs):
        t0 = time.time()
        model.train()
        perm, total = torch.randperm(len(xtr), generator=gen), 0.0
        for i in range(0, len(xtr), args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad()
            loss = lossf(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        print(f"epoch {ep + 1}/{args.epochs}: loss {total / len(xtr):.4f}  "
              f"test acc {accuracy(model, xte, yte):.4f}  ({time.time() - t0:.0f}s)", flush=True)

    model.eval()
    acc = accuracy(model, xte, yte)
    print(f"torch fp32 top-1 accuracy on {len(xte)} test images: {acc:.4f}")

    # PRESERVE on an eval-mode model exports inference semantics but skips the
    # exporter's eval peephole, which would fold BatchNormalization into Conv.
    tmp = args.out + ".tmp." + str(os.getpid())
    torch.onnx.export(model, xte[:1], tmp, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                      opset_version=OPSET, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    m = onnx.load(tmp)
    os.remove(tmp)
    add_dropout(m, model.classifier[1].p)
    onnx.checker.check_model(m, full_check=True)
    ops = [n.op_type for n in m.graph.node]
    for need in ("BatchNormalization", "Dropout"):
        assert need in ops, f"{need} missing from the exported graph"
    assert ops[:2] == ["Sub", "Div"], ops[:2]
    onnx.save(m, tmp)
    os.replace(tmp, args.out)

    counts = {op: ops.count(op) for op in dict.fromkeys(ops)}
    print(f"wrote {args.out}: {os.path.getsize(args.out)} bytes, opset {OPSET}, onnx {onnx.__version__}")
    print("ops: " + ", ".join(f"{op} x{c}" for op, c in counts.items()))

    try:
        from onnx.reference import ReferenceEvaluator
    except ImportError:
        print(f"onnx {onnx.__version__} has no onnx.reference.ReferenceEvaluator; "
              "ONNX-side accuracy not computed")
        return
    n = 2000
    sess = ReferenceEvaluator(m)
    pred = np.concatenate([sess.run(None, {"input": xte[i:i + 500].numpy()})[0].argmax(1)
                           for i in range(0, n, 500)])
    print(f"onnx ReferenceEvaluator top-1 accuracy on the first {n} test images: "
          f"{(pred == yte[:n].numpy()).mean():.4f}")


if __name__ == "__main__":
    main()
