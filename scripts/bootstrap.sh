#!/usr/bin/env bash
# Installs every Debian package that building, testing and the demo need. Idempotent and quiet
# when everything is present. Run as root (or with sudo available) on Debian 12. The build's own
# list (cmake/dependencies.cmake) names the same packages; scripts/fresh-machine-check.sh proves
# that this list is complete on a fresh machine.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ca-certificates
  # libraries Ingot links
  libprotobuf-dev protobuf-compiler libonnx-dev libdnnl-dev libopenblas-openmp-dev
  # oneDNN's CMake config requires OpenCL's headers and loader; libdnnl-dev only recommends them and
  # this script installs without recommends
  ocl-icd-opencl-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libpng-dev libjpeg-dev libxxhash-dev zlib1g-dev
  # the .ingot package format (FlatBuffers headers and the flatc schema compiler)
  libflatbuffers-dev flatbuffers-compiler
  # data-parallel training on CPUs: Gloo's collectives (the plugin libingot_gloo.so, opened on demand)
  libgloo-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev libonnx-testdata
  python3-numpy python3-onnx python3-skimage python3-pil pocketsphinx-testdata
  # the Python module (python/, `import ingot`) and its tests (tests/python: pytest, PyTorch as the reference)
  python3-dev pybind11-dev libdlpack-dev python3-pytest python3-torch
  # its wheel (scripts/build-wheel.sh: `wheel pack`) and the test that installs it with pip
  python3-wheel python3-pip
  # the training example's data (idx files, gzip-compressed)
  dataset-fashion-mnist
  # the sanitizer build and the libFuzzer targets (scripts/sanitize-check.sh, scripts/fuzz.sh)
  clang libclang-rt-14-dev libomp-14-dev
  # the profiler's HTML report is rendered headless in a test (label browser)
  chromium
  openssl
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Models are fetched with `npm pack` (and onnxruntime-node is a test-time reference). Any Node.js
# with npm will do; Debian's packages are installed only when none is on PATH.
if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
