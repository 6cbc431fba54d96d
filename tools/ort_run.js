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
const npy = require('./npy');
const {exact} = require('./ort_exact');

function loadNpy(file) {
    const t = npy.read(file);
    return new ort.Tensor(t.type, t.data, t.shape);
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
    // ORT fuses an int4 DequantizeLinear + MatMul into MatMulNBits, which by default (accuracy level 4)
    // quantizes the activations to int8; level 0 keeps the model's own f32 arithmetic.
    const opts = exact({graphOptimizationLevel: 'all', executionProviders: ['cpu'], intraOpNumThreads: 1,
                        extra: {session: {qdq_matmulnbits_accuracy_level: '0'}}});
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
    let out;
    try {
        out = await session.run(feeds);
    } catch (e) {
        // ORT's u8 x u8 rewrite (session.x64quantprecision, tools/ort_exact.js) can break a valid graph
        // on a CPU without VNNI (a blocked 4-bit DequantizeLinear: "x_zero_point must be null or have the
        // same rank as x"): run it without the rewrite then, and say so.
        if (!opts.extra.session.x64quantprecision) throw e;
        delete opts.extra.session.x64quantprecision;
        session = await ort.InferenceSession.create(model, opts);
        out = await session.run(feeds);
        console.error('ort_run: ' + model + ': with session.x64quantprecision: ' + e.message.split('\n')[0] +
                      '; ran without it');
    }
    fs.mkdirSync(outdir, {recursive: true});
    for (const name of session.outputNames) npy.write(path.join(outdir, fileName(name) + '.npy'), out[name].type, out[name].dims, out[name].data);
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
