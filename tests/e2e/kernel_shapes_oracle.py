#!/usr/bin/python3
"""The oracle of tests/e2e/test_kernel_shapes.c: numpy's P.V product (scaled by 0.5 after it) and
sum over the last axis, computed from the quantized inputs as the --qparams JSON gives them (the
integer product exact, one rounding half to even, saturation to u8): the integers the kernels of
tests/recipes/kernel_shapes.qrl must write. It reads only QRL's qparams and its outputs.

Usage: kernel_shapes_oracle.py make DIR        the model (pv.onnx: shapes left symbolic) and data:
                                               calibration with 5 keys, test inputs with 7
       kernel_shapes_oracle.py check DIR OUT   compares OUT/y.npy and OUT/z.npy with numpy; prints
                                               "BAD N OF M SHAPES ok|wrong" """
import json
import sys

import numpy as np


def make(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    nodes = [h.make_node("MatMul", ["p", "v"], ["m"]), h.make_node("Mul", ["m", "c"], ["y"]),
             h.make_node("ReduceSum", ["x", "axes"], ["z"], keepdims=1)]
    inits = [h.make_tensor("c", T.FLOAT, [], [0.5]), h.make_tensor("axes", T.INT64, [1], [-1])]
    ins = [h.make_tensor_value_info("p", T.FLOAT, ["n", 2, "s", "s"]),
           h.make_tensor_value_info("v", T.FLOAT, ["n", 2, "s", 3]),
           h.make_tensor_value_info("x", T.FLOAT, ["n", "s", 6])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("z", T.FLOAT, None)]
    m = h.make_model(h.make_graph(nodes, "pv", ins, outs, inits), opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, d + "/pv.onnx")
    for tag, seed, n, s in (("calib", 1, 16, 5), ("test", 2, 3, 7)):
        r = np.random.default_rng(seed)
        for name, shape, sd in (("p", (2, s, s), 1.0), ("v", (2, s, 3), 2.0), ("x", (s, 6), 1.5)):
            np.save("%s/%s_%s.npy" % (d, name, tag), (r.standard_normal((n,) + shape) * sd).astype(np.float32))


def quant(x, t):
    return np.clip(np.rint(x.astype(np.float64) / np.float64(np.float32(t["scale"]))) + t["zero_point"], 0, 255)


def check(d, out):
    qp = {t["value"]: t for t in json.load(open(d + "/pv.json"))["activations"]}
    p, v, x = (np.load("%s/%s_test.npy" % (d, n)) for n in "pvx")
    f = lambda name: np.float64(np.float32(qp[name]["scale"]))
    acc = (quant(p, qp["p"]) - qp["p"]["zero_point"]) @ (quant(v, qp["v"]) - qp["v"]["zero_point"])
    want_y = np.clip(np.rint(acc * (f("p") * f("v") * 0.5 / f("y"))) + qp["y"]["zero_point"], 0, 255)
    s = (quant(x, qp["x"]) - qp["x"]["zero_point"]).sum(-1, keepdims=True)
    want_z = np.clip(np.rint(s * (f("x") / f("z"))) + qp["z"]["zero_point"], 0, 255)
    # qrl run writes the outputs as real numbers: back to integers with the same qparams
    got_y = np.rint(np.load(out + "/y.npy").astype(np.float64) / f("y")) + qp["y"]["zero_point"]
    got_z = np.rint(np.load(out + "/z.npy").astype(np.float64) / f("z")) + qp["z"]["zero_point"]
    shapes = got_y.shape == want_y.shape == (3, 2, 7, 3) and got_z.shape == want_z.shape == (3, 7, 1)
    if not shapes:
        print("BAD -1 OF 0 SHAPES wrong", got_y.shape, got_z.shape)
        return
    bad = int((got_y != want_y).sum() + (got_z != want_z).sum())
    print("BAD %d OF %d SHAPES ok DISTINCT %d" % (bad, want_y.size + want_z.size, len(np.unique(want_y))))


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2], sys.argv[3])
