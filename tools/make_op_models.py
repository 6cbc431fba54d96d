#!/usr/bin/python3
"""Writes one tiny ONNX model per op case, for the per-op differential tests
(tests/e2e/test_op_quant.c), with calibration and test inputs of both signs.

    make_op_models.py OUT_DIR [CASE...]  ->  OUT_DIR/cases.tsv and, per case,
        OUT_DIR/<case>/model.onnx, calib_<input>.npy, test_<input>.npy

cases.tsv has one line per case, tab-separated:
    name  sqnr_min_db  flags  inputs  checked_outputs  description
flags: "-" or "fallback_ok" (the op may legitimately stay f32: no pattern or
rule of the stdlib covers it). Every node under test is named "op"; its
outputs are "y" (or y0, y1, ...). An affine op needs quantized inputs, and
only a pattern quantizes a graph input, so such an op reads the output of a
1x1 Conv named "pre" (pre_a, pre_b for two inputs), which is a graph output
too: the numpy oracle (tools/fakequant_ref.py) starts from the integers each
path really fed the op, and checks the op alone.

Thresholds (sqnr_min_db): 8-bit uniform quantization of a Gaussian over its
min/max range (about 8 sigma over 255 steps) gives 10*log10(12*255^2/64) =
40.9 dB per quantization; a case goes through two or three of them (input,
weights, output), and i8 symmetric ranges on one-signed data lose 6 dB.
30 dB is under what a correct quantization gives in every case here by a
margin of several dB, and far above what a wrong index, a wrong attribute or
a clipped range gives (under 20 dB, usually under 10). Cases with a
different bound say why next to it.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save, shape_inference

N_CALIB = 32
N_TEST = 8
DEFAULT_SQNR = 30.0
AVG_SQNR = 24.0  # averages on the input's scale: see the AveragePool cases

rng = np.random.default_rng(2024)
H = helper.make_node


def f32(a):
    return np.asarray(a, dtype=np.float32)


def sample(n, shape, mean=0.2, std=1.0):
    """Values of both signs: a Gaussian slightly off zero, so asymmetric ranges differ from symmetric ones."""
    return f32(rng.normal(mean, std, (n,) + tuple(shape)))


class Case:
    def __init__(self, name, desc, opset=14, sqnr=DEFAULT_SQNR, fallback_ok=False):
        self.name, self.desc, self.opset, self.sqnr, self.fallback_ok = name, desc, opset, sqnr, fallback_ok
        self.nodes, self.inits, self.inputs, self.outputs, self.data = [], [], [], [], {}
        self.checked = []

    def const(self, name, a, dtype=np.float32):
        self.inits.append(numpy_helper.from_array(np.asarray(a, dtype=dtype), name))
        return name

    def input(self, name, shape, mean=0.2, std=1.0, blocky=False):
        """A graph input [N, *shape] with calibration and test samples. The
        calibration samples include the test samples: min/max ranges then
        cover every test value, so what is measured is the op, not how well
        32 samples predict the range of 8 others."""
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N"] + list(shape)))
        both = sample(N_CALIB, shape, mean, std)
        if blocky:  # two levels and a little noise: sharp edges, where cubic interpolation overshoots
            both = f32(np.where(both > mean, 2.0, -2.0) * std + rng.normal(0, 0.05, both.shape))
        self.data[name] = (both, both[:N_TEST].copy())
        return name

    def output(self, name, checked=True):
        self.outputs.append(name)
        if checked:
            self.checked.append(name)
        return name

    def pre(self, x, channels, out="pre", gain=1.0, mix=0.2):
        """A 1x1 Conv (a pattern: quantizes x and its output) mixing the channels a little; also a graph output."""
        w = np.eye(channels) * gain + rng.normal(0, mix * gain, (channels, channels))
        nd = self.ndim[x]
        w = w.reshape((channels, channels) + (1,) * (nd - 2))
        self.nodes.append(H("Conv", [x, self.const("w" + out, w), self.const("b" + out, rng.normal(0, 0.1, channels))],
                            [out], name=out))
        self.output(out, checked=False)
        return out

    def write(self, root):
        d = os.path.join(root, self.name)
        os.makedirs(d, exist_ok=True)
        # output types from ONNX's shape inference
        g = helper.make_graph(self.nodes, self.name, self.inputs, [], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="qrl-tools")
        m.ir_version = 7
        vi = {v.name: v for v in shape_inference.infer_shapes(m).graph.value_info}
        missing = [o for o in self.outputs if o not in vi]
        if missing:
            sys.exit("%s: no inferred type for %s (have %s)" % (self.name, missing, list(vi)))
        m.graph.output.extend(vi[o] for o in self.outputs)
        checker.check_model(m)
        save(m, os.path.join(d, "model.onnx"))
        for k, (c, t) in self.data.items():
            np.save(os.path.join(d, "calib_%s.npy" % k), c)
            np.save(os.path.join(d, "test_%s.npy" % k), t)
        return "\t".join([self.name, "%g" % self.sqnr, "fallback_ok" if self.fallback_ok else "-",
                          ",".join(i.name for i in self.inputs), ",".join(self.checked), self.desc])


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def unary(name, desc, shape, op, attrs=None, extra_inputs=(), nout=1, opset=14, sqnr=DEFAULT_SQNR,
          fallback_ok=False, mean=0.2, std=1.0, blocky=False, unfuse=False):
    """input -> pre (1x1 Conv) -> op -> y (or y0..). unfuse: a Reshape to the same shape (on the integers)
    between pre and op, so that a Conv + op pattern (conv_relu, conv_clip) cannot claim the op."""
    c = Case(name, desc, opset, sqnr, fallback_ok)
    x = c.input("x", shape, mean, std, blocky)
    c.ndim = {x: len(shape) + 1}
    p = c.pre(x, shape[0], mix=0.0 if blocky else 0.2)
    if unfuse:
        c.nodes.append(H("Reshape", [p, c.const("same_shape", i64(*([0] * (len(shape) + 1))), np.int64)], ["pass"],
                         name="pass"))
        p = "pass"
    ins = [p] + [c.const("k%d" % i, a, a.dtype) if a is not None else "" for i, a in enumerate(extra_inputs)]
    outs = ["y"] if nout == 1 else ["y%d" % i for i in range(nout)]
    c.nodes.append(H(op, ins, outs, name="op", **(attrs or {})))
    for o in outs:
        c.output(o)
    return c


def i64(*v):
    return np.array(v, dtype=np.int64)


# ------------------------------------------------------------ patterns

def conv_case(name, desc, x_shape, w_shape, bias=True, post=None, post_inputs=(), sqnr=DEFAULT_SQNR, **attrs):
    c = Case(name, desc, sqnr=sqnr)
    x = c.input("x", x_shape)
    fan_in = int(np.prod(w_shape[1:]))
    ins = [x, c.const("w", rng.normal(0, 1.5 / np.sqrt(fan_in), w_shape))]
    if bias:
        ins.append(c.const("b", rng.normal(0, 0.2, w_shape[0])))
    if post:
        c.nodes.append(H("Conv", ins, ["c"], name="conv", **attrs))
        c.nodes.append(H(post, ["c"] + [c.const("p%d" % i, v) for i, v in enumerate(post_inputs)], ["y"], name="op"))
    else:
        c.nodes.append(H("Conv", ins, ["y"], name="op", **attrs))
    c.output("y")
    return c


@case
def _():
    return [
        conv_case("conv2d", "Conv 2d, bias, asymmetric pads, strides, dilations", (3, 9, 9), (6, 3, 3, 3),
                  pads=[1, 2, 0, 1], strides=[2, 1], dilations=[1, 2]),
        conv_case("conv2d_nobias", "Conv 2d without bias, pads", (3, 8, 8), (5, 3, 3, 3), bias=False, pads=[1, 1, 1, 1]),
        conv_case("conv2d_group", "Conv 2d group=2", (4, 8, 8), (6, 2, 3, 3), group=2, pads=[1, 1, 1, 1]),
        conv_case("conv2d_depthwise", "Conv 2d depthwise (group = channels = 4), stride 2", (4, 8, 8), (4, 1, 3, 3),
                  group=4, pads=[1, 1, 1, 1], strides=[2, 2]),
        conv_case("conv1d", "Conv 1d, pads, stride 2", (3, 16), (5, 3, 3), pads=[1, 1], strides=[2]),
        conv_case("conv3d", "Conv 3d, pads", (2, 5, 6, 6), (4, 2, 3, 3, 3), pads=[1, 1, 1, 1, 1, 1]),
        conv_case("conv_relu", "Conv + Relu", (3, 8, 8), (6, 3, 3, 3), post="Relu", pads=[1, 1, 1, 1]),
        conv_case("conv_clip", "Conv + Clip(-0.5, 4)", (3, 8, 8), (6, 3, 3, 3), post="Clip", post_inputs=(-0.5, 4.0),
                  pads=[1, 1, 1, 1]),
    ]


def gemm_case(name, desc, k=16, m=8, trans_a=0, trans_b=1, alpha=None, beta=None, fallback_ok=False):
    c = Case(name, desc, fallback_ok=fallback_ok)
    x = c.input("x", (k,))
    w = rng.normal(0, 1.5 / np.sqrt(k), (m, k) if trans_b else (k, m))
    attrs = {"transB": trans_b}
    if trans_a:
        attrs["transA"] = 1
    if alpha is not None:
        attrs["alpha"] = alpha
    if beta is not None:
        attrs["beta"] = beta
    a = x
    if trans_a:  # A is [K, N]: the input transposed (a Transpose on f32 data stays f32)
        c.nodes.append(H("Transpose", [x], ["xt"], name="transpose", perm=[1, 0]))
        a = "xt"
    c.nodes.append(H("Gemm", [a, c.const("w", w), c.const("b", rng.normal(0, 0.2, m))], ["y"], name="op", **attrs))
    c.output("y")
    return c


@case
def _():
    return [
        gemm_case("gemm_transb1", "Gemm transB=1 with bias"),
        gemm_case("gemm_transb0", "Gemm transB=0 with bias", trans_b=0),
        gemm_case("gemm_alpha_beta", "Gemm alpha=0.5 beta=2 transB=1", alpha=0.5, beta=2.0),
        # no stdlib pattern takes transA = 1: staying f32 is the documented outcome
        gemm_case("gemm_transa", "Gemm transA=1 (A from a Transpose)", trans_a=1, fallback_ok=True),
    ]


def matmul_case(name, desc, shape, m=8, relu=False):
    c = Case(name, desc)
    x = c.input("x", shape)
    k = shape[-1]
    w = c.const("w", rng.normal(0, 1.5 / np.sqrt(k), (k, m)))
    if relu:
        c.nodes.append(H("MatMul", [x, w], ["mm"], name="matmul"))
        c.nodes.append(H("Relu", ["mm"], ["y"], name="op"))
    else:
        c.nodes.append(H("MatMul", [x, w], ["y"], name="op"))
    c.output("y")
    return c


@case
def _():
    return [
        matmul_case("matmul_rank2", "MatMul [N,16] x const [16,8]", (16,)),
        matmul_case("matmul_rank3", "MatMul [N,5,16] x const [16,8]", (5, 16)),
        matmul_case("matmul_relu", "MatMul + Relu", (16,), relu=True),
    ]


def binary_case(name, desc, op, b_shape, b_from_slice=False):
    """Add/Mul of two activations: both graph inputs, quantized by the pattern
    (different ranges); b_from_slice: b is [1,C,1,1], the first sample of an
    activation (Slice on the integers), for broadcasting over the batch."""
    c = Case(name, desc)
    a = c.input("a", (4, 6, 6), 0.2, 1.0)
    b = c.input("b", b_shape, -0.5, 2.0)
    c.ndim = {a: 4, b: 4}
    if b_from_slice:
        p = c.pre(b, b_shape[0], "pre_b")
        c.nodes.append(H("Slice", [p, c.const("s0", i64(0), np.int64), c.const("s1", i64(1), np.int64),
                                   c.const("s2", i64(0), np.int64)], ["b1"], name="slice"))
        b = "b1"
    c.nodes.append(H(op, [a, b], ["y"], name="op"))
    c.output("y")
    return c


@case
def _():
    out = []
    for op in ("Add", "Mul"):
        lo = op.lower()
        out += [
            binary_case(lo + "_same", op + " of two activations, same shape", op, (4, 6, 6)),
            binary_case(lo + "_bcast_nc11", op + " [N,C,H,W] with [N,C,1,1] (squeeze-excite)", op, (4, 1, 1)),
            binary_case(lo + "_bcast_1c11", op + " [N,C,H,W] with [1,C,1,1]", op, (4, 1, 1), b_from_slice=True),
        ]
    c = unary("add_const", "Add of an activation and a constant [1,C,1,1]", (4, 6, 6), "Add",
              extra_inputs=(f32(rng.normal(0, 1, (1, 4, 1, 1))),), fallback_ok=True)  # no stdlib rule for it
    out.append(c)
    return out


# ------------------------------------------------------------ affine rules

S = (4, 6, 6)


@case
def _():
    return [
        unary("relu", "Relu (the affine rule: a Reshape keeps conv_relu off)", S, "Relu", unfuse=True),
        unary("clip", "Clip(-0.5, 1.5) (the affine rule: a Reshape keeps conv_clip off)", S, "Clip",
              extra_inputs=(f32(-0.5), f32(1.5)), unfuse=True),
        unary("leakyrelu", "LeakyRelu alpha=0.2", S, "LeakyRelu", {"alpha": 0.2}),
        unary("hardsigmoid", "HardSigmoid alpha=1/6 beta=0.5", S, "HardSigmoid", {"alpha": 1.0 / 6, "beta": 0.5},
              std=3.0),
        unary("hardsigmoid_03_04", "HardSigmoid alpha=0.3 beta=0.4", S, "HardSigmoid", {"alpha": 0.3, "beta": 0.4},
              std=2.0),
        unary("hardswish", "HardSwish", S, "HardSwish", std=3.0),
        unary("sigmoid", "Sigmoid", S, "Sigmoid", std=2.0),
        unary("tanh", "Tanh", S, "Tanh", std=1.5),
        unary("maxpool", "MaxPool 3x3, pads 1, strides 2", (4, 7, 7), "MaxPool",
              {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        unary("maxpool_dilated_ceil", "MaxPool 2x3, dilations 2x2, strides 2x1, pads 0,1,1,0, ceil_mode", (4, 9, 8),
              "MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [2, 1], "pads": [0, 1, 1, 0],
                          "ceil_mode": 1}),
        unary("maxpool_stride3", "MaxPool 3x2, strides 3x2, no padding (windows past the edge dropped)", (4, 10, 9),
              "MaxPool", {"kernel_shape": [3, 2], "strides": [3, 2]}),
        unary("globalmaxpool", "GlobalMaxPool", S, "GlobalMaxPool"),
        # Averages keep the input's scale (affine `same`): the step stays while the signal shrinks, from
        # power 1.04 to 0.04 + 1/k for k values of mean 0.2: -8 dB for 3x3 windows, -12 dB for 24..36
        # values, from the ~41 dB of one 8-bit quantization; 24 dB is under what that gives.
        unary("avgpool_pad_exclude", "AveragePool 3x3, pads 1, strides 2, count_include_pad=0", (4, 7, 7),
              "AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, sqnr=AVG_SQNR),
        unary("avgpool_pad_include", "AveragePool 3x3, pads 1, strides 2, count_include_pad=1", (4, 7, 7),
              "AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2],
                              "count_include_pad": 1}, sqnr=AVG_SQNR),
        unary("globalavgpool", "GlobalAveragePool", S, "GlobalAveragePool", sqnr=AVG_SQNR),
        unary("reshape", "Reshape to [0, 8, 18]", S, "Reshape", extra_inputs=(i64(0, 8, 18),)),
        unary("flatten", "Flatten axis=2", S, "Flatten", {"axis": 2}),
        unary("transpose", "Transpose perm [0,2,3,1]", S, "Transpose", {"perm": [0, 2, 3, 1]}),
        unary("squeeze", "Squeeze axes [1] (input)", (1, 6, 6), "Squeeze", extra_inputs=(i64(1),)),
        unary("unsqueeze", "Unsqueeze axes [2] (input)", S, "Unsqueeze", extra_inputs=(i64(2),)),
        unary("slice", "Slice starts [1,5] ends [4,0] axes [1,3] steps [2,-2]", S, "Slice",
              extra_inputs=(i64(1, 5), i64(4, 0), i64(1, 3), i64(2, -2))),
        unary("gather", "Gather axis=1 indices [2,0,3]", S, "Gather", {"axis": 1}, extra_inputs=(i64(2, 0, 3),)),
        unary("split", "Split axis=1 split [1,3]", S, "Split", {"axis": 1}, extra_inputs=(i64(1, 3),), nout=2),
        # more outputs than the executor and the lowering once had room for (16)
        unary("split_wide", "Split axis=1 into 20 equal parts", (20, 3, 3), "Split", {"axis": 1}, nout=20),
        unary("expand", "Expand [N,4,1,6] to [N,4,6,6]", (4, 1, 6), "Expand", extra_inputs=(i64(1, 1, 6, 1),)),
        unary("pad_const_input", "Pad constant 0.7 (value as an input, opset 14)", S, "Pad",
              {"mode": "constant"}, extra_inputs=(i64(0, 0, 1, 2, 0, 0, 2, 1), f32(0.7))),
        unary("pad_const_attr", "Pad constant 0.7 (attributes, opset 10)", S, "Pad",
              {"mode": "constant", "pads": [0, 0, 1, 2, 0, 0, 2, 1], "value": 0.7}, opset=10),
        unary("pad_reflect", "Pad reflect", S, "Pad", {"mode": "reflect"}, extra_inputs=(i64(0, 0, 1, 2, 0, 0, 2, 1),)),
        unary("resize_nearest", "Resize nearest x2 (scales)", S, "Resize", {"mode": "nearest"},
              extra_inputs=(None, f32([1, 1, 2, 2]))),
        unary("resize_linear", "Resize linear half_pixel x2", S, "Resize",
              {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}, extra_inputs=(None, f32([1, 1, 2, 2]))),
        # on two-level data (+-2, the pre Conv an identity) cubic interpolation (a = -0.75) overshoots by 10%
        # of the jump at every edge (2.42 for 2): an output kept on the input's scale clips that, about
        # 20 dB; on a range that holds the overshoot 8 bits give about 40 dB
        unary("resize_cubic", "Resize cubic half_pixel x2, two-level input", S, "Resize",
              {"mode": "cubic", "coordinate_transformation_mode": "half_pixel"}, extra_inputs=(None, f32([1, 1, 2, 2])),
              blocky=True),
        unary("reducemean_keep", "ReduceMean axes [2,3] keepdims=1", S, "ReduceMean", {"axes": [2, 3], "keepdims": 1},
              sqnr=AVG_SQNR),
        unary("reducemean_nokeep", "ReduceMean axes [1,3] keepdims=0", S, "ReduceMean", {"axes": [1, 3], "keepdims": 0},
              sqnr=AVG_SQNR),
        unary("reducemean_keep_mid", "ReduceMean axes [1,3] keepdims=1 (not trailing)", S, "ReduceMean",
              {"axes": [1, 3], "keepdims": 1}, sqnr=AVG_SQNR),
        unary("reducemean_keep_neg", "ReduceMean axes [-3] keepdims=1", S, "ReduceMean",
              {"axes": [-3], "keepdims": 1}, sqnr=AVG_SQNR),
    ]


@case
def _():
    c = Case("concat_ranges", "Concat axis=1 of two activations with ranges 4x apart")
    a, b = c.input("a", S), c.input("b", (2, 6, 6), -0.3, 1.0)
    c.ndim = {a: 4, b: 4}
    pa, pb = c.pre(a, 4, "pre_a"), c.pre(b, 2, "pre_b", gain=4.0)
    c.nodes.append(H("Concat", [pa, pb], ["y"], name="op", axis=1))
    c.output("y")
    # axis 0: a constant cannot have the batch dimension of the samples on any other axis
    d = unary("concat_const", "Concat axis=0 of an activation and a constant [2,4,6,6]", S, "Concat", {"axis": 0},
              extra_inputs=(f32(rng.normal(0, 1, (2, 4, 6, 6))),))
    # wider than any fixed array of the lowering (once 16 inputs): 20 activations on ranges up to 4x apart,
    # concatenated in another order
    w = Case("concat_wide", "Concat axis=1 of 20 activations with ranges up to 4x apart")
    parts, w.ndim = [], {}
    for i in range(20):
        xi = w.input("x%d" % i, (2, 4, 4), 0.1 * (i % 5) - 0.2, 1.0)
        w.ndim[xi] = 4
        parts.append(w.pre(xi, 2, "pre_%d" % i, gain=1.0 + 3.0 * (i % 4) / 3))
    w.nodes.append(H("Concat", parts[7:] + parts[:7], ["y"], name="op", axis=1))
    w.output("y")
    return [c, d, w]


# ------------------------------------------------------------ fused patterns

@case
def _():
    """Several nodes that the stdlib matches as one op (one requantization)."""
    ar = Case("add_relu", "Add of two activations then Relu (pattern add_relu)")
    a, b = ar.input("a", S, 0.2, 1.0), ar.input("b", S, -0.5, 2.0)
    ar.ndim = {a: 4, b: 4}
    ar.nodes.append(H("Add", [a, b], ["s"], name="add"))
    ar.nodes.append(H("Relu", ["s"], ["y"], name="op"))
    ar.output("y")
    out = [ar]
    for name, desc, act, attrs, swap in (
            ("silu", "x * Sigmoid(x) (pattern silu)", "Sigmoid", {}, False),
            ("hardswish_decomposed", "HardSigmoid(x, 1/6, 0.5) * x, as PyTorch exports HardSwish (pattern hardswish)",
             "HardSigmoid", {"alpha": 1.0 / 6, "beta": 0.5}, True)):
        c = Case(name, desc)
        x = c.input("x", S, 0.2, 3.0)
        c.ndim = {x: 4}
        p = c.pre(x, S[0], mix=0.0)
        c.nodes.append(H(act, [p], ["s"], name="act", **attrs))
        c.nodes.append(H("Mul", ["s", p] if swap else [p, "s"], ["y"], name="op"))
        c.output("y")
        out.append(c)
    # HardSwish as x * Clip(x + 3, 0, 6) / 6 and GELU as PyTorch writes it (x / sqrt 2, Erf, + 1, * x, * 0.5)
    hc = Case("hardswish_clip", "x * Clip(x + 3, 0, 6) / 6 (pattern hardswish_clip)")
    x = hc.input("x", S, 0.2, 3.0)
    hc.ndim = {x: 4}
    p = hc.pre(x, S[0], mix=0.0)
    hc.nodes += [H("Add", [p, hc.const("three", f32(3.0))], ["a"], name="add"),
                 H("Clip", ["a", hc.const("lo", f32(0.0)), hc.const("hi", f32(6.0))], ["c"], name="clip"),
                 H("Mul", [p, "c"], ["m"], name="mul"), H("Div", ["m", hc.const("six", f32(6.0))], ["y"], name="op")]
    hc.output("y")
    ge = Case("gelu", "GELU: x * (1 + erf(x / sqrt(2))) * 0.5 (pattern gelu)")
    x = ge.input("x", S, 0.2, 2.0)
    ge.ndim = {x: 4}
    p = ge.pre(x, S[0], mix=0.0)
    ge.nodes += [H("Div", [p, ge.const("r2", f32(1.4142135381698608))], ["d"], name="div"),
                 H("Erf", ["d"], ["e"], name="erf"), H("Add", ["e", ge.const("one", f32(1.0))], ["a"], name="add"),
                 H("Mul", [p, "a"], ["m"], name="mul"), H("Mul", ["m", ge.const("half", f32(0.5))], ["y"], name="op")]
    ge.output("y")
    return out + [hc, ge]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make_op_models.py OUT_DIR [CASE...]")
    root, only = sys.argv[1], set(sys.argv[2:])
    os.makedirs(root, exist_ok=True)
    lines = []
    for fn in CASES:
        for c in fn():
            if not only or c.name in only:
                lines.append(c.write(root))
    with open(os.path.join(root, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
