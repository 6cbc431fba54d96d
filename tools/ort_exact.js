// The session options under which ONNX Runtime computes a quantized model as ONNX defines it, for
// the tools that check QRL against it (ort_eval.js, ort_run.js, ort_sqnr.js). On x86-64 CPUs
// without VNNI (AVX2, or AVX-512 without VNNI) ORT's u8 x s8 products run through vpmaddubsw,
// which saturates a pair of products at 32767 (2 * 255 * 127 does not fit in 16 bits), so the
// fused QLinearConv / MatMulInteger of a QDQ export can differ from the model's arithmetic by many
// steps (on an AMD EPYC Zen 3: the Fashion-MNIST CNN's int8 export 90.6% top-1 fused, 96.1% as
// ONNX defines it). session.x64quantprecision = 1 (ORT's own switch, onnxruntime PR 12088) makes
// ORT convert such products to u8 x u8 where a weight lies outside [-64, 63]; on VNNI CPUs it
// changes nothing. The benchmarks (ort_bench.js) keep ORT's default: the peer as users run it.
'use strict';

function exact(opts) {
    const extra = opts.extra || {};
    extra.session = Object.assign({}, extra.session || {}, {x64quantprecision: '1'});
    return Object.assign(opts, {extra});
}

module.exports = {exact};
