#!/usr/bin/python3
"""ingot-vad in Python: finds speech in a recording with the Silero voice-activity detector.

The same pipeline as apps/vad/main.cpp, on Ingot's Python module, numpy, scipy and Pillow:

    PYTHONPATH=build/python /usr/bin/python3 apps/vad/ingot_vad.py AUDIO.wav [--device cpu|cuda]
        [--threshold 0.5] [--json FILE] [--plot FILE.png] [--package-dir DIR] [--model FILE]

The model comes from scripts/fetch-models.sh and is converted into a package on first use.
"""
import argparse
import json
import math
import os
import sys
import time
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from package_cache import cached_session, ingot, model_cache, package_cache  # noqa: E402


def read_wav(path):
    """Mono float samples and the rate of a PCM WAV file (channels averaged)."""
    try:
        with wave.open(path, "rb") as w:
            rate, channels, width, frames = w.getframerate(), w.getnchannels(), w.getsampwidth(), w.readframes(w.getnframes())
    except (OSError, EOFError, wave.Error) as e:
        raise SystemExit(f"error: cannot read audio file '{path}': {e}")
    if width == 1:
        x = (np.frombuffer(frames, np.uint8).astype(np.float32) - 128) / 128
    elif width == 2:
        x = np.frombuffer(frames, "<i2").astype(np.float32) / 32768
    elif width == 3:
        b = np.frombuffer(frames, np.uint8).reshape(-1, 3).astype(np.int32)
        x = ((b[:, 0] << 8 | b[:, 1] << 16 | b[:, 2] << 24) >> 8).astype(np.float32) / 8388608
    else:
        x = np.frombuffer(frames, "<i4").astype(np.float32) / 2147483648
    return x.reshape(-1, channels).mean(axis=1).astype(np.float32), rate


def probabilities(session, samples, rate):
    """Silero VAD v5 streamed as its OnnxWrapper does: 512-sample windows at 16 kHz (256 at 8 kHz),
    each with the previous window's last 64 (32) samples in front, the state carried."""
    window, context = (512, 64) if rate == 16000 else (256, 32)
    x = np.zeros(context + window, np.float32)
    state = np.zeros((2, 1, 128), np.float32)
    sr = np.array(rate, np.int64)
    probs = []
    for start in range(0, len(samples), window):
        x[:context] = x[-context:]
        chunk = samples[start:start + window]
        x[context:] = 0
        x[context:context + len(chunk)] = chunk
        out = session.run({"input": x[None], "state": state, "sr": sr})
        probs.append(float(out["output"].numpy().reshape(-1)[0]))
        state = out["stateN"].numpy()
    return probs, window


def speech_segments(probs, window, rate, total, threshold=0.5, neg_threshold=None, min_speech_ms=250,
                    min_silence_ms=100, speech_pad_ms=30, max_speech_s=math.inf):
    """silero-vad's get_speech_timestamps (utils_vad.py, v5) over per-window probabilities; samples."""
    min_speech = rate * min_speech_ms / 1000
    pad = rate * speech_pad_ms / 1000
    max_speech = rate * max_speech_s - window - 2 * pad
    min_silence = rate * min_silence_ms / 1000
    min_silence_at_max = rate * 98 / 1000
    neg = max(threshold - 0.15, 0.01) if neg_threshold is None else neg_threshold
    triggered, speeches, current = False, [], {}
    temp_end = prev_end = next_start = 0
    for i, p in enumerate(probs):
        at = window * i
        if p >= threshold and temp_end:
            temp_end = 0
            if next_start < prev_end:
                next_start = at
        if p >= threshold and not triggered:
            triggered, current = True, {"start": at}
            continue
        if triggered and at - current["start"] > max_speech:
            if prev_end:
                current["end"] = prev_end
                speeches.append(current)
                current = {}
                if next_start < prev_end:
                    triggered = False
                else:
                    current = {"start": next_start}
                prev_end = next_start = temp_end = 0
            else:
                current["end"] = at
                speeches.append(current)
                current, triggered = {}, False
                prev_end = next_start = temp_end = 0
                continue
        if p < neg and triggered:
            if not temp_end:
                temp_end = at
            if at - temp_end > min_silence_at_max:
                prev_end = temp_end
            if at - temp_end < min_silence:
                continue
            current["end"] = temp_end
            if current["end"] - current["start"] > min_speech:
                speeches.append(current)
            current, triggered = {}, False
            prev_end = next_start = temp_end = 0
    if current and total - current["start"] > min_speech:
        current["end"] = total
        speeches.append(current)
    for i, s in enumerate(speeches):
        if i == 0:
            s["start"] = int(max(0, s["start"] - pad))
        if i != len(speeches) - 1:
            silence = speeches[i + 1]["start"] - s["end"]
            if silence < 2 * pad:
                s["end"] += int(silence // 2)
                speeches[i + 1]["start"] = int(max(0, speeches[i + 1]["start"] - silence // 2))
            else:
                s["end"] = int(min(total, s["end"] + pad))
                speeches[i + 1]["start"] = int(max(0, speeches[i + 1]["start"] - pad))
        else:
            s["end"] = int(min(total, s["end"] + pad))
    return speeches


def plot(path, title, seconds_per_value, probs, segments, threshold):
    from PIL import Image, ImageDraw

    width, height, left, right, top, bottom = 1200, 360, 60, 30, 40, 50
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img, "RGBA")
    duration = max(seconds_per_value * len(probs), 1e-3)
    px = lambda s: left + (width - left - right) * s / duration  # noqa: E731
    py = lambda v: height - bottom - (height - top - bottom) * min(max(v, 0), 1)  # noqa: E731
    for a, b in segments:
        draw.rectangle([px(a), top, px(b), height - bottom], fill=(44, 160, 44, 64))
    for k in range(5):
        draw.line([left, py(k / 4), width - right, py(k / 4)], fill=(200, 200, 200))
        draw.text((10, py(k / 4) - 6), f"{k / 4:g}", fill="black")
    draw.line([left, py(threshold), width - right, py(threshold)], fill=(214, 39, 40))
    step = next((s for s in (1, 2, 5, 10, 20, 30, 60, 120, 300, 600) if duration / s <= 12), 600)
    for k in range(int(duration // step) + 1):
        draw.text((px(k * step) - 4, height - bottom + 8), f"{k * step:g}", fill="black")
    draw.text((width - right - 50, height - bottom + 26), "seconds", fill="black")
    draw.text((width // 2 - 4 * len(title), 12), title, fill="black")
    points = [(px((i + 0.5) * seconds_per_value), py(p)) for i, p in enumerate(probs)]
    if len(points) > 1:
        draw.line(points, fill=(31, 119, 180), width=2)
    img.save(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("audio")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--min-speech-ms", type=int, default=250)
    parser.add_argument("--min-silence-ms", type=int, default=100)
    parser.add_argument("--speech-pad-ms", type=int, default=30)
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--model", default=os.path.join(model_cache(), "silero-vad", "weights", "silero_vad.onnx"))
    parser.add_argument("--package-dir", default=package_cache())
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    t0 = time.perf_counter()
    samples, rate = read_wav(args.audio)
    original_rate = rate
    if rate not in (8000, 16000):
        from scipy.signal import resample_poly

        g = math.gcd(rate, 16000)
        samples, rate = resample_poly(samples, 16000 // g, rate // g).astype(np.float32), 16000
    if not os.path.exists(args.model):
        raise SystemExit(f"error: '{args.model}' not found (run scripts/fetch-models.sh, or pass --model)")
    try:
        t1 = time.perf_counter()
        context = 64 if rate == 16000 else 32
        session = cached_session(args.model, args.package_dir, args.device, args.threads,
                                 lambda s: print(s, file=sys.stderr),
                                 [{"input": [1, context + (512 if rate == 16000 else 256)], "state": [2, 1, 128]}])
        t2 = time.perf_counter()
        probs, window = probabilities(session, samples, rate)
        t3 = time.perf_counter()
    except ingot.Error as e:
        raise SystemExit(f"error: {e}")
    segments = speech_segments(probs, window, rate, len(samples), args.threshold, None, args.min_speech_ms,
                               args.min_silence_ms, args.speech_pad_ms)
    seconds = [(s["start"] / rate, s["end"] / rate) for s in segments]
    for i, (a, b) in enumerate(seconds):
        print(f"segment {i}: {a:.3f} - {b:.3f} s")
    print(f"{args.audio}: {len(samples) / rate:.2f} s at {original_rate} Hz, {len(segments)} segment"
          f"{'' if len(segments) == 1 else 's'}, {sum(b - a for a, b in seconds):.2f} s of speech")
    print(f"time: read {1e3 * (t1 - t0):.1f} ms, load {1e3 * (t2 - t1):.1f} ms, vad {1e3 * (t3 - t2):.1f} ms "
          f"({len(probs)} windows)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"audio": args.audio, "sample_rate": rate, "seconds": len(samples) / rate,
                       "window_samples": window, "probabilities": probs,
                       "segments": [{"start": a, "end": b, "start_sample": s["start"], "end_sample": s["end"]}
                                    for (a, b), s in zip(seconds, segments)]}, f, indent=1)
    if args.plot:
        plot(args.plot, f"speech probability: {os.path.basename(args.audio)}", window / rate, probs, seconds,
             args.threshold)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
