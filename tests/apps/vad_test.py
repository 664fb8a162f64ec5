#!/usr/bin/python3
"""ctest apps.vad: ingot-vad (C++, and the Python version with --python-app) against onnxruntime.

Inputs: the five LibriVox recordings of pocketsphinx-testdata, and one recording made of all five
with silences of 1.0, 0.6, 1.5 and 0.4 s between them. The reference (vad_reference.js) runs
Silero VAD in onnxruntime-node, streamed the same way, through a port of silero-vad's
get_speech_timestamps. Checked: per-window probabilities within 1e-3 of onnxruntime's, the same
number of segments with boundaries within one window (32 ms), every single recording's speech covered
by the long recording's segments, the same segments (within 3 windows) from a 22.05 kHz stereo copy
(resampling and channel averaging), the PNG plot, and clear errors for unreadable files.
Exit 77 (skip) without the model, node with onnxruntime-node, or pocketsphinx-testdata.

On a machine without node (the GPU machine), --references DIR reads the references that
--write-references DIR wrote here (scripts/gpu-test.sh bundles them).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np
from app_test_util import expect_error, run

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRIVOX_DIR = "/usr/share/pocketsphinx/test/data/librivox"
GAPS = [1.0, 0.6, 1.5, 0.4]
WINDOW = 512


def read_pcm16(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


def write_wav(path, samples, rate, channels=1):
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.ascontiguousarray(samples, "<i2").tobytes())


def compare(got, ref, who, tolerance=WINDOW, check_probs=True):
    if check_probs:
        diff = np.abs(np.array(got["probabilities"]) - np.array(ref["probabilities"])).max()
        print(f"  {who}: probabilities within {diff:.2e} of onnxruntime's")
        if len(got["probabilities"]) != len(ref["probabilities"]) or diff > 1e-3:
            sys.exit(f"FAIL ({who}): probabilities differ from onnxruntime's by {diff}")
    a = [(s["start"], s["end"]) for s in got["segments"]]
    b = [(s["start"], s["end"]) for s in ref["segments"]]
    print(f"  {who}: {a}\n  reference: {b}")
    if len(a) != len(b) or any(abs(x - y) > tolerance / 16000 + 1e-9 for p, q in zip(a, b) for x, y in zip(p, q)):
        sys.exit(f"FAIL ({who}): segments differ from the reference")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--python-app")
    parser.add_argument("--pythonpath")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--librivox", default=LIBRIVOX_DIR)
    parser.add_argument("--model")
    parser.add_argument("--references", help="read the references from here instead of running onnxruntime")
    parser.add_argument("--write-references", help="write onnxruntime's references here and exit")
    args = parser.parse_args()
    cache = os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models"))
    model = args.model or os.path.join(cache, "silero-vad", "weights", "silero_vad.onnx")
    librivox = sorted(glob.glob(os.path.join(args.librivox, "*.wav")))
    ort = os.path.join(cache, "node_modules", "onnxruntime-node", "package.json")
    node_ok = subprocess.run(["sh", "-c", "command -v node"], capture_output=True).returncode == 0
    have_reference = bool(args.references) or (os.path.exists(ort) and node_ok)
    if not os.path.exists(model) or not have_reference or len(librivox) != 5:
        print("skipped: Silero VAD / onnxruntime-node (scripts/fetch-models.sh), node or pocketsphinx-testdata missing")
        sys.exit(77)

    def reference(wav):
        name = os.path.splitext(os.path.basename(wav))[0] + ".json"
        if args.references:
            with open(os.path.join(args.references, name)) as f:
                return json.load(f)
        r = subprocess.run(["node", os.path.join(HERE, "vad_reference.js"), model, wav], capture_output=True, text=True,
                           env=dict(os.environ, NODE_PATH=os.path.join(cache, "node_modules")), timeout=600)
        if r.returncode != 0:
            sys.exit(f"FAIL: the reference failed: {r.stderr}")
        if args.write_references:
            os.makedirs(args.write_references, exist_ok=True)
            with open(os.path.join(args.write_references, name), "w") as f:
                f.write(r.stdout)
        return json.loads(r.stdout)

    with tempfile.TemporaryDirectory() as tmp:
        packages = os.path.join(tmp, "packages")

        def ingot_vad(wav, name, extra=()):
            run([args.app, wav, "--device", args.device, "--model", model, "--package-dir", packages, "--json", f"{tmp}/{name}.json", *extra])
            with open(f"{tmp}/{name}.json") as f:
                return json.load(f)

        singles = []
        for k, path in enumerate(librivox):
            if args.write_references:
                reference(path)
                continue
            got = ingot_vad(path, f"single{k}")
            compare(got, reference(path), os.path.basename(path))
            singles.append(got)

        # All five in one recording: several segments, each recording's speech inside them.
        parts, offsets, at = [], [], 0
        for k, path in enumerate(librivox):
            pcm = read_pcm16(path)
            offsets.append(at / 16000)
            parts.append(pcm)
            at += len(pcm)
            if k < len(GAPS):
                parts.append(np.zeros(int(GAPS[k] * 16000), np.int16))
                at += int(GAPS[k] * 16000)
        long_pcm = np.concatenate(parts)
        long_wav = f"{tmp}/librivox.wav"
        write_wav(long_wav, long_pcm, 16000)
        ref = reference(long_wav)
        if args.write_references:
            print(f"wrote the references into {args.write_references}")
            return
        got = ingot_vad(long_wav, "long", ["--plot", f"{tmp}/long.png"])
        compare(got, ref, "librivox.wav")
        if len(got["segments"]) < 5:
            sys.exit("FAIL: the five recordings and their silences should give at least five segments")
        for offset, single, path in zip(offsets, singles, librivox):
            for s in single["segments"]:
                a, b = offset + s["start"] + 0.1, offset + s["end"] - 0.1  # the speech, less the padding
                if not any(seg["start"] <= a and b <= seg["end"] for seg in got["segments"]):
                    sys.exit(f"FAIL: speech {a:.2f}-{b:.2f} s of {os.path.basename(path)} is not in one segment")
        with open(f"{tmp}/long.png", "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                sys.exit("FAIL: --plot did not write a PNG")

        # The same recording at 22.05 kHz in stereo: resampled back to 16 kHz, channels averaged.
        from scipy.signal import resample_poly

        resampled = np.clip(np.round(resample_poly(long_pcm.astype(np.float64), 441, 320)), -32768, 32767)
        stereo = np.stack([resampled, resampled], axis=1).astype(np.int16)
        write_wav(f"{tmp}/stereo.wav", stereo, 22050, channels=2)
        compare(ingot_vad(f"{tmp}/stereo.wav", "stereo"), ref, "stereo 22.05 kHz", tolerance=3 * WINDOW,
                check_probs=False)

        expect_error([args.app, f"{tmp}/no-such.wav", "--package-dir", packages], "no-such.wav", "a missing file")
        with open(f"{tmp}/text.wav", "w") as f:
            f.write("not audio\n")
        expect_error([args.app, f"{tmp}/text.wav", "--package-dir", packages], "not a WAV file", "a file that is not WAV")

        if args.python_app:
            env = dict(os.environ, PYTHONPATH=args.pythonpath or "")
            run(["/usr/bin/python3", args.python_app, long_wav, "--device", args.device, "--model", model,
                 "--package-dir", packages, "--json", f"{tmp}/py.json",
                 "--plot", f"{tmp}/py.png"], env=env)
            with open(f"{tmp}/py.json") as f:
                compare(json.load(f), ref, "ingot_vad.py")
    print("ok")


if __name__ == "__main__":
    main()
