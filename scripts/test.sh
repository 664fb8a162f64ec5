#!/usr/bin/env bash
# Installs what is needed, builds everything and runs every CPU test (unit tests, the ONNX node
# suite against its committed expected failures, and the real models against onnxruntime
# references), then the sanitizer build's checks. GPU tests are labelled "gpu" and excluded here.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
bash scripts/fetch-models.sh >/dev/null
ctest --test-dir build --output-on-failure --label-exclude gpu -j2
# AddressSanitizer + UndefinedBehaviorSanitizer over the unit tests and the ONNX node suite, and a
# short run of each libFuzzer target, in a second (clang) build: docs/RELIABILITY.md.
# INGOT_SKIP_SANITIZE=1 leaves it out (a quick local check).
if [ "${INGOT_SKIP_SANITIZE:-0}" != 1 ]; then
  bash scripts/sanitize-check.sh
fi
