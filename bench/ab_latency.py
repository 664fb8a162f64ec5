#!/usr/bin/python3
"""Two builds side by side on the real models: `ingot-bench-latency` of build A and of build B run in
alternating processes (A, B, A, B...), ROUNDS processes of each per model, RUNS timed runs in each,
so both see the same machine state. Prints a markdown table of medians and B/A (median, and the mean
of the faster half of the runs). Used for redesigns that must keep speed (docs/PERFORMANCE.md).

Usage: /usr/bin/python3 bench/ab_latency.py --a OLD/bench/ingot-bench-latency --b NEW/bench/ingot-bench-latency
           [--device cpu|cuda] [--threads 2] [--rounds 5] [--runs 20] [--models DIR] [--inputs DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "profiler"))
from measure_overhead import fast_half, median, models_with_feeds  # noqa: E402  (shared with the profiler's)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True, help="ingot-bench-latency of the reference build")
    parser.add_argument("--b", required=True, help="ingot-bench-latency of the build under test")
    parser.add_argument("--models",
                        default=os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models")))
    parser.add_argument("--inputs", help="inputs made earlier by tests/models/make_inputs.py")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(f"device {args.device}, {args.threads} CPU threads, {args.rounds} alternating processes x {args.runs} runs each")
    print()
    print("| model | A median ms | B median ms | B/A (median) | B/A (faster half) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="ingot-ab-") as temp:
        for model, path, feeds in models_with_feeds(args.models, args.inputs, temp):
            if path is None:
                print(f"| {model['name']} | not found under {args.models} | | | |")
                continue
            common = [path, *feeds, "--threads", str(args.threads), "--warmup", "3", "--device", args.device,
                      "--runs", str(args.runs)]
            times = {"a": [], "b": []}
            for _ in range(args.rounds):
                for variant in ("a", "b"):
                    out = subprocess.run([getattr(args, variant)] + common, capture_output=True, text=True, check=True)
                    times[variant] += json.loads(out.stdout.strip().splitlines()[-1])["times_ms"]
            med = {v: median(t) for v, t in times.items()}
            fast = {v: fast_half(t) for v, t in times.items()}
            print(f"| {model['name']} | {med['a']:.3f} | {med['b']:.3f} | {med['b'] / med['a']:.3f} | "
                  f"{fast['b'] / fast['a']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
