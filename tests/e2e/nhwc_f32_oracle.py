#!/usr/bin/python3
"""The f32 graph channels-last (runtime/pass_nhwc_f32.c; tests/e2e/test_nhwc_f32.c).

A small CNN with the layers the pass converts and the borders it must restore
(weights and inputs of both signs, ragged channel counts, odd image sizes):
  stem   Conv 3->20, 3x3 stride 2, pads 1 (reads the NCHW input itself), Relu
  pool   MaxPool 3x3 stride 2, pads 1
  block  Conv 20->20 3x3 + Relu, Conv 20->20 3x3, Add with the pool (residual), Relu
  mid    an output read in NCHW (y_mid), and a Flatten-free NCHW reader of it: ReduceMean
  dw     depthwise Conv 20, 3x3 stride 2, dilation 1, pads 1, Clip(0, 6)
  pw     Conv 20->36 1x1, HardSigmoid * itself (hard swish as two ops): an output (pw_hswish)
         that only channels-last nodes read
  se     GlobalAveragePool, Conv 36->9 1x1, Relu, Conv 9->36 1x1, HardSigmoid, Mul (gate)
  head   GlobalAveragePool, Flatten, Gemm 36->10 (y)
Outputs y, y_mid, y_red, pw_hswish. The check: QRL (channels-last) and QRL with nhwc=0 each
within 1e-4 of ONNX Runtime relative to the output's largest magnitude.

The batch in parts (qrl_model_run, runtime/samples.h): `make-parts DIR` writes p.onnx, a CNN
whose nodes keep the samples apart (stem, pool, residual block, depthwise, hard swish, SE gate,
head; outputs y, y_mid, pw_hswish) with 456 KB a sample (runs in parts of 2), and px.onnx, the same
with an output that mixes the samples (y_bmean: y's mean over the batch), which must run whole;
xp.npy holds 5 samples (parts of 2, 2 and 1).

Usage: nhwc_f32_oracle.py make DIR
       nhwc_f32_oracle.py make-parts DIR
       nhwc_f32_oracle.py check QRL_OUT ORT_OUT [OUTPUT...]
"""
import sys

import numpy as np

OUTS = ["y", "y_mid", "y_red", "pw_hswish"]


def make(d):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(name, x, cin, cout, k, stride=1, pad=0, group=1, dil=1):
        w = const(name + "_w", (cout, cin // group, k, k), 1.0 / np.sqrt(cin // group * k * k))
        b = const(name + "_b", (cout,), 0.1)
        nodes.append(helper.make_node("Conv", [x, w, b], [name], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[pad] * 4, group=group, dilations=[dil, dil]))
        return name

    def op(kind, ins, out, **attrs):
        nodes.append(helper.make_node(kind, ins, [out], **attrs))
        return out

    x = "x"
    s = op("Relu", [conv("stem", x, 3, 20, 3, 2, 1)], "stem_r")
    p = op("MaxPool", [s], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c1 = op("Relu", [conv("c1", p, 20, 20, 3, 1, 1)], "c1_r")
    c2 = conv("c2", c1, 20, 20, 3, 1, 1)
    mid = op("Relu", [op("Add", [c2, p], "res")], "y_mid")
    op("ReduceMean", [mid], "y_red", axes=[2, 3], keepdims=0)
    inits.append(numpy_helper.from_array(np.array(0, np.float32), "zero"))
    inits.append(numpy_helper.from_array(np.array(6, np.float32), "six"))
    dw = op("Clip", [conv("dw", mid, 20, 20, 3, 2, 1, group=20), "zero", "six"], "dw_c")
    pw = conv("pw", dw, 20, 36, 1)
    hs = op("Mul", [pw, op("HardSigmoid", [pw], "pw_hs", alpha=1.0 / 6, beta=0.5)], "pw_hswish")
    g = op("GlobalAveragePool", [hs], "se_pool")
    g = op("Relu", [conv("se1", g, 36, 9, 1)], "se1_r")
    g = op("HardSigmoid", [conv("se2", g, 9, 36, 1)], "se_gate", alpha=1.0 / 6, beta=0.5)
    se = op("Mul", [hs, g], "se_out")
    h = op("Flatten", [op("GlobalAveragePool", [se], "head_pool")], "flat")
    fw = const("fc_w", (10, 36), 0.3)
    fb = const("fc_b", (10,), 0.1)
    op("Gemm", [h, fw, fb], "y", transB=1)
    graph = helper.make_graph(
        nodes, "nhwc_f32", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 29, 27])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in OUTS], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, d + "/m.onnx")
    np.save(d + "/x.npy", (rng.standard_normal((2, 3, 29, 27)) * 2).astype(np.float32))


def make_parts(d):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    inits, nodes = [], []

    def const(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(name, x, cin, cout, k, stride=1, pad=0, group=1):
        w = const(name + "_w", (cout, cin // group, k, k), 1.0 / np.sqrt(cin // group * k * k))
        b = const(name + "_b", (cout,), 0.1)
        nodes.append(helper.make_node("Conv", [x, w, b], [name], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[pad] * 4, group=group))
        return name

    def op(kind, ins, out, **attrs):
        nodes.append(helper.make_node(kind, ins, [out], **attrs))
        return out

    s = op("Relu", [conv("stem", "x", 3, 16, 3, 2, 1)], "stem_r")
    p = op("MaxPool", [s], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c1 = op("Relu", [conv("c1", p, 16, 16, 3, 1, 1)], "c1_r")
    mid = op("Relu", [op("Add", [conv("c2", c1, 16, 16, 3, 1, 1), p], "res")], "y_mid")
    inits.append(numpy_helper.from_array(np.array(0, np.float32), "zero"))
    inits.append(numpy_helper.from_array(np.array(6, np.float32), "six"))
    dw = op("Clip", [conv("dw", mid, 16, 16, 3, 2, 1, group=16), "zero", "six"], "dw_c")
    pw = conv("pw", dw, 16, 24, 1)
    hs = op("Mul", [pw, op("HardSigmoid", [pw], "pw_hs", alpha=1.0 / 6, beta=0.5)], "pw_hswish")
    g = op("Relu", [conv("se1", op("GlobalAveragePool", [hs], "se_pool"), 24, 8, 1)], "se1_r")
    se = op("Mul", [hs, op("HardSigmoid", [conv("se2", g, 8, 24, 1)], "se_gate", alpha=1.0 / 6, beta=0.5)], "se_out")
    h = op("Flatten", [op("GlobalAveragePool", [se], "head_pool")], "flat")
    op("Gemm", [h, const("fc_w", (10, 24), 0.3), const("fc_b", (10,), 0.1)], "y", transB=1)
    outs = ["y", "y_mid", "pw_hswish"]
    xin = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 200, 190])]
    graph = helper.make_graph(nodes, "parts", xin, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                     for o in outs], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), d + "/p.onnx")
    nodes.append(helper.make_node("ReduceMean", ["y"], ["y_bmean"], axes=[0], keepdims=1))
    graph = helper.make_graph(nodes, "parts_mixed", xin, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                           for o in outs + ["y_bmean"]], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), d + "/px.onnx")
    np.save(d + "/xp.npy", (rng.standard_normal((5, 3, 200, 190)) * 2).astype(np.float32))


def check(qrl, ort, outs=OUTS):
    worst = 0.0
    for o in outs:
        a, b = np.load("%s/%s.npy" % (qrl, o)), np.load("%s/%s.npy" % (ort, o))
        if a.shape != b.shape:
            print("%s: shape %s, ONNX Runtime %s" % (o, a.shape, b.shape))
            return 1
        d = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
        worst = max(worst, d)
        print("%s: max |qrl - ort| / max |ort| = %.3g" % (o, d))
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "make-parts":
        make_parts(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4:] or OUTS))
