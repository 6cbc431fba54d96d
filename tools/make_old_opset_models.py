#!/usr/bin/python3
"""Small CNNs at opsets 9, 10, 11 and 12, for the opset-upgrade tests
(tests/e2e/test_opset_quant.c): each op whose form changed before opset 13 in
the form its opset defines.

    make_old_opset_models.py OUT_DIR
        -> OUT_DIR/opset{9,10,11,12}.onnx, calib.npy (32 samples), test.npy (16)
    make_old_opset_models.py --check QDQ.onnx
        -> one JSON line: the ONNX checker's verdict (full_check), the default-domain
           opset, and the DequantizeLinear nodes with a per-axis (1-D, more than one
           value) scale and an axis attribute

Every model: x [N,3,16,16] -> Conv -> Clip(0, 6) -> Pad -> Slice -> Split in two
along channels; one half -> Conv stride 2 -> Upsample/Resize x2 (nearest, or
linear at opset 12), the other -> Conv 1x1; Add -> MaxPool 8 -> Softmax axis 1
on [N,8,2,2] (before opset 13: the flattened C*H*W, the coercion case) ->
output "probs"; and Add -> GlobalAveragePool -> Squeeze [2,3] -> Gemm ->
Unsqueeze [2] -> output "logits" [N,10,1]. Before opset 10 Slice, before 11
Pad and Clip, before 13 Split, Squeeze and Unsqueeze take attributes. The
output channels of each Conv weight are scaled over two decades, so weights
per tensor lose precision that per channel keeps.
"""
import json
import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, load, numpy_helper, save

H = helper.make_node
N_CALIB, N_TEST = 32, 16


def build(opset, rng):
    inits = []

    def const(name, a, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(a, dtype=dtype), name))
        return name

    def conv_w(name, cout, cin, k):
        w = rng.normal(0, 1.0 / np.sqrt(cin * k * k), (cout, cin, k, k))
        w *= np.logspace(-1.5, 0.5, cout)[:, None, None, None]  # channels two decades apart
        return const(name, w)

    nodes = [
        H("Conv", ["x", conv_w("w1", 8, 3, 3), const("b1", rng.normal(0, 0.1, 8))], ["c1"], pads=[1, 1, 1, 1]),
    ]
    if opset < 11:
        nodes.append(H("Clip", ["c1"], ["r1"], min=0.0, max=6.0))
        nodes.append(H("Pad", ["r1"], ["p1"], mode="constant", pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.0))
    else:
        nodes.append(H("Clip", ["c1", const("lo", 0.0), const("hi", 6.0)], ["r1"]))
        nodes.append(H("Pad", ["r1", const("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)], ["p1"], mode="constant"))
    if opset < 10:
        nodes.append(H("Slice", ["p1"], ["s1"], starts=[1, 1], ends=[17, 17], axes=[2, 3]))
    else:
        nodes.append(H("Slice", ["p1", const("starts", [1, 1], np.int64), const("ends", [17, 17], np.int64),
                                 const("axes", [2, 3], np.int64)], ["s1"]))
    nodes.append(H("Split", ["s1"], ["ha", "hb"], axis=1, split=[4, 4]))
    nodes.append(H("Conv", ["ha", conv_w("w2", 8, 4, 3), const("b2", rng.normal(0, 0.1, 8))], ["c2"],
                   pads=[1, 1, 1, 1], strides=[2, 2]))
    scales = const("scales", [1, 1, 2, 2])
    if opset == 9:
        nodes.append(H("Upsample", ["c2", scales], ["u"], mode="nearest"))
    elif opset == 10:
        nodes.append(H("Resize", ["c2", scales], ["u"], mode="nearest"))
    elif opset == 11:
        nodes.append(H("Resize", ["c2", const("roi", np.zeros(0)), scales], ["u"], mode="nearest",
                       coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    else:
        nodes.append(H("Resize", ["c2", const("roi", np.zeros(0)), scales], ["u"], mode="linear",
                       coordinate_transformation_mode="half_pixel"))
    nodes += [
        H("Conv", ["hb", conv_w("w3", 8, 4, 1), const("b3", rng.normal(0, 0.1, 8))], ["c3"]),
        H("Add", ["u", "c3"], ["m"]),
        H("MaxPool", ["m"], ["mp"], kernel_shape=[8, 8], strides=[8, 8]),
        H("Softmax", ["mp"], ["probs"], axis=1),
        H("GlobalAveragePool", ["m"], ["gp"]),
        H("Squeeze", ["gp"], ["sq"], axes=[2, 3]),
        H("Gemm", ["sq", const("wg", rng.normal(0, 0.5, (10, 8))), const("bg", rng.normal(0, 0.1, 10))], ["gm"],
          transB=1),
        H("Unsqueeze", ["gm"], ["logits"], axes=[2]),
    ]
    g = helper.make_graph(
        nodes, "opset%d" % opset, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10, 1]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 8, 2, 2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_old_opset_models")
    m.ir_version = 7  # what onnxruntime and the checker take for these opsets
    checker.check_model(m, full_check=True)
    return m


def check(path):
    m = load(path)
    out = {"checker": "ok", "opset": None, "per_axis_dq": 0, "dq": 0}
    try:
        checker.check_model(m, full_check=True)
    except Exception as e:  # the verdict is the point: report it, do not crash
        out["checker"] = str(e).splitlines()[0][:300]
    out["opset"] = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type != "DequantizeLinear":
            continue
        out["dq"] += 1
        s = inits.get(n.input[1])
        has_axis = any(a.name == "axis" for a in n.attribute)
        if s is not None and s.ndim == 1 and s.size > 1 and has_axis:
            out["per_axis_dq"] += 1
    print(json.dumps(out))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(913)
    for opset in (9, 10, 11, 12):
        save(build(opset, rng), os.path.join(out, "opset%d.onnx" % opset))
    x = rng.normal(0.3, 1.0, (N_CALIB + N_TEST, 3, 16, 16)).astype(np.float32)
    np.save(os.path.join(out, "calib.npy"), x[:N_CALIB])
    np.save(os.path.join(out, "test.npy"), x[N_CALIB:])


if __name__ == "__main__":
    main()
