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
    # QRL-G: an absent input ("") in a required position (Conv's weights, with a bias after it).
    b = numpy_helper.from_array(np.zeros(4, np.float32), "b")
    save(relu_model([helper.make_node("Conv", ["x4", "", "b"], ["y"], name="conv")],
                    inputs=[helper.make_tensor_value_info("x4", TensorProto.FLOAT, [1, 1, 4, 4])], inits=[b]),
         os.path.join(out, "blank_required.onnx"), check=False)
    # A tiny model declaring an 8 GiB initializer with no data: refused before allocating.
    huge = TensorProto()
    huge.name, huge.data_type = "w", TensorProto.FLOAT
    huge.dims.extend([1 << 29, 4])
    save(relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], inits=[huge]),
         os.path.join(out, "huge_declared.onnx"), check=False)
    # opset 2^32 + 13: not opset 13.
    save(relu_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], opset=(1 << 32) + 13),
         os.path.join(out, "opset_huge.onnx"), check=False)
    # An empty string attribute (protobuf-c gives it no data pointer).
    pads = numpy_helper.from_array(np.zeros(4, np.int64), "pads")
    save(relu_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="")], inits=[pads]),
         os.path.join(out, "empty_attr.onnx"), check=False)
    # A QDQ pair with an int64 zero point: no 64-bit quantization range (1 << 63) is computed.
    zp = numpy_helper.from_array(np.array(0, np.int64), "zp")
    sc = numpy_helper.from_array(np.array(0.5, np.float32), "sc")
    save(relu_model([helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], name="q"),
                     helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"], name="dq")], inits=[sc, zp]),
         os.path.join(out, "qdq_int64.onnx"), check=False)
    # Expand to 1.5 GiB: fine for the tensor limit, over a small --max-memory.
    shp = numpy_helper.from_array(np.array([1 << 14, 1 << 12, 2, 3], np.int64), "shape")
    save(relu_model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")], inits=[shp],
                    outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
         os.path.join(out, "big_expand.onnx"), check=False)
    # A 9x9 Conv at stride 3 over 64 channels of 512x512: 64 MB in, 114 KB out, but 606 MB of
    # im2col scratch, which the memory budget must count too (stride 3: the f32 GEMM over padded
    # planes, which needs no im2col, takes strides 1 and 2 only).
    shp = numpy_helper.from_array(np.array([1, 64, 512, 512], np.int64), "shape")
    w = numpy_helper.from_array(np.ones((1, 64, 9, 9), np.float32), "w")
    save(relu_model([helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
                     helper.make_node("Expand", ["s", "shape"], ["big"], name="expand"),
                     helper.make_node("Conv", ["big", "w"], ["y"], name="conv", pads=[4, 4, 4, 4],
                                      strides=[3, 3])],
                    inits=[shp, w], outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
         os.path.join(out, "big_im2col.onnx"), check=False)
    # Outputs whose names sanitize to the same file, and one too long for a file name.
    long_name = "o" * 300
    save(relu_model([helper.make_node("Relu", ["x"], ["a/b"], name="r1"),
                     helper.make_node("Relu", ["x"], ["a_b"], name="r2"),
                     helper.make_node("Relu", ["x"], [long_name], name="r3")],
                    outputs=[helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])
                             for n in ("a/b", "a_b", long_name)]),
         os.path.join(out, "odd_names.onnx"), check=False)
    # One output listed 1000 times: 1000 distinct files (picking them was cubic in the count).
    save(relu_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                    outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]) for _ in range(1000)]),
         os.path.join(out, "many_outputs.onnx"), check=False)
    # External data at a FIFO: refused, never waited on.
    fifo = os.path.join(out, "ext", "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    t = numpy_helper.from_array(np.zeros((2, 3), np.float32), "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "fifo"
    save(relu_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], inits=[t]),
         os.path.join(out, "ext", "ext_fifo.onnx"), check=False)
    # Names that hold terminal escape sequences, a newline, a carriage return, and bytes that are
    # not UTF-8 (patched into the serialized bytes: protobuf's writer refuses them).
    r = np.random.default_rng(0)
    w = numpy_helper.from_array(r.standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x\x1b[2J", "w"], ["yQQQQ"], name="conv\x1b]0;title\x07", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["yQQQQ"], ["out\nname"], name="relu\r")],
        "g\x1b[31m", [helper.make_tensor_value_info("x\x1b[2J", TensorProto.FLOAT, [None, 1, 8, 8])],
        [helper.make_tensor_value_info("out\nname", TensorProto.FLOAT, [None, 4, 8, 8])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with open(os.path.join(out, "hostile_names.onnx"), "wb") as f:
        f.write(m.SerializeToString().replace(b"yQQQQ", b"y\xff\xfe\xc0\xaf"))
    np.save(os.path.join(out, "x_names.npy"), r.standard_normal((8, 1, 8, 8)).astype(np.float32))
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
