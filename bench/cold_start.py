#!/usr/bin/python3
"""Cold start (CPU, or --device cuda): wall time from process start to first output of `ingot run`, for each real
model from its .onnx file and from the .ingot package `ingot convert` makes of it.

Usage: /usr/bin/python3 bench/cold_start.py --ingot build/tools/ingot/ingot [--reps 7] [--threads 2]
                                            [--cache DIR] [--markdown] [--json FILE]
                                            [--spec MODELS.json --inputs DIR]

--spec takes another model list in tests/models/models.json's format, e.g. the one
bench/torch_models.py export writes beside its ONNX files and inputs (then --cache and --inputs
are that directory); an entry's optional "convert_args" are passed to `ingot convert`. A model
whose conversion or run fails is reported (its error in the JSON) and the others still run.

Each model is converted once (timed too), then every variant runs `--reps` times after one untimed
run that warms the page cache: the numbers are a fresh process with the files in the OS cache (the
usual case for an app launch), median of the repetitions: the time from process start to its first
output (the first byte `ingot run` writes, once the outputs are computed) and the process wall time
(start to exit). Inputs are the real-model test inputs
(tests/models/make_inputs.py; Silero VAD: its first step).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def find(cache, file):
    for dirpath, _, files in os.walk(cache):
        if file in files:
            return os.path.join(dirpath, file)
    return None


def launch(cmd, env=None):
    """One fresh process: (ms from its start to its first output on stdout, ms to its exit).

    `ingot run` prints its outputs' summary once they are computed and flushes it then, so the first
    byte on the pipe is the first output; what follows it is printing and process exit."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = p.stdout.read(1)
    first_ms = (time.perf_counter() - start) * 1000
    _, err = p.communicate()
    wall_ms = (time.perf_counter() - start) * 1000
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd, stderr=err)
    return (first_ms if first else wall_ms), wall_ms


def timed(cmd, reps, env=None):
    """Median and minimum over `reps` fresh processes (after one untimed run that warms the page cache)
    of the time to first output, and the median process wall time."""
    launch(cmd, env)
    firsts, walls = [], []
    for _ in range(reps):
        first, wall = launch(cmd, env)
        firsts.append(first)
        walls.append(wall)
    return statistics.median(firsts), min(firsts), statistics.median(walls)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--cache", default=os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models")))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the package is converted for it)")
    ap.add_argument("--inputs", help="inputs made earlier by tests/models/make_inputs.py (GPU machine), or the "
                                     "directory of --spec's input files")
    ap.add_argument("--spec", default=os.path.join(ROOT, "tests/models/models.json"),
                    help="model list (tests/models/models.json's format; default: the real models)")
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--precision", help="convert the packages with --precision (fp16, bf16; default fp32)")
    ap.add_argument("--only-packages", action="store_true", help="time the .ingot packages only, not the .onnx files")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set for the conversions and every run (repeatable)")
    ap.add_argument("--keep", metavar="DIR", help="write the packages here (kept for `ingot profile --cold`)")
    ap.add_argument("--also-env", action="append", default=[], metavar="NAME=VALUE",
                    help="time each package again with this environment variable set (an A/B in the same call; "
                         "repeatable, each one a variant of its own; NAME=VALUE,NAME=VALUE sets several)")
    args = ap.parse_args()
    spec = json.load(open(args.spec))["models"]
    base_env = dict(os.environ, **dict(a.partition("=")[::2] for a in args.env))
    rows, errors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        input_dir = args.inputs or tmp
        if not args.inputs:
            subprocess.run([sys.executable, os.path.join(ROOT, "tests/models/make_inputs.py"), tmp], check=True,
                           stdout=subprocess.DEVNULL)
        for m in spec:
            onnx = find(args.cache, m["file"])
            if not onnx:
                print(f"skip {m['name']}: {m['file']} not in {args.cache}", file=sys.stderr)
                continue
            suffix = f".{args.precision}.ingot" if args.precision else ".ingot"
            pkg = os.path.join(args.keep or tmp, m["name"] + suffix)
            try:
                start = time.perf_counter()
                precision = ["--precision", args.precision] if args.precision else []
                subprocess.run([args.ingot, "convert", onnx, "-o", pkg, "--quiet", "--device", args.device]
                               + m.get("convert_args", []) + precision, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=base_env)
                convert_ms = (time.perf_counter() - start) * 1000
                inputs = []
                for name, file in m["inputs"].items():
                    inputs += ["--input", f"{name}={os.path.join(input_dir, file.replace('{k}', '0'))}"]
                row = {"model": m["name"], "onnx_mb": os.path.getsize(onnx) / 1e6,
                       "ingot_mb": os.path.getsize(pkg) / 1e6, "convert_ms": convert_ms}
                if args.precision:
                    row["model"] += " " + args.precision
                variants = [("ingot", pkg, base_env)]
                if not args.only_packages:
                    variants.insert(0, ("onnx", onnx, base_env))
                for assignment in args.also_env:  # NAME=VALUE[,NAME=VALUE...]
                    extra = dict(a.partition("=")[::2] for a in assignment.split(","))
                    variants.append((f"ingot {assignment}", pkg, dict(base_env, **extra)))
                for kind, path, env in variants:
                    precision = ["--precision", args.precision] if args.precision and kind == "onnx" else []
                    cmd = [args.ingot, "run", path, "--threads", str(args.threads), "--device", args.device] + inputs
                    row[kind + "_ms"], row[kind + "_min_ms"], row[kind + "_wall_ms"] = timed(cmd + precision, args.reps,
                                                                                            env)
            except subprocess.CalledProcessError as e:
                tail = (e.stderr or b"").decode(errors="replace").strip().splitlines()[-3:]
                errors.append({"model": m["name"], "command": " ".join(e.cmd), "error": " | ".join(tail)})
                print(f"{m['name']}: failed: {errors[-1]}", file=sys.stderr)
                continue
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
        baseline, _, _ = timed([args.ingot, "ops"], args.reps, base_env)
    result = {"rows": rows, "errors": errors, "process_baseline_ms": baseline, "reps": args.reps,
              "threads": args.threads, "device": args.device}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.markdown:
        # First output: median [minimum]; wall: the process's median start-to-exit time.
        kinds = [k[:-len("_wall_ms")] for k in (rows[0] if rows else {}) if k.endswith("_wall_ms")]
        print("| model | .onnx MB | .ingot MB | convert ms | " +
              " | ".join(f"{k} first output ms | {k} wall ms" for k in kinds) + " |")
        print("|---|---:|---:|---:|" + "---:|---:|" * len(kinds))
        for r in rows:
            cells = " | ".join(f"{r[k + '_ms']:.1f} [{r[k + '_min_ms']:.1f}] | {r[k + '_wall_ms']:.1f}" for k in kinds)
            print(f"| {r['model']} | {r['onnx_mb']:.1f} | {r['ingot_mb']:.1f} | {r['convert_ms']:.0f} | {cells} |")
        print(f"\n`ingot ops` (process start, library loading, exit; no model): {baseline:.1f} ms")
        for e in errors:
            print(f"\n{e['model']}: failed: `{e['command']}`: {e['error']}")
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
