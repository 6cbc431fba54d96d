#!/usr/bin/python3
"""Writes the MatMulInteger models of a transformer's integer graph, for timing QRL against ONNX
Runtime on the same files (tools/matmulint_bench.c, tools/ort_bench_npy.js), with their inputs.

    make_matmulint_models.py OUT_DIR  ->  OUT_DIR/<case>.onnx, OUT_DIR/<case>_<input>.npy

Cases: attention's two products of computed activations (both operands graph inputs, u8 with
non-zero zero points): qk [8,128,32] x [8,32,128] and pv [8,128,128] x [8,128,32], and the same
with 4 heads of 64; and the
projections, u8 activations [B,S,K] by a constant i8 [K,N] (zero point 0), at batch 1 and 8.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save

rng = np.random.default_rng(7)


def product(name, a_shape, b_shape, b_const):
    nodes_in = ["A", "B", "a_zp"] + ([] if b_const else ["b_zp"])
    node = helper.make_node("MatMulInteger", nodes_in, ["Y"], name="mm")
    a = rng.integers(0, 256, a_shape, dtype=np.uint8)
    inits = [numpy_helper.from_array(np.array(121, np.uint8), "a_zp")]
    inputs = [helper.make_tensor_value_info("A", TensorProto.UINT8, a_shape)]
    feeds = {"A": a}
    if b_const:
        inits.append(numpy_helper.from_array(rng.integers(-128, 128, b_shape, dtype=np.int8), "B"))
    else:
        inits.append(numpy_helper.from_array(np.array(133, np.uint8), "b_zp"))
        inputs.append(helper.make_tensor_value_info("B", TensorProto.UINT8, b_shape))
        feeds["B"] = rng.integers(0, 256, b_shape, dtype=np.uint8)
    out_shape = list(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))) + [a_shape[-2], b_shape[-1]]
    graph = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info("Y", TensorProto.INT32, out_shape)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    checker.check_model(model)
    return model, feeds


CASES = [
    ("qk", [8, 128, 32], [8, 32, 128], False),
    ("pv", [8, 128, 128], [8, 128, 32], False),
    ("hd64_qk", [4, 128, 64], [4, 64, 128], False),  # the bench encoder's heads (d 256, 4 heads)
    ("hd64_pv", [4, 128, 128], [4, 128, 64], False),
    ("proj_b1", [1, 128, 256], [256, 256], True),
    ("ffn_up_b1", [1, 128, 256], [256, 1024], True),
    ("ffn_up_b8", [8, 128, 256], [256, 1024], True),
    ("ffn_down_b8", [8, 128, 1024], [1024, 256], True),
]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, a_shape, b_shape, b_const in CASES:
        model, feeds = product(name, a_shape, b_shape, b_const)
        save(model, os.path.join(out, name + ".onnx"))
        for k, v in feeds.items():
            np.save(os.path.join(out, "%s_%s.npy" % (name, k)), v)
        print(name)


if __name__ == "__main__":
    main()
