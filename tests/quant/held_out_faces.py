#!/usr/bin/python3
"""Held-out study of BlazeFace int8 packages (not a ctest: a measurement for docs/QUANTIZATION.md).

For each test photo of tests/quant/accuracy_test.py, calibrates without that photo's three samples
(make_calibration.py's photo, mirror image and centre crop), so the photo is one the quantizer has
not seen, and compares the faces ingot-facedetect finds with the int8 package against the float32
one (accuracy_test.py's criterion), with and without bias correction.

Usage: /usr/bin/python3 tests/quant/held_out_faces.py --ingot build/tools/ingot/ingot
           --facedetect build/apps/ingot-facedetect [--model front|back] [--models DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import accuracy_test as at  # noqa: E402
import make_calibration as mc  # noqa: E402
import make_inputs as mi  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ingot", required=True)
    p.add_argument("--facedetect", required=True)
    p.add_argument("--model", choices=["front", "back"], default="back")
    p.add_argument("--models", default=os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models")))
    args = p.parse_args()
    size = 256 if args.model == "back" else 128
    model = at.find_file(args.models, f"face_detection_{args.model}_{size}x{size}_barracuda.onnx")
    if model is None:
        sys.exit("BlazeFace is not in the model cache (scripts/fetch-models.sh)")
    work = tempfile.mkdtemp(prefix="ingot-held-out-")
    at.run([sys.executable, os.path.join(HERE, "make_calibration.py"), os.path.join(work, "calib")])
    calib = os.path.join(work, "calib", f"blazeface{size}")
    photos = [name for name in mc.PHOTOS if os.path.exists(os.path.join(mi.SKIMAGE_DATA, name))]
    fp32 = os.path.join(work, "fp32.ingot")
    at.run([args.ingot, "convert", model, "-o", fp32, "-q"])
    passed = {"bias correction": 0, "--no-bias-correction": 0}
    for photo in at.PHOTOS:
        held = os.path.join(work, "held")
        shutil.rmtree(held, ignore_errors=True)
        os.makedirs(held)
        index = photos.index(photo)
        for f in sorted(os.listdir(calib)):
            if int(f.split(".")[0]) // 3 != index:  # make_calibration.py: three samples per photo, in order
                shutil.copy(os.path.join(calib, f), held)
        for variant in passed:
            int8 = os.path.join(work, "int8.ingot")
            extra = [variant] if variant.startswith("--") else []
            at.run([args.ingot, "convert", model, "-o", int8, "-q", "--precision", "int8", "--calib", held] + extra)
            print(f"{variant:>22}:", end="")
            passed[variant] += at.match_faces(f"{photo} (held out)", at.faces(args, fp32, photo), at.faces(args, int8, photo))
    for variant, n in passed.items():
        print(f"{variant}: {n} of {len(at.PHOTOS)} held-out photos the same")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
