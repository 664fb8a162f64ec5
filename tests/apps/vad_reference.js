// The reference for ingot-vad's test: Silero VAD in onnxruntime-node (the pinned test-time runtime
// from scripts/fetch-models.sh), streamed as silero-vad's OnnxWrapper does (512-sample windows at
// 16 kHz with the previous 64 samples in front, state carried), and the speech segments by a port
// of silero-vad's get_speech_timestamps (utils_vad.py, v5) with its defaults.
//
//   NODE_PATH=$CACHE/node_modules node vad_reference.js MODEL.onnx AUDIO.wav  -> JSON on stdout
// AUDIO: 16-bit PCM, mono, 16 kHz.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readWav(path) {
  const b = fs.readFileSync(path);
  if (b.toString('ascii', 0, 4) !== 'RIFF' || b.toString('ascii', 8, 12) !== 'WAVE') throw new Error(`${path}: not a WAV file`);
  let fmt = null;
  for (let pos = 12; pos + 8 <= b.length;) {
    const id = b.toString('ascii', pos, pos + 4), size = b.readUInt32LE(pos + 4);
    if (id === 'fmt ') fmt = { format: b.readUInt16LE(pos + 8), channels: b.readUInt16LE(pos + 10), rate: b.readUInt32LE(pos + 12), bits: b.readUInt16LE(pos + 22) };
    if (id === 'data') {
      if (!fmt || fmt.format !== 1 || fmt.channels !== 1 || fmt.bits !== 16 || fmt.rate !== 16000) throw new Error(`${path}: expected 16-bit PCM mono 16 kHz`);
      const n = Math.floor(Math.min(size, b.length - pos - 8) / 2);
      const samples = new Float32Array(n);
      for (let i = 0; i < n; ++i) samples[i] = b.readInt16LE(pos + 8 + 2 * i) / 32768;
      return samples;
    }
    pos += 8 + size + (size & 1);
  }
  throw new Error(`${path}: no data chunk`);
}

function speechTimestamps(probs, window, rate, total) {
  const threshold = 0.5, neg = Math.max(threshold - 0.15, 0.01);
  const minSpeech = rate * 250 / 1000, pad = rate * 30 / 1000, minSilence = rate * 100 / 1000;
  const maxSpeech = Infinity, minSilenceAtMax = rate * 98 / 1000;
  let triggered = false, current = {}, tempEnd = 0, prevEnd = 0, nextStart = 0;
  const speeches = [];
  probs.forEach((p, i) => {
    const at = window * i;
    if (p >= threshold && tempEnd) {
      tempEnd = 0;
      if (nextStart < prevEnd) nextStart = at;
    }
    if (p >= threshold && !triggered) {
      triggered = true;
      current = { start: at };
      return;
    }
    if (triggered && at - current.start > maxSpeech) {
      if (prevEnd) {
        current.end = prevEnd;
        speeches.push(current);
        current = {};
        if (nextStart < prevEnd) triggered = false;
        else current = { start: nextStart };
        prevEnd = nextStart = tempEnd = 0;
      } else {
        current.end = at;
        speeches.push(current);
        current = {};
        prevEnd = nextStart = tempEnd = 0;
        triggered = false;
        return;
      }
    }
    if (p < neg && triggered) {
      if (!tempEnd) tempEnd = at;
      if (at - tempEnd > minSilenceAtMax) prevEnd = tempEnd;
      if (at - tempEnd < minSilence) return;
      current.end = tempEnd;
      if (current.end - current.start > minSpeech) speeches.push(current);
      current = {};
      prevEnd = nextStart = tempEnd = 0;
      triggered = false;
    }
  });
  if (current.start !== undefined && total - current.start > minSpeech) {
    current.end = total;
    speeches.push(current);
  }
  speeches.forEach((s, i) => {
    if (i === 0) s.start = Math.trunc(Math.max(0, s.start - pad));
    if (i !== speeches.length - 1) {
      const silence = speeches[i + 1].start - s.end;
      if (silence < 2 * pad) {
        s.end += Math.floor(silence / 2);
        speeches[i + 1].start = Math.trunc(Math.max(0, speeches[i + 1].start - Math.floor(silence / 2)));
      } else {
        s.end = Math.trunc(Math.min(total, s.end + pad));
        speeches[i + 1].start = Math.trunc(Math.max(0, speeches[i + 1].start - pad));
      }
    } else {
      s.end = Math.trunc(Math.min(total, s.end + pad));
    }
  });
  return speeches;
}

async function main() {
  const [modelPath, wavPath] = process.argv.slice(2);
  const samples = readWav(wavPath);
  const session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1 });
  const window = 512, context = 64, rate = 16000;
  let state = new Float32Array(2 * 128);
  const input = new Float32Array(context + window);
  const sr = new ort.Tensor('int64', BigInt64Array.from([BigInt(rate)]));
  const probs = [];
  for (let start = 0; start < samples.length; start += window) {
    input.copyWithin(0, window, window + context);  // the previous window's last 64 samples
    input.fill(0, context);
    input.set(samples.subarray(start, Math.min(samples.length, start + window)), context);
    const out = await session.run({
      input: new ort.Tensor('float32', input.slice(), [1, context + window]),
      state: new ort.Tensor('float32', state, [2, 1, 128]),
      sr,
    });
    probs.push(out.output.data[0]);
    state = Float32Array.from(out.stateN.data);
  }
  const segments = speechTimestamps(probs, window, rate, samples.length)
    .map((s) => ({ start_sample: s.start, end_sample: s.end, start: s.start / rate, end: s.end / rate }));
  process.stdout.write(JSON.stringify({ sample_rate: rate, window_samples: window, probabilities: probs, segments }) + '\n');
}

main().catch((e) => {
  console.error(`vad_reference: ${e.message}`);
  process.exit(1);
});
