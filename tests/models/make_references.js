// Writes the reference outputs of the real-model checks with ONNX Runtime (a test-time reference
// only; Ingot never links it).
//
// Usage: NODE_PATH=/path/to/node_modules node tests/models/make_references.js INPUT_DIR MODEL_DIR OUT_DIR
//            [--graph-opt disabled|basic|extended|all]
// INPUT_DIR: what make_inputs.py wrote. MODEL_DIR: searched recursively for the model files named
// in models.json. OUT_DIR: receives OUT_DIR/<name>/output_<i>.npy (graph-output order), or
// OUT_DIR/<name>/step<k>/output_<i>.npy for models that run in steps (see models.json), and
// OUT_DIR/<name>/outputs.json with the output names.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const {readNpy, writeNpy} = require('./npy');

function findFile(root, name) {
  for (const entry of fs.readdirSync(root, {withFileTypes: true})) {
    const full = path.join(root, entry.name);
    if (entry.isDirectory()) {
      const found = findFile(full, name);
      if (found) return found;
    } else if (entry.name === name) {
      return full;
    }
  }
  return null;
}

function loadInput(inputDir, file, step) {
  const array = readNpy(path.join(inputDir, file.replace('{k}', String(step))));
  return new ort.Tensor(array.type, array.data, array.dims);
}

function saveOutputs(dir, session, results) {
  fs.mkdirSync(dir, {recursive: true});
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    writeNpy(path.join(dir, `output_${i}.npy`), t.type, t.dims, t.data);
  });
}

async function main() {
  const args = process.argv.slice(2);
  let graphOptimizationLevel = 'all';
  const optAt = args.indexOf('--graph-opt');
  if (optAt >= 0) {
    graphOptimizationLevel = args[optAt + 1];
    args.splice(optAt, 2);
  }
  if (args.length !== 3) {
    console.error('usage: make_references.js INPUT_DIR MODEL_DIR OUT_DIR [--graph-opt LEVEL]');
    process.exit(2);
  }
  const [inputDir, modelDir, outDir] = args;
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, 'models.json'), 'utf8'));
  console.log(`onnxruntime-node ${require('onnxruntime-node/package.json').version}, ` +
              `1 thread, graph optimization '${graphOptimizationLevel}'`);

  for (const model of manifest.models) {
    const modelPath = findFile(modelDir, model.file);
    if (!modelPath) throw new Error(`${model.file} not found under ${modelDir}`);
    const session = await ort.InferenceSession.create(modelPath, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel,
      logSeverityLevel: 3,  // ORT warns about unused initializers in these models
    });
    const steps = model.steps || 1;
    let previous = null;
    for (let step = 0; step < steps; ++step) {
      const feeds = {};
      for (const [name, file] of Object.entries(model.inputs)) {
        const carried = model.carry && model.carry[name];
        feeds[name] = previous && carried ? previous[carried] : loadInput(inputDir, file, step);
      }
      const results = await session.run(feeds);
      const dir = model.steps ? path.join(outDir, model.name, `step${step}`) : path.join(outDir, model.name);
      saveOutputs(dir, session, results);
      previous = results;
    }
    fs.writeFileSync(path.join(outDir, model.name, 'outputs.json'),
                     JSON.stringify({onnxruntime: ort.env.versions.common, outputs: session.outputNames}) + '\n');
    const shapes = session.outputNames.map(n => `${n}[${previous[n].dims}]`).join(' ');
    console.log(`${model.name}: ${steps} run(s), outputs ${shapes}`);
  }
}

main().catch(e => {
  console.error(`make_references.js: ${e.message}`);
  process.exit(1);
});
