#!/usr/bin/env bash
# Ingot against PyTorch on the GPU machine (issue 5): ResNet-50, MobileNetV3-Large and a Whisper-tiny
# encoder with random weights, exported from PyTorch there (bench/torch_models.py export), then
#   ingot  steady-state latency (`ingot bench`, batch 1 and 32) of the .onnx file (fp32) and of a
#          package per batch size and precision (`ingot convert --device cuda --precision P
#          --input-shape input=<dims>`: static shapes let the passes fold the shape arithmetic and fuse
#          the residual Adds); Ingot's batch-1 output against torch's float32 CPU output;
#   cold   process start to first output (bench/cold_start.py: median of COLD_REPS fresh `ingot run`
#          processes after one warm-up) from the .onnx and from the batch-1 package, on cuda and on
#          the CPU; the real models too when REAL_MODELS is set;
#   torch  PyTorch eager, torch.compile and torch.compile(mode="reduce-overhead"), fp32 and fp16,
#          batch 1 and 32, same inputs (bench/torch_models.py bench);
#   report OUTDIR/compare.md (bench/compare_report.py).
#
# Usage, from the repository root on the GPU machine (python3 with torch, torchvision, numpy;
# transformers optional):
#   bash bench/compare_torch.sh INGOT_BINARY OUTDIR
# or with the bundle's binary: `bash scripts/gpu-test.sh run torch` (results in $OUT/torch).
#
# Time. torch.compile dominates: 12 cases (3 models x 2 batch sizes x 2 precisions) x 2 modes, each
# a fresh compilation (the second mode of a case reuses Inductor's on-disk caches), on the order of
# 10-30 s each. Expected on one H200 (16 host cores): export ~40 s, ingot ~1.5 min, cold ~1.5 min,
# torch: steady state ~1 min plus compilation, which stops once the run has used TOTAL_BUDGET_S
# (default 480 s, i.e. 8 minutes in all); variants left out are listed as "skipped: compile budget".
# To measure everything, split the work over two calls and merge the results afterwards:
#   SKIP=torch bash bench/compare_torch.sh INGOT OUT_A              (~4 min)
#   SKIP="ingot cold" bash bench/compare_torch.sh INGOT OUT_B       (~6-8 min: all of it for torch)
#   python3 bench/compare_report.py OUT_A OUT_B > compare.md
#
# Environment (defaults in brackets):
#   PYTHON [python3]  MODELS [resnet50 mobilenet_v3_large whisper_tiny_encoder]
#   BATCHES ["1 32"]  PRECISIONS ["fp32 fp16"]
#   CASES                              "MODEL:BATCH:PRECISION ..." (e.g. "resnet50:32:fp32
#                                      whisper_tiny_encoder:1:fp32"): only these cases in the ingot and
#                                      torch steps (one compilation each; the .onnx runs are left out), for a
#                                      same-call check of a few cases when device time is short
#   WARMUP [20] ITERATIONS [100]       warm-up and timed runs, for torch and `ingot bench` alike
#   TOTAL_BUDGET_S [480]               the torch step's compile budget is what is left of this after the
#                                      steps before it, minus TORCH_RESERVE_S [120] for its steady state
#   COMPILE_BUDGET_S                   a fixed compile budget instead (seconds of first calls)
#   TORCH_VARIANTS ["eager reduce-overhead compile"]  run in this order, so the budget cuts the last
#   COLD_REPS [5]  COLD_THREADS [2]    cold-start repetitions and `ingot run --threads`
#   REAL_MODELS, REAL_INPUTS           the real models and their inputs (the bundle's data/models and
#                                      data/inputs): adds their cold start (~2.5 min)
#   WORK [OUTDIR/work]                 exported models, inputs, packages and Ingot's outputs (~1.3 GB);
#                                      OUTDIR gets only logs, JSON and Markdown (~1 MB)
#   SKIP [none; any of: export ingot cold torch report]  steps to leave out (export: reuse WORK)
#   DEVICE [cuda]  COLD_DEVICES ["cuda cpu"]  DEVICE=cpu runs every step without a GPU (a debug run)
# Every step logs to OUTDIR and a failing step does not stop the others.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"
usage_unless $# 2
INGOT="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
OUTDIR="$2"
PY="${PYTHON:-python3}"
BATCHES="${BATCHES:-1 32}"
PRECISIONS="${PRECISIONS:-fp32 fp16}"
MODELS="${MODELS:-resnet50 mobilenet_v3_large whisper_tiny_encoder}"
WARMUP="${WARMUP:-20}"
ITERATIONS="${ITERATIONS:-100}"
SKIP=" ${SKIP:-} "
DEVICE="${DEVICE:-cuda}"
WORK="${WORK:-$OUTDIR/work}"
M="$WORK/models"
I="$OUTDIR/ingot"
mkdir -p "$M" "$I" "$WORK/outputs"
T0=$SECONDS
step() { echo "==== [$((SECONDS - T0)) s] $*"; }
skip() { [[ "$SKIP" == *" $1 "* ]]; }
CASES="${CASES:-}"
want() { [ -z "$CASES" ] || [[ " $CASES " == *" $1:$2:$3 "* ]]; }  # MODEL BATCH PRECISION

ingot_step() {  # NAME CMD...: runs CMD, output in $I/NAME.log; on failure keeps the log's tail in $I/NAME.err
  local name="$1" rc=0
  shift
  "$@" >"$I/$name.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    rm -f "$I/$name.err"
  else
    { echo "exit $rc: $*"; tail -n 5 "$I/$name.log"; } >"$I/$name.err"
    echo "FAILED $name: $(tail -n 1 "$I/$name.log")"
  fi
}

if ! skip export; then
  step "export (bench/torch_models.py export)"
  # shellcheck disable=SC2086
  "$PY" "$ROOT/bench/torch_models.py" export --out "$M" --batches $BATCHES --only $MODELS >"$OUTDIR/export.log" 2>&1
  echo "exit $?"
  grep -v 'Warning\|warnings.warn\|^ ' "$OUTDIR/export.log"
fi
if [ ! -f "$M/models.json" ]; then
  echo "compare_torch.sh: no exported models in $M (see $OUTDIR/export.log)" >&2
  exit 1
fi
cp "$M/models.json" "$OUTDIR/models.json"

if ! skip ingot; then
  step "Ingot: convert, bench, batch-1 outputs on $DEVICE"
  # Where `ingot run` has --repeat, the output checked is the third run's (a planned / replayed run).
  repeat=()
  "$INGOT" run --help 2>/dev/null | grep -q -- '--repeat' && repeat=(--repeat 3)
  # The package is timed twice: with inputs and outputs on the GPU (--device-io: like torch's
  # numbers, the comparison column) and through host tensors (ingot/*.ingot-host.json).
  device_io=()
  "$INGOT" bench --help 2>/dev/null | grep -q -- '--device-io' && [ "$DEVICE" = cuda ] && device_io=(--device-io)
  for m in $MODELS; do
    for b in $BATCHES; do
      in="$M/$m.b$b.input.npy"
      if [ -z "$CASES" ]; then
        ingot_step "$m.b$b.fp32.onnx" "$INGOT" bench "$M/$m.onnx" --device "$DEVICE" --input "input=$in" --batch "$b" \
          --warmup "$WARMUP" --iterations "$ITERATIONS" --json "$I/$m.b$b.fp32.onnx.json"
      fi
      for p in $PRECISIONS; do
        want "$m" "$b" "$p" || continue
        pkg="$M/$m.b$b.$p.ingot"
        start=$(date +%s%N)
        ingot_step "$m.b$b.$p.convert" "$INGOT" convert "$M/$m.onnx" -o "$pkg" --quiet --device "$DEVICE" \
          --precision "$p" --input-shape "input=$(model_dims "$m" "$b")"
        echo "{\"convert_ms\": $((($(date +%s%N) - start) / 1000000))}" >"$I/$m.b$b.$p.convert.json"
        ingot_step "$m.b$b.$p.ingot" "$INGOT" bench "$pkg" --device "$DEVICE" --input "input=$in" --batch "$b" \
          --warmup "$WARMUP" --iterations "$ITERATIONS" --json "$I/$m.b$b.$p.ingot.json" ${device_io[@]+"${device_io[@]}"}
        if [ ${#device_io[@]} -gt 0 ]; then
          ingot_step "$m.b$b.$p.ingot-host" "$INGOT" bench "$pkg" --device "$DEVICE" --input "input=$in" --batch "$b" \
            --warmup "$WARMUP" --iterations "$ITERATIONS" --json "$I/$m.b$b.$p.ingot-host.json"
        fi
        if [ "$b" = 1 ]; then
          ingot_step "$m.b1.$p.run" "$INGOT" run "$pkg" --device "$DEVICE" --input "input=$in" \
            -o "$WORK/outputs/$m.$p" ${repeat[@]+"${repeat[@]}"}
        fi
      done
      grep -H '^latency' "$I/$m.b$b".*.log 2>/dev/null | sed "s|^$I/||; s/\.log:latency//"
    done
  done
  "$PY" "$ROOT/bench/compare_report.py" --check-outputs "$WORK" --device "$DEVICE" >"$I/output-errors.json"
fi

if ! skip cold; then
  for dev in ${COLD_DEVICES:-cuda cpu}; do
    step "cold start on $dev (bench/cold_start.py)"
    "$PY" "$ROOT/bench/cold_start.py" --ingot "$INGOT" --spec "$M/models.json" --cache "$M" --inputs "$M" \
      --device "$dev" --reps "${COLD_REPS:-5}" --threads "${COLD_THREADS:-2}" --markdown \
      --json "$OUTDIR/cold-$dev.json" 2>"$OUTDIR/cold-$dev.log" | tee "$OUTDIR/cold-$dev.md"
    if [ -n "${REAL_MODELS:-}" ]; then
      "$PY" "$ROOT/bench/cold_start.py" --ingot "$INGOT" --cache "$REAL_MODELS" --inputs "${REAL_INPUTS:?}" \
        --device "$dev" --reps "${COLD_REPS:-5}" --threads "${COLD_THREADS:-2}" --markdown \
        --json "$OUTDIR/cold-real-$dev.json" 2>"$OUTDIR/cold-real-$dev.log" | tee "$OUTDIR/cold-real-$dev.md"
    fi
  done
fi

if ! skip torch; then
  budget="${COMPILE_BUDGET_S:-$((${TOTAL_BUDGET_S:-480} - (SECONDS - T0) - ${TORCH_RESERVE_S:-120}))}"
  [ "$budget" -lt 30 ] && budget=30
  step "PyTorch (bench/torch_models.py bench), compile budget ${budget} s"
  # shellcheck disable=SC2086
  "$PY" "$ROOT/bench/torch_models.py" bench --models "$M" --batch $BATCHES --precision $PRECISIONS \
    --only $MODELS --variants ${TORCH_VARIANTS:-eager reduce-overhead compile} --warmup "$WARMUP" \
    --iterations "$ITERATIONS" --compile-budget-s "$budget" --device "$DEVICE" --json "$OUTDIR/torch.json" \
    ${CASES:+--cases $CASES} >"$OUTDIR/torch.log" 2>&1
  echo "exit $?"
  grep -E '^(torch |[a-z_0-9]+ +b[0-9]+ |compiled )|Error' "$OUTDIR/torch.log" | tail -n 60
fi

if ! skip report; then
  step "report"
  "$PY" "$ROOT/bench/compare_report.py" "$OUTDIR" >"$OUTDIR/compare.md" && cat "$OUTDIR/compare.md"
fi
step "done: $OUTDIR/compare.md"
