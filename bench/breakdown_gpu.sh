#!/usr/bin/env bash
# Where a case's time goes on the GPU, Ingot beside eager PyTorch, in one call: for each
# MODEL:BATCH:PRECISION of CASES (models of bench/torch_models.py, exported here; precision fp32,
# fp16 or int8), the package's `ingot bench --device-io` median, its per-node device times
# (`ingot profile --trace`, then bench/compare_nodes.py: the TOP slowest nodes) and, for fp32 and
# fp16, eager torch's per-kernel times (`torch_models.py kernels`: torch.profiler, cudnn.benchmark
# on, TF32 off). int8 packages are `ingot quantize --symmetric` of the float model with random
# calibration inputs, then `ingot convert --device cuda`; their fp16 package's nodes sit beside
# theirs. Each case's files are written as soon as it is measured (a call cut short keeps them):
#   OUTDIR/breakdown.md            the medians, a line per case
#   OUTDIR/<case>.nodes.md         Ingot's slowest nodes (int8: beside the fp16 package's)
#   OUTDIR/<case>.torch.txt        eager torch's kernels (fp32, fp16)
# Usage (GPU machine, repository root; python3 with torch, torchvision, transformers):
#   bash bench/breakdown_gpu.sh INGOT OUTDIR     or     scripts/gpu-test.sh run breakdown
# Environment: PYTHON [python3] WORK [OUTDIR/work] TOP [40] WARMUP [20] ITERATIONS [100]
#   CASES ["resnet50:32:fp32 whisper_tiny_encoder:32:fp32"]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
usage_unless $# 2
INGOT="$1"
OUT="$2"
PY="${PYTHON:-python3}"
WORK="${WORK:-$OUT/work}"
CASES="${CASES:-resnet50:32:fp32 whisper_tiny_encoder:32:fp32}"
mkdir -p "$OUT" "$WORK"

models="" batches="1"
for c in $CASES; do
  IFS=: read -r m b p <<<"$c"
  case "$p" in fp32 | fp16 | int8) ;; *) echo "breakdown_gpu: $c: precision must be fp32, fp16 or int8" >&2; exit 2 ;; esac
  [[ " $models " == *" $m "* ]] || models="$models $m"
  [[ " $batches " == *" $b "* ]] || batches="$batches $b"
done
# shellcheck disable=SC2086
"$PY" "$ROOT/bench/torch_models.py" export --out "$WORK" --batches $batches --only $models >"$OUT/export.log" 2>&1 ||
  { echo "breakdown_gpu: export failed (export.log)"; tail -3 "$OUT/export.log"; exit 1; }

package() {  # MODEL BATCH PRECISION: converts (once) and prints the package's path
  local pkg="$WORK/$1.b$2.$3.ingot" src="$WORK/$1.onnx" args=()
  if [ ! -f "$pkg" ]; then
    if [ "$3" = int8 ]; then
      if [ ! -f "$WORK/$1.qdq.onnx" ]; then
        "$PY" - "$WORK/calib.$1" "$1" <<'EOF'
import os, sys
import numpy as np
d, m = sys.argv[1:]
os.makedirs(d, exist_ok=True)
shape = (1, 80, 3000) if m.startswith("whisper") else (1, 3, 224, 224)
rng = np.random.default_rng(7)
for i in range(8):
    np.save(os.path.join(d, f"{i}.npy"), rng.standard_normal(shape).astype(np.float32))
EOF
        "$INGOT" quantize "$src" -o "$WORK/$1.qdq.onnx" --calib "$WORK/calib.$1" --symmetric -q >"$OUT/$1.quantize.log" 2>&1
      fi
      src="$WORK/$1.qdq.onnx"
    elif [ "$3" = fp16 ]; then
      args=(--precision fp16)
    fi
    "$INGOT" convert "$src" -o "$pkg" --quiet --device cuda --input-shape "input=$(model_dims "$1" "$2")" "${args[@]}" \
      >"$OUT/$1.b$2.$3.convert.log" 2>&1 || { echo "breakdown_gpu: $1 b$2 $3: convert failed" >&2; return 1; }
  fi
  echo "$pkg"
}

echo "| case | Ingot .ingot median ms (\`ingot bench --device-io\`) |" >"$OUT/breakdown.md"
echo "|---|---:|" >>"$OUT/breakdown.md"
for c in $CASES; do
  IFS=: read -r m b p <<<"$c"
  name="$m.b$b.$p"
  pkg=$(package "$m" "$b" "$p") || { echo "| $c | convert failed |" >>"$OUT/breakdown.md"; continue; }
  ms=$("$INGOT" bench "$pkg" --device cuda --device-io --warmup "${WARMUP:-20}" --iterations "${ITERATIONS:-100}" 2>&1 |
    grep -o 'median [0-9.]*' | head -1 | cut -d' ' -f2)
  echo "| $c | ${ms:-failed} |" >>"$OUT/breakdown.md"
  "$INGOT" profile "$pkg" --device cuda --warmup 5 --runs 10 --trace "$WORK/$name.trace.json" >"$OUT/$name.profile.log" 2>&1
  traces=("$WORK/$name.trace.json") labels=("$p")
  if [ "$p" = int8 ] && half=$(package "$m" "$b" fp16); then
    "$INGOT" profile "$half" --device cuda --warmup 5 --runs 10 --trace "$WORK/$m.b$b.fp16.trace.json" >/dev/null 2>&1 &&
      traces+=("$WORK/$m.b$b.fp16.trace.json") labels+=(fp16)
  fi
  "$PY" "$ROOT/bench/compare_nodes.py" "${traces[@]}" --labels "${labels[@]}" --top "${TOP:-40}" >"$OUT/$name.nodes.md" 2>&1
  if [ "$p" != int8 ]; then
    "$PY" "$ROOT/bench/torch_models.py" kernels --models "$WORK" --case "$m:$b:$p" --top "${TOP:-40}" \
      >"$OUT/$name.torch.txt" 2>&1 || echo "breakdown_gpu: $c: torch kernels failed ($name.torch.txt)"
  fi
  echo "breakdown_gpu: $c: ${ms:-failed} ms"
done
cat "$OUT/breakdown.md"
