#!/usr/bin/env bash
# Builds an installable wheel of `import ingot` for this machine's python3 (Debian 12's 3.11) into
# DIR (default dist/): the module, libingot.so beside it, the Python files and type hints. The
# libraries libingot.so links (oneDNN, OpenBLAS, protobuf, ONNX, fmt: scripts/bootstrap.sh's
# packages) come from the system, so the wheel is for Debian 12 machines with them installed; it is
# not a manylinux wheel. Packed by Debian's python3-wheel (`wheel pack`, which writes RECORD).
#   bash scripts/build-wheel.sh [DIR]     then: pip install DIR/ingot-*.whl
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${INGOT_BUILD_DIR:-$ROOT/build}"
OUT="$(realpath -m "${1:-$ROOT/dist}")"
PY="${PYTHON:-/usr/bin/python3}"
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target ingot_python >/dev/null
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
cmake --install "$BUILD" --component python --prefix "$STAGE" >/dev/null
VERSION="$(sed -n 's/^project(ingot VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
TAG="$("$PY" -c 'import sys, sysconfig; v = "cp%d%d" % sys.version_info[:2]; print(v + "-" + v + "-" + sysconfig.get_platform().replace("-", "_").replace(".", "_"))')"
INFO="$STAGE/ingot-$VERSION.dist-info"
mkdir -p "$INFO"
cat >"$INFO/METADATA" <<META
Metadata-Version: 2.1
Name: ingot
Version: $VERSION
Summary: Ingot: ONNX models and .ingot packages, eager tensors with autograd, training and custom ops on CPUs and NVIDIA GPUs
Requires-Python: ==$("$PY" -c 'import sys; print("%d.%d.*" % sys.version_info[:2])')
Requires-Dist: numpy
META
cat >"$INFO/WHEEL" <<WHL
Wheel-Version: 1.0
Generator: ingot scripts/build-wheel.sh
Root-Is-Purelib: false
Tag: $TAG
WHL
mkdir -p "$OUT"
"$PY" -m wheel pack "$STAGE" -d "$OUT" >/dev/null
ls "$OUT"/ingot-"$VERSION"-"$TAG".whl
