"""A small f32 CNN of inverted residual blocks on ragged shapes, for tests/e2e/test_bands.c:
a 3x3 stem (3 -> 8 channels), then 1x1 expansion -> 3x3 depthwise -> 1x1 projection three times:
8 -> 20 -> 8 at stride 1 with the residual Add, 8 -> 27 -> 11 at stride 2 (pads 1: 15 x 13 ->
8 x 7), 11 -> 17 -> 5 at stride 2 without pads (8 x 7 -> 3 x 3: the input's last row and column
are read by no window). Channels are no multiples of 16; weights and inputs of both signs.
Writes DIR/bands.onnx, DIR/x.npy (calibration, 6 samples) and DIR/x_test.npy (3 other samples)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(35)
nodes, inits = [], []


def conv(x, cin, cout, k, stride, pad, group, name, clip=True):
    w = rng.normal(0, 1.0 / np.sqrt(cin // group * k * k), (cout, cin // group, k, k)).astype(np.float32)
    b = rng.normal(0, 0.1, cout).astype(np.float32)
    inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_c"], kernel_shape=[k, k],
                                  strides=[stride, stride], pads=[pad] * 4, group=group))
    if not clip:
        return name + "_c"
    nodes.append(helper.make_node("Clip", [name + "_c", "zero", "six"], [name + "_y"]))
    return name + "_y"


inits.extend([numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(6), "six")])
s = conv("x", 3, 8, 3, 1, 1, 1, "stem")
e = conv(s, 8, 20, 1, 1, 0, 1, "e1")
d = conv(e, 20, 20, 3, 1, 1, 20, "d1")
p = conv(d, 20, 8, 1, 1, 0, 1, "p1", clip=False)
nodes.append(helper.make_node("Add", [p, s], ["r1"]))
e = conv("r1", 8, 27, 1, 1, 0, 1, "e2")
d = conv(e, 27, 27, 3, 2, 1, 27, "d2")
p = conv(d, 27, 11, 1, 1, 0, 1, "p2", clip=False)
e = conv(p, 11, 17, 1, 1, 0, 1, "e3")
d = conv(e, 17, 17, 3, 2, 0, 17, "d3")
p = conv(d, 17, 5, 1, 1, 0, 1, "p3", clip=False)
g = helper.make_graph(nodes, "bands", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 15, 13])],
                      [helper.make_tensor_value_info(p, TensorProto.FLOAT, ["N", 5, 3, 3])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, out + "/bands.onnx")
np.save(out + "/x.npy", rng.normal(0, 1, (6, 3, 15, 13)).astype(np.float32))
np.save(out + "/x_test.npy", rng.normal(0, 1, (3, 3, 15, 13)).astype(np.float32))
