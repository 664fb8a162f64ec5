#!/usr/bin/env bash
# The custom-op story, all four steps (docs/CUSTOM_OPS.md):
#   examples/custom-op/run.sh [--device cpu|cuda] [--out DIR] [--batch N] [--width N] [--runs N]
# Needs the build (bash scripts/test.sh, or cmake --build build): Ingot's Python module in
# build/python and the CLI for the package step. INGOT_PYTHONPATH / INGOT_CLI / PYTHON point
# elsewhere (the GPU machine's bundle: scripts/gpu-test.sh run customop).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY_PATH="${INGOT_PYTHONPATH:-$ROOT/build/python}"
CLI="${INGOT_CLI:-$ROOT/build/tools/ingot/ingot}"
PY="${PYTHON:-/usr/bin/python3}"
if [ ! -d "$PY_PATH/ingot" ]; then
  echo "run.sh: Ingot's Python module is not built ($PY_PATH/ingot): run bash scripts/test.sh first" >&2
  exit 1
fi
PYTHONPATH="$PY_PATH${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" "$ROOT/examples/custom-op/run.py" --ingot "$CLI" "$@"
