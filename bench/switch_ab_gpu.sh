#!/usr/bin/env bash
# A/B of run-time switches on the GPU, side by side in one call: models with random weights exported
# from PyTorch here (bench/torch_models.py export), one package per case (`ingot convert --device
# cuda --precision P --input-shape input=...`), then `ingot bench --device-io` of each package under
# every setting in turn (median of ITERATIONS after WARMUP runs), ROUNDS times alternating, each
# median appended to OUTDIR/switches.md as it is measured (a call cut short keeps what it measured).
#
# Usage (GPU machine, repository root): bash bench/switch_ab_gpu.sh INGOT OUTDIR
#   or `scripts/gpu-test.sh run switches` with the bundle's binary (results in $OUT/switches).
# Environment: PYTHON [python3]
#   CASES ["whisper_tiny_encoder:32:fp32 resnet50:32:fp32"]  (MODEL:BATCH:PRECISION, fp32 or fp16)
#   SETTINGS ["INGOT_GEMM_3XTF32=0;INGOT_GEMM_3XTF32=1"]  (';' between settings, each a space-separated
#   list of VAR=VALUE for `env`)
#   ROUNDS [2] WARMUP [20] ITERATIONS [100] WORK [OUTDIR/work]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
usage_unless $# 2
INGOT="$1"
OUT="$2"
PY="${PYTHON:-python3}"
CASES="${CASES:-whisper_tiny_encoder:32:fp32 resnet50:32:fp32}"
SETTINGS="${SETTINGS:-INGOT_GEMM_3XTF32=0;INGOT_GEMM_3XTF32=1}"
WORK="${WORK:-$OUT/work}"
mkdir -p "$OUT" "$WORK"
REPORT="$OUT/switches.md"

models="" batches=""
for c in $CASES; do
  IFS=: read -r m b _ <<<"$c"
  [[ " $models " == *" $m "* ]] || models="$models $m"
  [[ " $batches " == *" $b "* ]] || batches="$batches $b"
done
# shellcheck disable=SC2086
"$PY" "$ROOT/bench/torch_models.py" export --out "$WORK" --batches $batches --only $models >"$OUT/export.log" 2>&1 ||
  { echo "switch_ab_gpu: export failed (see $OUT/export.log)" >&2; exit 1; }

IFS=';' read -r -a settings <<<"$SETTINGS"
{
  echo "# Switches side by side ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  echo
  echo "\`ingot bench --device-io\`, median of ${ITERATIONS:-100} after ${WARMUP:-20} warm-up runs; ${ROUNDS:-2} rounds, settings alternating."
  echo
  echo "| case | setting | round | median ms |"
  echo "|---|---|---:|---:|"
} >"$REPORT"
for c in $CASES; do
  IFS=: read -r m b p <<<"$c"
  pkg="$WORK/$m.b$b.$p.ingot"
  if ! "$INGOT" convert "$WORK/$m.onnx" -o "$pkg" --quiet --device cuda --precision "$p" \
    --input-shape "input=$(model_dims "$m" "$b")" >"$OUT/$m.b$b.$p.convert.log" 2>&1; then
    echo "| $c | (conversion failed: $(tail -n 1 "$OUT/$m.b$b.$p.convert.log")) | | |" >>"$REPORT"
    continue
  fi
  for ((round = 1; round <= ${ROUNDS:-2}; ++round)); do
    for s in "${settings[@]}"; do
      # shellcheck disable=SC2086
      ms=$(env $s "$INGOT" bench "$pkg" --device cuda --device-io --warmup "${WARMUP:-20}" \
        --iterations "${ITERATIONS:-100}" 2>&1 | grep -o 'median [0-9.]* ms' | head -n 1 | grep -o '[0-9.]*')
      echo "| $c | \`$s\` | $round | ${ms:-failed} |" | tee -a "$REPORT"
    done
  done
done
