#!/usr/bin/env python3
"""Kernel-by-kernel device times of one `ingot profile` run, from two Nsight Compute CSV reports of the
same command (`ncu --csv --metrics gpu__time_duration.sum`), one with `--nvtx --print-nvtx-rename
kernel` (each kernel named by the NVTX range around it: with INGOT_NVTX=1, its graph node) and one
without (the kernel's own name). Both list the same launches in the same order; their ID column joins
them.

`ingot profile`'s per-node times come from events around each node of an eager run and overstate a
CUDA-graph replay's: on an H100 their sums were 2.17 ms (MobileNetV3-Large int8 b32) and 1.88 ms
(fp16) against `ingot bench`'s 1.34 and 0.85 (docs/QUANTIZATION.md). ncu times each kernel alone.

Usage: ncu_kernels.py NAMED.csv PLAIN.csv [--runs R] [--top N]
  --runs R: the profile's warm-up plus measured runs; with R >= 3 the last run is the tail that
            repeats the run before it (so the first run's one-off launches, cuDNN's autotuning among
            them, may differ), otherwise the launches are split into R equal runs and the last one
            reported; default 1
Prints a markdown table per node (its kernels and their times, slowest first) and the total.
"""
import argparse
import collections
import csv
import io
import sys

SCALE_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6,
               "s": 1e6}


def read_report(path):
    """[(id, kernel name, microseconds)] in launch order, from ncu's CSV (lines before the header skipped)."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"ncu_kernels: {path} holds no ncu CSV table (no line starting with \"ID\")")
    rows = []
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        missing = [k for k in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value") if k not in r]
        if missing:
            sys.exit(f"ncu_kernels: {path} has no column(s) {missing}")
        if r["Metric Name"] != "gpu__time_duration.sum":
            continue
        unit = r["Metric Unit"].strip()
        if unit not in SCALE_TO_US:
            sys.exit(f"ncu_kernels: {path}: unknown time unit '{unit}'")
        value = float(r["Metric Value"].replace(",", ""))
        rows.append((int(r["ID"]), r["Kernel Name"], value * SCALE_TO_US[unit]))
    if not rows:
        sys.exit(f"ncu_kernels: {path} has no gpu__time_duration.sum rows")
    return rows


def steady_run_length(named):
    """The length P of the last run: the smallest P where the last P launches name the same nodes, in
    the same order, as the P before them and begin a node (a node's launches are adjacent and its name
    unique within a run, so no shorter P passes); None when the report does not end in two equal runs."""
    names = [node for _, node, _ in named]
    for p in range(1, len(names) // 2 + 1):
        if names[-p:] == names[-2 * p:-p] and (2 * p == len(names) or names[-p] != names[-p - 1]):
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("named")
    ap.add_argument("plain")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--top", type=int, default=1000)
    a = ap.parse_args()
    named, plain = read_report(a.named), read_report(a.plain)
    if [r[0] for r in named] != [r[0] for r in plain]:
        # Two runs of one command may launch differently (a first call's one-off kernels, cuDNN's
        # choices): the named report alone then, whose names end with the kernel's.
        print(f"(the two reports list different launches, {len(named)} and {len(plain)}: kernels named by the "
              "first alone)")
        plain = named
    runs = max(a.runs, 1)
    per_run = steady_run_length(named) if runs >= 3 else None
    divide = 1
    if per_run is not None:
        # The last two runs launch the same nodes in the same order: the last one is reported, and
        # the first runs' one-offs (weights padded on first use, cuDNN's autotuning) stay out.
        first = len(named) - per_run
    elif len(named) % runs == 0:
        per_run = len(named) // runs
        first = len(named) - per_run
    else:
        # The warm-up launches one-off kernels and no two runs repeat at the end: every launch is
        # kept and each node's time divided by the runs, an average with those one-offs in it.
        print(f"(the {len(named)} launches do not split into {runs} equal runs: each node's time is its "
              f"launches' sum / {runs})")
        per_run, first, divide = len(named), 0, runs
    nodes = collections.OrderedDict()
    for (_, node, us), (_, kernel, _) in zip(named[first:], plain[first:]):
        nodes.setdefault(node, []).append((kernel, us / divide))
    total = sum(us for _, _, us in named[first:]) / divide
    launches = f"{per_run} kernels" if divide == 1 else f"{per_run} launches in {divide} runs"
    print(f"{launches}, {total:.1f} us of device time (each kernel alone, one run)\n")
    print("| node | us | kernels |")
    print("|---|---:|---|")
    ranked = sorted(nodes.items(), key=lambda kv: -sum(us for _, us in kv[1]))
    for node, kernels in ranked[:a.top]:
        parts = "; ".join(f"{k[:70]} {us:.1f}" for k, us in sorted(kernels, key=lambda x: -x[1]))
        print(f"| {node} | {sum(us for _, us in kernels):.1f} | {parts} |")


if __name__ == "__main__":
    main()
