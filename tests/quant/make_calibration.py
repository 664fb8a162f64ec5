#!/usr/bin/python3
"""Builds calibration sets for int8 quantization of the real models, as .npy files, from
Debian-packaged photos (python3-skimage), with the real-model tests' preprocessing
(tests/models/make_inputs.py).

Usage: /usr/bin/python3 tests/quant/make_calibration.py OUTPUT_DIR

Folders written (one sample per file):
  blazeface128/  float32 [1,128,128,3]  photos, their mirror images and centre crops, NHWC in [-1,1]
  blazeface256/  float32 [1,256,256,3]  the same at 256x256
  ppocr_det/     float32 [1,3,192,384]  page.png and text-free photos, PaddleOCR's det normalization
  ppocr_rec/     float32 [1,3,48,320]   the printed lines of page.png, (x/255-0.5)/0.5

The test photo of each model (astronaut for BlazeFace, page for PP-OCR) is part of its set, as in
calibrating on the deployment's own data; the other photos widen the ranges.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import make_inputs as mi  # noqa: E402

PHOTOS = ["astronaut.png", "coffee.png", "chelsea.png", "motorcycle_left.png", "rocket.jpg", "camera.png",
          "immunohistochemistry.png" if os.path.exists(os.path.join(mi.SKIMAGE_DATA, "immunohistochemistry.png"))
          else "ihc.png", "retina.jpg", "hubble_deep_field.jpg", "coins.png"]
# Rows of page.png's printed lines (top, bottom) and the columns they span.
PAGE_LINES = [(6, 42, 0, 240), (46, 66, 0, 384), (64, 84, 0, 384), (82, 102, 0, 384), (100, 120, 0, 384),
              (116, 138, 0, 384), (160, 191, 0, 384)]


def photos():
    out = []
    for name in PHOTOS:
        path = os.path.join(mi.SKIMAGE_DATA, name)
        if os.path.exists(path):
            out.append(mi.gray_to_rgb(mi.read_png(name)))
    return out


def variants(photo):
    h, w = photo.shape[:2]
    s = min(h, w)
    square = photo[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    return [photo, photo[:, ::-1], square]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_calibration.py OUTPUT_DIR")
    out = sys.argv[1]
    sets = {"blazeface128": [], "blazeface256": [], "ppocr_det": [], "ppocr_rec": []}
    for photo in photos():
        for v in variants(photo):
            sets["blazeface128"].append(mi.blazeface_input(v, 128))
            sets["blazeface256"].append(mi.blazeface_input(v, 256))
        sets["ppocr_det"].append(mi.det_input(photo))
    page = mi.read_png("page.png")
    sets["ppocr_det"] += [mi.det_input(page), mi.det_input(page[:, ::-1])]
    for top, bottom, left, right in PAGE_LINES:
        crop = page[top:bottom, left:right]
        image = mi.resize_bilinear(mi.gray_to_rgb(crop), 48, 320) / 255.0
        sets["ppocr_rec"].append(mi.to_nchw((image - 0.5) / 0.5))
    for name, arrays in sets.items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        for i, a in enumerate(arrays):
            np.save(os.path.join(folder, f"{i:03d}.npy"), np.ascontiguousarray(a, dtype=np.float32))


if __name__ == "__main__":
    main()
