// ONNX Runtime's latency for one model, measured the same way as ingot-bench-latency (a
// benchmark reference only; Ingot never links ONNX Runtime).
//
//   NODE_PATH=... node bench/ort_latency.js MODEL --input NAME=FILE.npy [...] [--threads N]
//       [--warmup W] [--runs R]
//
// Prints one JSON line like ingot-bench-latency. Times session.run, which includes the N-API
// call and wrapping the outputs in JS tensors (tens of microseconds).
'use strict';
const ort = require('onnxruntime-node');
const {readNpy} = require('../tests/models/npy');

async function main() {
  const args = process.argv.slice(2);
  let modelPath = null;
  let threads = 2, warmup = 3, runs = 20;
  const feeds = {};
  for (let i = 0; i < args.length; ++i) {
    const arg = args[i];
    if (arg === '--input' && i + 1 < args.length) {
      const spec = args[++i];
      const eq = spec.indexOf('=');
      if (eq <= 0) throw new Error(`--input: expected NAME=FILE.npy, got '${spec}'`);
      const array = readNpy(spec.slice(eq + 1));
      feeds[spec.slice(0, eq)] = new ort.Tensor(array.type, array.data, array.dims);
    } else if (arg === '--threads' && i + 1 < args.length) {
      threads = Number(args[++i]);
    } else if (arg === '--warmup' && i + 1 < args.length) {
      warmup = Number(args[++i]);
    } else if (arg === '--runs' && i + 1 < args.length) {
      runs = Number(args[++i]);
    } else if (modelPath === null && !arg.startsWith('--')) {
      modelPath = arg;
    } else {
      throw new Error(`unexpected argument '${arg}'`);
    }
  }
  if (!modelPath || !(threads >= 1) || !(warmup >= 0) || !(runs >= 1)) {
    throw new Error('usage: ort_latency.js MODEL --input NAME=FILE.npy [...] [--threads N] [--warmup W] [--runs R]');
  }
  const loadStart = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 3,
  });
  const loadMs = Number(process.hrtime.bigint() - loadStart) / 1e6;
  for (let i = 0; i < warmup; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < runs; ++i) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const n = sorted.length;
  const median = n % 2 ? sorted[(n - 1) / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const mean = times.reduce((a, b) => a + b, 0) / n;
  const r = x => Number(x.toFixed(3));
  console.log(JSON.stringify({threads, runs, load_ms: r(loadMs), median_ms: r(median), min_ms: r(sorted[0]),
                              mean_ms: r(mean), times_ms: times.map(r)}));
}

main().catch(e => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
