#!/usr/bin/env bash
# .ingot packages from the CLI:
#   package_test.sh INGOT_BINARY CASE
# CASE: convert-run  BlazeFace (front 128) converted to a package gives the ONNX run's outputs
#                    (`ingot run` on both, the same real input); `inspect` reads the package
#       bench-json   `ingot bench --json` on the .onnx and on the .ingot writes the documented keys
#       corrupt      a package with a flipped byte fails with one error line and exit code 1
# Exit 77 (skip) when the model cache is missing.
set -uo pipefail
INGOT="$1"
CASE="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${INGOT_MODEL_CACHE:-$HOME/.cache/ingot/models}"
MODEL="$CACHE/blazeface/ONNX/face_detection_front_128x128_barracuda.onnx"
[ -f "$MODEL" ] || { echo "model cache missing: $MODEL"; exit 77; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
PKG="$TMP/blazeface.ingot"

"$INGOT" convert "$MODEL" -o "$PKG" 2>"$TMP/convert.err" >"$TMP/convert.out" \
  || { echo "FAIL: convert"; cat "$TMP/convert.err"; exit 1; }
cat "$TMP/convert.err" "$TMP/convert.out"
for step in import passes precision writing; do
  grep -q "\] $step" "$TMP/convert.err" || { echo "FAIL: no progress line for $step"; exit 1; }
done
[ -s "$PKG" ] || { echo "FAIL: no package written"; exit 1; }

case "$CASE" in
  convert-run)
    /usr/bin/python3 "$HERE/../models/make_inputs.py" "$TMP/inputs" >/dev/null || { echo "FAIL: make_inputs.py"; exit 1; }
    X="$TMP/inputs/blazeface128_x.npy"
    "$INGOT" run "$MODEL" --input "input:0=$X" --threads 2 -o "$TMP/onnx" >/dev/null || { echo "FAIL: run .onnx"; exit 1; }
    "$INGOT" run "$PKG" --input "input:0=$X" --threads 2 -o "$TMP/pkg" >/dev/null || { echo "FAIL: run .ingot"; exit 1; }
    /usr/bin/python3 - "$TMP/onnx" "$TMP/pkg" <<'PY' || exit 1
import json, sys, numpy as np
a, b = sys.argv[1], sys.argv[2]
ia, ib = json.load(open(a + "/outputs.json")), json.load(open(b + "/outputs.json"))
assert [o["name"] for o in ia] == [o["name"] for o in ib], "output names differ"
for o in ia:
    x, y = np.load(f"{a}/{o['file']}"), np.load(f"{b}/{o['file']}")
    assert x.shape == y.shape and x.dtype == y.dtype, f"{o['name']}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
    d = float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0
    print(f"{o['name']}: {x.dtype}{list(x.shape)} max |diff| {d:.3g}")
    assert np.allclose(x, y, rtol=1e-5, atol=1e-6), f"{o['name']} differs: max |diff| {d}"
PY
    "$INGOT" inspect "$PKG" >"$TMP/inspect" || { echo "FAIL: inspect .ingot"; exit 1; }
    grep -q "^package: format version 1, ingot .*built for cpu" "$TMP/inspect" || { cat "$TMP/inspect"; echo "FAIL: inspect"; exit 1; }
    ;;
  bench-json)
    for m in "$MODEL" "$PKG"; do
      "$INGOT" bench "$m" --threads 1 --warmup 1 --iterations 3 --json "$TMP/bench.json" || { echo "FAIL: bench $m"; exit 1; }
      /usr/bin/python3 - "$TMP/bench.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("median_ms", "p90_ms", "min_ms", "throughput_per_s", "device", "threads"):
    assert k in j, f"missing key {k}: {j}"
assert 0 < j["min_ms"] <= j["median_ms"] <= j["p90_ms"], j
assert j["device"] == "cpu" and j["threads"] == 1 and j["throughput_per_s"] > 0, j
print("ok:", j)
PY
    done
    # A random input's shape for an input the model does not have: one error naming it.
    "$INGOT" bench "$MODEL" --iterations 1 --input-shape nosuch=1,3 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "no input named 'nosuch'" "$TMP/err" || { cat "$TMP/err"; echo "FAIL: bench --input-shape"; exit 1; }
    ;;
  corrupt)
    /usr/bin/python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-100] ^= 1; open(p, 'wb').write(b)" "$PKG"
    "$INGOT" run "$PKG" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    cat "$TMP/err"
    [ "$rc" -eq 1 ] || { echo "FAIL: exit code $rc"; exit 1; }
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || { echo "FAIL: expected one error line"; exit 1; }
    grep -q "^error: package 'blazeface.ingot' is corrupted: checksum mismatch" "$TMP/err" || { echo "FAIL: message"; exit 1; }
    ;;
  *) echo "unknown case $CASE"; exit 2 ;;
esac
echo ok
