"""A small f32 CNN whose first node stays in f32, for tests/e2e/test_quantize.c
(quantize/shipped_runs_take_the_f32_prefix_from_the_f32_run).

x (8 channels, 10 x 10) -> Sin -> s -> Cos -> t -> Conv 3x3 (pads 1) -> c -> Relu -> a -> Conv 3x3
(pads 1) -> y. No recipe quantizes Sin or Cos, so neither x nor s is quantized: Sin reads the model
input and makes s, an f32 value of the model, so every run of the QDQ and of the integer graph
computes it as the f32 run does, to the bit. (Cos makes t, which the first Conv reads quantized: the
QDQ graph names Cos's output apart from t, the value of its DequantizeLinear.)
Writes DIR/cp.onnx and DIR/cp_calib.npy (64 samples)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
r = np.random.default_rng(5)
w1 = r.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.3
b1 = r.standard_normal(8).astype(np.float32) * 0.1
w2 = r.standard_normal((6, 8, 3, 3)).astype(np.float32) * 0.2
b2 = r.standard_normal(6).astype(np.float32) * 0.1
nodes = [helper.make_node("Sin", ["x"], ["s"]),
         helper.make_node("Cos", ["s"], ["t"]),
         helper.make_node("Conv", ["t", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["a"]),
         helper.make_node("Conv", ["a", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
inits = [numpy_helper.from_array(v, n) for v, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, 10, 10])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), out + "/cp.onnx")
x = r.standard_normal((64, 8, 10, 10)).astype(np.float32) * 2
np.save(out + "/cp_calib.npy", x)
