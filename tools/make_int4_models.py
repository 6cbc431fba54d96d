#!/usr/bin/python3
"""Int4 test models and their numpy oracles (QRL-I).

Usage: /usr/bin/python3 tools/make_int4_models.py OUTDIR

Writes to OUTDIR:
  dq_matmul.onnx  Y = X @ DequantizeLinear(Wq, s, z, axis=0, block_size=B): opset 21, Wq INT4 [K, N]
                  with K = 37 and B = 16 (a ragged last block of 5), s [3, N], z INT4 [3, N]
  dq_gemm.onnx    Y = Gemm(X, DequantizeLinear(Wq^T as UINT4 [N, K], axis=1, block_size=B), transB=1)
  x.npy           X [4, 37], both signs
  dq_matmul_y.npy, dq_gemm_y.npy  numpy's result: the nibbles unpacked by numpy, (q - z) * s, X @ W
  f32_chain.onnx  an f32 model for the quantizer (opset 17): X [4, 37] -> MatMul W1 [37, 40] -> Gemm W2 [40, 24]
                  (transB 0, bias) -> Gemm W3 [5, 24] (transB 1, alpha 0.5), weights of both signs with a few
                  large ones; every K (37, 40, 24) leaves a ragged last block of 16 or 32
  int4_transpose.onnx  an INT4 initializer read by Transpose (which QRL refuses: only DequantizeLinear
                  reads packed 4-bit tensors)
  packed_i4.bin, packed_u4.bin    the raw bytes numpy packs (low nibble first, the last high nibble 0)
  values_i4.npy, values_u4.npy    the values packed (odd count, 37 * 5)
The models' INT4 initializers are packed by this script itself (numpy bit operations, ONNX's layout:
element 2k in the low nibble of byte k), not by onnx.helper, so QRL's unpacking meets an
independent packer (this onnx predates INT4; ONNX Runtime, which the tests run them in, validates them)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

K, N, M, B = 37, 5, 4, 16
# TensorProto.INT4 and UINT4 (onnx >= 1.16; the onnx here, 1.12, predates them and opset 21)
ONNX_INT4, ONNX_UINT4 = 22, 21


def pack4(v):
    """ONNX INT4/UINT4 packing of a flat array of values in -8..7 or 0..15."""
    u = (np.asarray(v).astype(np.int64).ravel() & 15).astype(np.uint8)
    if u.size % 2:
        u = np.concatenate([u, np.zeros(1, np.uint8)])
    return (u[0::2] | (u[1::2] << 4)).astype(np.uint8).tobytes()


def int4_init(name, v, signed):
    t = TensorProto()
    t.name = name
    t.data_type = ONNX_INT4 if signed else ONNX_UINT4
    t.dims.extend(v.shape)
    t.raw_data = pack4(v)
    return t


def model(nodes, inits, out_shape, name):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], producer_name="tools/make_int4_models.py")
    m.ir_version = 10  # INT4 needs IR 10; this onnx's checker predates it, ONNX Runtime checks the models
    return m


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(4)
    nb = (K + B - 1) // B
    x = rng.standard_normal((M, K)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)

    # MatMul, signed nibbles with a zero point, blocks along K (axis 0 of W [K, N])
    wq = rng.integers(-8, 8, (K, N))
    z = rng.integers(-2, 3, (nb, N))
    s = rng.uniform(0.01, 0.1, (nb, N)).astype(np.float32)
    w = ((wq - np.repeat(z, B, axis=0)[:K]).astype(np.float32) * np.repeat(s, B, axis=0)[:K]).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["Wq", "s", "z"], ["W"], axis=0, block_size=B),
             helper.make_node("MatMul", ["X", "W"], ["Y"])]
    m = model(nodes, [int4_init("Wq", wq, True), helper.make_tensor("s", TensorProto.FLOAT, s.shape, s.ravel()),
                      int4_init("z", z, True)], [M, N], "dq_matmul")
    onnx.save(m, os.path.join(out, "dq_matmul.onnx"))
    np.save(os.path.join(out, "dq_matmul_y.npy"), (x.astype(np.float64) @ w.astype(np.float64)).astype(np.float32))

    # Gemm with transB = 1: W^T [N, K] unsigned, blocks along K (axis 1), with alpha and a bias
    wq = rng.integers(0, 16, (N, K))
    z = rng.integers(6, 10, (N, nb))
    s = rng.uniform(0.01, 0.1, (N, nb)).astype(np.float32)
    wt = ((wq - np.repeat(z, B, axis=1)[:, :K]).astype(np.float32) * np.repeat(s, B, axis=1)[:, :K]).astype(np.float32)
    c = rng.standard_normal(N).astype(np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["Wq", "s", "z"], ["W"], axis=1, block_size=B),
             helper.make_node("Gemm", ["X", "W", "C"], ["Y"], transB=1, alpha=0.5)]
    m = model(nodes, [int4_init("Wq", wq, False), helper.make_tensor("s", TensorProto.FLOAT, s.shape, s.ravel()),
                      int4_init("z", z, False), helper.make_tensor("C", TensorProto.FLOAT, [N], c)], [M, N], "dq_gemm")
    onnx.save(m, os.path.join(out, "dq_gemm.onnx"))
    y = 0.5 * (x.astype(np.float64) @ wt.T.astype(np.float64)) + c
    np.save(os.path.join(out, "dq_gemm_y.npy"), y.astype(np.float32))

    # An f32 model to quantize
    w1 = rng.standard_normal((K, 40)).astype(np.float32)
    w2 = (rng.standard_normal((40, 24)) * 0.3).astype(np.float32)
    w3 = rng.standard_normal((N, 24)).astype(np.float32)
    for w in (w1, w2, w3):
        w.flat[rng.integers(0, w.size, 3)] *= 8  # outliers: blocks with a large max
    b2 = rng.standard_normal(24).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h1"]),
             helper.make_node("Gemm", ["h1", "W2", "B2"], ["h2"]),
             helper.make_node("Gemm", ["h2", "W3"], ["Y"], transB=1, alpha=0.5)]
    inits = [helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.ravel()) for n, v in (("W1", w1), ("W2", w2),
                                                                                    ("W3", w3), ("B2", b2))]
    g = helper.make_graph(nodes, "f32_chain", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [M, N])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tools/make_int4_models.py")
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "f32_chain.onnx"))

    # A packed tensor where only DequantizeLinear may read one
    nodes = [helper.make_node("Transpose", ["Wq"], ["T"]), helper.make_node("Cast", ["T"], ["C"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["X", "C"], ["Y"])]
    m = model(nodes, [int4_init("Wq", rng.integers(-8, 8, (N, K)), True)], [M, N], "int4_transpose")
    onnx.save(m, os.path.join(out, "int4_transpose.onnx"))

    # Packing: an odd count, both signs
    for name, lo, hi in (("i4", -8, 8), ("u4", 0, 16)):
        v = rng.integers(lo, hi, K * N).astype(np.int8 if lo < 0 else np.uint8)
        np.save(os.path.join(out, "values_%s.npy" % name), v)
        with open(os.path.join(out, "packed_%s.bin" % name), "wb") as f:
            f.write(pack4(v))


if __name__ == "__main__":
    main()
