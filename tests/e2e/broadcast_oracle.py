#!/usr/bin/python3
"""Quantized element-wise ops whose operands broadcast (tests/e2e/test_broadcast.c).

The integer graph runs a pointwise kernel (qadd, qmul) on operands expanded to
the output's shape (quantizer/intgraph.c, expand_broadcasts); ONNX Runtime runs
the QDQ export with its own broadcasting. The model, inputs of both signs and
odd dims:
  y1 = a + b        a [N,3,5,7], b [N,1,5,7]   (Swin's window mask)
  y2 = a + c        c = ReduceMean(a, axes 0..2) [7], computed
  y3 = y2 * s       s = ReduceMean(c) [1]: a computed one-element tensor
  y4 = e * g        e [N,3,5,7], g = GlobalAveragePool(e) [N,3,1,1]
  y5 = g2 * e       g2 = Sigmoid(g): the broadcast operand first
(N = 2 in the test run; 1 in the batch-1 run of [1,C,H,W] * [1,C,1,1].)
The check divides both outputs by the scale of the export's last
QuantizeLinear of each output and wants every integer within one step.

Usage: broadcast_oracle.py make DIR
       broadcast_oracle.py check DIR QRL_OUT ORT_OUT QDQ.onnx
"""
import sys

import numpy as np

OUTS = ["y1", "y2", "y3", "y4", "y5"]


def make(d):
    import onnx
    from onnx import TensorProto, helper
    F = TensorProto.FLOAT
    nodes = [helper.make_node("Add", ["a", "b"], ["y1"]),
             helper.make_node("Add", ["a", "c"], ["y2"]),
             helper.make_node("ReduceMean", ["a"], ["c"], axes=[0, 1, 2], keepdims=0),
             helper.make_node("ReduceMean", ["c"], ["s"], keepdims=1),
             helper.make_node("Mul", ["y2", "s"], ["y3"]),
             helper.make_node("GlobalAveragePool", ["e"], ["g"]),
             helper.make_node("Mul", ["e", "g"], ["y4"]),
             helper.make_node("Sigmoid", ["g"], ["g2"]),
             helper.make_node("Mul", ["g2", "e"], ["y5"])]
    ins = [helper.make_tensor_value_info("a", F, ["N", 3, 5, 7]), helper.make_tensor_value_info("b", F, ["N", 1, 5, 7]),
           helper.make_tensor_value_info("e", F, ["N", 3, 5, 7])]
    shapes = {o: ["N", 3, 5, 7] for o in OUTS}
    outs = [helper.make_tensor_value_info(n, F, shapes[n]) for n in OUTS]
    g = helper.make_graph(nodes, "bcast", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{d}/bcast.onnx")
    rng = np.random.default_rng(31)
    for name, n in (("calib", 16), ("test", 2)):
        a = rng.normal(0.4, 1.5, (n, 3, 5, 7))
        b = rng.normal(-0.5, 2.0, (n, 1, 5, 7))
        e = rng.normal(0.2, 1.0, (n, 3, 5, 7))
        for k, v in (("a", a), ("b", b), ("e", e)):
            np.save(f"{d}/{k}_{name}.npy", v.astype(np.float32))


def out_scales(qdq):
    """Each graph output's scale: of the DequantizeLinear that makes it, or of the QuantizeLinear
    in front of the DequantizeLinear that feeds it."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(qdq)
    c = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    by_out = {o: n for n in m.graph.node for o in n.output}
    scales = {}
    for o in OUTS:
        n = by_out[o]
        while n.op_type not in ("DequantizeLinear", "QuantizeLinear"):
            if n.input[0] not in by_out:
                sys.exit(f"{o} is not quantized in the export (the quantizer fell back to f32)")
            n = by_out[n.input[0]]
        scales[o] = float(c[n.input[1]])
    return scales


def check(d, qrl, ort, qdq):
    scales = out_scales(qdq)
    worst, total, off1 = 0, 0, 0
    for o in OUTS:
        got = np.load(f"{qrl}/{o}.npy").astype(np.float64)
        want = np.load(f"{ort}/{o}.npy").astype(np.float64)
        if got.shape != want.shape:
            sys.exit(f"{o}: QRL's shape {got.shape}, ONNX Runtime's {want.shape}")
        diff = np.abs(np.rint(got / scales[o]) - np.rint(want / scales[o]))
        worst = max(worst, int(diff.max()))
        total += diff.size
        off1 += int((diff == 1).sum())
        print(f"{o}: scale {scales[o]:.6g}, {int((diff > 1).sum())} of {diff.size} off by more than one step, "
              f"{int((diff == 1).sum())} by one, distinct {len(np.unique(want))}")
    print(f"WORST {worst} OFF1 {off1} OF {total}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(*sys.argv[2:6])
