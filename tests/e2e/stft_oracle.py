#!/usr/bin/python3
"""A spectrogram in miniature, and numpy's run of it with recipes/a16w8-real.qrl's choices: the
oracle of tests/e2e/test_a16.c's STFT test, independent of QRL and of ONNX Runtime.

Usage: /usr/bin/python3 tests/e2e/stft_oracle.py make DIR
         writes DIR/stft.onnx: X [N, 1, 1, 400] -> two Convs (8 filters of 32 taps, stride 10: a
         real and an imaginary STFT) -> their squares added (the power spectrum) -> Clip(1e-10)
         -> Log -> Mul 10 (in dB), and DIR/stft_calib.npy (16 samples), DIR/stft_x.npy (4
         others): white noise whose loudness spans 40 dB
       /usr/bin/python3 tests/e2e/stft_oracle.py run DIR OUT.npy
         writes numpy's outputs for DIR/stft_x.npy with recipes/a16w8-real.qrl's choices: both
         Convs read the input quantized to u16 asymmetric from the calibration samples' min and
         max (ONNX's QuantizeLinear: scale (max - min) / 65535 over a range that holds 0, zero
         point round(-min / scale), x rounded half to even), their weights i8 symmetric per
         output channel (scale max |w| / 127.5); the products in float64 (exact for these
         integer sums), scaled back to real numbers and never requantized (the Convs' outputs
         are squared as they are), the rest in float64; and prints "f32_sqnr D": its SQNR
         against the f32 model on the same samples.
"""
import sys

import numpy as np


def make(d):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(35)
    k, f, stride, n = 32, 8, 10, 400
    t = np.arange(k)
    win = 0.5 - 0.5 * np.cos(2 * np.pi * t / k)
    wr = np.stack([win * np.cos(2 * np.pi * i * t / k) for i in range(f)]).astype(np.float32)
    wi = np.stack([-win * np.sin(2 * np.pi * i * t / k) for i in range(f)]).astype(np.float32)
    # a trained filter's weights: no two alike, none on a tie between two steps
    wr += rng.normal(0, 1e-3, wr.shape).astype(np.float32)
    wi += rng.normal(0, 1e-3, wi.shape).astype(np.float32)
    inits = [numpy_helper.from_array(wr.reshape(f, 1, 1, k), "wr"), numpy_helper.from_array(wi.reshape(f, 1, 1, k), "wi"),
             numpy_helper.from_array(np.array(1e-10, np.float32), "lo"),
             numpy_helper.from_array(np.array(10.0, np.float32), "ten")]
    conv = dict(kernel_shape=[1, k], strides=[1, stride])
    nodes = [helper.make_node("Conv", ["X", "wr"], ["re"], **conv),
             helper.make_node("Conv", ["X", "wi"], ["im"], **conv),
             helper.make_node("Mul", ["re", "re"], ["re2"]), helper.make_node("Mul", ["im", "im"], ["im2"]),
             helper.make_node("Add", ["re2", "im2"], ["power"]),
             helper.make_node("Clip", ["power", "lo"], ["c"]),
             helper.make_node("Log", ["c"], ["l"]), helper.make_node("Mul", ["l", "ten"], ["Y"])]
    frames = (n - k) // stride + 1
    g = helper.make_graph(nodes, "stft", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 1, 1, n])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", f, 1, frames])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, d + "/stft.onnx")

    def audio(count):  # white noise, its loudness over 40 dB, on the int16 scale
        return (rng.normal(size=(count, 1, 1, n)) * 1000 * 10 ** rng.uniform(-2, 0, (count, 1, 1, 1))).astype(np.float32)
    np.save(d + "/stft_calib.npy", audio(16))
    np.save(d + "/stft_x.npy", audio(4))


def forward(x, wr, wi, quant_x):
    k, stride = wr.shape[-1], 10
    frames = (x.shape[-1] - k) // stride + 1
    idx = np.arange(frames)[:, None] * stride + np.arange(k)
    out = []
    for s in x:
        fr = quant_x(s.reshape(-1).astype(np.float64))[idx]  # [frames, k]
        re, im = fr @ wr.T, fr @ wi.T
        p = (re * re + im * im).T  # [f, frames]
        out.append((10 * np.log(np.maximum(p, 1e-10))).reshape(-1, 1, frames))
    return np.stack(out)


def u16(lo, hi):
    """ONNX's QuantizeLinear then DequantizeLinear at u16 on [lo, hi] widened to hold 0."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float64(np.float32((hi - lo) / 65535))
    zero = np.clip(np.round(-lo / scale), 0, 65535)
    return lambda v: (np.clip(np.round(v / scale) + zero, 0, 65535) - zero) * scale


def wq(v, axis):
    """i8 symmetric per output channel (along axis): scale max |w| / 127.5 (the range [-max, max]
    over the 255 steps of [-128, 127], as PyTorch's symmetric observers), stored in f32."""
    amax = np.abs(v).max(axis=1 - axis, keepdims=True)
    s = amax / 127.5
    s[s == 0] = 1  # an all-zero filter (the imaginary part at frequency 0)
    q = np.clip(np.round(v / s), -128, 127)
    # the largest |w| is exactly 127.5 steps, a tie that float division may miss by an ulp:
    # half to even makes it 128 (saturated to 127) or -128
    q[(np.abs(v) == amax) & (amax > 0)] = np.where(v > 0, 127, -128)[(np.abs(v) == amax) & (amax > 0)]
    return q * s.astype(np.float32).astype(np.float64)


def run(d, out):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(d + "/stft.onnx")
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    cal, x = np.load(d + "/stft_calib.npy"), np.load(d + "/stft_x.npy")
    wr, wi = w["wr"].reshape(8, -1), w["wi"].reshape(8, -1)
    same = lambda v: v
    ref = forward(x, wr, wi, same)
    got = forward(x, wq(wr, 0), wq(wi, 0), u16(float(cal.min()), float(cal.max())))
    np.save(out, got.astype(np.float32))
    print("f32_sqnr %.2f" % (10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum())))


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else run(sys.argv[2], sys.argv[3])
