"""Checks a screenshot of the profiler's HTML report: the timeline canvas (found by its background
color) must contain boxes in the op palette. Usage: check_screenshot.py SHOT.png"""
import sys

import numpy as np
from PIL import Image

CANVAS_BG = (0x1E, 0x1E, 0x2E)  # src/profiler/html_report.cpp: the canvas background
PALETTE = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
           "#f032e6", "#bfef45", "#ffe119", "#469990", "#9a6324", "#800000"]  # kPalette there
MIN_OP_PIXELS = 2000  # five Conv runs fill most of one 1100 px wide, 20 px high row

img = np.asarray(Image.open(sys.argv[1]).convert("RGB")).astype(int)
bg = np.all(img == CANVAS_BG, axis=2)
if bg.sum() < 10000:
    sys.exit(f"FAIL: no timeline canvas in the screenshot ({bg.sum()} background pixels)")
rows, cols = np.nonzero(bg)
area = img[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
op = np.zeros(area.shape[:2], bool)
for c in PALETTE:
    rgb = np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)])
    op |= np.all(np.abs(area - rgb) <= 3, axis=2)
print(f"canvas {area.shape[1]}x{area.shape[0]} px, {op.sum()} op-colored pixels")
if op.sum() < MIN_OP_PIXELS:
    sys.exit(f"FAIL: the timeline shows {op.sum()} op-colored pixels, expected at least {MIN_OP_PIXELS}")
print("PASS")
