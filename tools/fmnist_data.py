"""Convert the Debian Fashion-MNIST IDX files to .npy arrays.

Usage:
    /usr/bin/python3 tools/fmnist_data.py OUTDIR

Reads the gzip'd IDX files from /usr/share/datasets/fashion-mnist and writes
into OUTDIR (each file atomically):

    test_images.npy   float32 [10000,1,28,28], pixel/255.0 (values in [0,1])
    test_labels.npy   int64   [10000]
    calib_images.npy  float32 [1000,1,28,28], the first 1000 training images
    calib_labels.npy  int64   [1000]

The IDX parsing is also used by tools/train_fmnist.py (load_images/load_labels).
"""
import gzip
import os
import struct
import sys

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"
N_CALIB = 1000


def _read_idx(name, magic, ndim):
    path = os.path.join(DATA_DIR, name)
    if not os.path.isfile(path):
        sys.exit(f"error: Fashion-MNIST file not found: {path}\n"
                 "(Debian package dataset-fashion-mnist)")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    got, = struct.unpack(">I", raw[:4])
    if got != magic:
        sys.exit(f"error: {path}: bad IDX magic 0x{got:08x}, want 0x{magic:08x}")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        sys.exit(f"error: {path}: size {data.size} does not match dims {dims}")
    return data.reshape(dims)


def load_images(split):
    """split is 'train' or 't10k'; returns float32 [N,1,28,28] in [0,1]."""
    u8 = _read_idx(f"{split}-images-idx3-ubyte.gz", 0x00000803, 3)
    return np.ascontiguousarray(u8[:, None, :, :].astype(np.float32) / 255.0)


def load_labels(split):
    """split is 'train' or 't10k'; returns int64 [N]."""
    return _read_idx(f"{split}-labels-idx1-ubyte.gz", 0x00000801, 1).astype(np.int64)


def _save(outdir, name, arr):
    final = os.path.join(outdir, name)
    tmp = os.path.join(outdir, f".{name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as f:
        np.save(f, arr)
    os.replace(tmp, final)
    print(f"wrote {final}  {arr.dtype} {list(arr.shape)}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    _save(outdir, "test_images.npy", load_images("t10k"))
    _save(outdir, "test_labels.npy", load_labels("t10k"))
    _save(outdir, "calib_images.npy", load_images("train")[:N_CALIB].copy())
    _save(outdir, "calib_labels.npy", load_labels("train")[:N_CALIB].copy())


if __name__ == "__main__":
    main()
