#!/usr/bin/python3
"""Markdown tables from what bench/compare_torch.sh leaves in its output directories (no torch needed).

Usage:
  python3 bench/compare_report.py OUTDIR [OUTDIR ...] > compare.md
      Several directories are merged (e.g. one call with SKIP=torch and one with SKIP="ingot cold");
      where two hold the same measurement, the later directory wins.
  python3 bench/compare_report.py --check-outputs WORK [--device cuda] > OUTDIR/ingot/output-errors.json
      Ingot's batch-1 outputs WORK/outputs/<model>.<prec>/output_0.npy against torch's float32 CPU
      output WORK/models/<model>.b1.output.npy (compare_torch.sh runs this after its Ingot step).

An OUTDIR holds torch*.json (bench/torch_models.py bench), ingot/<model>.b<N>.<prec>.<onnx|ingot>.json
(`ingot bench --json`), ingot/<...>.convert.json, ingot/*.err (failed Ingot steps),
ingot/output-errors.json, cold-*.json (bench/cold_start.py --json) and models.json. Missing pieces
show as "-"; failures as error[k], with the messages listed at the end.
"""
import argparse
import glob
import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = [("eager", "torch eager"), ("compile", "torch.compile"), ("reduce-overhead", "torch.compile reduce-overhead")]
PRECISIONS = ["fp32", "fp16"]
INGOT_FILE = re.compile(r"^(.+)\.b(\d+)\.(fp32|fp16)\.(onnx|ingot)\.json$")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def check_outputs(work, device):
    import numpy as np

    rows = []
    for ref_path in sorted(glob.glob(os.path.join(work, "models", "*.b1.output.npy"))):
        model = os.path.basename(ref_path)[: -len(".b1.output.npy")]
        ref = np.load(ref_path).astype(np.float64)
        for p in PRECISIONS:
            got_path = os.path.join(work, "outputs", f"{model}.{p}", "output_0.npy")
            if not os.path.exists(got_path):
                continue
            got = np.load(got_path).astype(np.float64)
            row = {"model": model, "precision": p, "device": device, "shape": list(got.shape)}
            if got.shape != ref.shape:
                row["error"] = f"shape {list(got.shape)}, torch {list(ref.shape)}"
            else:
                err = float(np.abs(got - ref).max())
                row.update(max_abs_error=err, ref_max_abs=float(np.abs(ref).max()), finite=bool(np.isfinite(got).all()))
            rows.append(row)
    print(json.dumps(rows, indent=1))


class Results:
    """Everything in the output directories, later directories overriding earlier ones."""

    def __init__(self, dirs):
        self.dirs = dirs
        self.torch, self.models, self.batches, self.notes, self.precisions = {}, [], set(), [], set()
        for d in dirs:
            for path in sorted(glob.glob(os.path.join(d, "torch*.json"))):
                for r in load(path) or []:
                    self.torch[(r["model"], r["batch"], r["precision"], r["variant"])] = r
                    self.add(r["model"], r["batch"], r["precision"] if r["variant"] != "host_io" else None)
            for path in glob.glob(os.path.join(d, "ingot", "*.json")):
                if match := INGOT_FILE.match(os.path.basename(path)):
                    self.add(match[1], int(match[2]), match[3])
        self.meta = next((r for r in self.torch.values() if r.get("torch")), {})
        self.spec = {}
        for d in dirs:
            for m in (load(os.path.join(d, "models.json")) or {"models": []})["models"]:
                self.spec[m["name"]] = m
        self.models.sort(key=lambda m: list(self.spec).index(m) if m in self.spec else len(self.spec))

    def add(self, model, batch, precision):
        if model not in self.models:
            self.models.append(model)
        self.batches.add(batch)
        if precision:
            self.precisions.add(precision)

    def note(self, text):
        self.notes.append(text)
        return f"error[{len(self.notes)}]"

    def ingot_file(self, name):
        """The last directory's ingot/NAME, or None."""
        hits = [os.path.join(d, "ingot", name) for d in self.dirs if os.path.exists(os.path.join(d, "ingot", name))]
        return hits[-1] if hits else None

    def ingot(self, stem):
        """(cell, median_ms) for ingot/STEM.json, or its .err: the directory that has either last wins."""
        for d in reversed(self.dirs):
            err, res = os.path.join(d, "ingot", stem + ".err"), os.path.join(d, "ingot", stem + ".json")
            if os.path.exists(err):
                return self.note(f"ingot {stem}: " + open(err).read().strip().replace("\n", " | ")[:400]), None
            r = load(res)
            if r is not None:
                return fmt(r.get("median_ms", r.get("convert_ms"))), r.get("median_ms", r.get("convert_ms"))
        return "-", None

    def ingot_json(self, stem):
        """ingot/STEM.json of the last directory that has it (no .err check)."""
        path = self.ingot_file(stem + ".json")
        return load(path) if path else None

    def torch_cell(self, key):
        r = self.torch.get(key)
        if r is None:
            return "-", None
        if r.get("error"):
            return self.note(f"torch {' '.join(map(str, key))}: {r['error']}"), None
        return fmt(r["median_ms"]), r["median_ms"]


def report(dirs):
    res = Results(dirs)
    meta = res.meta
    # The binary's commit where the GPU bundle recorded it (the device machine's copy of the tree
    # may carry an older .git), else this checkout's.
    commit = os.environ.get("INGOT_BUILD_COMMIT") or subprocess.run(
        ["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    batches = sorted(res.batches)
    precisions = [p for p in PRECISIONS if p in res.precisions]
    print("## Ingot vs PyTorch on the GPU: steady-state latency\n")
    print(f"- torch {meta.get('torch', '?')} on {meta.get('gpu', '?')}; report made at Ingot "
          f"{commit or '?'}; models from bench/torch_models.py, random weights ("
          + ", ".join(f"{n}: {m.get('impl', '?')}, {m.get('params', 0) / 1e6:.1f} M parameters"
                      for n, m in res.spec.items()) + ")")
    print(f"- median ms of {meta.get('iterations', '?')} calls, each synchronized, after {meta.get('warmup', '?')} "
          "warm-up calls (`ingot bench`: the same counts), same inputs on both sides; TF32 off, "
          f"cudnn.benchmark on; torch's Whisper attention: {meta.get('attn', '?')}")
    print("- torch fp16: model.half() with float16 inputs and outputs. Ingot fp16: a package converted with "
          "`--precision fp16`; its inputs and outputs stay float32")
    print("- torch's input is already on the GPU. `Ingot .ingot`: `ingot bench --device-io` (input on the GPU, "
          "output left there, each run waited for), the comparison column; `Ingot .ingot, host I/O`: the same "
          "package through host tensors (every run also uploads the input and downloads the output through "
          "pinned staging). `host I/O`: what torch takes for the same float32 copies from and to pageable memory")
    print("- Ingot .onnx: the ONNX file, symbolic batch (fp32 only: `ingot bench` has no --precision). Ingot "
          ".ingot: a package per batch size and precision (`ingot convert --device cuda --precision P "
          "--input-shape input=<dims>`). `Ingot CUDA graph`: whether `ingot bench` of the package replayed a "
          "CUDA graph (`cuda_graph` in its JSON; - when the binary does not report it)\n")
    print("| model | batch | precision | " + " | ".join(v[1] for v in VARIANTS)
          + " | Ingot .onnx | Ingot .ingot | Ingot .ingot / reduce-overhead | Ingot .ingot, host I/O | host I/O "
          "| Ingot CUDA graph |")
    print("|---|---:|---|" + "---:|" * (len(VARIANTS) + 5) + "---|")
    for m in res.models:
        for b in batches:
            for p in precisions:
                cells = [res.torch_cell((m, b, p, v)) for v, _ in VARIANTS]
                onnx = res.ingot(f"{m}.b{b}.fp32.onnx") if p == "fp32" else ("n/a", None)
                pkg = res.ingot(f"{m}.b{b}.{p}.ingot")
                host = res.ingot(f"{m}.b{b}.{p}.ingot-host")
                ro = cells[-1][1]
                ratio = f"{pkg[1] / ro:.2f}x" if pkg[1] is not None and ro else "-"
                io = res.torch.get((m, b, "fp32", "host_io"))
                io_ms = fmt(io["median_ms"]) if io and io.get("median_ms") is not None else "-"
                graph = (res.ingot_json(f"{m}.b{b}.{p}.ingot") or {}).get("cuda_graph")
                graph = "-" if graph is None else "replayed" if graph else "no"
                print(f"| {m} | {b} | {p} | " + " | ".join(c[0] for c in cells)
                      + f" | {onnx[0]} | {pkg[0]} | {ratio} | {host[0]} | {io_ms} | {graph} |")

    print("\n### First call (s): torch compilation and Ingot's conversion\n")
    print("torch: wall time of the first call (for the compiled variants: compilation; reduce-overhead records its "
          "CUDA graph on a later, warm-up call). The second compiled variant of a case reuses Inductor's on-disk "
          "caches from the first, so its first call is cheaper than a cold compilation. Ingot: `ingot convert "
          "--device cuda` as a process, CUDA start-up included.\n")
    print("| model | batch | precision | " + " | ".join(v[1] for v in VARIANTS) + " | ingot convert |")
    print("|---|---:|---|" + "---:|" * (len(VARIANTS) + 1))
    for m in res.models:
        for b in batches:
            for p in precisions:
                firsts = []
                for v, _ in VARIANTS:
                    r = res.torch.get((m, b, p, v))
                    firsts.append("-" if r is None or r.get("error") else fmt(r.get("first_call_s"), 2))
                cell, conv = res.ingot(f"{m}.b{b}.{p}.convert")
                print(f"| {m} | {b} | {p} | " + " | ".join(firsts) + f" | {cell if conv is None else fmt(conv / 1000, 2)} |")

    checks = load(res.ingot_file("output-errors.json") or "") or []
    if checks:
        print(f"\n### Ingot's batch-1 output on {checks[0]['device']} (the packages) against torch's float32 CPU "
              "output\n")
        print("| model | precision | max abs error | max abs error / max abs reference |")
        print("|---|---|---:|---:|")
        for c in sorted(checks, key=lambda c: (res.models.index(c["model"]) if c["model"] in res.models else 99,
                                               PRECISIONS.index(c["precision"]))):
            if c.get("error"):
                print(f"| {c['model']} | {c['precision']} | {c['error']} | |")
            else:
                nonfinite = "" if c.get("finite", True) else " (non-finite values)"
                print(f"| {c['model']} | {c['precision']} | {c['max_abs_error']:.3g}{nonfinite} | "
                      f"{c['max_abs_error'] / max(c['ref_max_abs'], 1e-30):.3g} |")
    for m in res.models:
        for p in precisions:
            if res.ingot_file(f"{m}.b1.{p}.run.err"):
                res.ingot(f"{m}.b1.{p}.run")  # lists the failure under Errors

    cold = {}
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "cold-*.json"))):
            if (c := load(path)) is not None:
                cold[os.path.basename(path)[5:-5]] = c
    if cold:
        print("\n## Cold start: process start to first output\n")
        print("bench/cold_start.py: wall time of a fresh `ingot run MODEL --input ...` process (files in the page "
              "cache), median of the repetitions after one untimed run [minimum]; batch 1; the package is converted "
              "for that device (for the exported models: the batch-1 package, static shapes).\n")
        print("| model | device | .onnx MB | .ingot MB | convert ms | from .onnx ms | from .ingot ms | speed-up |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for name, c in cold.items():
            for r in c["rows"]:
                print(f"| {r['model']} | {c['device']} | {r['onnx_mb']:.1f} | {r['ingot_mb']:.1f} | "
                      f"{r['convert_ms']:.0f} | {r['onnx_ms']:.1f} [{r['onnx_min_ms']:.1f}] | "
                      f"{r['ingot_ms']:.1f} [{r['ingot_min_ms']:.1f}] | {r['onnx_ms'] / r['ingot_ms']:.2f}x |")
            for e in c.get("errors", []):
                cell = res.note(f"cold start {e['model']} on {c['device']}: `{e['command']}`: {e['error']}")
                print(f"| {e['model']} | {c['device']} | {cell} | | | | | |")
        print()
        for name, c in cold.items():
            print(f"- `ingot ops` ({name}: process start and exit, no model): {c['process_baseline_ms']:.1f} ms; "
                  f"{c['reps']} repetitions, --threads {c['threads']}")
    if res.notes:
        print("\n### Errors\n")
        for i, n in enumerate(res.notes, 1):
            print(f"{i}. {n}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdirs", nargs="*", metavar="OUTDIR")
    ap.add_argument("--check-outputs", metavar="WORK", help="compare Ingot's outputs in WORK with torch's")
    ap.add_argument("--device", default="cuda", help="with --check-outputs: the device the outputs came from")
    args = ap.parse_args()
    if args.check_outputs:
        check_outputs(args.check_outputs, args.device)
    elif args.outdirs:
        report(args.outdirs)
    else:
        ap.error("give OUTDIR(s) or --check-outputs WORK")


if __name__ == "__main__":
    main()
