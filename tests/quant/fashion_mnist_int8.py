#!/usr/bin/python3
"""Test accuracy of the Fashion-MNIST CNN (trained by ingot-fashion-mnist and exported as ONNX) as a
float32 package and as an int8 one, on the 10,000 test images (Debian's dataset-fashion-mnist). The
int8 package is calibrated on the first 512 training images (one batch).

Usage: /usr/bin/python3 tests/quant/fashion_mnist_int8.py --ingot build/tools/ingot/ingot MODEL.onnx
           [--calib-method minmax] [--work DIR]
Prints both accuracies and the difference; exit 1 when int8 loses more than 0.5 points.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # the app's normalization (apps/fashion-mnist/main.cpp)


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def images(x):
    return ((x.astype(np.float32) / 255.0 - MEAN) / STD)[:, None]


def accuracy(ingot, package, x, labels, work):
    path = os.path.join(work, "test_x.npy")
    np.save(path, x)
    out = os.path.join(work, "out")
    subprocess.run([ingot, "run", package, "-i", path, "-o", out], check=True, capture_output=True)
    logits = np.load(os.path.join(out, "output_0.npy"))
    return float((logits.argmax(1) == labels).mean())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ingot", required=True)
    p.add_argument("model")
    p.add_argument("--calib-method", default="minmax")
    p.add_argument("--work")
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="ingot-fm-int8-")
    train = images(idx("train-images-idx3-ubyte.gz")[:512])
    calib = os.path.join(work, "calib.npy")
    np.save(calib, train)  # a batch on axis 0: 512 samples of [1,1,28,28]
    test_x, test_y = images(idx("t10k-images-idx3-ubyte.gz")), idx("t10k-labels-idx1-ubyte.gz")
    fp32, int8 = os.path.join(work, "fm.fp32.ingot"), os.path.join(work, "fm.int8.ingot")
    # The batch dim stays symbolic: one calibration run of 512 images, one test run of 10,000.
    subprocess.run([args.ingot, "convert", args.model, "-o", fp32, "-q"], check=True)
    subprocess.run([args.ingot, "convert", args.model, "-o", int8, "-q", "--precision", "int8", "--calib", calib,
                    "--calib-method", args.calib_method], check=True)
    a32 = accuracy(args.ingot, fp32, test_x, test_y, work)
    a8 = accuracy(args.ingot, int8, test_x, test_y, work)
    loss = (a32 - a8) * 100
    print(json.dumps({"float32": a32, "int8": a8, "points_lost": round(loss, 2),
                      "package_bytes": [os.path.getsize(fp32), os.path.getsize(int8)]}))
    return 0 if loss <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
