"""A small f32 CNN whose first convolution reads its input in f32 but runs on quantized weights,
for tests/e2e/test_quantize.c (quantize/shipped_sqnrs_with_quantized_weights_on_an_f32_input_match_numpy).

x (8 channels, 10 x 10, of both signs; channel 3 three hundred times wider than the others) ->
Conv 3x3 (dilations 2, pads 2) -> Relu -> Conv 3x3 (strides 2, pads 1 0 1 1) -> y. Channel 3
makes x's one u8 grid coarse for the other seven, so the fallback keeps x in f32, and the first
convolution's weights of channel 3 are a thousand times smaller, so that a (the Relu's output)
stays quantized: that Conv then keeps the model's name for its output ('c') and reads weights a
DequantizeLinear makes, the model's Conv of the same op and output name reading the f32 ones.
Channel 3's weights are under a sixth of their output channel's int8 step and round to zero, so
their quantization costs a (a packing of the f32 weights read for the int8 ones moved a's
cumulative SQNR from 18.7 to 26.3 dB). 8 input channels times 9 taps: the packing convolution
kernel (sconv) runs both Convs.
Writes DIR/fi.onnx and DIR/fi_calib.npy (64 samples)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
r = np.random.default_rng(11)
w1 = r.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.3
w1[:, 3] *= 1e-3
b1 = r.standard_normal(8).astype(np.float32) * 0.1 - 0.05
w2 = r.standard_normal((6, 8, 3, 3)).astype(np.float32) * 0.2
b2 = r.standard_normal(6).astype(np.float32) * 0.1
nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[2, 2, 2, 2], dilations=[2, 2]),
         helper.make_node("Relu", ["c"], ["a"]),
         helper.make_node("Conv", ["a", "w2", "b2"], ["y"], pads=[1, 0, 1, 1], strides=[2, 2])]
inits = [numpy_helper.from_array(v, n) for v, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, 10, 10])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), out + "/fi.onnx")
x = r.standard_normal((64, 8, 10, 10)).astype(np.float32) - 0.2
x[:, 3] *= 300
np.save(out + "/fi_calib.npy", x)
