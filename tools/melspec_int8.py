#!/usr/bin/python3
"""What int8 can keep of the openWakeWord melspectrogram's STFT (QRL-J, docs/quantizer.md
"(stop 35)"): independent of QRL.

qdq OUTDIR: writes QDQ copies of build/realmodels/oww_melspec.onnx in which only the STFT Convs
  (Conv_2 the real part, Conv_3 the imaginary one) read fake-quantized inputs and/or weights,
  everything else f32, for ONNX Runtime (tools/ort_sqnr.js) to score against the f32 model:
    c1t      Conv_2, input i8 symmetric per tensor (scale max|x| / 127 over the 64 calibration
             samples), weights i8 symmetric per tensor (max|w| / 127)
    c1c      the same, weights per output channel
    c1t_u8   Conv_2, input u8 asymmetric (scale (max - min) / 255, zero point round(-min / scale))
    c1t_s8a  Conv_2, input i8 asymmetric (the same scale, zero point shifted by -128)
    c12t     both Convs as c1t;  c12c  both as c1c;  c12c_u8  both, u8 input, per-channel weights
    c1_ain   Conv_2's input alone (f32 weights);  c1_w  Conv_2's weights alone (f32 input)
    w12c     both Convs' weights alone, per channel
    d1, d12  Conv_2 / both: the input u8 over each run's own range (DynamicQuantizeLinear: ort_sqnr.js
             runs one sample at a time, so per sample), weights per channel
frames: the same model in numpy (float64; checked against ONNX Runtime on the QDQ copies above)
  with input scales no QDQ node expresses, on the calibration and the unseen samples: a static
  per-tensor scale clipped to a fraction of the calibration range (Conv_2 alone), one per sample,
  one per STFT frame (each 512-sample window its own i8 symmetric or u8 scale), and static i16.
  Prints one line per choice: calibration (the first 16 samples) and unseen SQNR in dB."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = os.path.join(ROOT, "build/realmodels/oww_melspec.onnx")
CALIB = os.path.join(ROOT, "build/realmodels/oww_melspec_calib.npy")
TEST = os.path.join(ROOT, "build/realmodels/oww_melspec_test.npy")


def wq(w, per_channel):
    a = np.abs(w).reshape(w.shape[0], -1).max(1) if per_channel else np.full(w.shape[0], np.abs(w).max())
    s = (a / 127).astype(np.float32)
    s[s == 0] = 1  # the imaginary part's all-zero filters (frequency 0 and Nyquist)
    return np.clip(np.round(w / s.reshape(-1, 1, 1)), -127, 127).astype(np.int8), s


def build(out, convs, wmode, amode):
    m = onnx.load(MODEL)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    x = np.load(CALIB)
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    nodes, done = [], {}
    for n in g.node:
        if n.op_type == "Conv" and n.name in convs:
            xin = n.input[0]
            if amode != "none" and xin not in done:
                if amode == "dynamic":
                    nodes.append(helper.make_node("DynamicQuantizeLinear", [xin], [xin + "_q", xin + "_s", xin + "_zp"]))
                else:
                    if amode == "s8sym":
                        s, zp, dt = max(-lo, hi) / 127, 0, np.int8
                    elif amode == "u8":
                        s = (hi - lo) / 255
                        zp, dt = int(round(-lo / s)), np.uint8
                    else:  # s8asym
                        s = (hi - lo) / 255
                        zp, dt = int(round(-128 - lo / s)), np.int8
                    g.initializer.append(numpy_helper.from_array(np.array(s, np.float32), xin + "_s"))
                    g.initializer.append(numpy_helper.from_array(np.array(zp, dt), xin + "_zp"))
                    nodes.append(helper.make_node("QuantizeLinear", [xin, xin + "_s", xin + "_zp"], [xin + "_q"]))
                nodes.append(helper.make_node("DequantizeLinear", [xin + "_q", xin + "_s", xin + "_zp"], [xin + "_dq"]))
                done[xin] = xin + "_dq"
            if amode != "none":
                n.input[0] = done[xin]
            if wmode != "none":
                wn = n.input[1]
                q, s = wq(numpy_helper.to_array(inits[wn]), wmode == "channel")
                g.initializer.append(numpy_helper.from_array(q, wn + "_q"))
                g.initializer.append(numpy_helper.from_array(s, wn + "_s"))
                g.initializer.append(numpy_helper.from_array(np.zeros(len(s), np.int8), wn + "_zp"))
                nodes.append(helper.make_node("DequantizeLinear", [wn + "_q", wn + "_s", wn + "_zp"], [wn + "_dq"], axis=0))
                n.input[1] = wn + "_dq"
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, out)


VARIANTS = {"c1t": (["Conv_2"], "tensor", "s8sym"), "c1c": (["Conv_2"], "channel", "s8sym"),
            "c1t_u8": (["Conv_2"], "tensor", "u8"), "c1t_s8a": (["Conv_2"], "tensor", "s8asym"),
            "c12t": (["Conv_2", "Conv_3"], "tensor", "s8sym"), "c12c": (["Conv_2", "Conv_3"], "channel", "s8sym"),
            "c12c_u8": (["Conv_2", "Conv_3"], "channel", "u8"), "c1_ain": (["Conv_2"], "none", "s8sym"),
            "c1_w": (["Conv_2"], "tensor", "none"), "w12c": (["Conv_2", "Conv_3"], "channel", "none"),
            "d1": (["Conv_2"], "channel", "dynamic"), "d12": (["Conv_2", "Conv_3"], "channel", "dynamic")}


def frames_report():
    m = onnx.load(MODEL)
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    wr, wi, mel = w["0.stft.conv_real.weight"][:, 0], w["0.stft.conv_imag.weight"][:, 0], w["1.melW"]
    wr8, wi8 = [(lambda q, s: q[:, 0] * s.reshape(-1, 1).astype(np.float64))(*wq(v[:, None], True)) for v in (wr, wi)]

    def rest(r, i):  # power, mel, 10 log10, the 80 dB floor below the sample's peak
        l = 10 * np.log10(np.maximum((r * r + i * i) @ mel, 1e-10))
        return np.maximum(l, l.max() - 80)

    def frames(x):
        n = (x.shape[-1] - 512) // 160 + 1
        return x[np.arange(n)[:, None] * 160 + np.arange(512)]

    def sym(f, amax, bits=8):
        s = amax / (2 ** (bits - 1) - 1)
        s = np.where(s == 0, 1, s)
        return np.clip(np.round(f / s), -(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1) * s

    def u8_rows(f):
        lo, hi = np.minimum(f.min(1, keepdims=True), 0), np.maximum(f.max(1, keepdims=True), 0)
        s = np.where(hi > lo, (hi - lo) / 255, 1)
        z = np.round(-lo / s)
        return (np.clip(np.round(f / s) + z, 0, 255) - z) * s

    cal, test = np.load(CALIB).astype(np.float64), np.load(TEST).astype(np.float64)
    amax = np.abs(cal).max()
    choices = [("static i8, Conv_2 alone, clip at %.2f of the range" % c,
                (lambda c: lambda f, x: (sym(f, amax * c) @ wr8.T, f @ wi.T))(c)) for c in (1, 0.5, 0.25, 0.1, 0.05)]
    choices += [("per sample i8, Conv_2 alone", lambda f, x: (sym(f, np.abs(x).max()) @ wr8.T, f @ wi.T)),
                ("per sample i8, both", lambda f, x: (sym(f, np.abs(x).max()) @ wr8.T, sym(f, np.abs(x).max()) @ wi8.T)),
                ("per frame i8, Conv_2 alone", lambda f, x: (sym(f, np.abs(f).max(1, keepdims=True)) @ wr8.T, f @ wi.T)),
                ("per frame i8, both", lambda f, x: (sym(f, np.abs(f).max(1, keepdims=True)) @ wr8.T,
                                                     sym(f, np.abs(f).max(1, keepdims=True)) @ wi8.T)),
                ("per frame u8, both", lambda f, x: (u8_rows(f) @ wr8.T, u8_rows(f) @ wi8.T)),
                ("static i16, both", lambda f, x: (sym(f, amax, 16) @ wr8.T, sym(f, amax, 16) @ wi8.T))]
    for name, fn in choices:
        dbs = []
        for xs in (cal[:16], test):
            ref, got = [], []
            for x in xs:
                f = frames(x)
                ref.append(rest(f @ wr.T, f @ wi.T))
                got.append(rest(*fn(f, x)))
            ref, got = np.stack(ref), np.stack(got)
            dbs.append(10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum()))
        print("%-48s calibration %.2f dB, unseen %.2f dB" % (name, dbs[0], dbs[1]))


if __name__ == "__main__":
    if sys.argv[1] == "qdq":
        os.makedirs(sys.argv[2], exist_ok=True)
        for k, (convs, wmode, amode) in VARIANTS.items():
            build(os.path.join(sys.argv[2], k + ".onnx"), convs, wmode, amode)
    else:
        frames_report()
