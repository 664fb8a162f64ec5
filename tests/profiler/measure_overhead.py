#!/usr/bin/python3
"""Profiler overhead on the real models. By default in one process per model
(`ingot-bench-latency --profile-ab RUNS`): blocks of RUNS runs alternate with the profiler off and on,
ROUNDS blocks of each, so both see the same memory layout, clock speed and neighbours (separate
processes differ by a few per cent on that alone). With --baseline (a build without the profiler
hooks) the variants are separate processes in alternating rounds instead. Prints a markdown table:
medians, on/off by median and by the mean of the faster half of the runs.

Usage: /usr/bin/python3 tests/profiler/measure_overhead.py --bench build/bench/ingot-bench-latency
           [--baseline OTHER/ingot-bench-latency] [--models ~/.cache/ingot/models] [--rounds 3] [--runs 10]
           [--device cpu|cuda] [--inputs DIR (made by tests/models/make_inputs.py)]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests", "models")


def find_file(root, name):
    for directory, _, files in sorted(os.walk(root)):
        if name in files:
            return os.path.join(directory, name)
    return None


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def fast_half(values):
    values = sorted(values)
    half = max(1, len(values) // 2)
    return sum(values[:half]) / half


def models_with_feeds(models_dir, inputs, temp):
    """The real models of tests/models/models.json: (entry, path under models_dir or None, `--input
    NAME=FILE` arguments of step 0). Makes the inputs in `temp` when `inputs` is not given."""
    if not inputs:
        subprocess.run([sys.executable, os.path.join(TESTS, "make_inputs.py"), temp], check=True,
                       stdout=subprocess.DEVNULL)
        inputs = temp
    with open(os.path.join(TESTS, "models.json")) as f:
        models = json.load(f)["models"]
    for model in models:
        feeds = []
        for name, file in model["inputs"].items():
            feeds += ["--input", f"{name}={os.path.join(inputs, file.replace('{k}', '0'))}"]
        yield model, find_file(models_dir, model["file"]), feeds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--baseline", help="an ingot-bench-latency built without the profiler hooks")
    parser.add_argument("--models",
                        default=os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models")))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--inputs", help="inputs made earlier by make_inputs.py (GPU machine)")
    args = parser.parse_args()
    variants = {"off": [args.bench], "on": [args.bench, "--profile"]}
    if args.baseline:
        variants = {"baseline": [args.baseline], **variants}
    print("| model | " + " | ".join(f"{v} median ms" for v in variants) +
          " | on/off (median) | on/off (faster half) |")
    print("|---|" + "---|" * (len(variants) + 2))
    with tempfile.TemporaryDirectory(prefix="ingot-overhead-") as temp:
        for model, path, feeds in models_with_feeds(args.models, args.inputs, temp):
            if path is None:
                print(f"| {model['name']} | not found under {args.models} |")
                continue
            common = [path, *feeds, "--threads", str(args.threads), "--warmup", "3", "--device", args.device]
            times = {v: [] for v in variants}
            if args.baseline:
                for _ in range(args.rounds):
                    for v, command in variants.items():
                        out = subprocess.run(command[:1] + common + ["--runs", str(args.runs)] + command[1:],
                                             capture_output=True, text=True, check=True)
                        times[v] += json.loads(out.stdout.strip().splitlines()[-1])["times_ms"]
            else:
                out = subprocess.run([args.bench] + common + ["--runs", str(args.runs * args.rounds),
                                                              "--profile-ab", str(args.runs)],
                                     capture_output=True, text=True, check=True)
                result = json.loads(out.stdout.strip().splitlines()[-1])
                times = {"off": result["off_times_ms"], "on": result["on_times_ms"]}
            med = {v: median(t) for v, t in times.items()}
            fast = {v: fast_half(t) for v, t in times.items()}
            print(f"| {model['name']} | " + " | ".join(f"{med[v]:.3f}" for v in variants) +
                  f" | {med['on'] / med['off']:.3f} | {fast['on'] / fast['off']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
