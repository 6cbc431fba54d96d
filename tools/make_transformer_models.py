#!/usr/bin/python3
"""Transformer models for QRL-H (tests, `make bench`, the closing note's tables): PyTorch
exports (torch.onnx.export, opset 17) with random weights, as a new user would make them.

  bert   a post-LN nn.TransformerEncoder (BERT layout: attention, Add, LayerNorm, FFN with
         GELU, Add, LayerNorm), batch_first, input "x" [batch, seq, d] (dynamic batch),
         output "y" [batch, seq, d]
  gpt    a pre-LN decoder (GPT layout): token embedding (Gather on i64 ids) plus a learned
         position embedding, causal self-attention written as torch code (a
         masked_fill(-inf) mask, so Where in the export), split Q/K/V Linears, GELU (tanh
         form), a final LayerNorm and the LM head; input "ids" [1, seq] i64 (fixed batch 1),
         output "logits" [1, seq, vocab]
  gpt_outliers  gpt with 4 channels of every LayerNorm scale 20x larger, as trained LLMs have
         them (SmoothQuant's case)
  vit    torchvision vit_b_32 (input "x" [batch, 3, 224, 224]) -- only with --vit; its classifier
         gets random weights (torchvision's are zeros)
  swin   torchvision swin_t (Swin-T: shifted windows, torch.roll, the shifted windows' attention
         masks, patch merging; input "x" [batch, 3, 224, 224]) -- only with --swin; torchvision's
         own random initialization (truncated normal Linears, zero biases)

Usage: /usr/bin/python3 tools/make_transformer_models.py OUT_DIR [--size small|bench|large] [--only NAME]
                                                         [--no-ref] [--vit] [--swin]
Writes NAME.onnx, NAME.pt (state dict), NAME_calib.npy (32 samples) and NAME_test.npy
(16 other samples, never used to calibrate) for each model, and PyTorch's own outputs on the
test samples: NAME_test_f32.npy (the f32 model) and NAME_test_torch_dynamic.npy (PyTorch's
torch.quantization.quantize_dynamic of its nn.Linear layers, int8, fbgemm where the CPU has it):
the references QRL's accuracy is judged against. Sizes:
  small: d 32, 4 heads, ff 64, 2 layers, seq 8, vocab 50 (tests)
  bench: d 256, 4 heads, ff 1024, 4 layers, seq 128 (gpt: seq 64, vocab 1000)
  large: d 1024, 16 heads, ff 4096, 24 layers, seq 128 (gpt: seq 64, vocab 1000): the
         300M-parameter decoder of QRL-K (gpt: 303.4M parameters, a 1.2 GB f32 file); use it
         with --only gpt --no-ref (the bert alone is another 1.2 GB)
--only NAME (bert, gpt, gpt_outliers) writes that model only; --no-ref skips the PyTorch
references (NAME_test_f32.npy, NAME_test_torch_dynamic.npy).
Data: encoder inputs are N(0, 1); decoder ids uniform over the vocabulary (seed 1 for
calibration, 2 for test).
"""
import math
import os
import sys

import numpy as np
import torch
from torch import nn

TORCHVISION = {"vit": "vit_b_32", "swin": "swin_t"}  # the torchvision transformers, by their name here
SIZES = {
    "small": dict(d=32, heads=4, ff=64, layers=2, seq=8, gseq=8, vocab=50),
    "bench": dict(d=256, heads=4, ff=1024, layers=4, seq=128, gseq=64, vocab=1000),
    "large": dict(d=1024, heads=16, ff=4096, layers=24, seq=128, gseq=64, vocab=1000),
}


def randomize(model):
    """Every layer its own weights (nn.TransformerEncoder clones one layer), and biases and
    LayerNorm parameters away from PyTorch's 0 and 1, as trained models have them."""
    for name, p in model.named_parameters():
        with torch.no_grad():
            if p.dim() > 1 and "pos" not in name:
                nn.init.xavier_uniform_(p)
            elif "norm" in name or "ln" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.02 * torch.randn_like(p))
    return model


def bert(s):
    layer = nn.TransformerEncoderLayer(s["d"], s["heads"], s["ff"], dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=False)
    return randomize(nn.TransformerEncoder(layer, s["layers"], enable_nested_tensor=False))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.h
        q = self.q(x).view(b, t, self.h, hd).transpose(1, 2)
        k = self.k(x).view(b, t, self.h, hd).transpose(1, 2)
        v = self.v(x).view(b, t, self.h, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.o(y)


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, ff)
        self.proj = nn.Linear(ff, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, s):
        super().__init__()
        d = s["d"]
        self.tok = nn.Embedding(s["vocab"], d)
        self.pos = nn.Parameter(torch.randn(1, s["gseq"], d) * 0.02)
        self.blocks = nn.Sequential(*[Block(d, s["heads"], s["ff"]) for _ in range(s["layers"])])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, s["vocab"], bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos[:, : ids.shape[1]]
        return self.head(self.ln(self.blocks(x)))


class _SwinF:
    """torch.nn.functional for torchvision's swin_transformer module, but F.linear(x, w, b) with w the
    weight() method of a dynamically quantized Linear runs that Linear. torchvision's
    ShiftedWindowAttention passes self.qkv.weight and self.proj.weight to a functional
    shifted_window_attention, so after quantize_dynamic swaps those nn.Linear modules it fails
    ("linear(): argument 'weight' must be Tensor, not method"); with this, quantize_dynamic runs
    them as it runs every other nn.Linear, and the f32 model is unchanged (tensor weights go to
    F.linear)."""

    def __getattr__(self, name):
        return getattr(nn.functional, name)

    @staticmethod
    def linear(x, w, b=None):
        mod = getattr(w, "__self__", None)
        if isinstance(mod, torch.nn.quantized.dynamic.Linear):
            return mod(x)
        return nn.functional.linear(x, w, b)


def swin_dynamic_linears():
    """Lets quantize_dynamic's Swin run its attention Linears (see _SwinF); idempotent."""
    import torchvision.models.swin_transformer as st
    if not isinstance(st.F, _SwinF):
        st.F = _SwinF()


def references(model, test, out, name):
    """PyTorch's f32 outputs and quantize_dynamic's on the test samples, one sample at a time."""
    engines = torch.backends.quantized.supported_engines
    # as tools/torch_bench.py: fbgemm where this torch has it, else onednn (both quantize
    # activations to 7 bits), else qnnpack
    torch.backends.quantized.engine = next(e for e in ("fbgemm", "onednn", "qnnpack", engines[-1]) if e in engines)
    qmodel = torch.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    # training mode (dropout is 0) keeps nn.TransformerEncoder off its fused fast path, which
    # torch 1.13 breaks on dynamically quantized weights; not for swin, whose training mode
    # drops whole residual branches (torchvision's stochastic depth, 0.2 in swin_t)
    if name != "swin":
        qmodel.train()
    with torch.no_grad():
        f32 = torch.cat([model(test[i:i + 1]) for i in range(len(test))])
        dyn = torch.cat([qmodel(test[i:i + 1]) for i in range(len(test))])
    np.save(os.path.join(out, name + "_test_f32.npy"), f32.numpy())
    np.save(os.path.join(out, name + "_test_torch_dynamic.npy"), dyn.numpy())


def from_state(name, state):
    """The model NAME (bert, gpt, vit or swin) with the weights of state dict STATE, at the size whose
    shapes match them (eval mode): how tools/torch_bench.py and tools/transformer_sqnr.py rebuild
    what this script exported."""
    if name in TORCHVISION:
        import torchvision
        if name == "swin":
            swin_dynamic_linears()
        m = getattr(torchvision.models, TORCHVISION[name])(weights=None)
        m.load_state_dict(state)
        return m.eval()
    for s in SIZES.values():
        m = bert(s) if name == "bert" else GPT(s) if name in ("gpt", "gpt_outliers") else None
        if m is None:
            raise ValueError("unknown transformer model %s (bert, gpt, vit, swin)" % name)
        own = m.state_dict()
        if own.keys() == state.keys() and all(own[k].shape == state[k].shape for k in own):
            m.load_state_dict(state)
            return m.eval()
    raise ValueError("%s: the state dict matches no size of make_transformer_models.py" % name)


def export(model, example, path, inames, onames, dynamic_batch):
    axes = {n: {0: "batch"} for n in inames + onames} if dynamic_batch else None
    torch.onnx.export(model, example, path, opset_version=17, input_names=inames, output_names=onames,
                      dynamic_axes=axes, do_constant_folding=True)


def swin(out):
    """torchvision swin_t with randomize()'s weights: torchvision's own initialization
    (trunc_normal_(std=0.02)) leaves, in torch 1.13, single weights at the truncation bound 2.0
    (100 standard deviations: erfinv(-1) clamped) in some Linears, which no trained model has."""
    import torchvision
    torch.manual_seed(0)
    w = randomize(torchvision.models.swin_t(weights=None)).eval()
    calib = np.random.default_rng(1).standard_normal((32, 3, 224, 224), dtype=np.float32)
    test = np.random.default_rng(2).standard_normal((16, 3, 224, 224), dtype=np.float32)
    # exports as it is in torch 1.13 (torch.roll: Slice and Concat; the shifted windows' masks,
    # built in forward, as ScatterND on shapes; attention's F.dropout(p=0) as Dropout)
    export(w, torch.from_numpy(calib[:1]), os.path.join(out, "swin.onnx"), ["x"], ["y"], True)
    torch.save(w.state_dict(), os.path.join(out, "swin.pt"))
    np.save(os.path.join(out, "swin_calib.npy"), calib)
    np.save(os.path.join(out, "swin_test.npy"), test)
    swin_dynamic_linears()
    references(w, torch.from_numpy(test), out, "swin")


def bert_model(s, out, ref):
    """bert.onnx and its data."""
    torch.manual_seed(0)
    m = bert(s).eval()
    calib = torch.from_numpy(np.random.default_rng(1).standard_normal((32, s["seq"], s["d"]), dtype=np.float32))
    test = torch.from_numpy(np.random.default_rng(2).standard_normal((16, s["seq"], s["d"]), dtype=np.float32))
    # with gradients on, PyTorch takes its generic path (its fused fast path does not export)
    export(m, calib[:1], os.path.join(out, "bert.onnx"), ["x"], ["y"], True)
    torch.save(m.state_dict(), os.path.join(out, "bert.pt"))
    np.save(os.path.join(out, "bert_calib.npy"), calib.numpy())
    np.save(os.path.join(out, "bert_test.npy"), test.numpy())
    ref(m, test, out, "bert")


def gpt_model(s, out, ref):
    """gpt.onnx and its data."""
    torch.manual_seed(0)
    g = randomize(GPT(s)).eval()
    calib = np.random.default_rng(1).integers(0, s["vocab"], (32, s["gseq"]), dtype=np.int64)
    test = np.random.default_rng(2).integers(0, s["vocab"], (16, s["gseq"]), dtype=np.int64)
    with torch.no_grad():
        export(g, torch.from_numpy(calib[:1]), os.path.join(out, "gpt.onnx"), ["ids"], ["logits"], False)
    torch.save(g.state_dict(), os.path.join(out, "gpt.pt"))
    np.save(os.path.join(out, "gpt_calib.npy"), calib)
    np.save(os.path.join(out, "gpt_test.npy"), test)
    ref(g, torch.from_numpy(test), out, "gpt")


def gpt_outliers_model(s, out, ref):
    """gpt_outliers.onnx and its data."""
    calib = np.random.default_rng(1).integers(0, s["vocab"], (32, s["gseq"]), dtype=np.int64)
    test = np.random.default_rng(2).integers(0, s["vocab"], (16, s["gseq"]), dtype=np.int64)
    # gpt_outliers: the same decoder with the outlier channels trained LLMs have in their
    # LayerNorm outputs (Dettmers et al., LLM.int8(), 2022): the same 4 channels of every
    # LayerNorm's scale 20x larger. One per-tensor activation scale then spends its levels on
    # them, the case SmoothQuant (stdlib/transforms.qrl) moves into the weights.
    torch.manual_seed(0)
    g = randomize(GPT(s)).eval()
    hot = torch.randperm(s["d"], generator=torch.Generator().manual_seed(3))[:4]
    with torch.no_grad():
        for name, p in g.named_parameters():
            if ("ln" in name) and name.endswith("weight"):
                p[hot] *= 20.0
        export(g, torch.from_numpy(calib[:1]), os.path.join(out, "gpt_outliers.onnx"), ["ids"], ["logits"], False)
    torch.save(g.state_dict(), os.path.join(out, "gpt_outliers.pt"))
    np.save(os.path.join(out, "gpt_outliers_calib.npy"), calib)
    np.save(os.path.join(out, "gpt_outliers_test.npy"), test)
    ref(g, torch.from_numpy(test), out, "gpt_outliers")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    out = sys.argv[1]
    size = "small"
    if "--size" in sys.argv:
        size = sys.argv[sys.argv.index("--size") + 1]
    s = SIZES[size]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    want = lambda name: only is None or only == name
    ref = (lambda model, test, out, name: None) if "--no-ref" in sys.argv else references

    if want("bert"):
        bert_model(s, out, ref)
    if want("gpt"):
        gpt_model(s, out, ref)
    if want("gpt_outliers"):
        gpt_outliers_model(s, out, ref)

    if "--vit" in sys.argv:
        import torchvision
        torch.manual_seed(0)
        v = torchvision.models.vit_b_32(weights=None).eval()
        # torchvision starts the classifier at zero (for fine-tuning): every output would be 0
        # and no SQNR defined, so it gets nn.Linear's own random initialization
        v.heads.head.reset_parameters()
        rng = np.random.default_rng(1)
        calib = rng.standard_normal((32, 3, 224, 224), dtype=np.float32)
        test = np.random.default_rng(2).standard_normal((16, 3, 224, 224), dtype=np.float32)
        # with gradients on, as for bert: under no_grad torch 1.13 takes the fused attention fast
        # path (aten::_native_multi_head_attention), which does not export
        export(v, torch.from_numpy(calib[:1]), os.path.join(out, "vit.onnx"), ["x"], ["y"], True)
        torch.save(v.state_dict(), os.path.join(out, "vit.pt"))
        np.save(os.path.join(out, "vit_calib.npy"), calib)
        np.save(os.path.join(out, "vit_test.npy"), test)
        references(v, torch.from_numpy(test), out, "vit")

    if "--swin" in sys.argv:
        swin(out)

if __name__ == "__main__":
    main()
