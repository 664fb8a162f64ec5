#!/usr/bin/python3
"""CPU latency of the real models: Ingot (ingot-bench-latency, in process) next to ONNX Runtime
(onnxruntime-node, bench/ort_latency.js) on the same inputs with the same intra-op thread count.

Usage:
  NODE_PATH=/path/to/node_modules /usr/bin/python3 bench/cpu_latency.py \\
      --bench build/bench/ingot-bench-latency [--models DIR] [--threads 2] [--rounds 4] [--runs 10]
      [--warmup 3] [--write docs/PERFORMANCE.md]

Inputs are those of the real-model tests (tests/models/make_inputs.py; Silero: one 576-sample chunk
with a zero state). Each model is measured in alternating rounds (Ingot, ORT, Ingot, ORT, ...) so a
burst of load from other processes hits both; the table reports the median and the minimum over
all timed runs of each runtime (on a shared machine the minimum is the steadier of the two). With
--write, the results replace the section named by --section (between HTML-comment markers) of the
given markdown file, which is created if needed.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests", "models")
THREADING_ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "OPENBLAS_", "DNNL_", "ONEDNN_")


def find_file(root, name):
    for directory, _, files in sorted(os.walk(root)):
        if name in files:
            return os.path.join(directory, name)
    return None


def measure(command):
    """Runs one latency command; returns (parsed JSON, None) or (None, the error line)."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr.strip() or result.stdout.strip() or f"exit status {result.returncode}").splitlines()
        return None, lines[-1]
    return json.loads(result.stdout.strip().splitlines()[-1]), None


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def ort_version():
    result = subprocess.run(["node", "-e", "console.log(require('onnxruntime-node/package.json').version)"],
                            capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def git_revision():
    result = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else "uncommitted tree"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="path to ingot-bench-latency")
    parser.add_argument("--models", default=os.environ.get("INGOT_MODEL_CACHE",
                                                           os.path.expanduser("~/.cache/ingot/models")))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10, help="timed runs per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per round")
    parser.add_argument("--rounds", type=int, default=4, help="alternating Ingot/ORT rounds per model")
    parser.add_argument("--model", action="append", help="only this model (repeatable)")
    parser.add_argument("--write", help="markdown file whose section (see --section) is replaced")
    parser.add_argument("--section", default="cpu-latency",
                        help="name of the marked section to write, so several configurations can coexist")
    parser.add_argument("--title", default="CPU latency, real models (Ingot vs ONNX Runtime)")
    args = parser.parse_args()
    if "NODE_PATH" not in os.environ:
        print("note: NODE_PATH is unset; onnxruntime-node must be resolvable from bench/", file=sys.stderr)

    with open(os.path.join(TESTS, "models.json")) as f:
        models = [m for m in json.load(f)["models"] if not args.model or m["name"] in args.model]

    rows = []
    with tempfile.TemporaryDirectory(prefix="ingot-bench-") as inputs:
        subprocess.run([sys.executable, os.path.join(TESTS, "make_inputs.py"), inputs], check=True)
        for model in models:
            path = find_file(args.models, model["file"])
            if path is None:
                sys.exit(f"cpu_latency.py: {model['file']} not found under {args.models} (run scripts/fetch-models.sh)")
            feeds = []
            for name, file in model["inputs"].items():
                feeds += ["--input", f"{name}={os.path.join(inputs, file.replace('{k}', '0'))}"]
            common = [path, *feeds, "--threads", str(args.threads), "--warmup", str(args.warmup), "--runs",
                      str(args.runs)]
            commands = {"ingot": [args.bench, *common],
                        "ort": ["node", os.path.join(HERE, "ort_latency.js"), *common]}
            times = {"ingot": [], "ort": []}
            errors = {}
            for _ in range(args.rounds):
                for runtime, command in commands.items():
                    if runtime in errors:
                        continue
                    result, error = measure(command)
                    if error:
                        errors[runtime] = error
                    else:
                        times[runtime] += result["times_ms"]
            row = {"model": model["name"], "file": model["file"]}
            for runtime in commands:
                row[runtime] = median(times[runtime]) if runtime not in errors else None
                row[runtime + "_min"] = min(times[runtime]) if runtime not in errors else None
                row[runtime + "_error"] = errors.get(runtime)
            rows.append(row)
            ingot = (f"{row['ingot']:.2f} ms (min {row['ingot_min']:.2f})" if row["ingot"] is not None
                     else f"failed: {row['ingot_error']}")
            ort = (f"{row['ort']:.2f} ms (min {row['ort_min']:.2f})" if row["ort"] is not None
                   else f"failed: {row['ort_error']}")
            print(f"{model['name']}: ingot {ingot}, onnxruntime {ort}", flush=True)

    section = render(rows, args)
    print(section)
    if args.write:
        write_section(args.write, args.section, section)


def render(rows, args):
    load = os.getloadavg()
    threading_env = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(THREADING_ENV_PREFIXES)]
    command = " ".join(["NODE_PATH=<node_modules with onnxruntime-node>", *threading_env, "/usr/bin/python3",
                        "bench/cpu_latency.py", shlex.join(sys.argv[1:])])
    lines = [
        begin_marker(args.section),
        f"## {args.title}",
        "",
        f"- Date: {datetime.date.today().isoformat()}; Ingot {git_revision()}; onnxruntime-node {ort_version()}",
        f"- Machine: {cpu_name()}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}; "
        f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min)",
        f"- Intra-op threads: {args.threads} for both; ORT graph optimizations at their default (all), "
        f"sequential execution",
        f"- Threading environment: {' '.join(threading_env) if threading_env else 'none set (library defaults)'}",
        f"- {args.rounds} rounds x {args.runs} timed runs per runtime and model, each round a fresh process "
        f"that loads the model and does {args.warmup} warm-up runs; rounds alternate between the runtimes",
        f"- Command: `{command}`",
        "",
        "| model | input | Ingot median (ms) | ORT median (ms) | Ingot min (ms) | ORT min (ms) | Ingot / ORT (median) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    shapes = {
        "ppocr_det": "1x3x192x384",
        "ppocr_rec": "1x3x48x320",
        "ppocr_cls": "1x3x48x192",
        "blazeface_front128": "1x128x128x3",
        "blazeface_back256": "1x256x256x3",
        "silero_vad": "1x576 + state",
    }
    for row in rows:
        cells = []
        for key in ("ingot", "ort", "ingot_min", "ort_min"):
            runtime = key.split("_")[0]
            error = str(row[runtime + "_error"]).replace("|", "\\|")[:160]
            cells.append(f"{row[key]:.2f}" if row[key] is not None else f"fails: {error}")
        ratio = f"{row['ingot'] / row['ort']:.2f}x" if row["ingot"] is not None and row["ort"] else "-"
        lines.append(f"| {row['model']} | {shapes.get(row['model'], '')} | {' | '.join(cells)} | {ratio} |")
    lines.append(end_marker(args.section))
    return "\n".join(lines) + "\n"


def begin_marker(section):
    return f"<!-- {section}:begin (written by bench/cpu_latency.py) -->"


def end_marker(section):
    return f"<!-- {section}:end -->"


def write_section(path, name, section):
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    begin, end = begin_marker(name), end_marker(name)
    if begin in text and end in text:
        before = text[:text.index(begin)]
        after = text[text.index(end) + len(end):].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "# Performance\n\n") + section
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
