#!/usr/bin/python3
"""Issue 24's cost bound in its own two units, per model, from `qrl quantize --report R.json`
reports (docs/quantizer.md, stop 46): (a) f32 passes over the samples calibrated on (against 3),
each part; (b) validation passes over the held-out samples, each part, beside log2 of the tensors
the search ranked. Usage: bench/runs_split.py DIR (DIR/NAME.json for the thirteen models' names as
bench/cost_table.sh takes them, without tv:); a missing report is a row of '-'."""
import json, math, os, sys
D = sys.argv[1] if len(sys.argv) > 1 else '.'
names = [('blazeface','BlazeFace front 128'),('ppocr_cls','PP-OCR cls'),('oww_embedding','openWakeWord embedding'),('oww_melspec','openWakeWord melspectrogram'),('resnet18','ResNet-18'),('mobilenet_v2','MobileNetV2'),('mobilenet_v3_small','MobileNetV3-small'),('efficientnet_b0','EfficientNet-B0'),('ppocr_rec','PP-OCRv4 rec'),('ppocr_det','PP-OCRv4 det'),('blazeface_back','BlazeFace back 256'),('mlsd_tiny','M-LSD tiny'),('mlsd_large','M-LSD large')]
print('| model | calibrated on | (a) f32 passes over them | of it: calibration, f32 pass, calibrate figure | (a) - 3 | held out | (b) validation passes | of it: local measurement, first tries, effects, search, what ships | tensors ranked | log2 | (b) - log2 | (b) / log2 | search / log2 |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for f, n in names:
    p = os.path.join(D, '%s.json' % f)
    if not os.path.exists(p): print('|', n, '| - |'); continue
    r = json.load(open(p))['runs']
    c, v = r['calibrate'], r['validate']
    ph = {}
    for x in r['phases']:
        k = x['phase']; ph.setdefault(k, [0,0]); ph[k][0] += x['node_samples'] - x['validate_node_samples']; ph[k][1] += x['validate_node_samples']
    cp, vp = c['pass_node_samples'], v['pass_node_samples']
    ca = lambda k: ph.get(k, [0,0])[0] / cp
    va = lambda *ks: sum(ph.get(k, [0,0])[1] for k in ks) / vp
    a = c['f32_passes']; b = v['passes']; R = v['ranked']
    l2 = math.log2(R) if R else None
    print('| %s | %d | **%.2f** | %.2f, %.2f, %.2f | %+.2f | %d | **%.2f** | %.2f, %.2f, %.2f, %.2f, %.2f | %s | %s | %s | %s | %s |' % (
        n, c['samples'], a, ca('calibration'), ca('fp32 pass'), ca('outputs on the calibration samples'), a - 3, v['samples'], b,
        va('local measurement', 'local measurement and what ships', 'local measurement at 16 bits'), va('first tries', "the first try's outputs"),
        va('effects', 'effects at 16 bits'), va('search', 'search given up', '16-bit step', 'fewest 16-bit steps'), va('measurement of what ships'),
        R or '-', '%.2f' % l2 if l2 else '-', '+%.2f' % (b - l2) if l2 else '-', '%.1fx' % (b / l2) if l2 else '-', '%.2f' % (va('search')/l2) if l2 else '-'))
    other = set(ph) - {'calibration','fp32 pass','outputs on the calibration samples','local measurement','local measurement and what ships','local measurement at 16 bits','first tries',"the first try's outputs",'effects','effects at 16 bits','search','search given up','16-bit step','fewest 16-bit steps','measurement of what ships'}
    if other: print('  other phases', f, other, file=sys.stderr)
    rest_c = c['node_samples'] - sum(x[0] for x in ph.values()); rest_v = v['node_samples'] - sum(x[1] for x in ph.values())
    if rest_c or rest_v: print('  outside phases', f, rest_c, rest_v, file=sys.stderr)
