// Runs an ONNX model once in ONNX Runtime (onnxruntime-node) on .npy inputs and
// writes every output to OUTDIR/<output name>.npy, the counterpart of
// `qrl run MODEL -i X.npy -o OUTDIR`, so the two can be compared file by file.
// Usage: node tools/ort_run.js MODEL.onnx [NAME=]X.npy... -o OUTDIR [--no-opt]
//   A bare X.npy binds the next model input in order; NAME=X.npy binds by name.
//   --no-opt turns ORT's graph optimizations off (its fusions change the
//   arithmetic; off, each node runs as its own kernel).
//   dtypes: float32, float64, int64, int32, int8, uint8, bool.
// File names are made from output names as `qrl run` makes them (its
// file_name_for): characters other than [A-Za-z0-9_-] and a non-leading '.'
// become '_', at most 255 characters. Prints one line per output: name dtype shape.
// Set NODE_PATH or ORT_NODE_MODULE to find onnxruntime-node (build/npm/node_modules).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');

// .npy descr <-> ORT tensor type and typed array
const KINDS = [
    {descr: '<f4', type: 'float32', array: Float32Array},
    {descr: '<f8', type: 'float64', array: Float64Array},
    {descr: '<i8', type: 'int64', array: BigInt64Array},
    {descr: '<i4', type: 'int32', array: Int32Array},
    {descr: '|i1', type: 'int8', array: Int8Array},
    {descr: '|u1', type: 'uint8', array: Uint8Array},
    {descr: '|b1', type: 'bool', array: Uint8Array},
];

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
    const kind = KINDS.find((k) => k.descr === descr);
    if (!kind) throw new Error(file + ': unsupported dtype ' + descr);
    // copy: the typed array needs its own aligned buffer
    const bytes = new Uint8Array(buf.subarray(hstart + hlen));
    const data = new kind.array(bytes.buffer, 0, bytes.length / kind.array.BYTES_PER_ELEMENT);
    return new ort.Tensor(kind.type, kind.type === 'bool' ? Uint8Array.from(data, (v) => v !== 0) : data, shape);
}

function saveNpy(file, tensor) {
    const kind = KINDS.find((k) => k.type === tensor.type);
    if (!kind) throw new Error('output type ' + tensor.type + ' not supported');
    const dims = tensor.dims.map(String);
    const shape = '(' + dims.join(', ') + (dims.length === 1 ? ',' : '') + ')';
    let header = `{'descr': '${kind.descr}', 'fortran_order': False, 'shape': ${shape}, }`;
    header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n'; // total header a multiple of 64
    const head = Buffer.alloc(10);
    head.write('\x93NUMPY', 0, 'latin1');
    head[6] = 1;
    head[7] = 0;
    head.writeUInt16LE(header.length, 8);
    const src = tensor.type === 'bool' ? Uint8Array.from(tensor.data, (v) => (v ? 1 : 0)) : tensor.data;
    const body = Buffer.from(src.buffer, src.byteOffset, src.byteLength);
    const tmp = file + '.tmp';
    fs.writeFileSync(tmp, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
    fs.renameSync(tmp, file);
}

function fileNameFor(name) {
    const safe = Array.from(name.slice(0, 255), (c, k) => (/[A-Za-z0-9_-]/.test(c) || (c === '.' && k > 0) ? c : '_'));
    return safe.length ? safe.join('') : 'output';
}

function parseArgs(argv) {
    const a = {model: null, inputs: [], outdir: null, opt: true};
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '-o') a.outdir = argv[++i];
        else if (argv[i] === '--no-opt') a.opt = false;
        else if (!a.model) a.model = argv[i];
        else a.inputs.push(argv[i]);
    }
    if (!a.model || !a.outdir || a.inputs.length === 0)
        throw new Error('usage: node tools/ort_run.js MODEL.onnx [NAME=]X.npy... -o OUTDIR [--no-opt]');
    return a;
}

// Binds bare files to the inputs in order; NAME=FILE by name (the name may
// itself contain ':' but not '=').
function bindInputs(session, specs) {
    const feeds = {};
    let next = 0;
    for (const s of specs) {
        const eq = s.indexOf('=');
        const name = eq > 0 ? s.slice(0, eq) : session.inputNames[next++];
        if (!session.inputNames.includes(name)) throw new Error('model has no input ' + JSON.stringify(name));
        feeds[name] = loadNpy(eq > 0 ? s.slice(eq + 1) : s);
    }
    return feeds;
}

async function main() {
    const a = parseArgs(process.argv.slice(2));
    const opts = {graphOptimizationLevel: a.opt ? 'all' : 'disabled', executionProviders: ['cpu'], intraOpNumThreads: 1};
    const session = await ort.InferenceSession.create(a.model, opts);
    const out = await session.run(bindInputs(session, a.inputs));
    fs.mkdirSync(a.outdir, {recursive: true});
    for (const name of session.outputNames) {
        const t = out[name];
        saveNpy(path.join(a.outdir, fileNameFor(name) + '.npy'), t);
        console.log(`${name} ${t.type} [${t.dims.join(',')}]`);
    }
}

main().catch((e) => {
    console.error('ort_run: ' + e.message);
    process.exit(1);
});
