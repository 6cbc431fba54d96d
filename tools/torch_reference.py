"""PyTorch reference logits for the bundled Fashion-MNIST model.

Usage:
    /usr/bin/python3 tools/torch_reference.py MODEL.onnx OUT_DIR [N] [SEED]

Rebuilds the network of tools/train_fmnist.py in PyTorch, loads the weights
from the ONNX file's initializers (by name), and runs it in eval mode on N
seeded random images in [0,1]. Writes OUT_DIR/x.npy (float32 [N,1,28,28]) and
OUT_DIR/logits.npy (float32 [N,10]). The end-to-end tests compare `qrl run`
against these: an independent implementation of the same network.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_fmnist import FmnistCNN  # noqa: E402


def main():
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__)
    model_path, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
               for i in onnx.load(model_path).graph.initializer}
    model = FmnistCNN()
    state = model.state_dict()
    missing = [k for k in state if k not in weights and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit(f"{model_path}: no initializer for {', '.join(missing)}")
    model.load_state_dict({k: weights.get(k, v) for k, v in state.items()})
    model.eval()
    x = np.random.default_rng(seed).random((n, 1, 28, 28), dtype=np.float32)
    with torch.no_grad():
        logits = model(torch.from_numpy(x)).numpy()
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "logits.npy"), logits.astype(np.float32))


if __name__ == "__main__":
    main()
