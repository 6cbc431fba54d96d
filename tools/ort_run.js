// Runs ONNX models in ONNX Runtime (onnxruntime-node) on .npy inputs and
// writes every output as OUTDIR/<output name>.npy, as `qrl run` does.
// Usage: node tools/ort_run.js MODEL.onnx [NAME=]X.npy... -o OUTDIR
//        node tools/ort_run.js --batch JOBS.txt
// A bare X.npy binds to the next model input in order. With --batch, each
// line of JOBS.txt holds the arguments of one run (whitespace-separated, no
// quoting), all in one process: a test runs many small models without paying
// for node and ORT start-up each time. A failing job prints
// "ort_run: MODEL: message" and the others still run; the exit status is 1
// when any failed. Inputs and outputs: float32, float64, int8, uint8, int32,
// int64 (bool outputs are written as uint8). A model ORT's full graph
// optimization fails on runs at its basic level, with a note on stderr.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');

const kinds = {
    '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '|i1': ['int8', Int8Array],
    '|u1': ['uint8', Uint8Array], '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array],
    '|b1': ['bool', Uint8Array],
};

function loadNpy(file) {
    const buf = fs.readFileSync(file);
    if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(file + ': not a .npy file');
    const major = buf[6];
    const hlen = major >= 2 ? buf.readUInt32LE(8) : buf.readUInt16LE(8);
    const hstart = major >= 2 ? 12 : 10;
    const header = buf.toString('latin1', hstart, hstart + hlen);
    const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
    const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').filter((s) => s.trim()).map(Number);
    if (/'fortran_order':\s*True/.test(header)) throw new Error(file + ': Fortran order');
    if (!kinds[descr]) throw new Error(file + ': unsupported dtype ' + descr);
    const data = buf.subarray(hstart + hlen);
    const copy = new Uint8Array(data.length);
    copy.set(data);
    const [type, Arr] = kinds[descr];
    return new ort.Tensor(type, new Arr(copy.buffer), shape);
}

function saveNpy(file, t) {
    const descr = {float32: '<f4', float64: '<f8', int8: '|i1', uint8: '|u1', int32: '<i4', int64: '<i8', bool: '|u1'}[t.type];
    if (!descr) throw new Error('output type ' + t.type + ' is not supported');
    const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
    let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
    const pad = 64 - ((10 + header.length + 1) % 64);
    header += ' '.repeat(pad % 64) + '\n';
    const pre = Buffer.alloc(10);
    pre.write('\x93NUMPY', 0, 'latin1');
    pre[6] = 1;
    pre[7] = 0;
    pre.writeUInt16LE(header.length, 8);
    const d = t.type === 'bool' ? Uint8Array.from(t.data, (v) => (v ? 1 : 0)) : t.data;
    const body = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function fileName(name) {
    const s = name.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/^\./, '_');
    return s || 'output';
}

async function runOne(args) {
    let model = null, outdir = '.';
    const specs = [];
    for (let i = 0; i < args.length; i++) {
        if (args[i] === '-o') outdir = args[++i];
        else if (!model) model = args[i];
        else specs.push(args[i]);
    }
    if (!model) throw new Error('usage: ort_run.js MODEL.onnx [NAME=]X.npy... -o OUTDIR');
    const opts = {graphOptimizationLevel: 'all', executionProviders: ['cpu'], intraOpNumThreads: 1};
    let session;
    try {
        session = await ort.InferenceSession.create(model, opts);
    } catch (e) {
        // ORT's own graph optimizer can break a valid model (e.g. "two nodes with same node name" after
        // fusing Conv + Clip into QLinearConv): run it unfused then, and say so.
        opts.graphOptimizationLevel = 'basic';
        session = await ort.InferenceSession.create(model, opts);
        console.error('ort_run: ' + model + ': at optimization level all: ' + e.message.split('\n')[0] +
                      '; ran at level basic');
    }
    const feeds = {};
    let next = 0;
    for (const s of specs) {
        const eq = s.indexOf('=');
        if (eq > 0 && session.inputNames.includes(s.slice(0, eq))) {
            feeds[s.slice(0, eq)] = loadNpy(s.slice(eq + 1));
        } else {
            while (next < session.inputNames.length && feeds[session.inputNames[next]]) next++;
            if (next >= session.inputNames.length) throw new Error(model + ': more input files than inputs');
            feeds[session.inputNames[next]] = loadNpy(s);
        }
    }
    const out = await session.run(feeds);
    fs.mkdirSync(outdir, {recursive: true});
    for (const name of session.outputNames) saveNpy(path.join(outdir, fileName(name) + '.npy'), out[name]);
}

async function main() {
    const argv = process.argv.slice(2);
    if (argv[0] !== '--batch') return runOne(argv);
    const lines = fs.readFileSync(argv[1], 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && l[0] !== '#');
    let failed = 0;
    for (const l of lines) {
        const args = l.split(/\s+/);
        try {
            await runOne(args);
        } catch (e) {
            failed++;
            console.error('ort_run: ' + args[0] + ': ' + e.message.split('\n')[0]);
        }
    }
    if (failed) process.exitCode = 1;
}

main().catch((e) => {
    console.error('ort_run: ' + e.message);
    process.exit(1);
});
