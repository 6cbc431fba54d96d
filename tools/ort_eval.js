// Top-1 accuracy of an ONNX classifier in ONNX Runtime (onnxruntime-node),
// the peer runtime the tests and benchmarks compare QRL with.
// Usage: node tools/ort_eval.js MODEL.onnx X.npy Y.npy [OPTIMIZED_OUT.onnx]
// Prints one JSON line: {"n": N, "correct": C, "accuracy": A, "ms": T}.
// With OPTIMIZED_OUT, ORT also writes the graph it actually runs (after its
// fusions), so a test can check that QDQ groups became integer kernels.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_NODE_MODULE || 'onnxruntime-node');
const npy = require('./npy');
const {exact} = require('./ort_exact');


async function main() {
    const [model, xfile, yfile, optimized] = process.argv.slice(2);
    const opts = exact({graphOptimizationLevel: 'all', executionProviders: ['cpu'], intraOpNumThreads: 1});
    if (optimized) opts.optimizedModelFilePath = path.resolve(optimized);
    const session = await ort.InferenceSession.create(model, opts);
    const x = npy.read(xfile), y = npy.read(yfile);
    const n = x.shape[0], per = x.data.length / n, batch = 100;
    let correct = 0;
    const t0 = Date.now();
    for (let s = 0; s < n; s += batch) {
        const b = Math.min(batch, n - s);
        const input = new ort.Tensor('float32', x.data.subarray(s * per, (s + b) * per), [b, ...x.shape.slice(1)]);
        const out = await session.run({[session.inputNames[0]]: input});
        const logits = out[session.outputNames[0]];
        const classes = logits.data.length / b;
        for (let i = 0; i < b; i++) {
            let best = 0;
            for (let c = 1; c < classes; c++)
                if (logits.data[i * classes + c] > logits.data[i * classes + best]) best = c;
            if (BigInt(best) === BigInt(y.data[s + i])) correct++;
        }
    }
    console.log(JSON.stringify({n, correct, accuracy: (100 * correct) / n, ms: Date.now() - t0}));
}

main().catch((e) => {
    console.error('ort_eval: ' + e.message);
    process.exit(1);
});
