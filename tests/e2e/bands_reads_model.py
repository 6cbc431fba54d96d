"""A small f32 CNN for tests/e2e/test_bands.c's band_reads: a 3x3 stem (3 -> 8 channels, Clip 0..6),
a 1x1 layer 8 -> 6 whose last channel is 6 everywhere (weights near 0, bias 10, clipped), a 3x3
layer 6 -> 7 (pads 1, Clip 0..6; tests/recipes/conv-reads-input.qrl lowers it to a kernel that
reads its input's last element) and a 1x1 layer 7 -> 5. Writes DIR/reads.onnx, DIR/x.npy
(calibration, 6 samples) and DIR/x_test.npy (3 other samples), images 11 x 9."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(36)
nodes, inits = [], []


def conv(x, cin, cout, k, pad, name, clip=True, last=None):
    w = rng.normal(0, 1.0 / np.sqrt(cin * k * k), (cout, cin, k, k)).astype(np.float32)
    b = rng.normal(0, 0.1, cout).astype(np.float32)
    if last is not None:  # the last channel: bias `last`, weights too small to move it off the clip
        w[-1] = rng.uniform(-1e-3, 1e-3, w[-1].shape).astype(np.float32)
        b[-1] = last
    inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_c"], kernel_shape=[k, k],
                                  pads=[pad] * 4))
    if not clip:
        return name + "_c"
    nodes.append(helper.make_node("Clip", [name + "_c", "zero", "six"], [name + "_y"]))
    return name + "_y"


inits.extend([numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(6), "six")])
s = conv("x", 3, 8, 3, 1, "stem")
a = conv(s, 8, 6, 1, 0, "a", last=10.0)
b = conv(a, 6, 7, 3, 1, "b")
c = conv(b, 7, 5, 1, 0, "c", clip=False)
g = helper.make_graph(nodes, "reads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 11, 9])],
                      [helper.make_tensor_value_info(c, TensorProto.FLOAT, ["N", 5, 11, 9])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, out + "/reads.onnx")
np.save(out + "/x.npy", rng.normal(0, 1, (6, 3, 11, 9)).astype(np.float32))
np.save(out + "/x_test.npy", rng.normal(0, 1, (3, 3, 11, 9)).astype(np.float32))
