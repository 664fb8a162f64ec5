// Runs the models tests/export/export_models.cpp exported through onnxruntime-node and compares
// onnxruntime's outputs with Ingot's eager ones (ctest export.onnxruntime):
//
//   NODE_PATH=CACHE/node_modules node tests/export/check_onnxruntime.js DIR
//
// For every DIR/NAME.onnx: DIR/NAME.safetensors (and DIR/NAME.b.safetensors, another batch size
// through the same dynamic-batch model) hold "in.K" and Ingot's "out.K". Exits 1 on any mismatch.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// safetensors: u64 little-endian header size, a JSON header, the data.
function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const base = 8 + n, out = {};
  const kinds = {F32: ['float32', Float32Array], I64: ['int64', BigInt64Array], BOOL: ['bool', Uint8Array]};
  for (const [key, info] of Object.entries(header)) {
    if (key === '__metadata__') continue;
    const [begin, end] = info.data_offsets;
    const kind = kinds[info.dtype];
    if (!kind) throw new Error(`${file}: ${key}: dtype ${info.dtype} is not handled here`);
    const bytes = buf.subarray(base + begin, base + end);
    const copy = new Uint8Array(bytes.length);
    copy.set(bytes);
    out[key] = new ort.Tensor(kind[0], new kind[1](copy.buffer), info.shape);
  }
  return out;
}

async function check(dir, name, file) {
  const io = readSafetensors(path.join(dir, file));
  const session = await ort.InferenceSession.create(path.join(dir, name + '.onnx'), {intraOpNumThreads: 1});
  const feeds = {};
  session.inputNames.forEach((input, i) => { feeds[input] = io[`in.${i}`]; });
  const results = await session.run(feeds);
  let worst = 0, failures = [];
  session.outputNames.forEach((output, i) => {
    const got = results[output], want = io[`out.${i}`];
    if (JSON.stringify(got.dims) !== JSON.stringify(want.dims)) {
      failures.push(`${output}: onnxruntime's shape [${got.dims}], Ingot's [${want.dims}]`);
      return;
    }
    for (let k = 0; k < want.data.length; ++k) {
      const e = Math.abs(got.data[k] - want.data[k]) / (1 + Math.abs(want.data[k]));
      if (!(e <= worst)) worst = e;
    }
  });
  const ok = failures.length === 0 && worst <= 1e-4;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${file}: ${session.outputNames.length} outputs, worst relative error ${worst.toExponential(2)}` +
              (failures.length ? `; ${failures.join('; ')}` : ''));
  return ok;
}

async function main() {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: check_onnxruntime.js DIR');
  console.log(`onnxruntime-node ${ort.env.versions.node}`);
  let all = true, count = 0;
  for (const f of fs.readdirSync(dir).sort()) {
    if (!f.endsWith('.safetensors')) continue;
    const name = f.replace(/(\.b)?\.safetensors$/, '');
    all = (await check(dir, name, f)) && all;
    ++count;
  }
  if (count === 0) throw new Error(`no exported models in ${dir}`);
  process.exit(all ? 0 : 1);
}

main().catch((e) => { console.error(`check_onnxruntime: ${e.message}`); process.exit(1); });
