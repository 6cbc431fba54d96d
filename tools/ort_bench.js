// Inference time of a one-input ONNX model in ONNX Runtime (onnxruntime-node), the peer of
// `qrl bench`, measured the same way: seeded inputs in [0, 1), one warm-up run, then runs
// until MIN_TIME seconds have passed (at least three); median and fastest ms per batch.
// An int64 input (token ids) gets ids in [0, VOCAB) from the same seeded generator instead;
// VOCAB is the sixth argument, else $ORT_BENCH_VOCAB, else 8 (the ids `qrl bench` feeds).
// Usage: node tools/ort_bench.js MODEL.onnx SAMPLE_SHAPE BATCHES THREADS [MIN_TIME] [VOCAB]
//   e.g. node tools/ort_bench.js m.onnx 1,28,28 1,64 1,2 1.0
//        node tools/ort_bench.js gpt.onnx 64 1 1 1.0 1000    (ids [1, 64], i64)
// Prints one JSON object: {"model": ..., "results": [{batch, threads, runs, ms_median, ms_min,
// images_per_s}, ...]}.
'use strict';
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');

function list(s) {
    return s.split(',').filter((v) => v !== '').map(Number);
}

// The first input's type as ORT reports it (float32 where this ORT does not say).
function inputType(session) {
    const meta = session.inputMetadata;
    return (meta && meta[0] && meta[0].type) || 'float32';
}

async function timeOne(model, shape, batch, threads, minTime, vocab) {
    const session = await ort.InferenceSession.create(model, {
        graphOptimizationLevel: 'all', executionProviders: ['cpu'], intraOpNumThreads: threads,
        interOpNumThreads: 1, executionMode: 'sequential',
    });
    const dims = [batch, ...shape];
    const n = dims.reduce((a, b) => a * b, 1);
    const type = inputType(session);
    if (type !== 'float32' && type !== 'int64') throw new Error(model + ': input of type ' + type + ': float32 or int64 only');
    const data = type === 'int64' ? new BigInt64Array(n) : new Float32Array(n);
    let seed = 12345;
    for (let i = 0; i < n; i++) {
        seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
        const u = (seed >>> 8) / 16777216;
        data[i] = type === 'int64' ? BigInt(Math.floor(u * vocab)) : u;
    }
    const feeds = {[session.inputNames[0]]: new ort.Tensor(type, data, dims)};
    await session.run(feeds); // warm-up: not counted
    const ms = [];
    const start = process.hrtime.bigint();
    while (ms.length < 3 || Number(process.hrtime.bigint() - start) / 1e9 < minTime) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    ms.sort((a, b) => a - b);
    const k = ms.length;
    const median = k % 2 ? ms[(k - 1) / 2] : (ms[k / 2 - 1] + ms[k / 2]) / 2;
    if (session.release) await session.release();
    return {batch, threads, runs: k, ms_median: median, ms_min: ms[0], images_per_s: (batch * 1e3) / median};
}

async function main() {
    const [model, shape, batches, threads, minTime, vocabArg] = process.argv.slice(2);
    if (!threads) throw new Error('usage: ort_bench.js MODEL.onnx SAMPLE_SHAPE BATCHES THREADS [MIN_TIME] [VOCAB]');
    const vocab = Number(vocabArg || process.env.ORT_BENCH_VOCAB || 8);
    if (!(Number.isInteger(vocab) && vocab >= 1)) throw new Error('VOCAB must be a positive integer');
    const results = [];
    for (const b of list(batches))
        for (const t of list(threads))
            results.push(await timeOne(model, list(shape), b, t, minTime ? Number(minTime) : 1.0, vocab));
    console.log(JSON.stringify({model, results}));
}

main().catch((e) => {
    console.error('ort_bench: ' + e.message);
    process.exit(1);
});
