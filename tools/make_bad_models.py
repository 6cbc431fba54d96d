"""Writes small ONNX models for the bad-input tests into OUTDIR.

Usage: /usr/bin/python3 tools/make_bad_models.py OUTDIR

Each file is broken in exactly one way (a cycle, an unknown op, external data
that escapes the model folder, ...); good.onnx and ext/ext_ok.onnx are valid
controls. The tests run this at test time, so nothing binary is committed.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path, check=True):
    if check:
        onnx.checker.check_model(model)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def relu_model(nodes, inputs=None, outputs=None, inits=(), opset=13):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    outputs = outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def main(out):
    os.makedirs(os.path.join(out, "ext"), exist_ok=True)
    save(relu_model([helper.make_node("Relu", ["x"], ["y"], name="relu")]), os.path.join(out, "good.onnx"))
    # a -> b -> a
    cyc = relu_model([helper.make_node("Relu", ["x2"], ["x1"], name="first"),
                      helper.make_node("Relu", ["x1"], ["x2"], name="second"),
                      helper.make_node("Add", ["x", "x2"], ["y"], name="add")])
    save(cyc, os.path.join(out, "cycle.onnx"), check=False)
    save(relu_model([helper.make_node("FooBar", ["x"], ["y"], name="mystery")]),
         os.path.join(out, "unknown_op.onnx"), check=False)
    save(relu_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], opset=5),
         os.path.join(out, "old_opset.onnx"), check=False)
    save(relu_model([helper.make_node("Relu", ["nowhere"], ["y"], name="relu")]),
         os.path.join(out, "dangling.onnx"), check=False)
    # An initializer whose raw data is too short for its shape.
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.raw_data = w.raw_data[:10]
    save(relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], inits=[w]),
         os.path.join(out, "short_weight.onnx"), check=False)
    # External data: one inside the folder (valid), one escaping it.
    for name, loc in (("ext_ok", "weights.bin"), ("ext_escape", "../outside.bin")):
        t = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
        raw = t.raw_data
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", "0"), ("length", str(len(raw)))):
            e = t.external_data.add()
            e.key, e.value = k, v
        target = os.path.join(out, "ext", loc)
        with open(target, "wb") as f:
            f.write(raw)
        save(relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], inits=[t]),
             os.path.join(out, "ext", name + ".onnx"), check=False)
    # Expand to an absurd (but broadcast-valid) shape: caught at load time by shape inference.
    shp = numpy_helper.from_array(np.array([1 << 40, 1 << 30, 1, 3], np.int64), "shape")
    save(relu_model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")], inits=[shp]),
         os.path.join(out, "absurd_shape.onnx"), check=False)
    np.save(os.path.join(out, "x.npy"), np.arange(6, dtype=np.float32).reshape(2, 3) - 3)
    np.save(os.path.join(out, "x_wrong_shape.npy"), np.zeros((3, 2), np.float32))
    np.save(os.path.join(out, "x_f64.npy"), np.zeros((2, 3), np.float64))
    np.save(os.path.join(out, "x_fortran.npy"), np.asfortranarray(np.zeros((2, 3), np.float32)))
    with open(os.path.join(out, "x.npy"), "rb") as f:
        data = f.read()
    with open(os.path.join(out, "x_truncated.npy"), "wb") as f:
        f.write(data[:-5])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
