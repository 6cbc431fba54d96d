#!/usr/bin/python3
"""Which runtime is off? A float64 evaluation of an ONNX model in numpy, written
from the ONNX spec, that fp32 runs of QRL and ONNX Runtime are measured against.
Debian's onnx (1.12) has no onnx.reference; this covers the ops of the CNNs we
checked (M-LSD: Conv, Clip, Pad, Resize linear, MaxPool, Sigmoid, ...) and stops
with NotImplementedError on any other op.

  f64_reference.py all-outputs MODEL.onnx OUT.onnx
      OUT.onnx: every node output also a graph output, renamed n<index>_<op>
      (tf2onnx names are longer than file names may be).
  f64_reference.py outputs MODEL.onnx X.npy DIR...
      each DIR holds one run's outputs (qrl run -o DIR, node tools/ort_run.js -o DIR):
      max and rms error of every graph output against float64.
  f64_reference.py nodes MODEL_ALL.onnx X.npy DIR...
      DIRs from runs of an all-outputs model: per node, the error against
      float64 of the whole graph (what reaches this node) and the local error
      (this node evaluated in float64 on the runtime's own inputs), so the first
      node where one runtime loses accuracy shows even when both agree locally.
Example (M-LSD, tools/fetch_mlsd.sh):
  build/qrl run M.onnx -i x.npy -o q && node tools/ort_run.js M.onnx x.npy -o o --no-opt
  /usr/bin/python3 tools/f64_reference.py outputs M.onnx x.npy q o
"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def conv(x, w, b, a):
    n, _, _, _ = x.shape
    m, cg, kh, kw = w.shape
    g, s = a.get("group", 1), a.get("strides", [1, 1])
    d, p = a.get("dilations", [1, 1]), a.get("pads", [0, 0, 0, 0])
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", b""):
        raise NotImplementedError("Conv auto_pad")
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    ho = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    wo = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    y = np.zeros((n, m, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * d[0]:i * d[0] + s[0] * (ho - 1) + 1:s[0], j * d[1]:j * d[1] + s[1] * (wo - 1) + 1:s[1]]
            y += np.einsum("ngchw,gmc->ngmhw", patch.reshape(n, g, cg, ho, wo),
                           w[:, :, i, j].reshape(g, m // g, cg)).reshape(n, m, ho, wo)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def resize(x, ins, a):
    """Resize, mode linear, half_pixel or align_corners or asymmetric, separable per
    axis; the two neighbours are clamped to the edge (the spec's reference pads by edge)."""
    mode, ctm = a.get("mode", b"nearest"), a.get("coordinate_transformation_mode", b"half_pixel")
    if mode != b"linear" or ctm not in (b"half_pixel", b"align_corners", b"asymmetric"):
        raise NotImplementedError(f"Resize mode={mode} coordinate_transformation_mode={ctm}")
    scales = ins[2] if len(ins) > 2 and ins[2] is not None and ins[2].size else None
    sizes = ins[3] if len(ins) > 3 and ins[3] is not None and ins[3].size else None
    y = x
    for ax in range(x.ndim):
        n_in = y.shape[ax]
        scale = float(scales[ax]) if sizes is None else sizes[ax] / n_in
        n_out = int(np.floor(n_in * scale)) if sizes is None else int(sizes[ax])
        if n_out == n_in and scale == 1:
            continue
        o = np.arange(n_out, dtype=np.float64)
        if ctm == b"half_pixel":
            xo = (o + 0.5) / scale - 0.5
        elif ctm == b"align_corners":
            xo = o * (n_in - 1) / (n_out - 1) if n_out > 1 else o * 0
        else:
            xo = o / scale
        x0 = np.floor(xo)
        r = (xo - x0).reshape([-1 if k == ax else 1 for k in range(y.ndim)])
        i0 = np.clip(x0.astype(int), 0, n_in - 1)
        i1 = np.clip(x0.astype(int) + 1, 0, n_in - 1)
        y = np.take(y, i0, ax) * (1 - r) + np.take(y, i1, ax) * r
    return y


def maxpool(x, a):
    k, p, s = a["kernel_shape"], a.get("pads", [0, 0, 0, 0]), a.get("strides", [1, 1])
    if a.get("dilations", [1, 1]) != [1, 1] or a.get("ceil_mode", 0):
        raise NotImplementedError("MaxPool dilations/ceil_mode")
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=-np.inf)
    ho, wo = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    y = np.full(x.shape[:2] + (ho, wo), -np.inf)
    for i in range(k[0]):
        for j in range(k[1]):
            y = np.maximum(y, xp[:, :, i:i + s[0] * (ho - 1) + 1:s[0], j:j + s[1] * (wo - 1) + 1:s[1]])
    return y


def slice_(x, starts, ends, axes=None, steps=None):
    sl = [slice(None)] * x.ndim
    for i, ax in enumerate(range(len(starts)) if axes is None else axes):
        sl[int(ax)] = slice(int(starts[i]), int(ends[i]), None if steps is None else int(steps[i]))
    return x[tuple(sl)]


def pad(x, ins, a):
    if a.get("mode", b"constant") != b"constant":
        raise NotImplementedError("Pad mode")
    p = (ins[1] if len(ins) > 1 else np.array(a["pads"])).astype(int)
    r = len(p) // 2
    value = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("value", 0.0)
    return np.pad(x, [(p[i], p[i + r]) for i in range(r)], constant_values=value)


ELEMENTWISE = {
    "Relu": lambda i: np.maximum(i[0], 0), "Sigmoid": lambda i: 1 / (1 + np.exp(-i[0])),
    "Add": lambda i: i[0] + i[1], "Sub": lambda i: i[0] - i[1], "Mul": lambda i: i[0] * i[1],
    "Div": lambda i: i[0] / i[1], "Equal": lambda i: i[0] == i[1], "Identity": lambda i: i[0],
    "Shape": lambda i: np.array(i[0].shape, np.int64),
}


def clip(ins, a):
    lo = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("min", -np.inf)
    hi = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("max", np.inf)
    return np.clip(ins[0], lo, hi)


def cast(x, to):
    dt = helper.tensor_dtype_to_np_dtype(to) if hasattr(helper, "tensor_dtype_to_np_dtype") \
        else onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[to]
    return x.astype(np.float64) if np.dtype(dt).kind == "f" else x.astype(dt)


def run_node(n, ins):
    """The node's outputs in float64 (integer and bool values keep their type)."""
    a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
    t = n.op_type
    if t in ELEMENTWISE:
        return [ELEMENTWISE[t](ins)]
    if t == "Conv":
        return [conv(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a)]
    if t == "Clip":
        return [clip(ins, a)]
    if t == "Transpose":
        return [np.transpose(ins[0], a.get("perm"))]
    if t == "Concat":
        return [np.concatenate(ins, a["axis"])]
    if t == "Slice":
        return [slice_(ins[0], *ins[1:])]
    if t == "Reshape":
        return [ins[0].reshape([int(v) if v != 0 else ins[0].shape[k] for k, v in enumerate(ins[1])])]
    if t == "Cast":
        return [cast(ins[0], a["to"])]
    if t == "MaxPool":
        return [maxpool(ins[0], a)]
    if t == "Pad":
        return [pad(ins[0], ins, a)]
    if t == "Split":
        return list(np.split(ins[0], np.cumsum(a["split"])[:-1], a.get("axis", 0)))
    if t == "Resize":
        return [resize(ins[0], ins, a)]
    raise NotImplementedError(t)


def as_f64(v):
    return v.astype(np.float64) if v.dtype.kind == "f" else v


def file_name_for(name):
    """qrl run's (and ort_run.js's) output file name."""
    s = "".join(c if (c.isascii() and (c.isalnum() or c in "_-")) or (c == "." and k) else "_"
                for k, c in enumerate(name[:255]))
    return s or "output"


def evaluate(model, x):
    g = model.graph
    vals = {i.name: as_f64(numpy_helper.to_array(i)) for i in g.initializer}
    vals[g.input[0].name] = as_f64(x)
    for n in g.node:
        for o, v in zip(n.output, run_node(n, [vals[i] if i else None for i in n.input])):
            vals[o] = v
    return vals


def errors(got, ref):
    e = as_f64(got) - ref
    return np.abs(e).max(), np.sqrt(np.mean(e ** 2))


def cmd_all_outputs(src, dst):
    m = onnx.load(src)
    ren = {o: f"n{i:03d}_{n.op_type}" + (f"_{k}" if k else "")
           for i, n in enumerate(m.graph.node) for k, o in enumerate(n.output) if o}
    for n in m.graph.node:
        n.input[:] = [ren.get(v, v) for v in n.input]
        n.output[:] = [ren.get(v, v) for v in n.output]
    for o in m.graph.output:
        o.name = ren.get(o.name, o.name)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have:
                m.graph.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
    onnx.save(m, dst)


def cmd_outputs(model_path, x_path, dirs):
    m = onnx.load(model_path)
    ref = evaluate(m, np.load(x_path))
    for o in m.graph.output:
        r = ref[o.name]
        print(f"{o.name}: float64 range [{r.min():.4g}, {r.max():.4g}]")
        for d in dirs:
            mx, rms = errors(np.load(os.path.join(d, file_name_for(o.name) + ".npy")), r)
            print(f"  {d:30s} max |err| {mx:.3g}   rms {rms:.3g}")


def cmd_nodes(model_path, x_path, dirs):
    m = onnx.load(model_path)
    g = m.graph
    consts = {i.name: as_f64(numpy_helper.to_array(i)) for i in g.initializer}
    x = as_f64(np.load(x_path))
    full = evaluate(m, x)

    def load(d, name):
        if name in consts:
            return consts[name]
        if name == g.input[0].name:
            return x
        return as_f64(np.load(os.path.join(d, file_name_for(name) + ".npy")))

    print(f"{'node':22s} " + " ".join(f"{d + ': whole graph rms (local rms)':>44s}" for d in dirs))
    for n in g.node:
        ref = full[n.output[0]]
        if ref.dtype.kind != "f" or ref.size < 16:
            continue
        cols = []
        for d in dirs:
            got = load(d, n.output[0])
            local = run_node(n, [load(d, i) if i else None for i in n.input])[0]
            cols.append(f"{errors(got, ref)[1]:11.3g} ({errors(got, local)[1]:9.3g})")
        print(f"{n.output[0]:22s} " + " ".join(f"{c:>44s}" for c in cols))


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("all-outputs", "outputs", "nodes"):
        sys.exit(__doc__)
    if sys.argv[1] == "all-outputs":
        cmd_all_outputs(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "outputs":
        cmd_outputs(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        cmd_nodes(sys.argv[2], sys.argv[3], sys.argv[4:])


if __name__ == "__main__":
    main()
