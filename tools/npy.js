// The .npy format for the node tools (ort_eval.js, ort_run.js, ort_sqnr.js):
// read(file) -> {shape, type, data} (type as onnxruntime names it, data a
// typed array over a private copy); write(file, type, shape, data).
'use strict';
const fs = require('fs');

const kinds = {
    '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '|i1': ['int8', Int8Array],
    '|u1': ['uint8', Uint8Array], '<i4': ['int32', Int32Array], '<i8': ['int64', BigInt64Array],
    '|b1': ['bool', Uint8Array],
};

function read(file) {
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
    return {shape, type, data: new Arr(copy.buffer)};
}

function write(file, type, shape, data) {
    const descr = {float32: '<f4', float64: '<f8', int8: '|i1', uint8: '|u1', int32: '<i4', int64: '<i8', bool: '|u1'}[type];
    if (!descr) throw new Error('type ' + type + ' is not supported');
    const dims = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
    let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${dims}, }`;
    const pad = 64 - ((10 + header.length + 1) % 64);
    header += ' '.repeat(pad % 64) + '\n';
    const pre = Buffer.alloc(10);
    pre.write('\x93NUMPY', 0, 'latin1');
    pre[6] = 1;
    pre[7] = 0;
    pre.writeUInt16LE(header.length, 8);
    const d = type === 'bool' ? Uint8Array.from(data, (v) => (v ? 1 : 0)) : data;
    const body = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

module.exports = {read, write};
