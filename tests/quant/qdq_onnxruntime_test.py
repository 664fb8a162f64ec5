#!/usr/bin/python3
"""QDQ models written by `ingot quantize`, run by Ingot (its Q/DQ folded into integer kernels) and by
onnxruntime-node on the same input: the outputs must agree (cosine similarity >= 0.99 per output).
The two runtimes round requantizations independently, so a one-step difference may propagate; a
wrong kernel or a misread Q/DQ parameter shows as a far lower similarity.

On an x86 CPU without a VNNI dot product (AVX2 only), onnxruntime's u8 x s8 kernels add pairs of
products into int16 with saturation (its documentation advises 7-bit weights, `reduce_range`, there),
so a u8 model would be compared with results off by many steps: there onnxruntime runs with its graph
optimizations disabled, every DequantizeLinear, float convolution and QuantizeLinear on its own (the
float reading of the same QDQ model), and Ingot's integer kernels are compared with that.

Usage: /usr/bin/python3 tests/quant/qdq_onnxruntime_test.py --ingot build/tools/ingot/ingot [--models DIR]
Exit: 0 pass, 1 mismatch, 77 when the model cache, node or onnxruntime-node is missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    # (name, model file, calibration set, input shape, extra quantize options, the sample run: its index
    # in the set's sorted files)
    ("blazeface_front u8 per-channel", "face_detection_front_128x128_barracuda.onnx", "blazeface128", None, [], 0),
    ("blazeface_front s8 symmetric per-tensor", "face_detection_front_128x128_barracuda.onnx", "blazeface128", None,
     ["--symmetric", "--per-tensor"], 0),
    # The page (make_calibration.py puts it second to last): on a photo without text the probability
    # map is all below 0.001, where a cosine measures nothing but noise.
    ("ppocr_det u8 per-channel percentile", "ch_PP-OCRv4_det_infer.onnx", "ppocr_det", "x=1,3,192,384",
     ["--calib-method", "percentile"], -2),
    ("ppocr_rec dynamic (DynamicQuantizeLinear)", "ch_PP-OCRv4_rec_infer.onnx", "ppocr_rec", "x=1,3,48,320",
     ["--dynamic"], 0),
]


def find_file(root, name):
    for dirpath, _, files in os.walk(root):
        if name in files:
            return os.path.join(dirpath, name)
    return None


def cpu_has_vnni():
    """Whether this x86 CPU has an 8-bit dot product (AVX-512 VNNI, AVX-VNNI or AMX); True elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), None)
    except OSError:
        return True
    if flags is None or "avx2" not in flags:
        return True
    return any(f in flags for f in ("avx512_vnni", "avx_vnni", "amx_int8"))


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr[-4000:]}")
    return r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ingot", required=True)
    p.add_argument("--models", default=os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models")))
    args = p.parse_args()
    ort = os.path.join(args.models, "node_modules", "onnxruntime-node", "package.json")
    if not os.path.isdir(args.models) or not shutil.which("node") or not os.path.exists(ort):
        print("skipped: model cache, node or onnxruntime-node (scripts/fetch-models.sh) missing")
        return 77
    work = tempfile.mkdtemp(prefix="ingot-qdq-")
    calib = os.path.join(work, "calib")
    run([sys.executable, os.path.join(HERE, "make_calibration.py"), calib])
    env = dict(os.environ, NODE_PATH=os.path.join(args.models, "node_modules"))
    if not cpu_has_vnni():
        env["ORT_GRAPH_OPTIMIZATION"] = "disabled"
        print("note: this CPU has no VNNI dot product: onnxruntime runs the QDQ models' nodes one by one (its int8 "
              "kernels would saturate)")
    ok = True
    for name, file, calib_set, shape, extra, sample in CASES:
        model = find_file(args.models, file)
        if not model:
            print(f"{name}: {file} missing: skipped")
            continue
        qdq = os.path.join(work, "model.qdq.onnx")
        cmd = [args.ingot, "quantize", model, "-o", qdq, "--calib", os.path.join(calib, calib_set), "-q"] + extra
        if shape:
            cmd += ["--input-shape", shape]
        run(cmd)
        x = os.path.join(calib, calib_set, sorted(os.listdir(os.path.join(calib, calib_set)))[sample])
        for d in ("ort", "ingot"):
            shutil.rmtree(os.path.join(work, d), ignore_errors=True)
        run(["node", os.path.join(HERE, "onnxruntime_qdq.js"), qdq, x, os.path.join(work, "ort")], env)
        run([args.ingot, "run", qdq, "-i", x, "-o", os.path.join(work, "ingot")])
        k = 0
        while os.path.exists(os.path.join(work, "ort", f"output_{k}.npy")):
            a = np.load(os.path.join(work, "ort", f"output_{k}.npy")).astype(np.float64).ravel()
            b = np.load(os.path.join(work, "ingot", f"output_{k}.npy")).astype(np.float64).ravel()
            denom = np.linalg.norm(a) * np.linalg.norm(b)
            cos = float(a @ b / denom) if denom > 0 else float(np.array_equal(a, b))
            good = cos >= 0.99
            ok &= good
            print(f"{'ok  ' if good else 'FAIL'} {name}: output {k}: cosine {cos:.5f}, max |diff| {np.abs(a - b).max():.4g}")
            k += 1
        if k == 0:
            print(f"FAIL {name}: onnxruntime wrote no outputs")
            ok = False
    shutil.rmtree(work, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
