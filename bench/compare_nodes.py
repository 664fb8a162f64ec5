#!/usr/bin/env python3
"""Per-node device times of two or more `ingot profile --trace` traces, side by side.

Lines the nodes up by name (in the first trace's order; a node missing from a trace shows "-"),
with each node's median over the profiled runs (and the minimum, --min), the ratio of every
trace to the first, and the totals (copies left out unless --copies). Useful for "where does
this package lose against that one": an int8 package against the fp16 one of the same model, a
switch on and off, two binaries.

    ingot profile a.ingot --device cuda --warmup 5 --runs 10 --trace a.json
    ingot profile b.ingot --device cuda --warmup 5 --runs 10 --trace b.json
    /usr/bin/python3 bench/compare_nodes.py a.json b.json [--labels int8 fp16] [--top 20] [--min]

Caveat (docs/PROFILING.md, "GPU profiles"): op by op, a node's event pair also spans host time
before its kernel once the GPU has caught up with the host's launches, so late nodes of short
runs can read high; compare against `ingot bench --device-io` (graph replay) for whole runs.
Nodes are matched by name, so traces of the same model (any precision) line up; the fp16 and int8
packages of one ONNX model keep the ONNX node names.
"""
import argparse
import json
import statistics
import sys


def device_times(path, copies):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    times = {}
    for e in events:
        args = e.get("args", {})
        if e.get("ph") != "X" or args.get("timed_on") != "device":
            continue
        if e.get("cat") == "copy" and not copies:
            continue
        times.setdefault(e["name"], []).append(float(e["dur"]))
    if not times:
        sys.exit(f"compare_nodes: {path} has no device-timed events (profile with --device cuda and --trace)")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", help="Chrome traces written by `ingot profile --trace`")
    ap.add_argument("--labels", nargs="+", help="a column label per trace (default: the file names)")
    ap.add_argument("--min", action="store_true", help="each node's minimum over the runs instead of the median")
    ap.add_argument("--top", type=int, default=0, help="only the N nodes the first trace spends most on")
    ap.add_argument("--copies", action="store_true", help="include the copy events")
    args = ap.parse_args()
    labels = args.labels or args.traces
    if len(labels) != len(args.traces):
        sys.exit("compare_nodes: --labels needs one label per trace")
    pick = min if args.min else statistics.median
    tables = [{k: pick(v) for k, v in device_times(p, args.copies).items()} for p in args.traces]
    names = list(tables[0])
    for t in tables[1:]:
        names += [k for k in t if k not in tables[0]]
    shown = sorted(names, key=lambda k: -tables[0].get(k, 0.0))[: args.top] if args.top > 0 else names
    stat = "min" if args.min else "median"
    head = " | ".join(f"{l} us" for l in labels)
    ratios = " | ".join(f"{l} / {labels[0]}" for l in labels[1:])
    print(f"| node ({stat} device time per run) | {head} |" + (f" {ratios} |" if ratios else ""))
    print("|---|" + "---:|" * (2 * len(labels) - 1))

    def cells(values):
        out = [f"{v:.1f}" if v is not None else "-" for v in values]
        base = values[0]
        for v in values[1:]:
            out.append(f"{v / base:.2f}x" if base and v is not None else "-")
        return " | ".join(out)

    for k in shown:
        print(f"| {k} | {cells([t.get(k) for t in tables])} |")
    print(f"| **all nodes** | {cells([sum(t.values()) for t in tables])} |")


if __name__ == "__main__":
    main()
