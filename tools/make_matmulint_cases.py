#!/usr/bin/python3
"""Fixtures for tests/unit/test_matmulint.c: integer matrix products with their results computed
by numpy from the ONNX definitions, the oracle the C kernels are checked against.

    make_matmulint_cases.py OUT_DIR  ->  OUT_DIR/cases.tsv and, per case, OUT_DIR/<case>/*.npy

cases.tsv: one line per case, "name<TAB>op", op MatMulInteger or QLinearMatMul. A case's folder
holds a.npy, b.npy, and a_zero_point.npy / b_zero_point.npy when the node has them (0-d, the
operand's type); QLinearMatMul's also a_scale, b_scale, y_scale (0-d float32) and
y_zero_point; y.npy is the expected output:
  MatMulInteger: int32(sum_k (a - a_zero)(b - b_zero)), the exact sum (int64) wrapped to int32;
  QLinearMatMul: the accumulator times the float32 multiplier (a_scale * b_scale) / y_scale in
  double, rounded half to even, plus y_zero_point, saturated (ONNX's reference implementation
  keeps the multiplier in float32 as well).
Operands take values of both signs and the types' extremes; shapes have odd K, M, N, several
batch and head counts and broadcast batch dims.
"""
import os
import sys

import numpy as np

rng = np.random.default_rng(20261128)
RANGE = {"u8": (0, 255, np.uint8), "i8": (-128, 127, np.int8)}


def operand(kind, shape, extreme=None):
    lo, hi, t = RANGE[kind]
    if extreme is not None:  # mostly one end of the type, some random: sums past int32 for large K
        v = rng.integers(lo, hi + 1, shape)
        return np.where(rng.integers(0, 20, shape) == 0, v, hi if extreme == "hi" else lo).astype(t)
    return rng.integers(lo, hi + 1, shape).astype(t)


def zero_point(kind, v, a_shape=None):
    """A scalar, or a list: one per row of a or column of b; "rows" (a_shape given): one per row of
    each a matrix, shaped [..., M, 1] as DynamicQuantizeRows makes them, both ends of the type among
    them; "rows_hi": the same, all near the type's top (sums past int32 with a at its bottom)."""
    lo, hi, t = RANGE[kind]
    if isinstance(v, str):
        shape = list(a_shape[:-1]) + [1]
        if v == "rows_hi":
            return rng.integers(hi - 3, hi + 1, shape).astype(t)
        z = rng.integers(lo, hi + 1, shape)
        z.flat[0], z.flat[-1] = lo, hi
        return z.astype(t)
    return np.array(v, t)


def accumulate(a, b, za, zb):
    """za: a scalar, one per row of a (1-D [M]) or per row of each a matrix ([..., M, 1]); zb: a
    scalar or one per column of b ([N])."""
    za = np.asarray(za, np.int64)
    za = za[:, None] if za.ndim == 1 else za
    return np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - np.asarray(zb, np.int64))


# name, A type, B type, A shape, B shape, A zero point, B zero point (None: the input left out)
MATMUL = [
    ("u8u8_heads", "u8", "u8", [2, 3, 17, 13], [2, 3, 13, 19], 7, 250),
    ("i8i8", "i8", "i8", [5, 9, 33], [5, 33, 21], -3, 100),
    ("u8i8", "u8", "i8", [4, 31, 64], [4, 64, 40], 200, -128),
    ("i8u8", "i8", "u8", [3, 10, 5], [3, 5, 70], -128, 1),
    ("bcast_a", "u8", "u8", [1, 4, 12, 20], [3, 4, 20, 9], 128, 77),
    ("bcast_both", "i8", "u8", [3, 1, 7, 8], [1, 4, 8, 33], 5, 255),
    ("bcast_b_heads", "u8", "i8", [2, 4, 9, 16], [1, 4, 16, 17], 0, 3),
    ("b_matrix_computed", "u8", "i8", [6, 16, 40], [40, 50], 31, -7),
    ("a_matrix", "i8", "u8", [9, 11], [4, 11, 6], 0, 0),
    ("k1", "u8", "u8", [2, 5, 1], [2, 1, 7], 255, 0),
    ("a_vector", "u8", "i8", [13], [2, 13, 5], 9, 9),
    ("b_vector", "i8", "i8", [2, 6, 13], [13], -100, 100),
    ("weights_gemv", "u8", "i8", [3, 100], [100, 37], 140, 0),
    ("weights_gemv_i8", "i8", "i8", [1, 2, 63], [63, 129], -5, 0),
    ("weights", "u8", "i8", [2, 45, 96], [96, 70], 121, 0),
    ("weights_i8_no_zp", "i8", "i8", [1, 24, 256], [256, 48], None, None),
    ("ragged_blocks", "u8", "u8", [2, 2, 130, 67], [2, 2, 67, 45], 90, 161),
    ("rows_8_9", "i8", "i8", [2, 8, 36], [2, 36, 16], 1, -1),
    ("rows_9_cols_33", "u8", "i8", [3, 9, 29], [3, 29, 33], 254, 127),
    ("cols_65", "i8", "u8", [1, 70, 44], [1, 44, 65], -128, 128),
    ("no_b_zp", "u8", "u8", [2, 11, 21], [2, 21, 23], 200, None),
    ("attention_qk", "u8", "u8", [2, 4, 64, 32], [2, 4, 32, 64], 119, 134),
    ("attention_pv", "u8", "i8", [2, 4, 64, 64], [2, 4, 64, 32], 0, -3),
    # zero points per row of a or per column of b: one value throughout takes the kernels (the
    # per-channel zero points of symmetric weights), different values the portable path
    ("weights_per_column_zp_0", "u8", "i8", [2, 20, 64], [64, 48], 121, [0] * 48),
    ("per_row_zp_one_value", "i8", "u8", [9, 12], [12, 21], [-7] * 9, [200] * 21),
    ("per_row_and_column_zp", "u8", "u8", [9, 12], [2, 12, 21], list(range(0, 90, 10)), list(range(21))),
    # A's matrices as the rows of one product by weights: a sequence first with batch 1, and 3
    ("seq_first_batch1", "u8", "i8", [40, 1, 24], [24, 33], 77, 0),
    ("seq_first_batch3", "i8", "u8", [20, 3, 18], [18, 9], 4, 130),
    # a zero point per row of each a matrix, [..., M, 1] (the dynamic recipes' per-token
    # activations), one for b: the kernels with the rows' corrections in their sums. Attention's
    # Q K^T and P V with odd M, N and K, heads and batch, a broadcast; by weights (zero points 0
    # or not, per tensor or per column), a sequence first with batch 1 and 3; i8 a; rows past a
    # task's 64
    ("rows_qk_heads", "u8", "u8", [2, 4, 33, 17], [2, 4, 17, 29], "rows", 131),
    ("rows_pv_heads", "u8", "u8", [3, 2, 19, 45], [3, 2, 45, 7], "rows", 0),
    ("rows_bcast_a", "u8", "u8", [1, 4, 12, 20], [3, 4, 20, 9], "rows", 77),
    ("rows_bcast_b", "u8", "i8", [2, 3, 10, 21], [1, 3, 21, 16], "rows", -128),
    ("rows_i8_a", "i8", "u8", [2, 9, 13], [2, 13, 40], "rows", 255),
    ("rows_weights_seq_first", "u8", "i8", [40, 1, 70], [70, 33], "rows", 0),
    ("rows_weights_batch3", "u8", "i8", [5, 3, 37], [37, 65], "rows", [0] * 65),
    ("rows_weights_zb", "u8", "i8", [2, 17, 24], [24, 18], "rows", -5),
    ("rows_weights_no_b_zp", "i8", "i8", [3, 7, 64], [64, 32], "rows", None),
    ("rows_matrix", "u8", "u8", [9, 12], [12, 21], "rows", 200),
    ("rows_ragged_blocks", "u8", "u8", [2, 2, 130, 67], [2, 2, 67, 45], "rows", 161),
    ("rows_k1", "u8", "u8", [2, 5, 1], [2, 1, 7], "rows", 3),
    # N a multiple of 256 and K of 64 or more: B packed with a padded pitch for the AVX-512 kernel
    ("rows_weights_pitch", "u8", "i8", [2, 9, 70], [70, 256], "rows", 0),
    ("weights_pitch", "u8", "i8", [3, 5, 64], [64, 512], 100, 0),
    ("qk_pitch", "u8", "u8", [2, 12, 64], [2, 64, 256], 3, 200),
]

# sums past int32 (255 * 255 * 70001 > 2^32): the int32 result is the exact sum wrapped. The
# operands sit mostly at the ends that the kernels see as s8 -128 and u8 255 (u8 a 0, i8 a -128;
# u8 b 255, i8 b 127): a pair of such products is past i16, where vpmaddubsw would saturate.
WRAP = [
    ("wrap_u8u8", "u8", "u8", [1, 3, 70001], [70001, 5], 255, 0),
    ("wrap_i8i8", "i8", "i8", [2, 5, 66000], [2, 66000, 3], 127, -128),
    ("wrap_rows", "u8", "u8", [1, 3, 70001], [1, 70001, 5], "rows_hi", 0),
]

# name, A type, B type, y type, A shape, B shape, za, zb, yz
QLINEAR = [
    ("q_u8u8_heads", "u8", "u8", "u8", [2, 3, 17, 28], [2, 3, 28, 19], 120, 131, 128),
    ("q_i8i8_bcast", "i8", "i8", "i8", [1, 2, 9, 40], [3, 2, 40, 11], -4, 6, -2),
    ("q_u8i8_weights", "u8", "i8", "u8", [2, 13, 50], [50, 33], 17, 0, 131),
    ("q_i8u8_gemv", "i8", "i8", "i8", [1, 2, 77], [77, 20], 0, 0, 0),
    ("q_row_col_scales", "u8", "i8", "i8", [3, 1, 6, 21], [1, 2, 21, 10], 140, 2, 1),
    ("q_row_col_scales_weights", "i8", "i8", "u8", [3, 5, 30], [30, 12], 9, 0, 128),
]


def save(d, name, v):
    np.save(os.path.join(d, name + ".npy"), v)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, ta, tb, sa, sb, za, zb in MATMUL + WRAP:
        wrap = name.startswith("wrap")
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        a, b = operand(ta, sa, "lo" if wrap else None), operand(tb, sb, "hi" if wrap else None)
        save(d, "a", a)
        save(d, "b", b)
        za = None if za is None else zero_point(ta, za, sa)
        if za is not None:
            save(d, "a_zero_point", za)
        if zb is not None:
            save(d, "b_zero_point", zero_point(tb, zb))
        acc = accumulate(a, b, 0 if za is None else za, zb or 0)
        if wrap:
            assert np.abs(acc).max() > 2**31, name
        save(d, "y", acc.astype(np.int32))  # int64 -> int32 wraps modulo 2^32
        lines.append("%s\tMatMulInteger\n" % name)
    for name, ta, tb, ty, sa, sb, za, zb, yz in QLINEAR:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        a, b = operand(ta, sa), operand(tb, sb)
        acc = accumulate(a, b, za, zb)
        scale_a, scale_b = np.float32(0.02), np.float32(0.013)
        scale_y = np.float32(0.02 * 0.013 * 6 * acc.std() / 255)  # +-3 sigma of the accumulator over 255 steps
        if "row_col" in name:  # a scale per row of each a matrix and per column of each b matrix (QRL's extension)
            scale_a = (0.02 * rng.uniform(0.8, 1.25, sa[:-1] + [1])).astype(np.float32)
            scale_b = (0.013 * rng.uniform(0.8, 1.25, sb[:-2] + [1, sb[-1]])).astype(np.float32)
        for n, v in [("a", a), ("b", b), ("a_zero_point", zero_point(ta, za)), ("b_zero_point", zero_point(tb, zb)),
                     ("a_scale", scale_a), ("b_scale", scale_b), ("y_scale", scale_y),
                     ("y_zero_point", zero_point(ty, yz))]:
            save(d, n, np.asarray(v))
        mult = np.asarray(scale_a) * np.asarray(scale_b)  # float32, broadcast as the product's batch
        mult = (mult / scale_y).astype(np.float32)
        lo, hi, t = RANGE[ty]
        y = np.clip(np.rint(acc.astype(np.float64) * np.float64(mult)) + yz, lo, hi).astype(t)
        assert (y == lo).mean() < 0.2 and (y == hi).mean() < 0.2, name  # not mostly saturated
        save(d, "y", y)
        lines.append("%s\tQLinearMatMul\n" % name)
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
