#!/usr/bin/env bash
# The README's main job end to end: BlazeFace on the astronaut photo finds exactly her face.
# Reference box (onnxruntime-node 1.30 on the same letterboxed input, back 256 model):
# 172.8 74.1 277.3 178.6; the check allows 3 px. Exit 77 (skip) when the model cache is missing.
#   facedetect_demo_test.sh INGOT_FACEDETECT
set -uo pipefail
APP="$1"
CACHE="${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}"
MODEL="$CACHE/blazeface/ONNX/face_detection_back_256x256_barracuda.onnx"
PHOTO=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
[ -f "$MODEL" ] || { echo "model cache missing: $MODEL"; exit 77; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$APP" "$MODEL" "$PHOTO" --output "$OUT/faces.png" | tee "$OUT/log" || exit 1
grep -q ", 1 face" "$OUT/log" || { echo "FAIL: expected exactly one face"; exit 1; }
[ -s "$OUT/faces.png" ] || { echo "FAIL: no annotated PNG"; exit 1; }
awk '/^face 0:/ {
  x0 = $6; y0 = $7; x1 = $8; y1 = $9
  d = 0; split("172.8 74.1 277.3 178.6", r, " ")
  if ((x0 - r[1])^2 > 9 || (y0 - r[2])^2 > 9 || (x1 - r[3])^2 > 9 || (y1 - r[4])^2 > 9) { print "FAIL: box " x0, y0, x1, y1; exit 1 }
  found = 1
} END { exit found ? 0 : 1 }' "$OUT/log" || exit 1
echo ok
