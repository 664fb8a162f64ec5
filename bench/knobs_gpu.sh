#!/usr/bin/env bash
# A/B of the CUDA switches that are off by default until their speed is measured (their GPU tests
# pass; docs/PERFORMANCE.md, nineteenth session), each side by side in one call, ROUNDS times
# alternating. Every median is appended to OUTDIR/knobs.md as soon as it is measured, so a call cut
# short keeps what it measured:
#   INGOT_GEMM_3XTF32       Whisper-tiny encoder fp32 packages at batch 1 and 32 (read at run time:
#                           one package each), and the batch-32 output's max abs difference between
#                           the two (a run after two warm-up runs: `ingot run --repeat 3`; below the
#                           table, with OUTDIR/outputs.txt)
#   INGOT_CONV_3XTF32       ResNet-50 fp32 and the Whisper-tiny encoder fp32 at batch 32 (read at run
#                           time)
#   INGOT_INT8_STEM_GATHER  ResNet-50 int8 at batch 32 (`ingot quantize --symmetric` with random
#                           calibration inputs, then `ingot convert --device cuda`; read at run time)
# Usage (GPU machine, repository root; python3 with torch, torchvision, transformers):
#   bash bench/knobs_gpu.sh INGOT OUTDIR     or     scripts/gpu-test.sh run knobs
# Environment: PYTHON [python3] WORK [OUTDIR/work] ROUNDS [2] WARMUP [20] ITERATIONS [100]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -ne 2 ]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
INGOT="$1"
OUT="$2"
PY="${PYTHON:-python3}"
WORK="${WORK:-$OUT/work}"
ROUNDS="${ROUNDS:-2}"
mkdir -p "$OUT" "$WORK"
MD="$OUT/knobs.md"
echo "| switch | case | round | off (0) ms | on (1) ms |" >"$MD"
echo "|---|---|---:|---:|---:|" >>"$MD"

median() {  # PACKAGE [ENV...]: `ingot bench --device-io` median in ms, or "failed"
  local pkg="$1"
  shift
  env "$@" "$INGOT" bench "$pkg" --device cuda --device-io --warmup "${WARMUP:-20}" --iterations "${ITERATIONS:-100}" \
    2>&1 | grep -o 'median [0-9.]*' | head -1 | cut -d' ' -f2 | grep . || echo failed
}
ab() {  # SWITCH CASE PACKAGE: the switch off and on, ROUNDS times, a row each
  local r
  for r in $(seq 1 "$ROUNDS"); do
    echo "| \`$1\` | $2 | $r | $(median "$3" "$1=0") | $(median "$3" "$1=1") |" >>"$MD"
  done
}

"$PY" "$ROOT/bench/torch_models.py" export --out "$WORK" --batches 1 32 --only whisper_tiny_encoder resnet50 \
  >"$OUT/export.log" 2>&1 || { echo "knobs_gpu: export failed (export.log)"; tail -3 "$OUT/export.log"; exit 1; }

# 3xTF32: Whisper-tiny fp32.
for b in 1 32; do
  pkg="$WORK/whisper.b$b.fp32.ingot"
  "$INGOT" convert "$WORK/whisper_tiny_encoder.onnx" -o "$pkg" --quiet --device cuda --input-shape "input=$b,80,3000" \
    >"$OUT/whisper.b$b.convert.log" 2>&1 || echo "knobs_gpu: whisper b$b convert failed"
  ab INGOT_GEMM_3XTF32 "Whisper-tiny fp32 b$b" "$pkg"
done
for v in 0 1; do
  INGOT_GEMM_3XTF32=$v "$INGOT" run "$WORK/whisper.b32.fp32.ingot" --device cuda \
    --input "input=$WORK/whisper_tiny_encoder.b32.input.npy" -o "$WORK/whisper.out.$v" --repeat 3 >"$OUT/whisper.run.$v.log" 2>&1
done
"$PY" - "$WORK/whisper.out.0" "$WORK/whisper.out.1" >"$OUT/outputs.txt" <<'PY'
import glob, os, sys
import numpy as np
a, b = (sorted(glob.glob(os.path.join(d, "*.npy"))) for d in sys.argv[1:])
for x, y in zip(a, b):
    x, y = np.load(x), np.load(y)
    print(f"\nWhisper-tiny fp32 b32, INGOT_GEMM_3XTF32=1 against =0: max abs difference {np.abs(x - y).max():.3g} "
          f"(max abs output {np.abs(x).max():.3g})")
if not a or len(a) != len(b):
    print("\nWhisper-tiny fp32 b32 outputs: missing (whisper.run.*.log)")
PY

# 3xTF32 convolutions: ResNet-50 fp32 b32, Whisper-tiny fp32 b32 (its two stem convolutions).
"$INGOT" convert "$WORK/resnet50.onnx" -o "$WORK/resnet50.b32.fp32.ingot" --quiet --device cuda \
  --input-shape input=32,3,224,224 >"$OUT/resnet50.fp32.convert.log" 2>&1 || echo "knobs_gpu: resnet50 fp32 convert failed"
ab INGOT_CONV_3XTF32 "ResNet-50 fp32 b32" "$WORK/resnet50.b32.fp32.ingot"
ab INGOT_CONV_3XTF32 "Whisper-tiny fp32 b32" "$WORK/whisper.b32.fp32.ingot"

# The gathered int8 stem: ResNet-50 int8 b32.
"$PY" - "$WORK/calib" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(7)
for i in range(8):
    np.save(os.path.join(d, f"{i}.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY
"$INGOT" quantize "$WORK/resnet50.onnx" -o "$WORK/resnet50.qdq.onnx" --calib "$WORK/calib" --symmetric -q \
  >"$OUT/resnet50.quantize.log" 2>&1 || echo "knobs_gpu: resnet50 quantize failed"
"$INGOT" convert "$WORK/resnet50.qdq.onnx" -o "$WORK/resnet50.b32.int8.ingot" --quiet --device cuda \
  --input-shape input=32,3,224,224 >"$OUT/resnet50.int8.convert.log" 2>&1 || echo "knobs_gpu: resnet50 int8 convert failed"
ab INGOT_INT8_STEM_GATHER "ResNet-50 int8 b32" "$WORK/resnet50.b32.int8.ingot"
cat "$OUT/outputs.txt" >>"$MD"
cat "$MD"
