#!/usr/bin/env bash
# The main job: install what is needed, build Ingot, fetch BlazeFace (pinned, integrity-checked)
# and detect the face in a real photo on the CPU, writing an annotated PNG.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target ingot-cli ingot-facedetect
CACHE="${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}"
bash scripts/fetch-models.sh "$CACHE"

PHOTO=/usr/lib/python3/dist-packages/skimage/data/astronaut.png
OUT="${INGOT_DEMO_OUTPUT:-$PWD/astronaut-faces.png}"
build/apps/ingot-facedetect "$CACHE/blazeface/ONNX/face_detection_back_256x256_barracuda.onnx" "$PHOTO" --output "$OUT"
