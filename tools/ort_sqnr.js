// Runs ONNX models in ONNX Runtime (onnxruntime-node) on .npy inputs, for the
// real-model evaluation (QRL-D).
//
// Compare: node tools/ort_sqnr.js REF.onnx TEST.onnx [NAME=]X.npy...
//   runs both models on the same inputs, one sample at a time (the first axis
//   of every .npy is the sample axis; sample i is fed as x[i:i+1], so a model
//   with a fixed batch of 1 works), and prints one JSON line:
//   {"n": N, "outputs": [{"name", "sqnr_db", "nonfinite_ref", "nonfinite_test", "max_abs_err"}],
//    "sqnr_db": (over all outputs together), "ms_ref", "ms_test"}
//   SQNR = 10*log10(sum(ref^2) / sum((ref - test)^2)). "sqnr_mean_db" is the mean over
//   the samples of each sample's own SQNR (all outputs together): a sample whose
//   outputs carry most of the energy decides the pooled figure, not this one.
// Run:     node tools/ort_sqnr.js --run MODEL.onnx OUTDIR [NAME=]X.npy...
//   writes each output, the samples stacked on a new first axis, to
//   OUTDIR/<index>.npy (outputs in the model's order) and prints their names.
// Shapes:  node tools/ort_sqnr.js --shapes MODEL.onnx [NAME=]X.npy...
//   runs sample 0 without graph optimizations and prints {"output": [dims]}.
// A bare X.npy binds the next model input in order. Inputs of dtype int64
// may be given as NAME=@VALUE (a scalar). Set NODE_PATH or ORT_NODE_MODULE
// to find onnxruntime-node (build/npm/node_modules).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');
const npy = require('./npy');
const {exact} = require('./ort_exact');

function bindInputs(session, specs) {
    const feeds = [];
    let next = 0;
    for (const spec of specs) {
        const eq = spec.indexOf('=');
        let name, file;
        if (eq > 0 && !fs.existsSync(spec)) {
            name = spec.slice(0, eq);
            file = spec.slice(eq + 1);
        } else {
            name = session.inputNames[next];
            file = spec;
        }
        next = session.inputNames.indexOf(name) + 1;
        if (file.startsWith('@')) feeds.push({name, scalar: BigInt(file.slice(1))});
        else feeds.push({name, npy: npy.read(file)});
    }
    const n = Math.min(...feeds.filter((f) => f.npy).map((f) => f.npy.shape[0]));
    return {feeds, n};
}

function sample(feeds, i) {
    const out = {};
    for (const f of feeds) {
        if (f.npy) {
            const per = f.npy.data.length / f.npy.shape[0];
            out[f.name] = new ort.Tensor(f.npy.type, f.npy.data.slice(i * per, (i + 1) * per),
                [1, ...f.npy.shape.slice(1)]);
        } else {
            out[f.name] = new ort.Tensor('int64', BigInt64Array.from([f.scalar]), []);
        }
    }
    return out;
}

// ORT_OPT_LEVEL=disabled runs a model as ONNX defines it: ORT's QDQ rewrites at 'basic' and above
// can change the numerics of a graph that mixes f32 layers with quantized ones.
async function session(model, level) {
    return ort.InferenceSession.create(model, exact({graphOptimizationLevel: level || process.env.ORT_OPT_LEVEL || 'all',
        executionProviders: ['cpu'], intraOpNumThreads: 1}));
}

async function runAll(s, feeds, n) {
    const outs = s.outputNames.map(() => []);
    const shapes = s.outputNames.map(() => null);
    const t0 = Date.now();
    for (let i = 0; i < n; i++) {
        const r = await s.run(sample(feeds, i));
        s.outputNames.forEach((name, k) => {
            outs[k].push(Float32Array.from(r[name].data, Number));
            shapes[k] = r[name].dims;
        });
    }
    return {outs, shapes, ms: Date.now() - t0};
}

async function main() {
    const argv = process.argv.slice(2);
    if (argv[0] === '--shapes') {
        const s = await session(argv[1], 'disabled');
        const {feeds} = bindInputs(s, argv.slice(2));
        const r = await s.run(sample(feeds, 0));
        const shapes = {};
        for (const name of s.outputNames) shapes[name] = r[name].dims;
        console.log(JSON.stringify(shapes));
        return;
    }
    if (argv[0] === '--run') {
        const s = await session(argv[1]);
        fs.mkdirSync(argv[2], {recursive: true});
        const {feeds, n} = bindInputs(s, argv.slice(3));
        const {outs, shapes} = await runAll(s, feeds, n);
        s.outputNames.forEach((name, k) => {
            const total = outs[k].reduce((a, b) => a + b.length, 0);
            const all = new Float32Array(total);
            let o = 0;
            for (const a of outs[k]) { all.set(a, o); o += a.length; }
            npy.write(path.join(argv[2], k + '.npy'), 'float32', [n, ...shapes[k]], new Float32Array(all));
            console.log(k + '.npy ' + name + ' [' + [n, ...shapes[k]].join(',') + ']');
        });
        return;
    }
    const [refModel, testModel, ...specs] = argv;
    const sr = await session(refModel), st = await session(testModel);
    const {feeds, n} = bindInputs(sr, specs);
    const a = await runAll(sr, feeds, n), b = await runAll(st, feeds, n);
    let sig = 0, err = 0;
    const ps = new Float64Array(n), pe = new Float64Array(n);
    const outputs = sr.outputNames.map((name, k) => {
        const kt = st.outputNames.indexOf(name) >= 0 ? st.outputNames.indexOf(name) : k;
        let s2 = 0, e2 = 0, nfr = 0, nft = 0, maxe = 0;
        for (let i = 0; i < n; i++) {
            const r = a.outs[k][i], t = b.outs[kt][i];
            for (let j = 0; j < r.length; j++) {
                if (!Number.isFinite(r[j])) { nfr++; continue; }
                if (!Number.isFinite(t[j])) { nft++; continue; }
                const d = r[j] - t[j];
                s2 += r[j] * r[j];
                e2 += d * d;
                ps[i] += r[j] * r[j];
                pe[i] += d * d;
                if (Math.abs(d) > maxe) maxe = Math.abs(d);
            }
        }
        sig += s2;
        err += e2;
        return {name, sqnr_db: e2 === 0 ? 999 : 10 * Math.log10(s2 / e2), nonfinite_ref: nfr,
            nonfinite_test: nft, max_abs_err: maxe};
    });
    let mean = 0;
    for (let i = 0; i < n; i++) mean += (pe[i] === 0 ? 999 : 10 * Math.log10(ps[i] / pe[i])) / n;
    console.log(JSON.stringify({n, sqnr_db: err === 0 ? 999 : 10 * Math.log10(sig / err), sqnr_mean_db: mean, outputs,
        ms_ref: a.ms, ms_test: b.ms}));
}

main().catch((e) => {
    console.error('ort_sqnr: ' + (e.message || e).toString().split('\n')[0]);
    process.exit(1);
});
