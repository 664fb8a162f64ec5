#!/usr/bin/env bash
# ctest export.onnxruntime: every kind of nn module exported to ONNX (ingot-export-models) gives
# Ingot's outputs in onnxruntime (tests/export/check_onnxruntime.js). The runtime is the pinned
# onnxruntime-node that scripts/fetch-models.sh puts in the model cache; without it (or node) the
# test is skipped (77).
set -euo pipefail
bin="$1"
here="$(cd "$(dirname "$0")" && pwd)"
cache="${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}"
if ! command -v node >/dev/null 2>&1 || [ ! -f "$cache/node_modules/onnxruntime-node/package.json" ]; then
  echo "skipped: node or onnxruntime-node (scripts/fetch-models.sh) is missing"
  exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bin" "$dir"
NODE_PATH="$cache/node_modules" node "$here/check_onnxruntime.js" "$dir"
