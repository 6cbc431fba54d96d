// Inference time of a model in ONNX Runtime (onnxruntime-node) on .npy inputs, measured as
// tools/matmulint_bench.c measures QRL: one warm-up run, then runs for at least 0.5 s
// ($BENCH_MIN_TIME seconds when set); the fastest run's ms (wall clock; the machine is shared,
// the fastest is the least disturbed).
// Usage: node tools/ort_bench_npy.js MODEL.onnx THREADS X.npy...
'use strict';
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');
const npy = require('./npy');

async function main() {
    const [model, threads, ...files] = process.argv.slice(2);
    if (!threads) throw new Error('usage: ort_bench_npy.js MODEL.onnx THREADS X.npy...');
    const session = await ort.InferenceSession.create(model, {
        graphOptimizationLevel: 'all', executionProviders: ['cpu'], intraOpNumThreads: Number(threads),
        interOpNumThreads: 1, executionMode: 'sequential',
    });
    const feeds = {};
    files.forEach((f, i) => {
        const t = npy.read(f);
        feeds[session.inputNames[i]] = new ort.Tensor(t.type, t.data, t.shape);
    });
    await session.run(feeds); // warm-up: not counted
    const minTime = Number(process.env.BENCH_MIN_TIME || 0.5);
    let best = Infinity, runs = 0;
    const start = process.hrtime.bigint();
    while (runs < 4 || Number(process.hrtime.bigint() - start) / 1e9 < minTime) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds);
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
        runs++;
    }
    console.log(`${model} threads ${threads}: ${best.toFixed(3)} ms (${runs} runs)`);
}

main().catch((e) => {
    console.error('ort_bench_npy: ' + e.message);
    process.exit(1);
});
