// Where ONNX Runtime (onnxruntime-node) spends a one-input model's runs, node by node: ORT's own
// profile (enableProfiling) of RUNS runs on one thread after one warm-up, each node's median
// `_kernel_time` in microseconds, slowest first -- the peer of `qrl bench --profile` for per-node
// comparisons (docs/runtime.md, stops 36 and 39). Inputs as tools/ort_bench.js makes them (seeded,
// in [0, 1), float32). A profiled node carries a few microseconds of ORT's own overhead, so the
// sum exceeds an unprofiled run (tools/ort_bench.js times those).
// Usage: node tools/ort_profile.js MODEL.onnx SAMPLE_SHAPE [BATCH] [RUNS] [TOP]
//   e.g. node tools/ort_profile.js m.int8.onnx 3,224,224 1 300 40
// Prints one line per node: median us, op type, node name; then the sum. The profile's JSON goes
// to a temporary directory, removed after.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');

async function main() {
    const [model, shape, batchArg, runsArg, topArg] = process.argv.slice(2);
    if (!shape) throw new Error('usage: ort_profile.js MODEL.onnx SAMPLE_SHAPE [BATCH] [RUNS] [TOP]');
    const batch = Number(batchArg || 1), runs = Number(runsArg || 300), top = Number(topArg || 0);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile-'));
    try {
        const session = await ort.InferenceSession.create(model, {
            graphOptimizationLevel: 'all', executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1,
            executionMode: 'sequential', enableProfiling: true, profileFilePrefix: path.join(dir, 'p'),
        });
        const dims = [batch, ...shape.split(',').filter((v) => v !== '').map(Number)];
        const n = dims.reduce((a, b) => a * b, 1);
        const data = new Float32Array(n);
        let seed = 12345;
        for (let i = 0; i < n; i++) {
            seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
            data[i] = (seed >>> 8) / 16777216;
        }
        const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, dims)};
        await session.run(feeds); // warm-up: its events are dropped below (the first of each node's)
        for (let i = 0; i < runs; i++) await session.run(feeds);
        session.endProfiling();
        const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
        if (!file) throw new Error('ONNX Runtime wrote no profile');
        const times = new Map(), ops = new Map();
        for (const e of JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'))) {
            if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
            const name = e.name.slice(0, -'_kernel_time'.length);
            if (!times.has(name)) {
                times.set(name, []); // the warm-up's
                ops.set(name, (e.args && e.args.op_name) || '?');
                continue;
            }
            times.get(name).push(e.dur);
        }
        const rows = [];
        for (const [name, t] of times) {
            if (!t.length) continue;
            t.sort((a, b) => a - b);
            const k = t.length, median = k % 2 ? t[(k - 1) / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
            rows.push({name, op: ops.get(name), median});
        }
        rows.sort((a, b) => b.median - a.median);
        let sum = 0;
        for (const r of rows) sum += r.median;
        for (const r of top > 0 ? rows.slice(0, top) : rows)
            console.log(`${r.median.toFixed(1).padStart(9)} ${r.op.padEnd(26)} ${r.name}`);
        console.log(`${sum.toFixed(1).padStart(9)} us: the ${rows.length} nodes' medians summed, ${runs} runs, batch ${batch}`);
        if (session.release) await session.release();
    } finally {
        fs.rmSync(dir, {recursive: true, force: true});
    }
}

main().catch((e) => {
    console.error('ort_profile: ' + e.message);
    process.exit(1);
});
