#!/usr/bin/env bash
# Int8 against float16 on the GPU (issue 22): ResNet-50 and MobileNetV3-Large with random weights,
# exported from PyTorch on the GPU machine (bench/torch_models.py export, batch-norm statistics
# recalibrated so activations stay O(1)), then per model and batch size, side by side in one call:
#   fp16  `ingot convert --device cuda --precision fp16 --input-shape input=B,3,224,224`
#   int8  `ingot quantize --symmetric --calib DIR` once (int8 activations at zero point 0, per-channel
#         weights: cuDNN's int8 convolutions), then `ingot convert --device cuda` of that QDQ model
#         with the same shapes
# and `ingot bench --device-io` of each package (median of ITERATIONS after WARMUP runs), plus the
# int8 package's output against the float32 model's on the batch-1 input (cosine similarity,
# max abs error). Calibration: CALIB_SAMPLES of the exported deterministic inputs' kind (random).
#
# Usage (GPU machine, repository root): bash bench/int8_gpu.sh INGOT OUTDIR
#   or `scripts/gpu-test.sh run int8` with the bundle's binary (results in $OUT/int8).
# Environment: PYTHON [python3] MODELS [resnet50 mobilenet_v3_large] BATCHES ["1 32"]
#   WARMUP [20] ITERATIONS [100] CALIB_SAMPLES [16] WORK [OUTDIR/work]
#   REUSE_EXPORT [0] (1: keep WORK's models and inputs when every one is there)
#   NCU [0] (1: each package's kernels timed one by one by Nsight Compute, named by their nodes:
#   MODEL.bB.PRECISION.kernels.md, bench/ncu_kernels.py; NCU_TIMEOUT [120] s per report)
#   AB_SWITCH [none] (an INGOT_* switch read at run time: each int8 package benched with it at each
#   of AB_VALUES ["0 1"] in turn, twice, the medians appended to int8.md below the table)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
usage_unless $# 2
INGOT="$1"
OUT="$2"
PY="${PYTHON:-python3}"
MODELS="${MODELS:-resnet50 mobilenet_v3_large}"
BATCHES="${BATCHES:-1 32}"
WORK="${WORK:-$OUT/work}"
mkdir -p "$OUT" "$WORK"

exported=1
for m in $MODELS; do for b in $BATCHES; do [ -f "$WORK/$m.onnx" ] && [ -f "$WORK/$m.b$b.input.npy" ] || exported=0; done; done
if [ "${REUSE_EXPORT:-0}" = 1 ] && [ $exported = 1 ]; then
  echo "int8_gpu: reusing the export in $WORK" >"$OUT/export.log"
else
  # shellcheck disable=SC2086
  "$PY" "$ROOT/bench/torch_models.py" export --out "$WORK" --batches $BATCHES --only $MODELS >"$OUT/export.log" 2>&1 ||
    { echo "int8_gpu: export failed (export.log)"; tail -5 "$OUT/export.log"; exit 1; }
fi
"$PY" - "$WORK/calib" "${CALIB_SAMPLES:-16}" <<'EOF'
import os, sys
import numpy as np
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(7)
for i in range(n):
    np.save(os.path.join(d, f"{i}.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
EOF

echo "| model | batch | fp16 ms | int8 ms | int8 speed-up | int8 vs fp32: cosine | max abs err |" >"$OUT/int8.md"
echo "|---|---:|---:|---:|---:|---:|---:|" >>"$OUT/int8.md"
for m in $MODELS; do
  # One symmetric quantization (batch 1 calibration), compiled per batch size for the GPU.
  "$INGOT" quantize "$WORK/$m.onnx" -o "$WORK/$m.qdq.onnx" --calib "$WORK/calib" --symmetric \
    --report "$OUT/$m.int8.report.json" >"$OUT/$m.quantize.log" 2>&1 ||
    { echo "int8_gpu: $m quantize failed:"; tail -3 "$OUT/$m.quantize.log"; }
  for b in $BATCHES; do
    shape="input=$(model_dims "$m" "$b")"
    fp16="$WORK/$m.b$b.fp16.ingot"
    int8="$WORK/$m.b$b.int8.ingot"
    "$INGOT" convert "$WORK/$m.onnx" -o "$fp16" --device cuda --precision fp16 --input-shape "$shape" \
      >"$OUT/$m.b$b.fp16.convert.log" 2>&1 || echo "int8_gpu: $m b$b fp16 convert failed"
    "$INGOT" convert "$WORK/$m.qdq.onnx" -o "$int8" --device cuda --input-shape "$shape" \
      >"$OUT/$m.b$b.int8.convert.log" 2>&1 ||
      { echo "int8_gpu: $m b$b int8 convert failed:"; tail -3 "$OUT/$m.b$b.int8.convert.log"; }
    for p in fp16 int8; do
      "$INGOT" bench "$WORK/$m.b$b.$p.ingot" --device cuda --device-io --warmup "${WARMUP:-20}" \
        --iterations "${ITERATIONS:-100}" --json "$OUT/$m.b$b.$p.bench.json" >"$OUT/$m.b$b.$p.bench.log" 2>&1 ||
        echo "int8_gpu: $m b$b $p bench failed"
      echo "-- $m b$b $p:"
      grep -i "median\|graph\|fallback" "$OUT/$m.b$b.$p.bench.log" | head -6
    done
    "$INGOT" profile "$int8" --device cuda >"$OUT/$m.b$b.int8.profile.log" 2>&1 || true
    echo "-- $m b$b int8 profile:"
    head -"${PROFILE_LINES:-25}" "$OUT/$m.b$b.int8.profile.log"
    if [ "${NCU:-0}" = 1 ]; then  # each kernel's device time by Nsight Compute, named by its node
      ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
      for p in fp16 int8; do
        for mode in kernel none; do
          INGOT_NVTX=1 timeout "${NCU_TIMEOUT:-120}" "$ncu_bin" --clock-control none --cache-control none --nvtx \
            --print-nvtx-rename "$mode" --metrics gpu__time_duration.sum --csv \
            "$INGOT" profile "$WORK/$m.b$b.$p.ingot" --device cuda --warmup 2 --runs 1 \
            >"$OUT/$m.b$b.$p.ncu.$mode.csv" 2>"$OUT/$m.b$b.$p.ncu.log" || echo "int8_gpu: $m b$b $p ncu ($mode) failed"
        done
        "$PY" "$ROOT/bench/ncu_kernels.py" "$OUT/$m.b$b.$p.ncu.kernel.csv" "$OUT/$m.b$b.$p.ncu.none.csv" --runs 3 \
          >"$OUT/$m.b$b.$p.kernels.md" 2>&1 || echo "int8_gpu: $m b$b $p kernel table failed"
        echo "-- $m b$b $p kernels (ncu):"
        head -"${PROFILE_LINES:-25}" "$OUT/$m.b$b.$p.kernels.md"
      done
    fi
    if [ "$b" = 1 ]; then
      "$INGOT" run "$int8" --device cuda --input "input=$WORK/$m.b1.input.npy" --output-dir "$WORK/$m.int8.out" \
        >"$OUT/$m.int8.run.log" 2>&1 || echo "int8_gpu: $m int8 run failed"
    fi
    "$PY" - "$OUT" "$WORK" "$m" "$b" >>"$OUT/int8.md" <<'EOF'
import glob, json, os, sys
import numpy as np
out, work, m, b = sys.argv[1:5]
def median(p):
    try:
        with open(os.path.join(out, f"{m}.b{b}.{p}.bench.json")) as f:
            j = json.load(f)
        return float(j.get("median_ms", j.get("median", float("nan"))))
    except Exception:
        return float("nan")
f16, i8 = median("fp16"), median("int8")
cos = err = ""
if b == "1":
    outs = sorted(glob.glob(os.path.join(work, f"{m}.int8.out", "*.npy")))
    ref = os.path.join(work, f"{m}.b1.output.npy")
    if outs and os.path.exists(ref):
        y, r = np.load(outs[0]).astype(np.float64).ravel(), np.load(ref).astype(np.float64).ravel()
        cos = f"{float(y @ r / (np.linalg.norm(y) * np.linalg.norm(r) + 1e-30)):.4f}"
        err = f"{float(np.max(np.abs(y - r))):.3g} (ref max {float(np.max(np.abs(r))):.3g})"
print(f"| {m} | {b} | {f16:.3f} | {i8:.3f} | {f16 / i8:.2f}x | {cos} | {err} |")
EOF
  done
done
if [ -n "${AB_SWITCH:-}" ]; then
  values="${AB_VALUES:-0 1}"
  header="| int8 package |" rule="|---|"
  for v in $values; do header="$header $AB_SWITCH=$v ms |" rule="$rule---:|"; done
  printf '\n%s\n%s\n' "$header" "$rule" >>"$OUT/int8.md"
  for m in $MODELS; do for b in $BATCHES; do for _ in 1 2; do
    row="| $m b$b |"
    for v in $values; do
      ms=$(env "$AB_SWITCH=$v" "$INGOT" bench "$WORK/$m.b$b.int8.ingot" --device cuda --device-io --warmup "${WARMUP:-20}" \
        --iterations "${ITERATIONS:-100}" 2>&1 | grep -o 'median [0-9.]*' | head -1 | cut -d' ' -f2)
      row="$row ${ms:-failed} |"
    done
    echo "$row" >>"$OUT/int8.md"
  done; done; done
fi
cat "$OUT/int8.md"
