#!/usr/bin/python3
"""Runs the real models with the `ingot` CLI and compares every output with ONNX Runtime's
(tests/models/reference/, made by make_references.js).

Usage: /usr/bin/python3 tests/models/run_model_tests.py --ingot PATH/TO/ingot
           [--models DIR] [--model NAME ...] [--work DIR] [--atol 1e-4] [--rtol 1e-3]
           [--device cpu|cuda] [--precision fp32|fp16|bf16] [--inputs DIR] [--no-fallbacks]

--inputs uses inputs already made by make_inputs.py (on a machine without its dependencies, such
as the GPU machine); --no-fallbacks fails a model whose run reports a CPU fallback. --precision is passed to `ingot run`
(reduced precision needs looser --atol/--rtol: see docs/MODELS.md, "Float16 / bfloat16").

--models defaults to $INGOT_MODEL_CACHE, else ~/.cache/ingot/models (what scripts/fetch-models.sh
fills); the model files are found by name anywhere below it. An element passes when
|ingot - reference| <= atol + rtol * |reference|. Exit status: 0 all passed, 1 a mismatch or an
ingot failure, 77 the model cache is missing (ctest's SKIP_RETURN_CODE), 2 bad usage.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def find_file(root, name):
    for directory, _, files in sorted(os.walk(root)):
        if name in files:
            return os.path.join(directory, name)
    return None


def compare(name, actual, expected, atol, rtol):
    """Prints one line for an output; returns True when it matches."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        print(f"  FAIL {name}: got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}")
        return False
    a = actual.astype(np.float64)
    b = expected.astype(np.float64)
    if a.size == 0:
        print(f"  ok   {name}: empty {list(actual.shape)}")
        return True
    if not np.all(np.isfinite(a) == np.isfinite(b)):
        print(f"  FAIL {name}: {int(np.sum(~np.isfinite(a)))} non-finite values (reference has "
              f"{int(np.sum(~np.isfinite(b)))})")
        return False
    finite = np.isfinite(b)
    diff = np.abs(a[finite] - b[finite])
    scale = np.abs(b[finite])
    max_abs = float(diff.max()) if diff.size else 0.0
    # Relative error only where the reference is not ~0 (there it is meaningless; atol governs).
    significant = scale > atol
    max_rel = float((diff[significant] / scale[significant]).max()) if significant.any() else 0.0
    # Worst ratio of error to allowed error: <= 1 passes.
    ratio = float((diff / (atol + rtol * scale)).max()) if diff.size else 0.0
    bad = int(np.sum(diff > atol + rtol * scale))
    status = "ok  " if bad == 0 else "FAIL"
    detail = f", {bad} of {diff.size} elements out of tolerance" if bad else ""
    print(f"  {status} {name}: {expected.dtype}{list(expected.shape)} max abs err {max_abs:.3e}, max rel err "
          f"{max_rel:.3e}, worst err/tolerance {ratio:.3f}{detail}")
    return bad == 0


def run_ingot(ingot, model_path, feeds, out_dir, device="cpu", no_fallbacks=False, precision="fp32"):
    """Runs `ingot run` with feeds {input name: .npy path}; returns the outputs in graph order."""
    os.makedirs(out_dir, exist_ok=True)
    # --repeat 3: the outputs checked come from the third run (static memory plan; on a GPU a replayed
    # CUDA graph), after two runs on other inputs.
    command = [ingot, "run", model_path, "--output-dir", out_dir, "--device", device, "--repeat", "3"]
    if precision != "fp32":
        command += ["--precision", precision]
    for name, path in feeds.items():
        command += ["--input", f"{name}={path}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise RuntimeError(f"ingot run exited with {result.returncode}: {message[-1] if message else ''}\n"
                           f"    command: {' '.join(command)}")
    fallback_lines = [line for line in result.stderr.splitlines() if "run on the CPU instead of" in line]
    if fallback_lines:
        print(f"  {fallback_lines[0]}")
        if no_fallbacks:
            raise RuntimeError("CPU fallbacks (--no-fallbacks)")
    outputs = []
    while os.path.exists(os.path.join(out_dir, f"output_{len(outputs)}.npy")):
        outputs.append(np.load(os.path.join(out_dir, f"output_{len(outputs)}.npy")))
    return outputs


def check_model(model, args, input_dir, work_dir):
    model_path = find_file(args.models, model["file"])
    if model_path is None:
        print(f"FAIL {model['name']}: {model['file']} not found under {args.models} (run scripts/fetch-models.sh)")
        return False
    steps = model.get("steps")
    carry = model.get("carry", {})
    with open(os.path.join(HERE, "reference", model["name"], "outputs.json")) as f:
        reference_names = json.load(f)["outputs"]
    ok = True
    previous_dir = None
    for step in range(steps or 1):
        label = f"{model['name']} step {step}" if steps else model["name"]
        out_dir = os.path.join(work_dir, model["name"], f"step{step}" if steps else "")
        ref_dir = os.path.join(HERE, "reference", model["name"], f"step{step}" if steps else "")
        feeds = {}
        for name, file in model["inputs"].items():
            feeds[name] = os.path.join(input_dir, file.replace("{k}", str(step)))
        if previous_dir is not None:
            # A carried input (Silero's LSTM state) comes from Ingot's own previous output, so an
            # error compounds across steps exactly as in real use.
            for input_name, output_name in carry.items():
                feeds[input_name] = os.path.join(previous_dir, f"output_{reference_names.index(output_name)}.npy")
        try:
            outputs = run_ingot(args.ingot, model_path, feeds, out_dir, args.device, args.no_fallbacks, args.precision)
        except RuntimeError as e:
            print(f"FAIL {label}: {e}")
            return False
        print(f"{label}: {os.path.relpath(model_path, args.models)}")
        if len(outputs) != len(reference_names):
            print(f"  FAIL got {len(outputs)} outputs, expected {len(reference_names)}")
            return False
        for i, actual in enumerate(outputs):
            expected = np.load(os.path.join(ref_dir, f"output_{i}.npy"))
            ok = compare(f"output_{i} ({reference_names[i]})", actual, expected, args.atol, args.rtol) and ok
        previous_dir = out_dir
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ingot", required=True, help="path to the ingot CLI")
    parser.add_argument("--models", default=os.environ.get("INGOT_MODEL_CACHE",
                                                           os.path.expanduser("~/.cache/ingot/models")))
    parser.add_argument("--model", action="append", help="check only this model (repeatable)")
    parser.add_argument("--work", help="keep inputs and outputs here (default: a temporary directory)")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--inputs", help="inputs made earlier by make_inputs.py")
    parser.add_argument("--no-fallbacks", action="store_true")
    args = parser.parse_args()

    with open(os.path.join(HERE, "models.json")) as f:
        models = json.load(f)["models"]
    known = [m["name"] for m in models]
    for name in args.model or []:
        if name not in known:
            parser.error(f"unknown model {name}; known: {', '.join(known)}")
    if not os.path.isdir(args.models):
        print(f"SKIP: model cache {args.models} missing (run scripts/fetch-models.sh)")
        return SKIP
    if not os.access(args.ingot, os.X_OK):
        parser.error(f"{args.ingot} is not an executable")

    with tempfile.TemporaryDirectory(prefix="ingot-model-tests-") as temp:
        work = args.work or temp
        input_dir = args.inputs or os.path.join(work, "inputs")
        if not args.inputs:
            subprocess.run([sys.executable, os.path.join(HERE, "make_inputs.py"), input_dir], check=True)
        failed = []
        for model in models:
            if args.model and model["name"] not in args.model:
                continue
            if not check_model(model, args, input_dir, os.path.join(work, "outputs")):
                failed.append(model["name"])
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print("all real-model outputs match ONNX Runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
