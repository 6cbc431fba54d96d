#!/usr/bin/python3
"""MatMulNBits models (com.microsoft, 4 bits) and numpy oracles for QRL's int4 GEMV (QRL-I).

Usage: /usr/bin/python3 tools/make_nbits_models.py OUTDIR NAME K N BLOCK M [--zp] [--seed S] [--no-ref]

Writes to OUTDIR, for random weights W [K, N] of both signs rounded to nearest in blocks of BLOCK
along K (symmetric, codes q + 8 and no zero points; --zp: asymmetric, a zero point per block):
  NAME_l0.onnx, NAME_l4.onnx  Y = MatMulNBits(X, B, scales[, zero_points], bias) with accuracy_level
                  0 (f32 activations) and 4 (int8 activations), X [M, K]
  NAME_f32.onnx   Y = X @ W + bias in f32 (the same W before rounding: for QRL's int8 recipes)
  NAME_x.npy      X [M, K], both signs
  NAME_y0.npy     numpy's f32 reference of level 0: X @ dequantize(W) + bias, in float64
  NAME_y4.npy     numpy's level-4 reference: each row of X quantized per block as MLAS does (scale
                  amax / 127, X * (127 / amax) in float32 rounded half to even), the integer dot of
                  each block exact, its term (sa * sb) * (dot - z * sum(qa)) summed in float64
                  (--no-ref: neither oracle, for the benchmark's large shapes)
The packing is numpy's own (ONNX Runtime's MatMulNBits layout: B uint8 [N, n_blocks, BLOCK / 2],
low nibble first; zero_points uint8 [N, ceil(n_blocks / 2)] packed the same way)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def rtn(w, block, zp):
    """w [K, N] -> codes [N, nb, block] (0..15, 0 past K), scales [N, nb], zeros [N, nb]."""
    K, N = w.shape
    nb = (K + block - 1) // block
    wp = np.zeros((nb * block, N), np.float32)
    wp[:K] = w
    blocks = wp.T.reshape(N, nb, block)
    valid = (np.arange(nb * block) < K).reshape(nb, block)[None]
    if zp:
        lo = np.minimum(np.where(valid, blocks, np.inf).min(-1), 0)
        hi = np.maximum(np.where(valid, blocks, -np.inf).max(-1), 0)
        scale = ((hi - lo) / 15).astype(np.float32)
        scale[scale == 0] = 1
        zero = np.clip(np.rint(-lo / scale), 0, 15).astype(np.int64)
    else:
        scale = (np.abs(np.where(valid, blocks, 0)).max(-1) / 7).astype(np.float32)
        scale[scale == 0] = 1
        zero = np.full((N, nb), 8, np.int64)
    codes = np.clip(np.rint(blocks / scale[..., None]) + zero[..., None], 0, 15).astype(np.int64)
    codes = np.where(valid, codes, 0)
    return codes, scale, zero


def pack_pairs(v):
    """Pairs along the last axis, low nibble first (an odd count's last high nibble 0)."""
    if v.shape[-1] % 2:
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype)], -1)
    return (v[..., 0::2] | (v[..., 1::2] << 4)).astype(np.uint8)


def quant_rows(x, block):
    """MLAS's CompInt8 quantization of A: per row and block, float32 arithmetic."""
    M, K = x.shape
    nb = (K + block - 1) // block
    xp = np.zeros((M, nb * block), np.float32)
    xp[:, :K] = x
    xb = xp.reshape(M, nb, block)
    amax = np.abs(xb).max(-1).astype(np.float32)
    sa = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint((xb * inv[..., None]).astype(np.float32)).astype(np.int64)
    return q, sa


def main():
    a = sys.argv[1:]
    out, name, K, N, block, M = a[0], a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5])
    zp = "--zp" in a
    seed = int(a[a.index("--seed") + 1]) if "--seed" in a else 0
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
    w[rng.integers(0, K, 4), rng.integers(0, N, 4)] *= 8  # a few outliers
    bias = (rng.standard_normal(N) * 0.1).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    codes, scale, zero = rtn(w, block, zp)
    nb = codes.shape[1]
    if "--no-ref" not in a:
        deq = ((codes - zero[..., None]) * scale[..., None].astype(np.float64)).reshape(N, nb * block)[:, :K]
    np.save(f"{out}/{name}_x.npy", x)
    if "--no-ref" not in a:
        np.save(f"{out}/{name}_y0.npy", (x.astype(np.float64) @ deq.T + bias).astype(np.float32))
        q, sa = quant_rows(x, block)
        dot = np.einsum("mbk,nbk->mnb", q, codes)  # exact int64
        asum = q.sum(-1)  # [M, nb]
        t = dot - zero[None] * asum[:, None, :]
        y4 = (t * (sa[:, None, :].astype(np.float64) * scale[None].astype(np.float64))).sum(-1) + bias
        np.save(f"{out}/{name}_y4.npy", y4.astype(np.float32))

    inits = [helper.make_tensor("B", TensorProto.UINT8, [N, nb, block // 2], pack_pairs(codes).tobytes(), raw=True),
             helper.make_tensor("scales", TensorProto.FLOAT, [N * nb], scale.ravel().tolist()),
             helper.make_tensor("bias", TensorProto.FLOAT, [N], bias.tolist())]
    ins = ["X", "B", "scales", "", "", "bias"]
    if zp:
        inits.append(helper.make_tensor("zp", TensorProto.UINT8, [N * ((nb + 1) // 2)],
                                        pack_pairs(zero).ravel().tobytes(), raw=True))
        ins[3] = "zp"
    for level in (0, 4):
        node = helper.make_node("MatMulNBits", ins, ["Y"], domain="com.microsoft", K=K, N=N, bits=4,
                                block_size=block, accuracy_level=level)
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [M, K])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [M, N])], initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="tools/make_nbits_models.py")
        m.ir_version = 8
        onnx.save(m, f"{out}/{name}_l{level}.onnx")
    g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "bias"], ["Y"])],
                          name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, [M, K])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [M, N])],
                          initializer=[helper.make_tensor("W", TensorProto.FLOAT, [K, N], w.tobytes(), raw=True),
                                       helper.make_tensor("bias", TensorProto.FLOAT, [N], bias.tolist())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tools/make_nbits_models.py")
    m.ir_version = 8
    onnx.save(m, f"{out}/{name}_f32.onnx")


if __name__ == "__main__":
    main()
