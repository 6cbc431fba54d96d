"""A model for the fallback's 16-bit step (fallback = u16 then f32 when ..., tests/e2e/test_ladder.c),
written to DIR:

ladder.onnx  x [N, 4, 8, 8] ->
               a = Relu(Conv 1x1 (x)), 8 channels; channel 7 is Relu(50 (x1 + x2 + x3) - 300): 0
                   but where all three inputs are near 3 (planted positions), where it reaches
                   150. That sets a's u8 step (about 0.6) while the other channels hold Relu of
                   normals of variance 0.75: at u8 their rounding swamps them (about 11 dB); at
                   u16 the step is 256 times finer. Only the Conv y1 reads a.
               y1 = Conv 3x3 (a), 4 channels (channel 7 scaled down): an output.
               y2 = Conv 1x1 (x), 4 channels: an output whose weights hold 1000 on x's channel
                   0, which is 0 everywhere, beside weights of 0.5 to 1.5 on the others:
                   per-channel i8 rounds those to 0 (its step is 1000 / 127), so y2 is lost at
                   any activation width and only f32 keeps it.
               d = Conv 1x1 (x), 4 channels; channel 3 is 50 (x1 + x2 + x3) - 300: about -300,
                   150 at the plants, so its u8 step (about 3) swamps the other channels as a's
                   does; but only a Sigmoid reads d, and its lookup table takes 8 bits: d cannot
                   go to 16 bits, only to f32.
               y3 = Sigmoid(d): an output.
ladder_x.npy 48 samples: normals with channel 0 at 0, and in 8 of them one position where
             channels 1 to 3 are 3.
ladder_test.npy 16 other samples of the same kind (4 planted).
ladder_hs.onnx x [N, 4, 8, 8] -> a = Conv 1x1 (x), 8 channels, channel 7 = -10 (x1 + x2 + x3) - 60
             (about -60: a's u8 step, about 0.5, costs the other channels 15 dB; HardSwish makes it 0, so
             the activation's own output keeps a small range) -> h = a * HardSigmoid(a) (HardSwish
             as PyTorch exports it: the pattern hardswish, whose lowering from a 16-bit input into
             8 bits is qact_narrow) -> y = Conv 3x3 (h): a's 16-bit step is open through the
             activation pattern.
ladder_ho.onnx x [N, 4, 8, 8] -> a = Relu(Conv 1x1 (x)), 8 channels, channel 7's weights 9 times the
             others' (it sets a's u8 step; y barely reads it) -> y = Conv 3x3 (a), 4 channels: for the
             16-bit step judged on held-out samples at a lower bound (recipes/int8-a16-fallback.qrl).
ladder_ho_x.npy 64 samples: normals (channel 0 at 0), 8 of them (7, 10, 17, 29, 35, 44, 53, 58) at a
             quarter of the others' amplitude. Two of those (7, 35) are among the 16 that
             validate = 0.25 with validate_from = spread holds out (3, 7, ..., 63): their error ratios
             are 16 times the loud samples', so the held-out samples' mean ratio meets 25 dB with a
             at u8 and its one-sided 95% bound does not. Held-out sample 11 is the calibrating sample
             whose a peaks, 1.1 times louder: a's range over the 48 is not the 64's.
ladder_ho_val.npy those 16 held-out samples (x[3::4]).
ladder_ho_test.npy 16 other samples of the same kind (2 quiet).

Usage: /usr/bin/python3 tools/make_ladder_model.py DIR
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def samples(rng, n, planted):
    x = rng.standard_normal((n, 4, 8, 8)).astype(np.float32)
    x[:, 0] = 0
    for i in range(planted):  # one position each in the first `planted` samples
        s = i * n // planted
        h, w = rng.integers(0, 8, 2)
        x[s, 1:, h, w] = 3.0
    return x


def main(out):
    rng = np.random.default_rng(11)
    wa = rng.standard_normal((8, 4, 1, 1)).astype(np.float32) * 0.5
    ba = np.zeros(8, np.float32)
    wa[7, :, 0, 0] = 50.0
    ba[7] = -300.0  # 50 (x1 + x2 + x3) - 300 (x0 is 0): above 0 near the plants (150 there)
    wc = (rng.standard_normal((4, 8, 3, 3)) * 0.2).astype(np.float32)
    wc[:, 7] *= 0.01  # the spike channel barely reaches y1: y1 carries the other channels
    bc = (rng.standard_normal(4) * 0.1).astype(np.float32)
    wb = rng.uniform(0.5, 1.5, (4, 4, 1, 1)).astype(np.float32)
    wb[:, 0] = 1000.0  # on x0, which is 0
    wd = (rng.standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32)
    bd = np.zeros(4, np.float32)
    wd[3, :, 0, 0] = [0.0, 50.0, 50.0, 50.0]
    bd[3] = -300.0
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["ca"]),
        helper.make_node("Relu", ["ca"], ["a"]),
        helper.make_node("Conv", ["a", "wc", "bc"], ["y1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wb"], ["y2"]),
        helper.make_node("Conv", ["x", "wd", "bd"], ["d"]),
        helper.make_node("Sigmoid", ["d"], ["y3"]),
    ]
    g = helper.make_graph(nodes, "ladder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["N", 4, 8, 8]),
                           helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["N", 4, 8, 8]),
                           helper.make_tensor_value_info("y3", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [numpy_helper.from_array(wa, "wa"), numpy_helper.from_array(ba, "ba"),
                           numpy_helper.from_array(wc, "wc"), numpy_helper.from_array(bc, "bc"),
                           numpy_helper.from_array(wb, "wb"), numpy_helper.from_array(wd, "wd"),
                           numpy_helper.from_array(bd, "bd")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{out}/ladder.onnx")
    wh = rng.standard_normal((8, 4, 1, 1)).astype(np.float32) * 0.5
    bh = np.zeros(8, np.float32)
    wh[7, :, 0, 0] = [0.0, -10.0, -10.0, -10.0]
    bh[7] = -60.0
    wy = (rng.standard_normal((4, 8, 3, 3)) * 0.2).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "wh", "bh"], ["a"]),
                           helper.make_node("HardSigmoid", ["a"], ["s"], alpha=1.0 / 6, beta=0.5),
                           helper.make_node("Mul", ["a", "s"], ["h"]),
                           helper.make_node("Conv", ["h", "wy"], ["y"], pads=[1, 1, 1, 1])], "ladder_hs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [numpy_helper.from_array(wh, "wh"), numpy_helper.from_array(bh, "bh"),
                           numpy_helper.from_array(wy, "wy")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{out}/ladder_hs.onnx")
    np.save(f"{out}/ladder_x.npy", samples(rng, 48, 8))
    np.save(f"{out}/ladder_test.npy", samples(rng, 16, 4))
    holdout_model(out)


def holdout_model(out):
    rng = np.random.default_rng(0)  # its own generator: the files above stay as they were
    wa = rng.standard_normal((8, 4, 1, 1)) * 0.5
    wa[7] *= 9.0
    wy = rng.standard_normal((4, 8, 3, 3)) * 0.2
    wy[:, 7] *= 0.01
    amp = np.ones(64)
    amp[[7, 35, 10, 17, 29, 44, 53, 58]] = 0.25
    x = rng.standard_normal((64, 4, 8, 8)) * amp[:, None, None, None]
    x[:, 0] = 0
    # held-out sample 11: the calibrating sample whose a peaks, 1.1 times louder, so that a's range
    # over the 48 calibrating samples is not the 64's
    peak = np.einsum("nchw,c->nhw", x, wa[7, :, 0, 0]).reshape(64, -1).max(1)
    peak[3::4] = -np.inf
    x[11] = 1.1 * x[int(np.argmax(peak))]
    g = helper.make_graph([helper.make_node("Conv", ["x", "wa", "ba"], ["ca"]),
                           helper.make_node("Relu", ["ca"], ["a"]),
                           helper.make_node("Conv", ["a", "wy"], ["y"], pads=[1, 1, 1, 1])], "ladder_ho",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [numpy_helper.from_array(wa.astype(np.float32), "wa"),
                           numpy_helper.from_array(np.zeros(8, np.float32), "ba"),
                           numpy_helper.from_array(wy.astype(np.float32), "wy")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{out}/ladder_ho.onnx")
    x = x.astype(np.float32)
    np.save(f"{out}/ladder_ho_x.npy", x)
    np.save(f"{out}/ladder_ho_val.npy", x[3::4])
    t = rng.standard_normal((16, 4, 8, 8)).astype(np.float32)
    t[:, 0] = 0
    t[[5, 12]] *= 0.25
    np.save(f"{out}/ladder_ho_test.npy", t)


if __name__ == "__main__":
    main(sys.argv[1])
