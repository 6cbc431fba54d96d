"""A small f32 CNN whose images may be of any size, for tests/e2e/test_run_plan.c: a 3 x 3 stem
(3 -> 8 channels, the gathered path of few channels), MaxPool 2 x 2, a 3 x 3 layer over 8 channels
(gathered too), a 3 x 3 stride-2 layer with pads over 20 channels (the windows' pointers), a
1 x 1 projection (20 -> 5): Relu after each but the last. Channels are no multiples of 16, weights,
biases and inputs of both signs. Writes DIR/plan.onnx (input x: N x 3 x H x W, output y),
DIR/x.npy (calibration: 6 samples of 15 x 13), DIR/a.npy (2 other samples of 15 x 13) and
DIR/b.npy (3 samples of 9 x 11)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(44)
nodes, inits = [], []


def conv(x, cin, cout, k, stride, pad, name, relu=True):
    w = rng.normal(0, 1.0 / np.sqrt(cin * k * k), (cout, cin, k, k)).astype(np.float32)
    b = rng.normal(0, 0.1, cout).astype(np.float32)
    inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
    y = name + "_c" if relu else "y"
    nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [y], kernel_shape=[k, k],
                                  strides=[stride, stride], pads=[pad] * 4))
    if not relu:
        return y
    nodes.append(helper.make_node("Relu", [y], [name + "_r"]))
    return name + "_r"


s = conv("x", 3, 8, 3, 1, 1, "stem")
nodes.append(helper.make_node("MaxPool", [s], ["pool"], kernel_shape=[2, 2], strides=[2, 2]))
c = conv("pool", 8, 20, 3, 1, 1, "c1")
c = conv(c, 20, 24, 3, 2, 1, "c2")
conv(c, 24, 5, 1, 1, 0, "p", relu=False)
g = helper.make_graph(nodes, "run_plan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5, "h", "w"])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, out + "/plan.onnx")
np.save(out + "/x.npy", rng.normal(0, 1, (6, 3, 15, 13)).astype(np.float32))
np.save(out + "/a.npy", rng.normal(0, 1, (2, 3, 15, 13)).astype(np.float32))
np.save(out + "/b.npy", rng.normal(0, 1, (3, 3, 9, 11)).astype(np.float32))
