#!/usr/bin/env bash
# Bad input gets one clear error line and exit code 1, never a crash:
#   bad_input_test.sh INGOT_BINARY CASE
# CASE: truncated-model | random-bytes | missing-file | missing-input | wrong-dtype | wrong-shape |
#       unsupported-op | unknown-input | memory-limit | bad-memory-limit | usage
set -uo pipefail
INGOT="$1"
CASE="$2"
NODE=/usr/share/libonnx-testdata/data/node
HERE="$(cd "$(dirname "$0")" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

ADD="$NODE/test_add/model.onnx"  # x: float32[3,4,5], y: float32[3,4,5]
X="$NODE/test_add/test_data_set_0/input_0.pb"
Y="$NODE/test_add/test_data_set_0/input_1.pb"

expect_rc=1
case "$CASE" in
  truncated-model)
    head -c 60 "$ADD" >"$TMP/truncated.onnx"
    args=(run "$TMP/truncated.onnx" --input "$X" --input "$Y"); want="truncated.onnx.*not a valid ONNX model" ;;
  random-bytes)
    # deterministic pseudo-random bytes
    awk 'BEGIN { srand(7); for (i = 0; i < 4096; i++) printf "%c", int(rand() * 256) }' >"$TMP/random.onnx"
    args=(run "$TMP/random.onnx"); want="random.onnx.*not a valid ONNX model" ;;
  missing-file)
    args=(run "$TMP/nope.onnx"); want="nope.onnx' does not exist" ;;
  missing-input)
    args=(run "$ADD" --input "x=$X"); want="input 'y' is missing" ;;
  wrong-dtype)
    args=(run "$ADD" --input "x=$X" --input "y=$NODE/test_equal/test_data_set_0/input_1.pb")
    want="input 'y': expected dtype float32, got int32" ;;
  wrong-shape)
    args=(run "$ADD" --input "x=$X" --input "y=$NODE/test_add_bcast/test_data_set_0/input_1.pb")
    want="input 'y': expected shape \[3,4,5\].*got float32\[5\]" ;;
  unsupported-op)
    args=(run "$HERE/../data/unsupported_op.onnx"); want="node 'mystery' \(FrobnicateTensor\): unsupported op FrobnicateTensor" ;;
  unknown-input)
    args=(run "$ADD" --input "z=$X"); want="no input named 'z'" ;;
  memory-limit)
    args=(run "$ADD" --input "x=$X" --input "y=$Y" --memory-limit 100)
    want="cannot allocate 240 B for a float32 tensor: .*the memory limit is 100 B" ;;
  bad-memory-limit)
    args=(run "$ADD" --memory-limit 8X); want="--memory-limit: expected a size such as 8G, 512M or a byte count, got '8X'" ;;
  usage)
    args=(run --no-such-flag); want="" ; expect_rc=2 ;;
  *) echo "unknown case $CASE"; exit 2 ;;
esac

"$INGOT" "${args[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
echo "stderr: $(cat "$TMP/err")"
if [ "$rc" -ne "$expect_rc" ]; then
  echo "FAIL: exit code $rc, expected $expect_rc"
  exit 1
fi
if [ "$expect_rc" -eq 1 ]; then
  lines=$(wc -l <"$TMP/err")
  if [ "$lines" -ne 1 ]; then echo "FAIL: expected exactly one error line, got $lines"; exit 1; fi
  if ! grep -Eq "^error: .*$want" "$TMP/err"; then echo "FAIL: error line does not match /$want/"; exit 1; fi
fi
echo "ok"
