"""Oracle for test_hooks.c: what a recipe's policy hooks (stdlib/qparams.qrl's, or its own) must
make of the bundled CNN, recomputed with numpy from the f32 model and the rules the test states,
not from QRL's code. The export is read with onnx; every check prints its failure and exits 1.

  hooks_oracle.py bias MODEL EXPORT MULT DTYPE
      each Gemm's bias (the classifier's, not folded into anything at load) is DTYPE (int32 or
      int16) with scale float32(s_x * s_w[c] * MULT), s_x the scale of the Gemm's input and s_w[c]
      its weight's channel scale as the export holds them, zero point 0, and integers
      clip(rint(b / scale), DTYPE's range) (float32 division, ties to even)
  hooks_oracle.py narrow MODEL EXPORT LO HI
      each Gemm's weight (per output channel, symmetric minmax) has scale float32(amax / half),
      half = (HI - LO) / 2, and integers clip(rint(w / scale), LO, HI); some integer reaches HI
  hooks_oracle.py priority MODEL DEFAULT.onnx DEFAULT.txt FLIPPED.onnx FLIPPED.txt
      the model's Relus that follow a Conv or Gemm: fused into the product's kernel in DEFAULT (no
      lookup table, conv_relu/gemm_relu kernels), each its own lookup table in FLIPPED (its
      QuantizeLinear more in the export, and no *_relu kernel)
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper as nh


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def consts(m):
    return {i.name: nh.to_array(i) for i in m.graph.initializer}


def dq_by_output(m):
    return {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}


def gemms(model, export):
    """(original Gemm, export Gemm) pairs: the export keeps the node's name and input names."""
    ex = {n.name: n for n in export.graph.node if n.op_type == "Gemm"}
    pairs = [(n, ex[n.name]) for n in model.graph.node if n.op_type == "Gemm" and n.name in ex]
    if len(pairs) != 2:
        fail("expected the CNN's two Gemms in the export, found %d" % len(pairs))
    return pairs


def bias(model, export, mult, dtype):
    mc, ec, dq = consts(model), consts(export), dq_by_output(export)
    want_t = {"int32": np.int32, "int16": np.int16}[dtype]
    info = np.iinfo(want_t)
    for g, eg in gemms(model, export):
        b = mc[g.input[2]].astype(np.float32)
        sx = ec[dq[eg.input[0]].input[1]].astype(np.float32)
        sw = ec[dq[eg.input[1]].input[1]].astype(np.float32)
        bd = dq[eg.input[2]]
        ints, scale, zero = ec[bd.input[0]], ec[bd.input[1]], ec[bd.input[2]]
        if ints.dtype != want_t or zero.dtype != want_t:
            fail("%s: bias stored as %s (zero point %s), not %s" % (g.name, ints.dtype, zero.dtype, dtype))
        want_scale = (np.float64(sx) * sw.astype(np.float64) * mult).astype(np.float32)
        if not np.array_equal(scale, want_scale):
            fail("%s: bias scale %s, numpy %s" % (g.name, scale[:4], want_scale[:4]))
        if np.any(zero != 0):
            fail("%s: bias zero point not 0" % g.name)
        want = np.clip(np.rint(b / want_scale), info.min, info.max)
        if not np.array_equal(ints.astype(np.int64), want.astype(np.int64)):
            fail("%s: bias integers %s, numpy %s" % (g.name, ints[:6], want[:6]))
    if mult != 1 or dtype != "int32":
        if max(o.version for o in export.opset_import if o.domain in ("", "ai.onnx")) < 21:
            fail("a 16-bit bias's DequantizeLinear needs opset 21")


def narrow(model, export, lo, hi):
    mc, ec, dq = consts(model), consts(export), dq_by_output(export)
    half = (hi - lo) / 2.0
    reached = False
    for g, eg in gemms(model, export):
        w = mc[g.input[1]].astype(np.float32)
        wd = dq[eg.input[1]]
        axis = next((a.i for a in wd.attribute if a.name == "axis"), 1)
        ints, scale = ec[wd.input[0]], ec[wd.input[1]]
        amax = np.abs(w).max(axis=1 - axis).astype(np.float64)
        want_scale = np.maximum(amax / half, 1e-12).astype(np.float32)
        if not np.array_equal(scale, want_scale):
            fail("%s: weight scale %s, numpy %s" % (g.name, scale[:4], want_scale[:4]))
        s = want_scale.reshape((-1, 1) if axis == 0 else (1, -1))
        want = np.clip(np.rint(w / s), lo, hi)
        if not np.array_equal(ints.astype(np.int64), want.astype(np.int64)):
            bad = np.argwhere(ints.astype(np.int64) != want)[0]
            fail("%s: weight integer at %s is %d, numpy %d" % (g.name, bad, ints[tuple(bad)], want[tuple(bad)]))
        reached |= bool((ints == hi).any())
    if not reached:
        fail("no weight integer reaches the narrow range's end %d" % hi)


def kernels(path):
    """(op type, node name) of each node of a --int-graph listing."""
    out = []
    for line in open(path):
        if line.startswith("node "):
            name, rest = line[5:].strip().split(": ", 1)
            out.append((rest.split("(", 1)[0], name))
    return out


def priority(model, d_onnx, d_txt, f_onnx, f_txt):
    ops = {n.output[0]: n.op_type for n in model.graph.node}
    bn = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "BatchNormalization"}
    relus = 0
    for n in model.graph.node:
        if n.op_type == "Relu":
            src = bn.get(n.input[0], n.input[0])  # a Conv's BatchNormalization is folded into it at load
            relus += ops.get(src) in ("Conv", "Gemm")
    if relus != 4:
        fail("the CNN has 4 Relus after a Conv or Gemm, counted %d" % relus)
    d, f = kernels(d_txt), kernels(f_txt)
    look = lambda k: sum(op == "qrl.QrlLookup" for op, _ in k)
    fused = lambda k: sum(name.startswith(("conv_relu_", "gemm_relu_")) for _, name in k)
    if look(d) != 0 or fused(d) != relus:
        fail("default: %d lookup tables and %d fused kernels, want 0 and %d" % (look(d), fused(d), relus))
    if look(f) != relus or fused(f) != 0:
        fail("flipped: %d lookup tables and %d fused kernels, want %d and 0" % (look(f), fused(f), relus))
    q = lambda p: sum(n.op_type == "QuantizeLinear" for n in onnx.load(p).graph.node)
    if q(f_onnx) != q(d_onnx) + relus:
        fail("QuantizeLinear nodes: %d flipped, %d default; want %d more" % (q(f_onnx), q(d_onnx), relus))


def main():
    mode, model = sys.argv[1], onnx.load(sys.argv[2])
    if mode == "bias":
        bias(model, onnx.load(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif mode == "narrow":
        narrow(model, onnx.load(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "priority":
        priority(model, *sys.argv[3:7])
    else:
        fail("unknown mode " + mode)
    print("ok")


if __name__ == "__main__":
    main()
