"""A small f32 CNN whose MaxPools sit inside chains of convolutions, for tests/e2e/test_bands.c:
a 7x7 stride-2 stem (3 -> 13 channels, pads 3, ReLU: u8 with zero point 0) into a 3x3 stride-2
MaxPool with pads 1 (ResNet's), a 3x3 convolution 13 -> 10 without activation (a non-zero zero
point) into a 2x2 stride-2 MaxPool without pads on an odd size (its input's last row and column
are read by no window), then a 1x1 convolution 10 -> 6. 25 x 19 images; channels no multiples of
16; weights and inputs of both signs. Writes DIR/pools.onnx, DIR/x.npy (calibration, 6 samples)
and DIR/x_test.npy (3 other samples)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(45)
nodes, inits = [], []


def conv(x, cin, cout, k, stride, pad, name, relu):
    w = rng.normal(0, 1.0 / np.sqrt(cin * k * k), (cout, cin, k, k)).astype(np.float32)
    b = rng.normal(0, 0.3, cout).astype(np.float32)
    inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_c"], kernel_shape=[k, k],
                                  strides=[stride, stride], pads=[pad] * 4))
    if not relu:
        return name + "_c"
    nodes.append(helper.make_node("Relu", [name + "_c"], [name + "_y"]))
    return name + "_y"


def maxpool(x, k, stride, pad, name):
    nodes.append(helper.make_node("MaxPool", [x], [name], kernel_shape=[k, k], strides=[stride, stride],
                                  pads=[pad] * 4))
    return name


s = conv("x", 3, 13, 7, 2, 3, "stem", True)      # 25 x 19 -> 13 x 10
m = maxpool(s, 3, 2, 1, "pool1")                 # -> 7 x 5
c = conv(m, 13, 10, 3, 1, 1, "c2", False)        # -> 7 x 5
m = maxpool(c, 2, 2, 0, "pool2")                 # -> 3 x 2: row 6 and column 4 read by none
p = conv(m, 10, 6, 1, 1, 0, "c3", False)
g = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 25, 19])],
                      [helper.make_tensor_value_info(p, TensorProto.FLOAT, ["N", 6, 3, 2])], inits)
mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
mdl.ir_version = 8
onnx.checker.check_model(mdl)
onnx.save(mdl, out + "/pools.onnx")
np.save(out + "/x.npy", rng.normal(0, 1, (6, 3, 25, 19)).astype(np.float32))
np.save(out + "/x_test.npy", rng.normal(0, 1, (3, 3, 25, 19)).astype(np.float32))
