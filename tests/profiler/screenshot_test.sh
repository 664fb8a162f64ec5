#!/usr/bin/env bash
# Renders the HTML report of `ingot profile` in headless Chromium and checks that the timeline was
# drawn (op-colored pixels inside the canvas). Skips (77) without chromium or PIL.
# Usage: screenshot_test.sh INGOT
set -euo pipefail
ingot="$1"
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v chromium >/dev/null 2>&1; then
  echo "SKIP: chromium is not installed (scripts/bootstrap.sh installs it)"
  exit 77
fi
/usr/bin/python3 -c 'import PIL' 2>/dev/null || { echo "SKIP: python3-pil is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ingot" profile /usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx --runs 5 \
  --html "$tmp/report.html" >/dev/null
# --virtual-time-budget lets the page's script finish before the capture.
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$tmp/profile" \
  --virtual-time-budget=5000 --screenshot="$tmp/shot.png" --window-size=1200,800 "file://$tmp/report.html" \
  >"$tmp/chromium.log" 2>&1 || { cat "$tmp/chromium.log"; echo "FAIL: chromium failed"; exit 1; }
/usr/bin/python3 "$here/check_screenshot.py" "$tmp/shot.png"
