#!/usr/bin/python3
"""ctest apps.ocr: ingot-ocr (C++, and the Python version with --python-app) reads skimage's page.png.

The expected text is the page's printed text, transcribed by hand. PP-OCRv4's recognizer drops most
spaces after punctuation and between short words, and reads some ASCII punctuation as its
full-width form, so lines are compared without whitespace and after NFKC normalization; each line
may differ from the page by at most 10% of its characters (edit distance; the blurred code line at
the bottom reads as '>>markersnp.zeros_like(coins)' on the GPU), all lines together by 2%.
Also checked: the package cache (the first run converts three models, the second converts none),
the annotated PNG and JSON, and clear errors for unreadable input. Exit 77 (skip) without the models.
"""
import argparse
import json
import os
import sys
import tempfile
import unicodedata

from app_test_util import expect_error, run

PAGE = "/usr/lib/python3/dist-packages/skimage/data/page.png"
EXPECTED = [
    "Region-based segmentation",
    "Let us first determine markers of the coins and the",
    "background. These markers are pixels that we can label",
    "unambiguously as either object or background. Here,",
    "the markers are found at the two extreme parts of the",
    "histogram of grey values:",
    ">>> markers = np.zeros_like(coins)",
]


def normalize(text):
    return "".join(unicodedata.normalize("NFKC", text).split())


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def check_lines(lines, who):
    texts = [line["text"] for line in lines]
    if len(texts) != len(EXPECTED):
        sys.exit(f"FAIL ({who}): {len(texts)} lines read, expected {len(EXPECTED)}: {texts}")
    total_errors = total_chars = 0
    for got, want in zip(texts, EXPECTED):
        errors = edit_distance(normalize(got), normalize(want))
        total_errors += errors
        total_chars += len(normalize(want))
        print(f"  {errors:2d} errors: {got!r}")
        if errors > 0.10 * len(normalize(want)):
            sys.exit(f"FAIL ({who}): read {got!r}, the page says {want!r}")
    if total_errors > 0.02 * total_chars:
        sys.exit(f"FAIL ({who}): {total_errors} character errors in {total_chars}")
    print(f"{who}: {len(texts)} lines, {total_errors} character errors in {total_chars}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--python-app")
    parser.add_argument("--pythonpath")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--page", default=PAGE)
    parser.add_argument("--models", help="PP-OCR's models and dictionary (default: the model cache)")
    args = parser.parse_args()
    models = args.models or os.path.join(
        os.environ.get("INGOT_MODEL_CACHE", os.path.expanduser("~/.cache/ingot/models")), "ocr-models", "assets")
    page = args.page
    if not os.path.exists(os.path.join(models, "ch_PP-OCRv4_rec_infer.onnx")) or not os.path.exists(page):
        print("skipped: PP-OCR models (scripts/fetch-models.sh) or python3-skimage's page.png missing")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        packages = os.path.join(tmp, "packages")
        cmd = [args.app, page, "--device", args.device, "--model-dir", models, "--package-dir", packages, "--json", f"{tmp}/page.json", "--output", f"{tmp}/page.png"]
        first = run(cmd)
        if first.stderr.count("converted ") != 3:
            sys.exit("FAIL: the first run should convert the three models into packages")
        second = run(cmd)
        if "converted " in second.stderr or "time: load" not in second.stdout:
            sys.exit("FAIL: the second run should load the cached packages and print its timing line")
        with open(f"{tmp}/page.json") as f:
            check_lines(json.load(f)["lines"], "ingot-ocr")
        with open(f"{tmp}/page.png", "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                sys.exit("FAIL: --output did not write a PNG")

        expect_error([args.app, f"{tmp}/no-such.png", "--package-dir", packages], "no-such.png", "a missing image")
        with open(f"{tmp}/text.png", "w") as f:
            f.write("not an image\n")
        expect_error([args.app, f"{tmp}/text.png", "--package-dir", packages], "text.png", "an unreadable image")
        expect_error([args.app, page, "--model-dir", f"{tmp}/nothing", "--package-dir", packages], "fetch-models.sh",
                     "missing models")

        if args.python_app:
            env = dict(os.environ, PYTHONPATH=args.pythonpath or "")
            run(["/usr/bin/python3", args.python_app, page, "--device", args.device, "--model-dir", models,
                 "--package-dir", packages, "--json", f"{tmp}/py.json",
                 "--output", f"{tmp}/py.png"], env=env)
            with open(f"{tmp}/py.json") as f:
                check_lines(json.load(f)["lines"], "ingot_ocr.py")
    print("ok")


if __name__ == "__main__":
    main()
