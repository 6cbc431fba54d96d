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
       /usr/bin/python3 tests/e2e/stft_oracle.py mel DIR OUT.npy BITS
         the same for DIR/stft_mel.onnx (make writes it too: the power spectrum, transposed, by
         a [8, 4] mel MatMul, no Log), the MatMul's input also u16 (BITS 16) or u8 (BITS 8),
         and the X input at BITS too (run_mel says how; it prints "tol T").
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
    # the same STFT read by a mel MatMul: power -> Transpose -> MatMul by a [8, 4] constant, no Log
    mel = np.abs(rng.normal(size=(f, 4))).astype(np.float32)
    nodes = nodes[:5] + [helper.make_node("Transpose", ["power"], ["pt"], perm=[0, 2, 3, 1]),
                         helper.make_node("MatMul", ["pt", "mel"], ["Y"])]
    g = helper.make_graph(nodes, "stft_mel", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 1, 1, n])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 1, frames, 4])],
                          inits[:2] + [numpy_helper.from_array(mel, "mel")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, d + "/stft_mel.onnx")

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


def u16(lo, hi, levels=65535):
    """ONNX's QuantizeLinear then DequantizeLinear at u16 (u8: levels 255) on [lo, hi] widened to
    hold 0; and the scale."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float64(np.float32((hi - lo) / levels))
    zero = np.clip(np.round(-lo / scale), 0, levels)
    f = lambda v: (np.clip(np.round(v / scale) + zero, 0, levels) - zero) * scale
    f.scale = scale
    return f


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


def run_mel(d, out, bits):
    """stft_mel.onnx at u16 (bits 16) or u8 (bits 8) inputs: X from the calibration samples' range,
    the power spectrum from its range on them with the weights quantized and nothing else rounded
    (calibrate = float). Prints "tol T": one step of the power spectrum's grid times the largest
    mel weight, what a power bin rounded the other way (f32 sums against float64 ones) moves an
    output by."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(d + "/stft_mel.onnx")
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    cal, x = np.load(d + "/stft_calib.npy"), np.load(d + "/stft_x.npy")
    wr, wi, mel = wq(w["wr"].reshape(8, -1), 0), wq(w["wi"].reshape(8, -1), 0), wq(w["mel"], 1)
    levels = 2 ** bits - 1
    idx = np.arange((x.shape[-1] - 32) // 10 + 1)[:, None] * 10 + np.arange(32)
    power = lambda fr: (fr @ wr.T) ** 2 + (fr @ wi.T) ** 2
    pmax = max(power(s.reshape(-1).astype(np.float64)[idx]).max() for s in cal)
    qx, qp = u16(float(cal.min()), float(cal.max()), levels), u16(0.0, pmax, levels)
    got = np.stack([(qp(power(qx(s.reshape(-1).astype(np.float64))[idx])) @ mel)[None] for s in x])
    np.save(out, got.astype(np.float32))
    print("tol %.9g" % (qp.scale * np.abs(mel).max()))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        run_mel(sys.argv[2], sys.argv[3], int(sys.argv[4]))
