#!/usr/bin/python3
"""Per quantization point of a torchvision model: QRL's range (a `qrl quantize --qparams` JSON) against
PyTorch FX's (prepare_fx with the onednn qconfig, HistogramObserver, calibrated on tv_calib.npy),
judged on the f32 torch model fake-quantized at one point, or at all of them, with either range
(weights f32): the local SQNR, the output SQNR pooled and on the image of most output energy, the
share of values each range clips. Then variants (the Conv outputs a HardSwish or gate reads left
unquantized, FX's ranges for chosen points) and, for each point, the gain of taking FX's range there
alone. FX's observers are matched to QRL's values by value (shape and allclose) on the test images.
Measures; never pass/fail (docs/quantizer.md, "Against PyTorch FX").
Usage: /usr/bin/python3 tools/fx_points.py MODEL QPARAMS.json [TEST.npy]   (MODEL: a torchvision name
with build/realmodels/MODEL.pt, tv_calib.npy and tv_test.npy)
"""
import sys, json, numpy as np, torch, torchvision
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import prepare_fx
torch.backends.quantized.engine = "onednn"; torch.set_num_threads(1)
import os
d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "realmodels")
name, qjson = sys.argv[1], sys.argv[2]
test = np.load(sys.argv[3]) if len(sys.argv) > 3 else np.load(f"{d}/tv_test.npy")
m = getattr(torchvision.models, name)(weights=None)
m.load_state_dict(torch.load(f"{d}/{name}.pt")); m.eval()
calib = np.load(f"{d}/tv_calib.npy")
mods = dict(m.named_modules())

def torch_path(onnx_name):
    scopes = onnx_name.split('/')[1:-1]
    path, prev = [], ''
    for c in scopes:
        path.append(c[len(prev) + 1:] if prev and c.startswith(prev + '.') else c)
        prev = c
    p = '.'.join(path)
    last = onnx_name.split('/')[-1]
    if last.startswith('Conv_output') and isinstance(mods.get(p), torch.nn.Conv2d):
        sib = p.rsplit('.', 1)
        if len(sib) == 2 and sib[1].isdigit():
            bn = sib[0] + '.' + str(int(sib[1]) + 1)
            if isinstance(mods.get(bn), torch.nn.BatchNorm2d):
                p = bn
    return p

q = json.load(open(qjson))
points = []
for a in q['activations']:
    v = a['value']
    if v == 'input': p = ''
    elif v == 'output': p = 'classifier.3' if name.startswith('mobilenet_v3') else None
    else: p = torch_path(v)
    if p is None or (p and p not in mods) or a['value'].endswith('Flatten_output_0'):
        continue
    points.append((v, p, a['scale'], a['zero_point']))

# capture f32 values at each module output
vals = {}
def cap(p):
    def h(mod, inp, out): vals.setdefault(p, []).append(out.detach().clone())
    return h
hs = [mods[p].register_forward_hook(cap(p)) for _, p, _, _ in points if p]
with torch.no_grad():
    ref = m(torch.from_numpy(test)).numpy()
for h in hs: h.remove()
vals[''] = [torch.from_numpy(test)]

# FX observers: capture their inputs on the test images, match by value
pfx = prepare_fx(m, get_default_qconfig_mapping("onednn"), (torch.from_numpy(calib[:1]),))
with torch.no_grad():
    for s in range(0, len(calib), 8): pfx(torch.from_numpy(calib[s:s+8]))
obs = {n: mod for n, mod in pfx.named_modules() if 'activation_post_process' in n}
ovals = {}
def capo(n):
    def h(mod, inp): ovals[n] = inp[0].detach().clone()
    return h
for n, mod in obs.items(): mod.register_forward_pre_hook(capo(n))
for mod in obs.values(): mod.eval()
# observers still observe in eval? disable by saving state: run under a copy of ranges
qp = {}
for n, mod in obs.items():
    s, z = mod.calculate_qparams()
    qp[n] = (float(s.reshape(-1)[0]), int(z.reshape(-1)[0]), str(mod.dtype))
with torch.no_grad():
    pfx(torch.from_numpy(test))

def fq(x, s, z, lo=0, hi=255):
    return (torch.clamp(torch.round(x / s) + z, lo, hi) - z) * s

def sq(r, e):
    r = r.double(); e = e.double()
    return 10 * np.log10(float((r ** 2).sum()) / max(float(((r - e) ** 2).sum()), 1e-30))

def with_points(sel):  # sel: list of (path, s, z)
    hs = []
    for p, s, z in sel:
        if p == '':
            continue
        hs.append(mods[p].register_forward_hook(lambda mod, i, o, s=s, z=z: fq(o, s, z)))
    x = torch.from_numpy(test)
    for p, s, z in sel:
        if p == '': x = fq(x, s, z)
    with torch.no_grad(): out = m(x).numpy()
    for h in hs: h.remove()
    return out

def pooled(out): return sq(torch.from_numpy(ref), torch.from_numpy(out))
def mean_img(out): return float(np.mean([sq(torch.from_numpy(ref[i]), torch.from_numpy(out[i])) for i in range(len(ref))]))
energy = (ref.astype(np.float64) ** 2).reshape(len(ref), -1).sum(1)
heavy = int(np.argmax(energy))
print("images %d, heavy image %d holds %.0f%% of the output energy" % (len(ref), heavy, 100 * energy[heavy] / energy.sum()))

rows = []
selq, self = [], []
for v, p, s, z in points:
    x = torch.cat(vals[p]) if p in vals else None
    best = None
    for n, t in ovals.items():
        if t.shape == x.shape and torch.allclose(t, x, rtol=1e-2, atol=1e-3 * float(x.abs().max() + 1e-9)):
            best = n; break
    fs, fz = (qp[best][0], qp[best][1]) if best else (None, None)
    selq.append((p, s, z))
    if best: self.append((p, fs, fz))
    oq = with_points([(p, s, z)])
    of = with_points([(p, fs, fz)]) if best else None
    def rng(s, z): return ((0 - z) * s, (255 - z) * s)
    cq = float(((x < rng(s, z)[0] - s / 2) | (x > rng(s, z)[1] + s / 2)).float().mean())
    cf = float(((x < rng(fs, fz)[0] - fs / 2) | (x > rng(fs, fz)[1] + fs / 2)).float().mean()) if best else float('nan')
    rows.append((v, best, float(x.min()), float(x.max()), rng(s, z), rng(fs, fz) if best else None,
                 sq(x, fq(x, s, z)), sq(x, fq(x, fs, fz)) if best else float('nan'),
                 pooled(oq), pooled(of) if best else float('nan'), sq(torch.from_numpy(ref[heavy]), torch.from_numpy(oq[heavy])),
                 sq(torch.from_numpy(ref[heavy]), torch.from_numpy(of[heavy])) if best else float('nan'), cq, cf))
print("%-62s %-14s %-16s %-16s %-16s %6s %6s %6s %6s %6s %6s" % ("value", "fx", "test range", "qrl range", "fx range", "locQ", "locF", "outQ", "outF", "hvyQ", "hvyF"))
for r in rows:
    v = r[0].replace('/features/features.', 'f').replace('/block/block.', ' b').replace('_output_0', '')
    print("%-62s %-14s %7.2f %7.2f  %7.2f %7.2f  %7s %7s  %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f clipQ %.2e clipF %.2e" % (
        v[-62:], (r[1] or '-')[-14:], r[2], r[3], r[4][0], r[4][1], "%.2f" % r[5][0] if r[5] else '-', "%.2f" % r[5][1] if r[5] else '-',
        r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13]))
oq = with_points(selq); of = with_points(self)
print("all points, weights f32: QRL ranges %.2f / %.2f, FX ranges %.2f / %.2f (pooled / mean per image); FX matched %d of %d" % (
    pooled(oq), mean_img(oq), pooled(of), mean_img(of), len(self), len(selq)))
import re
def variant(label, drop=None, fx_for=None):
    sel = []
    for (v, p, s, z), r in zip(points, rows):
        if drop and re.search(drop, v): continue
        if fx_for and re.search(fx_for, v) and r[1]:
            s, z = qp[r[1]][0], qp[r[1]][1]
        sel.append((p, s, z))
    o = with_points(sel)
    print("%-60s %.2f / %.2f" % (label, pooled(o), mean_img(o)))
hsconv = [v for v, p, s, z in points if v.endswith('Conv_output_0') and any(w.endswith('Mul_output_0') and w.startswith(v.rsplit('/', 2)[0]) and 'scale' not in w for w, _, _, _ in points) ]
print("Conv outputs read only by a HardSwish:", len(hsconv))
pat = '|'.join(re.escape(v) + '$' for v in hsconv)
variant("QRL, no Conv->HardSwish points", drop=pat)
variant("QRL, classifier+final avgpool FX", fx_for='classifier|^output$')
variant("QRL, no Conv->HardSwish, classifier FX", drop=pat, fx_for='classifier|^output$')
variant("QRL, HardSwish outputs FX", fx_for=r'(features\.\d+\.2|block\.\d\.2|classifier\.1)/Mul')
base = [(p, s, z) for v, p, s, z in points]
b0 = with_points(base); bp, bm = pooled(b0), mean_img(b0)
gains = []
for i, ((v, p, s, z), r) in enumerate(zip(points, rows)):
    if not r[1]: continue
    sel = list(base); sel[i] = (p, qp[r[1]][0], qp[r[1]][1])
    o = with_points(sel); gains.append((pooled(o) - bp, mean_img(o) - bm, v))
gains.sort(reverse=True)
print("swap one point's range to FX's: pooled / mean gain")
for g in gains[:12] + gains[-5:]: print("  %+.2f %+.2f %s" % g)
