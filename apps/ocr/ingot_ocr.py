#!/usr/bin/python3
"""ingot-ocr in Python: reads the text in a photo with PP-OCRv4 (detection, orientation, recognition).

The same pipeline as apps/ocr/main.cpp, on Ingot's Python module, numpy and Pillow:

    PYTHONPATH=build/python /usr/bin/python3 apps/ocr/ingot_ocr.py IMAGE [--device cpu|cuda]
        [--package-dir DIR] [--model-dir DIR] [--output annotated.png] [--json FILE] [--threads N]

Models come from scripts/fetch-models.sh (the model cache); each is converted into a package on first
use and loaded from it afterwards (apps/common/package_cache.py, as apps/common/package_cache.h).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from package_cache import cached_session, ingot, model_cache, package_cache  # noqa: E402

DET_MODEL = "ch_PP-OCRv4_det_infer.onnx"
CLS_MODEL = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
REC_MODEL = "ch_PP-OCRv4_rec_infer.onnx"
KEYS = "ppocr_keys_v1.txt"

# PaddleOCR's defaults (tools/infer/utility.py).
DET_LIMIT_SIDE = 960
DET_THRESH, DET_BOX_THRESH, DET_UNCLIP, DET_MIN_SIZE = 0.3, 0.6, 1.5, 3
CLS_SHAPE, CLS_THRESH = (48, 192), 0.9
REC_HEIGHT, REC_MIN_WIDTH, REC_BATCH = 48, 320, 6
# On a GPU every run has one of a few shapes, measured when the packages are converted: the detector
# sees a 960x960 canvas, the classifier and recognizer batches of 6, recognizer widths in steps of 320.
GPU_DET_SIDE, GPU_REC_STEP, GPU_REC_STEPS = 960, 320, 8


# ---------------------------------------------------------------- geometry (DB post-processing)

def convex_hull(points):
    """Andrew's monotone chain; points (N, 2), returns the hull counter-clockwise."""
    pts = sorted(set(map(tuple, points)))
    if len(pts) <= 2:
        return np.array(pts, dtype=np.float64)

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1], dtype=np.float64)


def min_area_rect(points):
    """The smallest rectangle around points (rotating calipers over the hull): center, (w, h), angle."""
    hull = convex_hull(points)
    if len(hull) == 1:
        return hull[0], (0.0, 0.0), 0.0
    best = None
    for i in range(len(hull)):
        edge = hull[(i + 1) % len(hull)] - hull[i]
        length = math.hypot(*edge)
        if length == 0:
            continue
        u = edge / length
        v = np.array([-u[1], u[0]])
        pu, pv = hull @ u, hull @ v
        area = (pu.max() - pu.min()) * (pv.max() - pv.min())
        if best is None or area < best[0]:
            best = (area, u, v, pu.min(), pu.max(), pv.min(), pv.max())
    _, u, v, u0, u1, v0, v1 = best
    center = u * (u0 + u1) / 2 + v * (v0 + v1) / 2
    return center, (u1 - u0, v1 - v0), math.atan2(u[1], u[0])


def box_corners(center, size, angle):
    """The rectangle's corners ordered top-left, top-right, bottom-right, bottom-left (image axes)."""
    c, s = math.cos(angle), math.sin(angle)
    u, v = np.array([c, s]), np.array([-s, c])
    w, h = size
    pts = np.array([center + su * u * w / 2 + sv * v * h / 2 for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))])
    return order_corners(pts)


def order_corners(pts):
    """PaddleOCR's get_mini_boxes order: by x, then the left pair and the right pair by y."""
    pts = pts[np.argsort(pts[:, 0], kind="stable")]
    left, right = pts[:2], pts[2:]
    tl, bl = (left[0], left[1]) if left[0, 1] <= left[1, 1] else (left[1], left[0])
    tr, br = (right[0], right[1]) if right[0, 1] <= right[1, 1] else (right[1], right[0])
    return np.array([tl, tr, br, bl])


def db_boxes(prob, scale_x, scale_y, image_w, image_h):
    """Text boxes from DB's probability map: threshold, connected regions (8-neighbour), score (the
    mean probability over the region: PaddleOCR's "slow" score mode, which keeps slightly curved lines
    of a photographed page that the bounding rectangle's mean would drop), minimum-area rectangle,
    unclip (each side grown by area * ratio / perimeter), scaled to the image."""
    from scipy import ndimage

    labels, count = ndimage.label(prob > DET_THRESH, structure=np.ones((3, 3)))
    boxes = []
    for index, region in enumerate(ndimage.find_objects(labels), start=1):
        ys, xs = np.nonzero(labels[region] == index)
        if prob[region][labels[region] == index].mean() < DET_BOX_THRESH:
            continue
        pts = np.stack([xs + region[1].start, ys + region[0].start], axis=1)
        center, (w, h), angle = min_area_rect(pts)
        if min(w, h) < DET_MIN_SIZE:
            continue
        grow = w * h * DET_UNCLIP / (2 * (w + h))
        w, h = w + 2 * grow, h + 2 * grow
        if min(w, h) < DET_MIN_SIZE + 2:
            continue
        box = box_corners(center, (w, h), angle)
        box[:, 0] = np.clip(np.round(box[:, 0] * scale_x), 0, image_w)
        box[:, 1] = np.clip(np.round(box[:, 1] * scale_y), 0, image_h)
        boxes.append(box)
    return reading_order(boxes)


def reading_order(boxes):
    """Top to bottom, and left to right within a line (PaddleOCR's sorted_boxes)."""
    boxes = sorted(boxes, key=lambda b: (b[0, 1], b[0, 0]))
    for i in range(len(boxes) - 1):
        for j in range(i, -1, -1):
            if abs(boxes[j + 1][0, 1] - boxes[j][0, 1]) < 10 and boxes[j + 1][0, 0] < boxes[j][0, 0]:
                boxes[j], boxes[j + 1] = boxes[j + 1], boxes[j]
            else:
                break
    return boxes


# ---------------------------------------------------------------- images

def resize_bilinear(img, out_w, out_h):
    """img (H, W, C) float32 -> (out_h, out_w, C), half-pixel centers (OpenCV's INTER_LINEAR)."""
    h, w = img.shape[:2]
    ys = np.clip((np.arange(out_h) + 0.5) * h / out_h - 0.5, 0, h - 1)
    xs = np.clip((np.arange(out_w) + 0.5) * w / out_w - 0.5, 0, w - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = img[y0][:, x0] * (1 - fx) + img[y0][:, x1] * fx
    bottom = img[y1][:, x0] * (1 - fx) + img[y1][:, x1] * fx
    return (top * (1 - fy) + bottom * fy).astype(np.float32)


def crop_quad(img, box):
    """The quadrilateral's content as an upright rectangle (PaddleOCR's get_rotate_crop_image):
    bilinear sampling along its edges, replicated border; tall crops are turned 90 degrees."""
    w = int(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))
    h = int(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))
    w, h = max(w, 1), max(h, 1)
    u = (np.arange(w) + 0.5) / w
    v = (np.arange(h) + 0.5) / h
    top = box[0][None, :] + u[:, None] * (box[1] - box[0])[None, :]
    bottom = box[3][None, :] + u[:, None] * (box[2] - box[3])[None, :]
    pts = top[None, :, :] + v[:, None, None] * (bottom - top)[None, :, :] - 0.5  # (h, w, 2) pixel coords
    x = np.clip(pts[..., 0], 0, img.shape[1] - 1)
    y = np.clip(pts[..., 1], 0, img.shape[0] - 1)
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    x1, y1 = np.minimum(x0 + 1, img.shape[1] - 1), np.minimum(y0 + 1, img.shape[0] - 1)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    out = (img[y0, x0] * (1 - fx) + img[y0, x1] * fx) * (1 - fy) + (img[y1, x0] * (1 - fx) + img[y1, x1] * fx) * fy
    if h >= 1.5 * w:
        out = np.rot90(out)
    return out.astype(np.float32)


def det_input(bgr):
    """Resized so the longer side is at most 960 and both are multiples of 32, ImageNet-normalized."""
    h, w = bgr.shape[:2]
    ratio = min(1.0, DET_LIMIT_SIDE / max(h, w))
    rh, rw = max(32, int(round(h * ratio / 32)) * 32), max(32, int(round(w * ratio / 32)) * 32)
    x = resize_bilinear(bgr, rw, rh) / 255.0
    x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32), w / rw, h / rh


def line_input(crops, height, width, rows=None):
    """Crops resized to `height` keeping their aspect (at most `width`), in [-1, 1], right-padded with 0;
    `rows` (at least len(crops)) pads the batch with all-zero lines."""
    batch = np.zeros((max(rows or 0, len(crops)), 3, height, width), np.float32)
    for i, crop in enumerate(crops):
        h, w = crop.shape[:2]
        rw = min(width, max(1, int(math.ceil(height * w / h))))
        x = resize_bilinear(crop, rw, height) / 255.0
        batch[i, :, :, :rw] = ((x - 0.5) / 0.5).transpose(2, 0, 1)
    return batch


# ---------------------------------------------------------------- the pipeline

def ctc_decode(probs, charset):
    """Greedy CTC: best class per step, repeats merged, blanks (class 0) dropped; confidence is the
    mean probability of the kept steps."""
    best = probs.argmax(axis=1)
    keep = (best != 0) & np.concatenate([[True], best[1:] != best[:-1]])
    text = "".join(charset[i] for i in best[keep])
    score = float(probs.max(axis=1)[keep].mean()) if keep.any() else 0.0
    return text, score


class Ocr:
    def __init__(self, model_dir, package_dir, device, threads, log):
        t0 = time.perf_counter()
        self.gpu = device != "cpu"
        self.det = cached_session(os.path.join(model_dir, DET_MODEL), package_dir, device, threads, log,
                                  [{"x": [1, 3, GPU_DET_SIDE, GPU_DET_SIDE]}])
        self.cls = cached_session(os.path.join(model_dir, CLS_MODEL), package_dir, device, threads, log,
                                  [{"x": [REC_BATCH, 3, *CLS_SHAPE]}])
        self.rec = cached_session(os.path.join(model_dir, REC_MODEL), package_dir, device, threads, log,
                                  [{"x": [REC_BATCH, 3, REC_HEIGHT, k * GPU_REC_STEP]} for k in range(1, GPU_REC_STEPS + 1)])
        with open(os.path.join(model_dir, KEYS), encoding="utf-8") as f:
            self.charset = ["<blank>"] + [line.rstrip("\n") for line in f] + [" "]
        self.load_ms = 1e3 * (time.perf_counter() - t0)
        self.times = {}

    def _timed(self, stage, fn):
        t0 = time.perf_counter()
        out = fn()
        self.times[stage] = self.times.get(stage, 0.0) + 1e3 * (time.perf_counter() - t0)
        return out

    def _recognize(self, crops):
        """Batches of REC_BATCH crops of similar aspect ratio (PaddleOCR's order), each as wide as its
        widest line (at least 320, rounded up to 32 columns to bound the number of shapes)."""
        order = sorted(range(len(crops)), key=lambda i: crops[i].shape[1] / crops[i].shape[0])
        readings = [None] * len(crops)
        for begin in range(0, len(order), REC_BATCH):
            batch = [crops[i] for i in order[begin:begin + REC_BATCH]]
            widest = max([REC_MIN_WIDTH / REC_HEIGHT] + [c.shape[1] / c.shape[0] for c in batch])
            step = GPU_REC_STEP if self.gpu else 32
            width = (int(math.ceil(REC_HEIGHT * widest)) + step - 1) // step * step
            rows = REC_BATCH if self.gpu else len(batch)
            rec = self._timed("rec", lambda: self.rec.run([line_input(batch, REC_HEIGHT, width, rows)]))
            for i, probs in zip(order[begin:begin + REC_BATCH], next(iter(rec.values())).numpy()):
                readings[i] = ctc_decode(probs, self.charset)
        return readings

    def __call__(self, rgb):
        bgr = rgb[..., ::-1].astype(np.float32)
        x, sx, sy = det_input(bgr)
        h, w = x.shape[2:]
        if self.gpu:
            canvas = np.zeros((1, 3, GPU_DET_SIDE, GPU_DET_SIDE), np.float32)
            canvas[:, :, :h, :w] = x
            x = canvas
        prob = self._timed("det", lambda: self.det.run([x]))
        prob = np.ascontiguousarray(next(iter(prob.values())).numpy()[0, 0, :h, :w])
        boxes = db_boxes(prob, sx, sy, rgb.shape[1], rgb.shape[0])
        crops = [crop_quad(bgr, b) for b in boxes]
        if not crops:
            return []
        step = REC_BATCH if self.gpu else len(crops)
        cls = np.concatenate([
            next(iter(self._timed("cls", lambda: self.cls.run([line_input(crops[i:i + step], *CLS_SHAPE, step)]))
                      .values())).numpy()[:len(crops[i:i + step])]
            for i in range(0, len(crops), step)])
        # The classifier sees a long line squeezed into 192 columns and now and then calls an upright
        # line upside down; a line it flags is read both ways and the more confident reading kept.
        flagged = [i for i, c in enumerate(cls) if c[1] > c[0] and c[1] > CLS_THRESH]
        candidates = crops + [np.ascontiguousarray(crops[i][::-1, ::-1]) for i in flagged]
        readings = self._recognize(candidates)
        lines = []
        for i, box in enumerate(boxes):
            (text, score), rotated = readings[i], False
            if i in flagged:
                turned = readings[len(crops) + flagged.index(i)]
                if turned[1] > score:
                    (text, score), rotated = turned, True
            lines.append({"text": text, "confidence": score, "box": box.tolist(), "rotated": rotated})
        return lines


def annotate(rgb, lines, path):
    """PaddleOCR's draw_ocr_box_txt layout: the photo with the boxes on the left, each line's text in
    its box on a white page on the right (Pillow's built-in font: characters beyond Latin-1 as '?')."""
    from PIL import Image, ImageDraw

    h, w = rgb.shape[:2]
    img = Image.new("RGB", (2 * w, h), "white")
    img.paste(Image.fromarray(rgb), (0, 0))
    draw = ImageDraw.Draw(img)
    colors = [(214, 39, 40), (31, 119, 180), (44, 160, 44), (148, 103, 189), (255, 127, 14)]
    for i, line in enumerate(lines):
        pts = [tuple(p) for p in line["box"]]
        draw.polygon(pts, outline=colors[i % 5])
        draw.polygon([(x + w, y) for x, y in pts], outline=colors[i % 5])
        text = "".join(c if ord(c) < 256 else "?" for c in line["text"])
        draw.text((pts[0][0] + w + 2, (pts[0][1] + pts[3][1]) / 2 - 5), text, fill="black")
    img.save(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("image")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--package-dir", default=package_cache())
    parser.add_argument("--model-dir", default=os.path.join(model_cache(), "ocr-models", "assets"))
    parser.add_argument("--output", "-o")
    parser.add_argument("--json")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    try:
        from PIL import Image

        try:
            rgb = np.asarray(Image.open(args.image).convert("RGB"))
        except OSError as e:
            raise SystemExit(f"error: cannot read image '{args.image}': {e}")
        for name in (DET_MODEL, CLS_MODEL, REC_MODEL, KEYS):
            if not os.path.exists(os.path.join(args.model_dir, name)):
                raise SystemExit(f"error: {name} not found in {args.model_dir} (run scripts/fetch-models.sh)")
        ocr = Ocr(args.model_dir, args.package_dir, args.device, args.threads, log)
        t0 = time.perf_counter()
        lines = ocr(rgb)
        total = 1e3 * (time.perf_counter() - t0)
    except ingot.Error as e:
        raise SystemExit(f"error: {e}")
    for i, line in enumerate(lines):
        box = " ".join(f"{p[0]:.0f},{p[1]:.0f}" for p in line["box"])
        print(f"line {i}: {line['confidence']:.3f} [{box}] {line['text']}")
    t = ocr.times
    print(f"time: load {ocr.load_ms:.1f} ms, det {t.get('det', 0):.1f} ms, cls {t.get('cls', 0):.1f} ms, "
          f"rec {t.get('rec', 0):.1f} ms ({len(lines)} lines), total {total:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"image": args.image, "lines": lines}, f, indent=1, ensure_ascii=False)
    if args.output:
        annotate(rgb, lines, args.output)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
