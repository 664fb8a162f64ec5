// Runs a QDQ model (written by `ingot quantize`) through onnxruntime-node on one input and writes
// its outputs as .npy, and optionally times it (median of N runs at T intra-op threads):
//
//   NODE_PATH=CACHE/node_modules node tests/quant/onnxruntime_qdq.js MODEL.onnx INPUT.npy OUT_DIR [RUNS THREADS]
//
// ORT_GRAPH_OPTIMIZATION=disabled runs the model's nodes as they are (each DequantizeLinear, float
// convolution and QuantizeLinear on its own: the float reading of the QDQ model, without
// onnxruntime's int8 kernels).
// Used by tests/quant/qdq_onnxruntime_test.sh (Ingot's run of the same model against onnxruntime's)
// and bench/int8.sh (onnxruntime's time on the same QDQ model, side by side with Ingot's packages).
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const {readNpy, writeNpy} = require(path.join(__dirname, '..', 'models', 'npy.js'));

async function main() {
  const [model, input, outDir, runs = '0', threads = '1'] = process.argv.slice(2);
  const options = {intraOpNumThreads: Number(threads), interOpNumThreads: 1};
  if (process.env.ORT_GRAPH_OPTIMIZATION) options.graphOptimizationLevel = process.env.ORT_GRAPH_OPTIMIZATION;
  const session = await ort.InferenceSession.create(model, options);
  const x = readNpy(input);
  const feeds = {[session.inputNames[0]]: new ort.Tensor(x.type, x.data, x.dims)};
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, {recursive: true});
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    writeNpy(path.join(outDir, `output_${i}.npy`), t.type, t.dims, t.data);
  });
  if (Number(runs) > 0) {
    for (let i = 0; i < 5; ++i) await session.run(feeds);
    const times = [];
    for (let i = 0; i < Number(runs); ++i) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(JSON.stringify({median_ms: times[Math.floor(times.length / 2)], min_ms: times[0], threads: Number(threads)}));
  }
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
