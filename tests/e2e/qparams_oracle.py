#!/usr/bin/python3
"""Checks a weight-only export's --qparams JSON against the export itself (tests/e2e/test_int4.c).

Usage: qparams_oracle.py QUANTIZED.onnx Q.json

Every DequantizeLinear of a constant and every com.microsoft MatMulNBits of QUANTIZED.onnx must have
one entry among the JSON's "weights": the DequantizeLinear's output (or the MatMulNBits' B) by name,
its storage type (u4 for MatMulNBits), axis, block_size when blocked, and its scales and zero points
in the file's order (a DequantizeLinear without zero points: 0; a MatMulNBits without them: 8, else
its packed nibbles, low first, [N][ceil(n_blocks / 2)]). Prints "ok N" or the first difference."""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from int4_rtn_oracle import tensor  # noqa: E402

TYPES = {1: "f32", 2: "u8", 3: "i8", 21: "u4", 22: "i4"}


def attr(n, name, default):
    a = [x for x in n.attribute if x.name == name]
    return a[0].i if a else default


def main():
    m, q = onnx.load(sys.argv[1]), json.load(open(sys.argv[2]))
    inits = {t.name: t for t in m.graph.initializer}
    got = {w["value"]: w for w in q["weights"]}
    want = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits and n.input[1] in inits:
            s = numpy_helper.to_array(inits[n.input[1]]).ravel()
            z = tensor(inits[n.input[2]]).ravel() if len(n.input) > 2 and n.input[2] else np.zeros(s.size, np.int64)
            e = {"dtype": TYPES[inits[n.input[0]].data_type], "axis": attr(n, "axis", 1) if s.size > 1 else -1,
                 "scale": s, "zero_point": z}
            if attr(n, "block_size", 0):
                e["block_size"] = attr(n, "block_size", 0)
            want[n.output[0]] = e
        elif n.op_type == "MatMulNBits":
            K, N, bs = attr(n, "K", 0), attr(n, "N", 0), attr(n, "block_size", 0)
            nb = (K + bs - 1) // bs
            s = numpy_helper.to_array(inits[n.input[2]]).ravel()
            if len(n.input) > 3 and n.input[3]:
                zb = numpy_helper.to_array(inits[n.input[3]]).reshape(N, (nb + 1) // 2)
                z = np.stack([zb & 15, zb >> 4], axis=-1).reshape(N, -1)[:, :nb].ravel()
            else:
                z = np.full(s.size, 8)
            want[n.input[1]] = {"dtype": "u4", "axis": 1, "block_size": bs, "scale": s, "zero_point": z, "K": K,
                                "N": N, "format": "MatMulNBits"}
    for name, e in want.items():
        if name not in got:
            sys.exit("%s: not in the qparams JSON" % name)
        g = got[name]
        for k, v in e.items():
            # the JSON's %.9g of a float32 scale reads back as that float32
            dt = np.float32 if k == "scale" else np.int64
            ok = np.array_equal(np.asarray(g.get(k), dt), np.asarray(v, dt)) if k in ("scale", "zero_point") else \
                g.get(k) == v
            if not ok:
                sys.exit("%s: %s is %s in the JSON, %s in the file" % (name, k, str(g.get(k))[:80], str(v)[:80]))
    if len(got) != len(want):
        sys.exit("the JSON lists %d weights, the file has %d" % (len(got), len(want)))
    print("ok %d" % len(want))


if __name__ == "__main__":
    main()
