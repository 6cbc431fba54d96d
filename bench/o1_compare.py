#!/usr/bin/python3
"""rank = effect against another recipe's ranking (QRL-J, stop 47), per model, from two directories
of bench/o1_table.sh's outputs (NAME.json reports and table.tsv): validation passes over the held-out
samples (all of (b), the effects' part, the search's), tensors ranked and log2, layers to f32 and
the integer MAC share, the validate and unseen figures, CPU s and peak MB, and how many of the
layers' effect_db are the reference's to 1e-3 dB (measured exactly). Usage: bench/o1_compare.py REFDIR DIR"""
import json, math, os, sys
A, B = sys.argv[1], sys.argv[2]
names = ['blazeface', 'ppocr_cls', 'oww_embedding', 'oww_melspec', 'resnet18', 'mobilenet_v2', 'mobilenet_v3_small',
         'efficientnet_b0', 'ppocr_rec', 'ppocr_det', 'blazeface_back', 'mlsd_tiny', 'mlsd_large']
def table(d):
    # -> cpu_s peak_mb to_f32 int_macs validate_db unseen_db: stop 47's lines as they are (7 fields),
    # bench/j_sets.sh's (stop 48: cpu wall peak f32 macs calib validate unseen) picked from theirs
    t = {}
    p = os.path.join(d, 'table.tsv')
    for line in open(p) if os.path.exists(p) else []:
        f = line.rstrip('\n').split('\t')
        if len(f) >= 9:
            f = [f[0], f[1], f[3], f[4], f[5], f[7] if f[7] != '-' else f[6], f[8]]
        t[f[0]] = f[1:]
    return t
ta, tb = table(A), table(B)
def runs(r):
    v = r['runs']['validate']; vp = v['pass_node_samples']
    ph = {}
    for x in r['runs']['phases']:
        ph[x['phase']] = ph.get(x['phase'], 0) + x['validate_node_samples']
    return v['passes'], ph.get('effects', 0) / vp, ph.get('search', 0) / vp, v['ranked'], len(r.get('search_tries', []))
print('| model | ranked | log2 | (b) effect / new | effects effect / new | search effect / new | tries effect / new | exact | to f32 effect / new | integer MACs effect / new | validate dB effect / new | unseen dB effect / new | CPU s effect / new | peak MB effect / new |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for n in names:
    pa, pb = os.path.join(A, n + '.json'), os.path.join(B, n + '.json')
    if not (os.path.exists(pa) and os.path.exists(pb)) or n not in ta or n not in tb:
        print('|', n, '| - |'); continue
    ra, rb = json.load(open(pa)), json.load(open(pb))
    xa, xb = runs(ra), runs(rb)
    ea = {l['value']: l['effect_db'] for l in ra['layers'] if l.get('effect_db') is not None}
    eb = {l['value']: l['effect_db'] for l in rb['layers'] if l.get('effect_db') is not None}
    ex = sum(1 for v in ea if v in eb and (ea[v] == eb[v] or abs(ea[v] - eb[v]) < 1e-3))
    a, b = ta[n], tb[n]  # cpu_s peak_mb to_f32 int_macs validate_db unseen_db
    R = xa[3]
    print('| %s | %s | %s | %.2f / **%.2f** | %.2f / **%.2f** | %.2f / %.2f | %d / %d | %d of %d | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |' % (
        n, R or '-', '%.2f' % math.log2(R) if R else '-', xa[0], xb[0], xa[1], xb[1], xa[2], xb[2], xa[4], xb[4], ex, len(ea),
        a[2], b[2], a[3], b[3], a[4], b[4], a[5], b[5], a[0], b[0], a[1], b[1]))
