#!/usr/bin/python3
"""An independent fake-quant reference for QDQ ONNX models, in numpy (and
torch for convolutions, pools and resizing, in float64): QuantizeLinear
rounds half to even and saturates, DequantizeLinear multiplies back, and
every other op is computed in float on the dequantized values, as the QDQ
semantics say. Nothing here comes from QRL: it reads the exported model's
graph and quantization parameters with the onnx package.

    fakequant_ref.py oracle EXPORT.onnx NAME=X.npy... [--given DIR] -o OUTDIR
        writes every graph output the oracle computes to OUTDIR/<name>.npy;
        --given DIR takes the graph outputs named pre* from DIR (the values a
        path under test fed the op) instead of computing them.

    fakequant_ref.py compare JOBS.tsv RESULTS.tsv
        the per-op differential tests (tests/e2e/test_op_quant.c): each JOBS
        line is "case_dir<TAB>run_dir<TAB>checked_outputs"; case_dir holds
        test_<input>.npy and ref/ (ONNX Runtime on the fp32 model), run_dir
        quantize.rc, quantize.log, export.onnx and one folder per path
        (ort_export, qrl_run_export, intgraph, each with its .rc). Writes one
        line per job: SQNR of each path against ref, the largest differences
        in output quantization steps between the paths, and between each path
        and this oracle fed with that path's own pre* values.
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

PATHS = ("ort_export", "qrl_run_export", "intgraph")


def attrs_of(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def torch_mod():
    import torch  # noqa: deferred: only convolutions, pools and Resize need it
    return torch


def conv(x, w, b, a):
    torch = torch_mod()
    F = torch.nn.functional
    nd = x.ndim - 2
    pads = a.get("pads", [0] * 2 * nd)
    strides = a.get("strides", [1] * nd)
    dil = a.get("dilations", [1] * nd)
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise ValueError("auto_pad is not supported by the oracle")
    padspec = []
    for i in reversed(range(nd)):
        padspec += [pads[i], pads[i + nd]]
    xt = F.pad(torch.from_numpy(x), padspec)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    y = fn(xt, torch.from_numpy(w), None if b is None else torch.from_numpy(b), stride=strides, dilation=dil,
           groups=a.get("group", 1))
    return y.numpy()


def pool(x, a, kind):
    torch = torch_mod()
    F = torch.nn.functional
    nd = x.ndim - 2
    k = a["kernel_shape"]
    pads = a.get("pads", [0] * 2 * nd)
    strides = a.get("strides", [1] * nd)
    dil = a.get("dilations", [1] * nd)
    ceil = bool(a.get("ceil_mode", 0))
    if kind != "max" and (ceil or any(d != 1 for d in dil)):
        raise ValueError("ceil_mode/dilations of an average are not supported by the oracle")
    padspec = []
    for i in reversed(range(nd)):
        padspec += [pads[i], pads[i + nd]]
    xt = torch.from_numpy(x)
    if kind == "max":  # padding as -inf; PyTorch drops a last window that starts past the end, as ONNX
        xt = F.pad(xt, padspec, value=-math.inf)
        fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
        return fn(xt, k, strides, dilation=dil, ceil_mode=ceil).numpy()
    fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
    s = fn(F.pad(xt, padspec), k, strides).numpy()
    if a.get("count_include_pad", 0):
        return s
    ones = F.pad(torch.ones_like(xt), padspec)
    cnt = fn(ones, k, strides).numpy()
    return s / cnt


def resize(x, a, roi, scales, sizes):
    torch = torch_mod()
    F = torch.nn.functional
    mode = a.get("mode", b"nearest").decode()
    ctm = a.get("coordinate_transformation_mode", b"half_pixel").decode()
    if sizes is not None and len(sizes):
        scales = np.array(sizes, dtype=np.float64) / np.array(x.shape)
    if scales[0] != 1 or scales[1] != 1:
        raise ValueError("Resize: the oracle scales the spatial axes only")
    nd = x.ndim - 2
    sf = [float(s) for s in scales[2:]]
    xt = torch.from_numpy(x)
    if mode == "nearest":
        return resize_nearest(x, [float(v) for v in scales], ctm, a.get("nearest_mode", b"round_prefer_floor").decode())
    if ctm != "half_pixel":
        raise ValueError("Resize: the oracle takes half_pixel coordinates for linear and cubic")
    if mode == "linear":
        m = {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]
        return F.interpolate(xt, scale_factor=sf, mode=m, align_corners=False).numpy()
    if mode == "cubic" and nd == 2:
        if abs(a.get("cubic_coeff_a", -0.75) + 0.75) > 1e-6 or a.get("exclude_outside", 0):
            raise ValueError("Resize cubic: the oracle takes cubic_coeff_a -0.75")
        return F.interpolate(xt, scale_factor=sf, mode="bicubic", align_corners=False).numpy()
    raise ValueError("Resize mode %s is not supported by the oracle" % mode)


def resize_nearest(x, scales, ctm, nearest_mode):
    """ONNX Resize, mode nearest, by its formulas: each output index maps to an input coordinate, then rounds."""
    y = x
    for ax, sc in enumerate(scales):
        n_in = x.shape[ax]
        n_out = int(math.floor(n_in * sc))
        if n_out == n_in and sc == 1:
            continue
        o = np.arange(n_out, dtype=np.float64)
        if ctm == "half_pixel":
            c = (o + 0.5) / sc - 0.5
        elif ctm == "asymmetric":
            c = o / sc
        elif ctm == "align_corners":
            c = o * (n_in - 1) / max(n_out - 1, 1)
        else:
            raise ValueError("Resize nearest: coordinate_transformation_mode %s is not supported by the oracle" % ctm)
        if nearest_mode == "round_prefer_floor":
            i = np.where(c - np.floor(c) == 0.5, np.floor(c), np.round(c))
        elif nearest_mode == "round_prefer_ceil":
            i = np.where(c - np.floor(c) == 0.5, np.ceil(c), np.round(c))
        elif nearest_mode == "floor":
            i = np.floor(c)
        else:
            i = np.ceil(c)
        y = np.take(y, np.clip(i, 0, n_in - 1).astype(np.int64), axis=ax)
    return y


def pad(x, a, pads, value, opset):
    mode = a.get("mode", b"constant").decode()
    if opset < 11:
        pads, value = a["pads"], a.get("value", 0.0)
    nd = x.ndim
    width = [(int(pads[i]), int(pads[i + nd])) for i in range(nd)]
    if any(p < 0 for w in width for p in w):
        raise ValueError("negative pads are not supported by the oracle")
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=0.0 if value is None else float(np.ravel(value)[0]))
    return np.pad(x, width, mode={"reflect": "reflect", "edge": "edge"}[mode])


def slice_(x, starts, ends, axes, steps):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    idx = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        n = x.shape[ax]
        s, e, st = int(s), int(e), int(st)
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
            idx[ax] = slice(s, e, st)
        else:
            s, e = min(max(s, -1), n - 1), min(max(e, -1), n - 1)
            idx[ax] = slice(s, None if e < 0 else e, st)
    return x[tuple(idx)]


def run_node(n, ins, opset):
    a = attrs_of(n)
    op = n.op_type
    x = ins[0] if ins else None

    def opt(i):
        return ins[i] if len(ins) > i and ins[i] is not None else None

    if op == "Conv":
        return [conv(x, ins[1], opt(2), a)]
    if op == "Gemm":
        A = x.T if a.get("transA", 0) else x
        B = ins[1].T if a.get("transB", 0) else ins[1]
        y = a.get("alpha", 1.0) * (A @ B)
        if opt(2) is not None:
            y = y + a.get("beta", 1.0) * ins[2]
        return [y]
    if op == "MatMul":
        return [x @ ins[1]]
    if op == "Add":
        return [x + ins[1]]
    if op == "Mul":
        return [x * ins[1]]
    if op == "Div":
        return [x / ins[1]]
    if op == "Erf":
        return [np.vectorize(math.erf)(x).astype(x.dtype)]
    if op == "Relu":
        return [np.maximum(x, 0)]
    if op == "Clip":
        lo = opt(1) if opset >= 11 else a.get("min")
        hi = opt(2) if opset >= 11 else a.get("max")
        y = x if lo is None else np.maximum(x, lo)
        return [y if hi is None else np.minimum(y, hi)]
    if op == "LeakyRelu":
        return [np.where(x < 0, a.get("alpha", 0.01) * x, x)]
    if op == "HardSigmoid":
        return [np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)]
    if op == "HardSwish":
        return [x * np.clip(x / 6 + 0.5, 0, 1)]
    if op == "Sigmoid":
        return [1 / (1 + np.exp(-x))]
    if op == "Tanh":
        return [np.tanh(x)]
    if op == "MaxPool":
        return [pool(x, a, "max")]
    if op == "AveragePool":
        return [pool(x, a, "avg")]
    if op == "GlobalMaxPool":
        return [x.max(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op == "GlobalAveragePool":
        return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op == "ReduceMean":
        axes = a.get("axes", opt(1))
        axes = tuple(range(x.ndim)) if axes is None else tuple(int(v) for v in axes)
        return [x.mean(axis=axes, keepdims=bool(a.get("keepdims", 1)))]
    if op == "Reshape":
        shape = [x.shape[i] if (s == 0 and not a.get("allowzero", 0)) else s for i, s in enumerate(ins[1])]
        return [x.reshape(shape)]
    if op == "Flatten":
        ax = a.get("axis", 1)
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op == "Transpose":
        return [x.transpose(a.get("perm", list(reversed(range(x.ndim)))))]
    if op == "Squeeze":
        axes = a.get("axes", opt(1))
        return [np.squeeze(x, axis=None if axes is None else tuple(int(v) for v in axes))]
    if op == "Unsqueeze":
        axes = a.get("axes", opt(1))
        y = x
        for ax in sorted(int(v) % (x.ndim + len(axes)) for v in axes):
            y = np.expand_dims(y, ax)
        return [y]
    if op == "Slice":
        if opset < 10:
            return [slice_(x, a["starts"], a["ends"], a.get("axes"), None)]
        return [slice_(x, ins[1], ins[2], opt(3), opt(4))]
    if op == "Gather":
        return [np.take(x, ins[1].astype(np.int64), axis=a.get("axis", 0))]
    if op == "Split":
        ax = a.get("axis", 0)
        split = a.get("split", opt(1))
        if split is None:
            return np.split(x, len(n.output), axis=ax)
        return np.split(x, np.cumsum([int(s) for s in split])[:-1], axis=ax)
    if op == "Expand":
        shape = np.broadcast_shapes(x.shape, tuple(int(s) for s in ins[1]))
        return [np.broadcast_to(x, shape).copy()]
    if op == "Pad":
        return [pad(x, a, opt(1), opt(2), opset)]
    if op == "Resize":
        return [resize(x, a, opt(1), opt(2), opt(3))]
    if op == "Concat":
        return [np.concatenate(ins, axis=a["axis"])]
    raise ValueError("op %s is not supported by the oracle" % op)


QRANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127), np.dtype(np.int32): (-2**31, 2**31 - 1)}


def axis_shape(s, x, axis):
    if np.ndim(s) == 0 or np.size(s) == 1:
        return np.reshape(s, ())
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    return np.reshape(s, shape)


class Oracle:
    """Evaluates a QDQ model value by value; given: values taken as they are."""

    def __init__(self, model, feeds, given=None):
        self.m = model
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.vals = {k: np.asarray(v, dtype=np.float64) for k, v in feeds.items()}
        for k, v in (given or {}).items():
            self.vals[k] = np.asarray(v, dtype=np.float64)
        for t in model.graph.initializer:
            self.vals[t.name] = numpy_helper.to_array(t)
        self.producer = {o: n for n in model.graph.node for o in n.output}
        self.qinfo = {}  # value -> (scale, zero, dtype) of the QuantizeLinear that made it

    def value(self, name):
        if name == "":
            return None
        if name in self.vals:
            return self.vals[name]
        n = self.producer[name]
        ins = [self.value(i) for i in n.input]
        a = attrs_of(n)
        if n.op_type == "QuantizeLinear":
            s, z = ins[1], ins[2]
            zt = z.dtype if z is not None else np.dtype(np.uint8)
            lo, hi = QRANGE[np.dtype(zt)]
            ax = a.get("axis", 1)
            q = np.rint(ins[0] / axis_shape(s.astype(np.float64), ins[0], ax)) + \
                (axis_shape(z.astype(np.float64), ins[0], ax) if z is not None else 0)
            outs = [np.clip(q, lo, hi)]
        elif n.op_type == "DequantizeLinear":
            s, z = ins[1], ins[2] if len(ins) > 2 else None
            ax = a.get("axis", 1)
            x = ins[0].astype(np.float64)
            zz = axis_shape(z.astype(np.float64), x, ax) if z is not None else 0
            outs = [(x - zz) * axis_shape(s.astype(np.float64), x, ax)]
        else:
            fins = [None if v is None else (v.astype(np.float64) if v.dtype.kind == "f" else v) for v in ins]
            outs = run_node(n, fins, self.opset)
        for o, v in zip(n.output, outs):
            self.vals[o] = v
        return self.vals[name]

    def out_scale(self, name):
        """The output step of a graph output: the scale of the DequantizeLinear that makes it."""
        n = self.producer.get(name)
        if n is None or n.op_type != "DequantizeLinear":
            return None
        s = self.value(n.input[1])
        return float(np.max(s))


def read_feeds(case_dir):
    return {f[5:-4]: np.load(os.path.join(case_dir, f)) for f in os.listdir(case_dir)
            if f.startswith("test_") and f.endswith(".npy")}


def sqnr(ref, x):
    noise = float(np.sum((ref.astype(np.float64) - x) ** 2))
    sig = float(np.sum(ref.astype(np.float64) ** 2))
    if noise == 0:
        return 200.0
    return 10 * math.log10(sig / noise) if sig > 0 else -200.0


def load_outputs(d, names):
    try:
        return {n: np.load(os.path.join(d, n + ".npy")).astype(np.float64) for n in names}
    except (OSError, ValueError):
        return None


def rc_of(path):
    """A command's exit status as its job wrote it; 0 when none was written (ORT's batch: the outputs tell)."""
    try:
        with open(path) as f:
            return int(f.read().strip() or "1")
    except OSError:
        return 0
    except ValueError:
        return 1


def max_steps(a, b, names, scale):
    """Largest |a - b| over the checked outputs, in output steps."""
    worst = 0.0
    for n in names:
        if a[n].shape != b[n].shape:
            return math.inf
        if a[n].size:
            worst = max(worst, float(np.max(np.abs(a[n] - b[n]))) / scale[n])
    return worst


def parse_quantize_log(path):
    """Whether everything was quantized: no node in f32, no f32 island, no fallback."""
    try:
        log = open(path).read()
    except OSError:
        return None
    import re
    f32 = re.search(r"(\d+) in f32", log)
    isl = re.search(r"(\d+) f32 islands", log)
    fb = re.search(r"(\d+) tensors? fell back", log)
    return all(m is not None and int(m.group(1)) == 0 for m in (f32, isl)) and (fb is None or int(fb.group(1)) == 0)


def f32_in_report(path):
    """The tensors the report (qrl quantize --report) says are computed in f32 in the integer graph: a node
    the lowering left in f32 without counting it as an island is caught here."""
    import json
    try:
        layers = json.load(open(path))["layers"]
    except (OSError, ValueError, KeyError):
        return []
    return [l["value"] for l in layers if l.get("runs_as", "").startswith("f32")]


def fmt(v):
    return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else ("inf" if v == math.inf else "%.3f" % v)


def compare_one(case_dir, run_dir, names):
    row = {"quantize": rc_of(os.path.join(run_dir, "quantize.rc")) == 0, "quantized": None, "note": ""}
    ref = load_outputs(os.path.join(case_dir, "ref"), names)
    if not row["quantize"] or ref is None:
        row["note"] = "quantize failed" if not row["quantize"] else "no fp32 reference"
        return row
    row["quantized"] = parse_quantize_log(os.path.join(run_dir, "quantize.log"))
    in_f32 = f32_in_report(os.path.join(run_dir, "report.json"))
    if in_f32:
        row["quantized"] = False
        row["note"] = "in f32 in the integer graph: " + ",".join(in_f32)
    model = onnx.load(os.path.join(run_dir, "export.onnx"))
    feeds = read_feeds(case_dir)
    given_names = [o.name for o in model.graph.output if o.name.startswith("pre")]
    outs, scale = {}, {}
    probe = Oracle(model, feeds)
    for n in names:
        s = probe.out_scale(n)
        scale[n] = s if s else math.nan
    for p in PATHS:
        d = os.path.join(run_dir, p)
        outs[p] = load_outputs(d, names) if rc_of(d + ".rc") == 0 else None
        row["sqnr_" + p] = None if outs[p] is None else min(sqnr(ref[n], outs[p][n]) if ref[n].shape == outs[p][n].shape
                                                             else -math.inf for n in names)
        row["oracle_" + p] = None
        if outs[p] is None or any(math.isnan(scale[n]) for n in names):
            continue
        given = load_outputs(d, given_names)
        try:
            o = Oracle(model, feeds, given)
            exp = {n: o.value(n) for n in names}
            row["oracle_" + p] = max_steps(outs[p], exp, names, scale)
        except Exception as e:  # an op or attribute the oracle does not know: no verdict
            row["note"] = "oracle: %s" % str(e).split("\n")[0]
    b = outs["ort_export"]
    for p, key in (("qrl_run_export", "step_c_b"), ("intgraph", "step_d_b")):
        row[key] = None if b is None or outs[p] is None or any(math.isnan(scale[n]) for n in names) \
            else max_steps(outs[p], b, names, scale)
    return row


COLUMNS = ["quantize", "quantized", "sqnr_ort_export", "sqnr_qrl_run_export", "sqnr_intgraph", "step_c_b", "step_d_b",
           "oracle_ort_export", "oracle_qrl_run_export", "oracle_intgraph", "note"]


def compare(jobs, out):
    lines = []
    for line in open(jobs):
        if not line.strip():
            continue
        case_dir, run_dir, names = line.rstrip("\n").split("\t")
        try:
            row = compare_one(case_dir, run_dir, names.split(","))
        except Exception as e:
            row = {"quantize": True, "note": "compare: %s: %s" % (type(e).__name__, str(e).split("\n")[0])}
        cells = [run_dir]
        for c in COLUMNS:
            v = row.get(c)
            if isinstance(v, bool):
                cells.append("yes" if v else "no")
            elif c == "note":
                cells.append((v or "-").replace("\t", " "))
            else:
                cells.append(fmt(v))
        lines.append("\t".join(cells))
    with open(out, "w") as f:
        f.write("\t".join(["run"] + COLUMNS) + "\n" + "\n".join(lines) + "\n")


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        return compare(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 3 and sys.argv[1] == "oracle":
        model = onnx.load(sys.argv[2])
        args, feeds, given, outdir = sys.argv[3:], {}, {}, "."
        i = 0
        while i < len(args):
            if args[i] == "-o":
                outdir, i = args[i + 1], i + 2
            elif args[i] == "--given":
                d = args[i + 1]
                given = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)
                         if f.startswith("pre") and f.endswith(".npy")}
                i += 2
            else:
                k, v = args[i].split("=", 1)
                feeds[k] = np.load(v)
                i += 1
        o = Oracle(model, feeds, given)
        os.makedirs(outdir, exist_ok=True)
        for out in model.graph.output:
            np.save(os.path.join(outdir, out.name + ".npy"), o.value(out.name).astype(np.float32))
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
