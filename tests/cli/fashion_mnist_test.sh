#!/usr/bin/env bash
# The training example end to end, small: one epoch on the first 2048 Fashion-MNIST images must
# learn (test accuracy well above the 10% of chance; a full run reaches 91.5%: docs/TRAINING.md),
# and write its JSON, loss/accuracy plot and safetensors checkpoint. Exit 77 (skip) without the
# dataset (Debian's dataset-fashion-mnist, installed by scripts/bootstrap.sh). Further arguments go
# to the app (demo.fashion_mnist_ddp: `--gpus 2 --batch 64`, two data-parallel CPU processes that
# must write one JSON saying so, one plot and one checkpoint, from rank 0).
#   fashion_mnist_test.sh INGOT_FASHION_MNIST [APP ARGS...]
set -uo pipefail
APP="$1"
shift
PROCESSES=1
for ((i = 1; i <= $#; i++)); do [ "${!i}" = "--gpus" ] && { j=$((i + 1)); PROCESSES="${!j}"; }; done
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "dataset missing: $DATA"; exit 77; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$APP" --epochs 1 --limit 2048 --json "$OUT/run.json" --plot "$OUT/curves.png" --save "$OUT/net.safetensors" "$@" 2>&1 | tail -3
[ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL: the app exited with status ${PIPESTATUS[0]}"; exit 1; }
[ -s "$OUT/curves.png" ] || { echo "FAIL: no plot"; exit 1; }
[ -s "$OUT/net.safetensors" ] || { echo "FAIL: no checkpoint"; exit 1; }
python3 - "$OUT/run.json" "$PROCESSES" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["epochs"] == 1 and r["train_images"] == 2048, r
assert r["processes"] == int(sys.argv[2]), f"FAIL: {r['processes']} processes, expected {sys.argv[2]}"
assert r["test_accuracy"] > 0.55, f"FAIL: test accuracy {r['test_accuracy']} after one small epoch"
print(f"test accuracy {r['test_accuracy']:.4f}")
PY
# A bad flag is one clear line.
"$APP" --precision fp8 >/dev/null 2>"$OUT/err" && { echo "FAIL: --precision fp8 accepted"; exit 1; }
grep -q "precision" "$OUT/err" || { echo "FAIL: no message naming --precision"; cat "$OUT/err"; exit 1; }
echo ok
