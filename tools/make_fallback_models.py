"""Models for the fallback tests (tests/e2e/test_quantize.c), written to DIR:

logmel.onnx  x -> Conv 1x1 -> Relu -> Clip(1e-10, 1e9) -> Log: a log-mel front
             end's guard. Quantized, the Clip's lower bound becomes real 0 and
             Log gives -inf; the fallback must revert until the outputs are finite.
logmel_x.npy 64 samples of both signs, some channels mostly silent.
spiky.onnx   x -> Relu -> Conv 3x3 (bias) -> y, and spiky_x.npy whose rare huge values make x
             fall back to f32 while the Conv's weights stay int8: its bias must stay
             f32 too (quantized with x's scale, the export loaded back lost it).
ranking.onnx x -> a = Conv 1x1 (two nearly equal channels) -> b = Conv 1x1 (their difference),
             c = Conv 1x1 (a spiky channel, scaled down) -> y = b + c; ranking_x.npy.
             a's local SQNR is fine, but b amplifies its rounding error beyond the signal;
             c's local SQNR is worse, its effect on y small. Ranked by local SQNR the fallback
             reverts c and then a; ranked by effect on the outputs, a alone.
branchy.onnx x -> r = Relu(Conv 3x3) -> a squeeze-excitation gate (GlobalAveragePool, Conv 1x1,
             HardSigmoid, Mul) -> Conv 3x3 -> + r (a skip) -> Reshape to [N, -1] (its shape from
             Shape(x): an int64 value) -> MatMul -> y; and z = Conv 1x1 (r), a second output
             the later layers do not reach; branchy_x.npy. For the fallback's effect runs, which
             start at the layer from cached f32 values (tests/e2e/test_quantize.c).
permac.onnx  three outputs from x (its values multiples of 1/255 in [0, 1], which u8 holds
             exactly): a = Conv 3x3, 8 -> 32 channels (590k MACs a sample), b and c = Conv 1x1,
             8 -> 2 (4k each), b and c scaled so that each adds 0.35 of a's u8 rounding error
             (numpy's) to the pooled outputs; permac_x.npy. Worst
             effect first, the fallback gives back a (most of the MACs); most error per MAC
             first (order = per_mac), b and c.
dominant.onnx x -> Conv 3x3 (4 -> 8) -> Relu -> Conv 1x1 (8 -> 4) -> y, and dominant_x.npy: 16
             samples, sample 3 thirty times the others, so that it holds most of the output
             energy and sets every u8 range: it quantizes well and the others coarsely. Pooled,
             the outputs' SQNR is sample 3's; each sample's own, most are far below it (samples
             = F, tests/e2e/test_quantize.c).
loud.onnx    the same layers as dominant.onnx (other weights), and loud_x.npy: 64 samples, two of
             them (3 and 35) twice the others' amplitude. Held out of calibration (validate = 0.25,
             validate_from = spread holds out 3, 7, ..., 63), they clip at the ranges the other
             samples set: 2 of the 16 judged samples carry most of the error and much of the energy,
             so that each sample's own figure (sample_balanced_lower) passes where the pooled one
             at its bound (sample_pooled_lower) fails (tests/e2e/test_quantize.c).
tail.onnx    the same layers (other weights), tail_x.npy: 64 calibration samples, each scaled by
             its own log-normal amplitude (sigma 0.5: the per-sample maxima spread, a few loud),
             and tail_test.npy: 4 unseen samples at 1.5 times the calibration's largest amplitude.
             minmax() clips them; extreme() leaves headroom where the maxima spread
             (tests/e2e/test_quantize.c).

Usage: /usr/bin/python3 tools/make_fallback_models.py DIR
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(g, path):
    """g as an opset-13, IR-8 model, checked, at path."""
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def save_conv_relu_conv(rng, out, name):
    """Conv 3x3 (4 -> 8, bias) -> Relu -> Conv 1x1 (8 -> 4), weights drawn from rng, as out/name.onnx."""
    w1 = (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((4, 8, 1, 1)) * 0.5).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["r"]),
                           helper.make_node("Conv", ["r", "w2"], ["y"])], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2")])
    save(g, f"{out}/{name}.onnx")


def main(out):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 4, 1, 1)).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b")
    lo = numpy_helper.from_array(np.array(1e-10, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(1e9, np.float32), "hi")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Clip", ["r", "lo", "hi"], ["g"]),
        helper.make_node("Log", ["g"], ["y"]),
    ]
    g = helper.make_graph(nodes, "logmel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 16, 16])], [w, b, lo, hi])
    save(g, f"{out}/logmel.onnx")
    x = rng.standard_normal((64, 4, 16, 16)).astype(np.float32)
    x[:, :, :8] *= 1e-3  # quiet rows: Conv outputs near 0, below one quantization step
    np.save(f"{out}/logmel_x.npy", x)

    # Positive weights average the input's independent rounding errors over 27 taps while its
    # signal adds up; channel 0, where the spikes are, is ignored.
    wv = rng.uniform(0.05, 0.15, (6, 4, 3, 3)).astype(np.float32)
    wv[:, 0] = 0
    w = numpy_helper.from_array(wv, "w")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32) * 2.0, "b")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Conv", ["r", "w", "b"], ["y"], pads=[1, 1, 1, 1])], "spiky",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6, 32, 32])], [w, b])
    save(g, f"{out}/spiky.onnx")
    x = rng.uniform(0, 1, (32, 4, 32, 32)).astype(np.float32)
    x[::8, 0, 0, 0] = 100.0  # rare huge values: r's u8 steps are coarse (local SQNR under 20 dB)
    np.save(f"{out}/spiky_x.npy", x)

    wa = numpy_helper.from_array(np.array([[1, 0.01, 0], [1, 0, 0]], np.float32).reshape(2, 3, 1, 1), "wa")
    wb = numpy_helper.from_array(np.array([[1, -1]], np.float32).reshape(1, 2, 1, 1), "wb")
    wc = numpy_helper.from_array(np.array([[0, 0, 0.001]], np.float32).reshape(1, 3, 1, 1), "wc")
    g = helper.make_graph([helper.make_node("Conv", ["x", "wa"], ["a"]),
                           helper.make_node("Conv", ["a", "wb"], ["b"]),
                           helper.make_node("Conv", ["x", "wc"], ["c"]),
                           helper.make_node("Add", ["b", "c"], ["y"])], "ranking",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, 8, 8])], [wa, wb, wc])
    save(g, f"{out}/ranking.onnx")
    x = rng.standard_normal((32, 3, 8, 8)).astype(np.float32)
    x[::8, 2, 0, 0] = 30.0  # rare large values: c's u8 steps are coarse
    np.save(f"{out}/ranking_x.npy", x)

    def const(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    inits = [const("w1", (8, 4, 3, 3)), const("b1", (8,), 0.1), const("ws", (8, 8, 1, 1)), const("w2", (8, 8, 3, 3), 0.15),
             const("wz", (2, 8, 1, 1)), const("wm", (8 * 8 * 8, 10), 0.05),
             numpy_helper.from_array(np.array([0], np.int64), "zero"), numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Conv", ["p", "ws"], ["s"]),
             helper.make_node("HardSigmoid", ["s"], ["gate"]),
             helper.make_node("Mul", ["r", "gate"], ["m"]),
             helper.make_node("Conv", ["m", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r"], ["a"]),
             helper.make_node("Shape", ["x"], ["shx"]),
             helper.make_node("Gather", ["shx", "zero"], ["n"], axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["flat"], axis=0),
             helper.make_node("Reshape", ["a", "flat"], ["f"]),
             helper.make_node("MatMul", ["f", "wm"], ["y"]),
             helper.make_node("Conv", ["r", "wz"], ["z"])]
    g = helper.make_graph(nodes, "branchy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 2, 8, 8])], inits)
    save(g, f"{out}/branchy.onnx")
    np.save(f"{out}/branchy_x.npy", rng.standard_normal((32, 4, 8, 8)).astype(np.float32))

    def int8_levels(shape):  # each output channel's integers, max |k| 127: k * scale is exact in i8
        k = rng.integers(-127, 128, shape)
        k.reshape(shape[0], -1)[:, 0] = 127
        return k
    ka, kb, kc = int8_levels((32, 8, 3, 3)), int8_levels((2, 8, 1, 1)), int8_levels((2, 8, 1, 1))
    x = (rng.integers(0, 256, (32, 8, 16, 16)) / 255.0).astype(np.float32)

    def rounding_error(w, pad):  # u8 minmax rounding error energy of the Conv's output, in numpy
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
        k = w.shape[2]
        out = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + 16, j:j + 16], w[:, :, i, j])
                  for i in range(k) for j in range(k))
        lo, hi = min(out.min(), 0.0), max(out.max(), 0.0)
        s = (hi - lo) / 255
        z = np.round(-lo / s)
        return float(((np.clip(np.round(out / s) + z, 0, 255) - z) * s - out).__pow__(2).sum())
    wa = (ka * 0.001).astype(np.float32)
    ea = rounding_error(wa, 1)  # scaling a Conv's weights by f scales its error energy by f^2
    wb = (kb * (0.01 * np.sqrt(0.35 * ea / rounding_error(kb * 0.01, 0)))).astype(np.float32)
    wc = (kc * (0.01 * np.sqrt(0.35 * ea / rounding_error(kc * 0.01, 0)))).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "wa"], ["a"], pads=[1, 1, 1, 1]),
                           helper.make_node("Conv", ["x", "wb"], ["b"]),
                           helper.make_node("Conv", ["x", "wc"], ["c"])], "permac",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 16, 16])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", ch, 16, 16])
                           for n, ch in (("a", 32), ("b", 2), ("c", 2))],
                          [numpy_helper.from_array(wa, "wa"), numpy_helper.from_array(wb, "wb"),
                           numpy_helper.from_array(wc, "wc")])
    save(g, f"{out}/permac.onnx")
    np.save(f"{out}/permac_x.npy", x)

    save_conv_relu_conv(rng, out, "dominant")
    x = rng.standard_normal((16, 4, 8, 8)).astype(np.float32)
    x[3] *= 30
    np.save(f"{out}/dominant_x.npy", x)

    rng = np.random.default_rng(5)  # its own stream: the models above stay as they were
    save_conv_relu_conv(rng, out, "loud")
    x = rng.standard_normal((64, 4, 8, 8)).astype(np.float32)
    x[[3, 35]] *= 2
    np.save(f"{out}/loud_x.npy", x)

    rng = np.random.default_rng(11)  # its own stream again
    save_conv_relu_conv(rng, out, "tail")
    amp = np.exp(0.5 * rng.standard_normal(64))
    x = rng.standard_normal((64, 4, 8, 8)) * amp[:, None, None, None]
    np.save(f"{out}/tail_x.npy", x.astype(np.float32))
    np.save(f"{out}/tail_test.npy", (rng.standard_normal((4, 4, 8, 8)) * 1.5 * amp.max()).astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1])
