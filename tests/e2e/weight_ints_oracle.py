#!/usr/bin/python3
"""Numpy's check of an export's weight integers (tests/e2e/test_mixed.c).

Usage: weight_ints_oracle.py F32.onnx EXPORT.onnx

Every DequantizeLinear of the export whose integers are an initializer and whose output is an f32
initializer of the model (a weight, by name) must hold ONNX QuantizeLinear of that weight with
the DequantizeLinear's own scales and zero points (per tensor or along its axis): w / scale in
float32, rounded half to even, plus the zero point, saturated to the integer type (INT8, UINT8,
and INT4 / UINT4 read from their packed bytes, low nibble first, as onnx 1.12 cannot). Prints
"ok", the weights checked and their types, or the first weight that differs (exit 1)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

INT4, UINT4 = 22, 21  # TensorProto.INT4 / UINT4 (onnx >= 1.16 names them)
RANGE = {onnx.TensorProto.INT8: (-128, 127), onnx.TensorProto.UINT8: (0, 255), INT4: (-8, 7), UINT4: (0, 15)}


def ints(t):
    """An initializer's integers (int64), INT4 / UINT4 unpacked from raw_data."""
    if t.data_type in (INT4, UINT4):
        n = int(np.prod(t.dims)) if t.dims else 1
        b = np.frombuffer(t.raw_data, dtype=np.uint8)
        v = np.stack([b & 15, b >> 4], axis=1).reshape(-1)[:n].astype(np.int64)
        if t.data_type == INT4:
            v = np.where(v >= 8, v - 16, v)
        return v.reshape(tuple(t.dims))
    return numpy_helper.to_array(t).astype(np.int64)


def main(f32_path, export_path):
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(f32_path).graph.initializer}
    m = onnx.load(export_path)
    init = {t.name: t for t in m.graph.initializer}
    checked = []
    for n in m.graph.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in init or n.output[0] not in weights:
            continue
        w = weights[n.output[0]].astype(np.float32)
        t = init[n.input[0]]
        if t.data_type not in RANGE:
            continue
        got = ints(t)
        scale = numpy_helper.to_array(init[n.input[1]]).astype(np.float32)
        zero = ints(init[n.input[2]]) if len(n.input) > 2 and n.input[2] else np.zeros_like(scale, dtype=np.int64)
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        if scale.ndim == 1:  # per axis: broadcast along it
            shape = [1] * w.ndim
            shape[axis] = -1
            scale, zero = scale.reshape(shape), zero.reshape(shape)
        lo, hi = RANGE[t.data_type]
        want = np.clip(np.rint(w / scale).astype(np.int64) + zero, lo, hi)
        if got.shape != want.shape or not np.array_equal(got, want):
            bad = np.argwhere(got != want) if got.shape == want.shape else None
            at = tuple(bad[0]) if bad is not None and len(bad) else "shape"
            print("weight %s (%s): the export's integers differ from numpy's rounding with its qparams at %s: "
                  "%s, numpy %s" % (n.output[0], onnx.TensorProto.DataType.Name(t.data_type) if t.data_type not in
                                    (INT4, UINT4) else "INT4" if t.data_type == INT4 else "UINT4", at,
                                    got[at] if at != "shape" else got.shape, want[at] if at != "shape" else want.shape))
            return 1
        checked.append("%s:%s" % (n.output[0], {INT4: "i4", UINT4: "u4"}.get(t.data_type, "i8" if lo < 0 else "u8")))
    if not checked:
        print("no quantized weight in the export")
        return 1
    print("ok %d weights: %s" % (len(checked), " ".join(checked)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
