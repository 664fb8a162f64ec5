#!/usr/bin/env bash
# GPU tests in two steps (CONTRIBUTING.md):
#
#   scripts/gpu-test.sh bundle        here (Debian, with CUDA's compiler, no GPU needed): builds,
#                                     then packs into .gpu-bundle/ the binaries, the non-system
#                                     shared libraries they load, the ONNX node suite, the real
#                                     models and their inputs.
#   scripts/gpu-test.sh run [WHAT]    on the GPU machine, in the repository root, with .gpu-bundle/
#                                     beside it: unpacks and runs WHAT (default: all) and prints a
#                                     summary. WHAT is any of: unit node models fp16 gradcheck autograd train trainbench profile latency
#                                     bench apps memcheck all, racecheck and synccheck (only when named;
#                                     SANITIZER_FILTER=PATTERN limits the tests under compute-sanitizer; racecheck and
#                                     synccheck instrument Ingot's kernels only, SANITIZER_KERNELS=all every kernel), python (only when named; bundle with
#                                     INGOT_BUNDLE_PYTHON=1: the Python module built there, its tests,
#                                     the custom-op story, the extension reload bench), and torch (only when named: ~8 minutes,
#                                     bench/compare_torch.sh; needs python3 with torch and torchvision)
#                                     and int8 (only when named: bench/int8_gpu.sh, int8 vs fp16 packages),
#                                     and switches (only when named: bench/switch_ab_gpu.sh, run-time switches
#                                     side by side on exported float packages: CASES, SETTINGS),
#                                     and breakdown (only when named: bench/breakdown_gpu.sh, per CASES entry
#                                     (MODEL:BATCH:PRECISION) Ingot's slowest nodes beside eager torch's kernels),
#                                     and pool (only when named: ResNet-50 b32 fp16/int8/fp32 packages converted
#                                     with INGOT_CUDA_NHWC_POOL=0 and =1, side by side; needs torch),
#                                     and startup (only when named: cold-start floor and phases, fresh processes),
#                                     and ddp (only when named: data-parallel over NCCL on every GPU of the machine:
#                                     the collectives/DDP check, ResNet-50 AMP scaling beside PyTorch DDP, the
#                                     Fashion-MNIST example with --gpus when bundled with INGOT_BUNDLE_TRAINING=1),
#                                     and ab (only when named: the previous build bundled with
#                                     INGOT_PREV_BUILD=<build folder> against this one, bench/ab_latency.py).
#                                     Logs go to $OUT (or ./gpu-results) when set.
#
# The GPU machine needs only the NVIDIA driver, CUDA's cuBLAS and cuDNN 9 (found wherever they are
# installed) and python3 with numpy; nothing is compiled there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/.gpu-bundle"
BUILD="${INGOT_BUILD_DIR:-$ROOT/build}"

# Libraries every Linux with a CUDA driver provides (glibc, the C++ runtime, the driver, CUDA's
# own libraries): these are never bundled.
SYSTEM_LIBS='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudnn|libcublas|libcudart|libnvrtc|libz\.)'

bundle() {
  bash "$ROOT/scripts/bootstrap.sh"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$BUILD"
  grep -q "INGOT_HAS_CUDA:INTERNAL=ON\|Ingot CUDA backend: ON" "$BUILD/CMakeCache.txt" 2>/dev/null ||
    test -f "$BUILD/tests/ingot-gpu-tests" || { echo "gpu-test.sh: the build has no CUDA backend (nvcc missing?)" >&2; exit 1; }
  local stage
  stage="$(mktemp -d)"
  mkdir -p "$stage/bin" "$stage/lib" "$stage/data/models" "$stage/data/inputs"
  # INGOT_BUNDLE_SKIP="ingot-bench-gpu ...": binaries left out to keep the bundle under the device
  # tool's 64 MiB (each is ~8 MB compressed; `unit` and `memcheck` need ingot-gpu-tests, `bench`
  # ingot-bench-gpu).
  for b in "$BUILD/tools/ingot/ingot" "$BUILD/tests/ingot-gpu-tests" "$BUILD/tests/ingot-ddp-worker" "$BUILD"/bench/ingot-bench-*; do
    [[ " ${INGOT_BUNDLE_SKIP:-} " == *" $(basename "$b") "* ]] && continue
    [ -x "$b" ] && cp "$b" "$stage/bin/"
  done
  # A previous build to compare with side by side (the `ab` part): INGOT_PREV_BUILD=<its build folder>.
  if [ -n "${INGOT_PREV_BUILD:-}" ]; then
    mkdir -p "$stage/prev"
    for f in bench/ingot-bench-latency tools/ingot/ingot; do  # what the folder has of them
      if [ -x "$INGOT_PREV_BUILD/$f" ]; then cp "$INGOT_PREV_BUILD/$f" "$stage/prev/"; fi
    done
    strip "$stage"/prev/*
  fi
  # INGOT_BUNDLE_TRAINING=1: the training example (it links libingot.so) and Fashion-MNIST (30 MB)
  # for the `train` part; with INGOT_BUNDLE_NO_SUITES=1 the node suite and the real models stay
  # out to make room.
  if [ "${INGOT_BUNDLE_TRAINING:-0}" = 1 ]; then
    cp "$BUILD/apps/ingot-fashion-mnist" "$stage/bin/"
    mkdir -p "$stage/data/fashion-mnist"
    cp /usr/share/datasets/fashion-mnist/*.gz "$stage/data/fashion-mnist/"
  fi
  # INGOT_BUNDLE_PYTHON=1: what the `python` part needs to build Ingot's Python module for the GPU
  # machine's own python3 (another version than Debian's): libingot.so and the headers its public
  # headers include (fmt, DLPack).
  if [ "${INGOT_BUNDLE_PYTHON:-0}" = 1 ]; then
    cp -L "$BUILD/libingot.so" "$stage/bin/"
    mkdir -p "$stage/include"
    cp -r /usr/include/fmt /usr/include/dlpack "$stage/include/"
  fi
  # The apps (the `apps` part; they link libingot.so, which the loop below bundles).
  for b in "$BUILD/apps/ingot-ocr" "$BUILD/apps/ingot-vad"; do
    [[ " ${INGOT_BUNDLE_SKIP:-} " == *" $(basename "$b") "* ]] && continue
    [ -x "$b" ] && cp "$b" "$stage/bin/"
  done
  strip "$stage"/bin/*
  for b in "$stage"/bin/*; do
    ldd "$b" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      if ! [[ "$name" =~ $SYSTEM_LIBS ]]; then cp -L -n "$path" "$stage/lib/"; fi
    done
  done
  if [ "${INGOT_BUNDLE_NO_SUITES:-0}" != 1 ]; then
    # INGOT_BUNDLE_NO_NODE=1: the real models without the node suite (room for ingot-gpu-tests).
    [ "${INGOT_BUNDLE_NO_NODE:-0}" = 1 ] || cp -r /usr/share/libonnx-testdata/data/node "$stage/data/node"
    local cache
    cache="$(bash "$ROOT/scripts/fetch-models.sh")"
    for f in ch_PP-OCRv4_det_infer.onnx ch_PP-OCRv4_rec_infer.onnx ch_ppocr_mobile_v2.0_cls_infer.onnx \
             face_detection_front_128x128_barracuda.onnx face_detection_back_256x256_barracuda.onnx silero_vad.onnx; do
      cp "$(find "$cache" -name "$f" | head -1)" "$stage/data/models/"
    done
    /usr/bin/python3 "$ROOT/tests/models/make_inputs.py" "$stage/data/inputs" >/dev/null
  fi
  # The apps (the `apps` part): ingot-ocr and ingot-vad, their models, page.png, the LibriVox
  # recordings and onnxruntime's VAD references (there is no node on the GPU machine).
  if [ -x "$stage/bin/ingot-ocr" ] && [ -x "$stage/bin/ingot-vad" ]; then
    local cache
    cache="$(bash "$ROOT/scripts/fetch-models.sh")"
    mkdir -p "$stage/data/apps/models" "$stage/data/apps/librivox"
    cp "$cache"/ocr-models/assets/* "$cache/silero-vad/weights/silero_vad.onnx" "$stage/data/apps/models/"
    cp /usr/lib/python3/dist-packages/skimage/data/page.png "$stage/data/apps/"
    cp /usr/share/pocketsphinx/test/data/librivox/*.wav "$stage/data/apps/librivox/"
    /usr/bin/python3 "$ROOT/tests/apps/vad_test.py" --app "$BUILD/apps/ingot-vad" \
      --write-references "$stage/data/apps/vad-references" >/dev/null
  fi
  # The commit the binaries were built from (the device machine's copy of the tree may carry an
  # older .git): reports name it (INGOT_BUILD_COMMIT).
  (cd "$ROOT" && echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include || echo '+changes')") \
    >"$stage/commit.txt" 2>/dev/null || true
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE"
  # The smallest xz makes (the device tool carries at most 64 MiB with the working tree): one thread
  # and a 256 MiB window, so that the statically linked binaries (~70 MB each, mostly the same
  # kernels) compress as one plus their differences. Binaries first, side by side.
  tar -C "$stage" -cf - bin lib $(cd "$stage" && ls | grep -v '^bin$\|^lib$') |
    xz -T1 --lzma2=preset=9e,dict=256MiB > "$BUNDLE/bundle.tar.xz"
  rm -rf "$stage"
  echo "gpu-test.sh: $(du -h "$BUNDLE/bundle.tar.xz" | cut -f1) in $BUNDLE/bundle.tar.xz"
}

find_lib_dir() {  # directory holding library $1 on this machine
  local hit
  hit="$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')"
  [ -z "$hit" ] && hit="$(find / -xdev -name "$1" 2>/dev/null | head -1 || true)"
  [ -n "$hit" ] && dirname "$hit"
}

# Unpacks the bundle into $1 (once per bundle: a stamp names the archive's size and time) and exports
# LD_LIBRARY_PATH for its binaries.
unpack() {
  local dir="$1" stamp
  mkdir -p "$dir"
  stamp="$(stat -c '%s %Y' "$BUNDLE/bundle.tar.xz")"
  if [ "$(cat "$dir/.unpacked" 2>/dev/null)" != "$stamp" ]; then
    xz -dc "$BUNDLE/bundle.tar.xz" | tar -C "$dir" -xf -
    echo "$stamp" >"$dir/.unpacked"
  fi
  local libs="$dir/lib"
  # NVRTC, where the machine has one (generated kernels; without it they run the interpreter), and
  # NCCL (the ddp part; 218 MB, never bundled: PyTorch's wheel brings one).
  for l in libcudnn.so.9 libcublasLt.so.13 libcublas.so.13 libnvrtc.so.13 libnvrtc.so.12 libnccl.so.2; do
    local d
    d="$(find_lib_dir "$l" || true)"
    [ -n "$d" ] && libs="$libs:$d"
  done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -f "$dir/commit.txt" ] && export INGOT_BUILD_COMMIT="$(cat "$dir/commit.txt")"
  return 0
}

run() {
  local what="${1:-all}" dir=/tmp/ingot-gpu out="${OUT:-$ROOT/gpu-results}"
  mkdir -p "$out"
  unpack "$dir"
  local ingot="$dir/bin/ingot" summary=()
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  want() { [ "$what" = all ] || [[ " $what " == *" $1 "* ]]; }

  if want unit; then
    local rc=0
    # The concurrency test reads the real models from the bundle.
    # GPU_TEST_FILTER=PATTERN: only those tests (gtest's --gtest_filter), and none of the variants below.
    # gpu-unit.json: every test's time (the whole suite took 189 s of device time on an H100).
    INGOT_MODEL_CACHE="$dir/data/models" "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter="${GPU_TEST_FILTER:-*}" \
      --gtest_output="json:$out/gpu-unit.json" >"$out/gpu-unit.log" 2>&1 || rc=$?
    tail -n 40 "$out/gpu-unit.log"
    python3 -c "import json, sys; t = [(float(c['time'].rstrip('s')), s['name'] + '.' + c['name']) for s in json.load(open(sys.argv[1]))['testsuites'] for c in s['testsuite']]; print('slowest:', ', '.join(f'{n} {s:.1f} s' for s, n in sorted(t)[::-1][:8]))" \
      "$out/gpu-unit.json" 2>/dev/null || true
    summary+=("unit: $(grep -E '^\[  PASSED  \]|FAILED TEST' "$out/gpu-unit.log" | tr '\n' ' ') (exit $rc)")
  fi
  if want unit && [ -z "${GPU_TEST_FILTER:-}" ]; then
    # The fused elementwise kernels again without NVRTC: the interpreter kernel.
    rc=0
    INGOT_NO_NVRTC=1 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter='FusedElementwise*' \
      >"$out/gpu-unit-interpreter.log" 2>&1 || rc=$?
    tail -n 8 "$out/gpu-unit-interpreter.log"
    summary+=("unit, fused kernels without NVRTC: $(grep -E '^\[  PASSED  \]|FAILED TEST' "$out/gpu-unit-interpreter.log" | tr '\n' ' ') (exit $rc)")
    # Convolutions again through cuDNN's legacy API (the graph API is the default), NCHW depthwise
    # layers through cuDNN too (Ingot's kernel is the default).
    rc=0
    INGOT_CUDNN_GRAPH=0 INGOT_DEPTHWISE_NCHW=0 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter='*Conv*:CudaChannelsLast*' \
      >"$out/gpu-unit-legacy-conv.log" 2>&1 || rc=$?
    tail -n 8 "$out/gpu-unit-legacy-conv.log"
    summary+=("unit, convolutions through cuDNN's legacy API: $(grep -E '^\[  PASSED  \]|FAILED TEST' "$out/gpu-unit-legacy-conv.log" | tr '\n' ' ') (exit $rc)")
    # Attention through the materialized path only (the flash kernel is the default for 16-bit and float32).
    rc=0
    INGOT_FLASH_ATTENTION=0 INGOT_CUDNN_ATTENTION=0 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter='CudaAttention.*-CudaAttention.Cudnn*' \
      >"$out/gpu-unit-attention-materialized.log" 2>&1 || rc=$?
    tail -n 8 "$out/gpu-unit-attention-materialized.log"
    summary+=("unit, attention without the flash kernel: $(grep -E '^\[  PASSED  \]|FAILED TEST' "$out/gpu-unit-attention-materialized.log" | tr '\n' ' ') (exit $rc)")
    # The cold tier (INGOT_CUDA_COLD_KERNELS, cuda_runtime.h): its own test with the switch at 1, then
    # the convolution and product tests with every call on its tiled kernel (2).
    rc=0
    { INGOT_CUDA_COLD_KERNELS=1 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter='*ColdTier*' &&
      INGOT_CUDA_COLD_KERNELS=2 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 \
        --gtest_filter='*Conv*:*MatMul*:*Gemm*:CudaChannelsLast*:-*Stored*:*Serialized*:*RepeatedCalls*:*ColdTier*:CudaTuning*'
    } >"$out/gpu-unit-cold-tier.log" 2>&1 || rc=$?
    tail -n 8 "$out/gpu-unit-cold-tier.log"
    summary+=("unit, convolutions and products on the cold tier: $(grep -E '^\[  PASSED  \]|FAILED TEST' "$out/gpu-unit-cold-tier.log" | tr '\n' ' ') (exit $rc)")
    # Depthwise convolutions on the scalar kernel only (the vectorized one is the default).
    rc=0
    INGOT_DEPTHWISE_VEC=0 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter='CudaFusedConv*:CudaConv*' \
      >"$out/gpu-unit-depthwise-scalar.log" 2>&1 || rc=$?
    tail -n 8 "$out/gpu-unit-depthwise-scalar.log"
    summary+=("unit, depthwise on the scalar kernel: $(grep -E '^\[  PASSED  \]|FAILED TEST' "$out/gpu-unit-depthwise-scalar.log" | tr '\n' ' ') (exit $rc)")
  fi
  if want node; then
    # A crash in one case must not hide the rest: resume after it (test-onnx prints CRASH <case>).
    local start=() rc
    : >"$out/node-cuda.log"
    for _ in $(seq 1 50); do
      rc=0
      "$ingot" test-onnx "$dir/data/node" --device cuda --verbose "${start[@]}" >>"$out/node-cuda.log" 2>&1 || rc=$?
      [ "$rc" -eq 3 ] || break
      start=(--start-after "$(grep '^CRASH ' "$out/node-cuda.log" | tail -n 1 | cut -d' ' -f2)")
    done
    local pass fail crash
    pass=$(grep -c '^PASS ' "$out/node-cuda.log" || true)
    fail=$(grep -c '^FAIL ' "$out/node-cuda.log" || true)
    crash=$(grep -c '^CRASH ' "$out/node-cuda.log" || true)
    grep '^FAIL \|^CRASH \|ran on the CPU instead' "$out/node-cuda.log" | cut -c1-300 | tail -n 60
    summary+=("node suite on cuda: $pass passed, $fail failed, $crash crashed of $((pass + fail + crash))")
  fi
  if want models; then
    local rc=0
    python3 "$ROOT/tests/models/run_model_tests.py" --ingot "$ingot" --models "$dir/data/models" \
      --inputs "$dir/data/inputs" --device cuda --no-fallbacks >"$out/models-cuda.log" 2>&1 || rc=$?
    cat "$out/models-cuda.log"
    summary+=("real models on cuda vs onnxruntime: exit $rc")
  fi
  if want fp16; then
    # Reduced precision on the GPU against the float32 onnxruntime references: the tolerance is
    # reported per model (docs/MODELS.md says what is expected).
    local p
    for p in fp16 bf16; do
      python3 "$ROOT/tests/models/run_model_tests.py" --ingot "$ingot" --models "$dir/data/models" \
        --inputs "$dir/data/inputs" --device cuda --precision "$p" --atol 2 --rtol 2 >"$out/models-cuda-$p.log" 2>&1 || true
      grep -E "^[a-z_0-9]+( step 0)?:|worst" "$out/models-cuda-$p.log" | head -n 40
    done
    summary+=("reduced precision on cuda: see models-cuda-fp16.log / models-cuda-bf16.log")
  fi
  if want profile; then
    # The PROFILING.md walkthrough: PP-OCR det with its Resize kernel hidden (a forced fallback),
    # then as shipped.
    local det="$dir/data/models/ch_PP-OCRv4_det_infer.onnx"
    INGOT_HIDE_CUDA_KERNELS=Resize "$ingot" profile "$det" --device cuda --runs 3 --warmup 2 \
      -i "x=$dir/data/inputs/det_x.npy" --trace "$out/det-fallback.json" --html "$out/det-fallback.html" \
      >"$out/det-fallback.txt" 2>&1 || true
    "$ingot" profile "$det" --device cuda --runs 3 --warmup 2 -i "x=$dir/data/inputs/det_x.npy" \
      --trace "$out/det-fixed.json" --html "$out/det-fixed.html" >"$out/det-fixed.txt" 2>&1 || true
    cat "$out/det-fallback.txt" "$out/det-fixed.txt"
    summary+=("profile: det-fallback.* and det-fixed.*")
  fi
  if want latency; then
    # Steady-state latency of the real models on the GPU with the profiler off and on (its overhead).
    python3 "$ROOT/tests/profiler/measure_overhead.py" --bench "$dir/bin/ingot-bench-latency" --device cuda \
      --models "$dir/data/models" --inputs "$dir/data/inputs" --rounds 5 --runs 100 2>&1 | tee "$out/latency-cuda.md"
    summary+=("latency and profiler overhead on cuda: latency-cuda.md")
  fi
  if [[ " $what " == *" ab "* ]] && [ -x "$dir/prev/ingot-bench-latency" ]; then
    # Only when named: the previous build (bundled from INGOT_PREV_BUILD) against this one, side by side.
    python3 "$ROOT/bench/ab_latency.py" --a "$dir/prev/ingot-bench-latency" --b "$dir/bin/ingot-bench-latency" \
      --device cuda --models "$dir/data/models" --inputs "$dir/data/inputs" --rounds 5 --runs 50 2>&1 | tee "$out/ab-cuda.md"
    # Reduced precision's error against the float32 references, both builds (worst err/tolerance).
    local p b
    [ -x "$dir/prev/ingot" ] || echo "(no previous ingot bundled: latency only)"
    for p in $([ -x "$dir/prev/ingot" ] && echo fp16 bf16); do
      for b in prev bin; do
        python3 "$ROOT/tests/models/run_model_tests.py" --ingot "$dir/$b/ingot" --models "$dir/data/models" \
          --inputs "$dir/data/inputs" --device cuda --precision "$p" --atol 2 --rtol 2 >"$out/ab-$p-$b.log" 2>&1 || true
      done
      echo "-- $p worst err/tolerance (atol = rtol = 2), previous build | this build"
      paste -d'|' <(grep -oE '^[a-z_0-9]+(128|256)?:|worst err/tolerance [0-9.]+' "$out/ab-$p-prev.log") \
                  <(grep -oE 'worst err/tolerance [0-9.]+|^[a-z_0-9]+(128|256)?:' "$out/ab-$p-bin.log") | head -n 24
    done
    summary+=("previous build vs this one on cuda: ab-cuda.md, ab-fp16-*.log, ab-bf16-*.log")
  fi
  if [[ " $what " == *" python "* ]] && [ -f "$dir/bin/libingot.so" ]; then
    # Only when named (bundle with INGOT_BUNDLE_PYTHON=1): Ingot's Python module built here for this
    # machine's python3 against the bundled libingot.so, then the Python tests (the CUDA ones run
    # here only), the custom-op story on the GPU and on this machine's CPU, and the reload bench.
    local py="$dir/python" ext_suffix rc=0
    mkdir -p "$py/ingot"
    ln -sf libingot.so "$dir/bin/libingot.so.0"  # the soname the module records
    cp "$ROOT"/python/ingot/*.py "$ROOT"/python/ingot/*.pyi "$py/ingot/"
    ext_suffix="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
    c++ -O2 -std=c++20 -shared -fPIC $(python3 -m pybind11 --includes) -I"$ROOT/include" -I"$ROOT/src" -I"$dir/include" \
      "$ROOT/src/python/module.cpp" "$ROOT/src/python/training.cpp" -o "$py/ingot/_ingot$ext_suffix" "$dir/bin/libingot.so" -Wl,-rpath,"$dir/bin" \
      >"$dir/python-build.log" 2>&1 || { cat "$dir/python-build.log"; rc=1; }
    if [ "$rc" = 0 ]; then
      export INGOT_INCLUDE_DIR="$ROOT/include" INGOT_EXTENSIONS_DIR="$dir/extensions"
      PYTHONPATH="$py" INGOT_CLI="$ingot" python3 -m pytest -q -p no:cacheprovider "$ROOT/tests/python" \
        >"$out/python-pytest.log" 2>&1 || rc=$?
      tail -n 15 "$out/python-pytest.log"
      summary+=("python tests on this machine (CUDA ones included): $(tail -n 1 "$out/python-pytest.log") (exit $rc)")
      for d in cuda cpu; do
        INGOT_PYTHONPATH="$py" INGOT_CLI="$ingot" PYTHON=python3 bash "$ROOT/examples/custom-op/run.sh" --device "$d" \
          --out "$dir/customop-$d" >"$out/customop-$d.log" 2>&1 || rc=$?
        grep -E "^== |fallback nodes|ms$" "$out/customop-$d.log" | tail -n 8
        summary+=("custom-op story on $d: $(grep '^== '"$d" "$out/customop-$d.log" | tail -n 1)")
      done
      # The GPU story's timelines and numbers (the device tool brings back 8 files at most).
      for f in before.html after.html summary.json; do cp "$dir/customop-cuda/$f" "$out/customop-cuda-$f" 2>/dev/null || true; done
      PYTHONPATH="$py" python3 "$ROOT/bench/extension_reload.py" --cuda --json "$out/extension-reload.json" 2>&1 | tail -n 2
      summary+=("extension reload bench: extension-reload.json")
    fi
  fi
  if want bench && [ -x "$dir/bin/ingot-bench-gpu" ]; then
    "$dir/bin/ingot-bench-gpu" --json "$out/bench-gpu.json" 2>&1 | tee "$out/bench-gpu.log" || true
    if [ -f "$ROOT/bench/gpu_torch.py" ]; then
      python3 "$ROOT/bench/gpu_torch.py" --ingot-json "$out/bench-gpu.json" 2>&1 | tee "$out/bench-torch.log" || true
    fi
    summary+=("bench: see bench-gpu.log / bench-torch.log")
  fi
  if [[ " $what " == *" pool "* ]]; then
    # The channels-last max pool on CUDA (INGOT_CUDA_NHWC_POOL acts when a package is compiled): ResNet-50
    # at batch 32 as fp16, int8 (ingot quantize --symmetric) and fp32 packages converted with the switch
    # off and on, then `ingot bench --device-io` of each pair alternating, twice.
    local pw="$dir/pool-work" f p
    mkdir -p "$pw"
    {
      python3 "$ROOT/bench/torch_models.py" export --out "$pw" --batches 1 --only resnet50 >"$out/pool-export.log" 2>&1 ||
        echo "torch_models.py export failed (pool-export.log)"
      python3 -c "import os, sys, numpy as np; d = sys.argv[1]; os.makedirs(d, exist_ok=True); r = np.random.default_rng(7)
for i in range(8): np.save(os.path.join(d, f'{i}.npy'), r.standard_normal((1, 3, 224, 224)).astype(np.float32))" "$pw/calib"
      "$ingot" quantize "$pw/resnet50.onnx" -o "$pw/resnet50.qdq.onnx" --calib "$pw/calib" --symmetric -q >/dev/null 2>&1 ||
        echo "quantize failed"
      for f in 0 1; do
        INGOT_CUDA_NHWC_POOL=$f "$ingot" convert "$pw/resnet50.onnx" -o "$pw/fp16.$f.ingot" --device cuda --precision fp16 \
          --input-shape input=32,3,224,224 -q >/dev/null 2>&1 || echo "fp16 convert ($f) failed"
        INGOT_CUDA_NHWC_POOL=$f "$ingot" convert "$pw/resnet50.qdq.onnx" -o "$pw/int8.$f.ingot" --device cuda \
          --input-shape input=32,3,224,224 -q >/dev/null 2>&1 || echo "int8 convert ($f) failed"
      done
      "$ingot" convert "$pw/resnet50.onnx" -o "$pw/fp32.0.ingot" --device cuda --input-shape input=32,3,224,224 -q \
        >/dev/null 2>&1 || echo "fp32 convert failed"
      for _ in 1 2; do
        for p in fp16.0 fp16.1 int8.0 int8.1 fp32.0; do
          [ -f "$pw/$p.ingot" ] || continue
          echo "resnet50 b32 $p (INGOT_CUDA_NHWC_POOL=${p#*.}): $("$ingot" bench "$pw/$p.ingot" --device cuda --device-io --warmup 20 \
            --iterations 100 2>&1 | grep -o 'median [0-9.]* ms')"
        done
      done
      for p in fp16.1 int8.1 fp32.0; do
        [ -f "$pw/$p.ingot" ] && "$ingot" profile "$pw/$p.ingot" --device cuda --runs 5 2>&1 | sed -n 2,10p
      done
    } 2>&1 | tee "$out/pool.log"
    summary+=("pool: pool.log (ResNet-50 b32 with and without the channels-last max pool)")
  fi
  if [[ " $what " == *" switches "* ]]; then
    # Run-time switches side by side on exported float packages (bench/switch_ab_gpu.sh: CASES,
    # SETTINGS, ROUNDS; needs torch): switches/switches.md, written as it goes.
    WORK="$dir/switches-work" bash "$ROOT/bench/switch_ab_gpu.sh" "$ingot" "$out/switches" 2>&1 | tee "$out/switches.log" || true
    summary+=("switches: switches/switches.md (each setting's medians, alternating)")
  fi
  if [[ " $what " == *" int8 "* ]]; then
    # Int8 against float16 packages of ResNet-50 and MobileNetV3-Large exported here
    # (bench/int8_gpu.sh; needs python3 with torch and torchvision): int8/int8.md.
    WORK="$dir/int8-work" bash "$ROOT/bench/int8_gpu.sh" "$ingot" "$out/int8" 2>&1 | tee "$out/int8.log" || true
    summary+=("int8: int8/int8.md (int8 vs fp16 packages on the GPU)")
  fi
  if [[ " $what " == *" breakdown "* ]]; then
    # Where the cases' time goes, Ingot per node beside eager torch per kernel (bench/breakdown_gpu.sh,
    # CASES; needs torch): breakdown/breakdown.md and a file or two per case, written as it goes.
    WORK="$dir/breakdown-work" bash "$ROOT/bench/breakdown_gpu.sh" "$ingot" "$out/breakdown" 2>&1 | tee "$out/breakdown.log" || true
    summary+=("breakdown: breakdown/*.nodes.md, breakdown/*.torch.txt")
  fi
  if [[ " $what " == *" torch "* ]]; then
    # Ingot against PyTorch eager / torch.compile on models exported here (nothing from the bundle but
    # the binary): tables in torch/compare.md; models and packages stay in $dir/torch-work.
    # TORCH_COLD_REAL=1 adds the real models' cold start (~2.5 min more).
    local real=()
    [ "${TORCH_COLD_REAL:-0}" = 1 ] && real=(REAL_MODELS="$dir/data/models" REAL_INPUTS="$dir/data/inputs")
    env ${real[@]+"${real[@]}"} WORK="$dir/torch-work" bash "$ROOT/bench/compare_torch.sh" "$ingot" "$out/torch" 2>&1 |
      tee "$out/torch.log" || true
    summary+=("torch: torch/compare.md (Ingot vs PyTorch eager/compile; cold start)")
  fi
  if want train && [ -x "$dir/bin/ingot-fashion-mnist" ]; then
    # The Fashion-MNIST example on the GPU, then PyTorch's same network and step in the same call
    # (bench/fashion_mnist_torch.py); TRAIN_EPOCHS epochs each (default 10), for each precision in
    # TRAIN_PRECISIONS (default "fp32 bf16 fp16"); TRAIN_TIMEOUT seconds at most per run (default 200).
    local epochs="${TRAIN_EPOCHS:-10}" p
    for p in ${TRAIN_PRECISIONS:-fp32 bf16 fp16}; do
      timeout "${TRAIN_TIMEOUT:-200}" "$dir/bin/ingot-fashion-mnist" --device cuda --precision "$p" --epochs "$epochs" \
        --data "$dir/data/fashion-mnist" --json "$out/train-ingot-cuda-$p.json" --plot "$out/train-ingot-cuda-$p.png" \
        --profile "$out/train-ingot-cuda-$p-trace.json" >"$out/train-ingot-cuda-$p.log" 2>&1 || true
      grep -E "^epoch|accuracy|rror" "$out/train-ingot-cuda-$p.log" | tail -n 12
      # TRAIN_COMPILE=1: the same with --compile (one compiled graph per step; not fp16).
      if [ "${TRAIN_COMPILE:-0}" = 1 ] && [ "$p" != fp16 ]; then
        timeout "${TRAIN_TIMEOUT:-200}" "$dir/bin/ingot-fashion-mnist" --device cuda --precision "$p" --epochs "$epochs" --compile \
          --data "$dir/data/fashion-mnist" --json "$out/train-ingot-cuda-$p-compiled.json" >"$out/train-ingot-cuda-$p-compiled.log" 2>&1 || true
        grep -E "^epoch|accuracy|rror|compiled step" "$out/train-ingot-cuda-$p-compiled.log" | tail -n 12
      fi
      timeout "${TRAIN_TIMEOUT:-200}" python3 "$ROOT/bench/fashion_mnist_torch.py" --device cuda --precision "$p" --epochs "$epochs" \
        --data "$dir/data/fashion-mnist" --json "$out/train-torch-cuda-$p.json" >"$out/train-torch-cuda-$p.log" 2>&1 || true
      tail -n 3 "$out/train-torch-cuda-$p.log"
    done
    # TRAIN_LSTM_EPOCHS=N (default 0: none): the sequence version (--network lstm) as well.
    if [ "${TRAIN_LSTM_EPOCHS:-0}" -gt 0 ]; then
      timeout "${TRAIN_TIMEOUT:-200}" "$dir/bin/ingot-fashion-mnist" --device cuda --network lstm --epochs "$TRAIN_LSTM_EPOCHS" \
        --data "$dir/data/fashion-mnist" --json "$out/train-ingot-cuda-lstm.json" >"$out/train-ingot-cuda-lstm.log" 2>&1 || true
      grep -E "^epoch [0-9]+:|accuracy|rror" "$out/train-ingot-cuda-lstm.log" | tail -n 12
    fi
    summary+=("train: train-{ingot,torch}-cuda-PRECISION.json (Fashion-MNIST, $epochs epochs)")
  fi
  if [[ " $what " == *" ddp "* ]]; then
    # Data-parallel training over NCCL (docs/TRAINING.md, "Data-parallel training") on the machine's
    # GPUs (DDP_GPUS to use fewer), NCCL's multicast off as the issue asks:
    #  1. tests/distributed/ddp_worker.cpp under `ingot launch`: the collectives and DDP against one
    #     process on the whole batch, every rank over NCCL;
    #  2. ResNet-50 bf16 AMP training throughput on 1 GPU and on all of them, Ingot
    #     (ingot-bench-training --gpus N) and PyTorch DDP (torchrun) one after the other: the scaling;
    #  3. the Fashion-MNIST example with --gpus N (when bundled), its accuracy beside one GPU's.
    local ngpu
    ngpu="${DDP_GPUS:-$(nvidia-smi -L | wc -l)}"
    export NCCL_NVLS_ENABLE=0
    timeout 300 "$dir/bin/ingot" launch --nproc-per-node "$ngpu" "$dir/bin/ingot-ddp-worker" --device cuda 2>&1 |
      tee "$out/ddp-check.log" | tail -n "$((ngpu + 4))" || true
    local steps="${DDP_STEPS:-30}" batch="${DDP_BATCH:-128}" n
    for n in 1 "$ngpu"; do
      [ "$n" = 1 ] && [ "$ngpu" = 1 ] && continue  # one GPU: the DDP row is the 1-GPU row
      timeout 400 "$dir/bin/ingot-bench-training" --model resnet50 --device cuda --precision bf16 --batch "$batch"         --steps "$steps" --gpus "$n" 2>>"$out/ddp.err" | sed 's/^\[rank 0\] //; s/^{/{"engine":"ingot",/' >>"$out/ddp.jsonl" || true
      if [ "$n" = 1 ]; then
        timeout 400 python3 "$ROOT/bench/training_torch.py" --model resnet50 --precision bf16 --batch "$batch" --steps "$steps" \
          2>>"$out/ddp.err" | sed 's/^{/{"engine":"torch",/' >>"$out/ddp.jsonl" || true
      else
        timeout 400 python3 -m torch.distributed.run --nproc_per_node "$n" "$ROOT/bench/training_torch.py" --model resnet50 \
          --precision bf16 --batch "$batch" --steps "$steps" 2>>"$out/ddp.err" | sed 's/^{/{"engine":"torch",/' >>"$out/ddp.jsonl" || true
      fi
    done
    # The 1-GPU path through DDP (one rank, NCCL) beside no DDP at all: what the reducer costs.
    if [ "$ngpu" = 1 ]; then
      timeout 400 "$dir/bin/ingot-bench-training" --model resnet50 --device cuda --precision bf16 --batch "$batch" \
        --steps "$steps" 2>>"$out/ddp.err" | sed 's/^{/{"engine":"ingot no ddp",/' >>"$out/ddp.jsonl" || true
      WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 INGOT_RENDEZVOUS="file://$dir/rendezvous-1" timeout 400 "$dir/bin/ingot-bench-training" \
        --model resnet50 --device cuda --precision bf16 --batch "$batch" --steps "$steps" 2>>"$out/ddp.err" |
        sed 's/^{/{"engine":"ingot ddp",/' >>"$out/ddp.jsonl" || true
    fi
    cat "$out/ddp.jsonl" 2>/dev/null || true
    tail -n 5 "$out/ddp.err" 2>/dev/null || true
    if [ -x "$dir/bin/ingot-fashion-mnist" ]; then
      local e="${DDP_EPOCHS:-5}"
      for n in 1 "$ngpu"; do
        timeout 300 "$dir/bin/ingot-fashion-mnist" --device cuda --epochs "$e" --gpus "$n" --data "$dir/data/fashion-mnist" \
          --json "$out/ddp-fashion-$n.json" >"$out/ddp-fashion-$n.log" 2>&1 || true
        grep -E "accuracy|rror" "$out/ddp-fashion-$n.log" | tail -n 3
      done
    fi
    summary+=("ddp: ddp-check.log, ddp.jsonl (ResNet-50 bf16 on 1 and $ngpu GPUs), ddp-fashion-N.json")
  fi
  if want trainbench && [ -x "$dir/bin/ingot-bench-training" ]; then
    # Training steps side by side (bench/training_bench.cpp, bench/training_torch.py): for each
    # model, Ingot eager fp32 and AMP, PyTorch eager fp32 and AMP, and torch.compile AMP; one JSON
    # line each in trainbench.jsonl. TRAINBENCH_MODELS (default "fashion resnet50 transformer"),
    # TRAINBENCH_AMP (default bf16), TRAINBENCH_STEPS (default 20); TRAINBENCH_COMPILE=0 leaves
    # torch.compile out (its compilation takes a minute per model), TRAINBENCH_TORCH=0 PyTorch.
    # TRAINBENCH_INGOT_COMPILE=1 adds Ingot's compiled step (optim::CompiledStep) for fp32 and the
    # AMP precision (not fp16); TRAINBENCH_WGRAD16="1 2" adds AMP rows under INGOT_CONV_WGRAD_16BIT=N;
    # TRAINBENCH_PROFILE=1 prints each Ingot row's time per op type (trainbench.err).
    local m amp="${TRAINBENCH_AMP:-bf16}" steps="${TRAINBENCH_STEPS:-20}" prof=()
    [ "${TRAINBENCH_PROFILE:-0}" = 1 ] && prof=(--profile)
    for m in ${TRAINBENCH_MODELS:-fashion resnet50 transformer}; do
      for p in fp32 "$amp"; do
        timeout 300 "$dir/bin/ingot-bench-training" --model "$m" --device cuda --precision "$p" --steps "$steps" "${prof[@]}" \
          2>>"$out/trainbench.err" | sed 's/^{/{"engine":"ingot",/' >>"$out/trainbench.jsonl" || true
        if [ "${TRAINBENCH_INGOT_COMPILE:-0}" = 1 ] && [ "$p" != fp16 ]; then
          timeout 300 "$dir/bin/ingot-bench-training" --model "$m" --device cuda --precision "$p" --steps "$steps" --compile \
            "${prof[@]}" 2>>"$out/trainbench.err" | sed 's/^{/{"engine":"ingot compiled",/' >>"$out/trainbench.jsonl" || true
        fi
        if [ "$p" = "$amp" ]; then
          for w in ${TRAINBENCH_WGRAD16:-}; do
            INGOT_CONV_WGRAD_16BIT="$w" timeout 300 "$dir/bin/ingot-bench-training" --model "$m" --device cuda --precision "$p" \
              --steps "$steps" "${prof[@]}" 2>>"$out/trainbench.err" | sed "s/^{/{\"engine\":\"ingot wgrad16=$w\",/" \
              >>"$out/trainbench.jsonl" || true
          done
        fi
        [ "${TRAINBENCH_TORCH:-1}" = 1 ] || continue
        timeout 300 python3 "$ROOT/bench/training_torch.py" --model "$m" --precision "$p" --steps "$steps" \
          2>>"$out/trainbench.err" | sed 's/^{/{"engine":"torch",/' >>"$out/trainbench.jsonl" || true
      done
      if [ "${TRAINBENCH_COMPILE:-1}" = 1 ]; then
        timeout 400 python3 "$ROOT/bench/training_torch.py" --model "$m" --precision "$amp" --steps "$steps" --compile \
          2>>"$out/trainbench.err" | sed 's/^{/{"engine":"torch.compile",/' >>"$out/trainbench.jsonl" || true
      fi
    done
    cat "$out/trainbench.jsonl"
    tail -n 5 "$out/trainbench.err" 2>/dev/null || true
    summary+=("trainbench: trainbench.jsonl")
  fi
  if want autograd && [ -x "$dir/bin/ingot-bench-autograd" ]; then
    # Eager op and backward host costs and an MLP training step, eager and compiled, against PyTorch.
    for d in cuda cpu; do
      "$dir/bin/ingot-bench-autograd" --device "$d" --json "$out/autograd-ingot-$d.json" >/dev/null 2>"$out/autograd-ingot-$d.err" || true
      python3 "$ROOT/bench/autograd_torch.py" --device "$d" >"$out/autograd-torch-$d.json" 2>"$out/autograd-torch-$d.err" || true
    done
    [ -x "$dir/bin/ingot-bench-cuda-launch" ] && "$dir/bin/ingot-bench-cuda-launch" --json "$out/cuda-launch.json" >/dev/null 2>&1
    # The CPU step with fewer threads: how the MLP's small products scale on this host's cores.
    for t in 1 4; do
      "$dir/bin/ingot-bench-autograd" --device cpu --threads "$t" --json "$out/autograd-ingot-cpu-t$t.json" >/dev/null 2>&1 || true
      python3 "$ROOT/bench/autograd_torch.py" --device cpu --threads "$t" >"$out/autograd-torch-cpu-t$t.json" 2>/dev/null || true
    done
    summary+=("autograd costs: autograd-ingot-{cuda,cpu,cpu-t1,cpu-t4}.json, autograd-torch-{cuda,cpu,cpu-t1,cpu-t4}.json")
    summary+=("CPUs: nproc $(nproc), online $(getconf _NPROCESSORS_ONLN), cgroup cpu.max '$(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)'")
  fi
  if want gradcheck; then
    # Every gradient rule's float32 gradient on the GPU against the CPU's float64 one.
    local rc=0
    "$ingot" gradcheck --device cuda --json "$out/gradcheck-cuda.json" >"$out/gradcheck-cuda.log" 2>&1 || rc=$?
    grep -v '^PASS' "$out/gradcheck-cuda.log" | tail -n 30
    summary+=("gradcheck on cuda: $(tail -n 1 "$out/gradcheck-cuda.log") (exit $rc)")
  fi
  if [[ " $what " == *" startup "* ]]; then
    # Only when named: the cold start's floor and Ingot's share, fresh processes (docs/PERFORMANCE.md
    # "Cold start (H200)"). CUDA alone (bench/cuda_startup.cu: context, first kernel launch, handles,
    # exit = wall minus end of main), a one-node Relu model, and each real model from its package
    # (`ingot profile --cold` phases, then `ingot run` wall times).
    # STARTUP_PARTS (default "floor relu ppocr torch"): floor = ingot-bench-cuda-startup, relu = a
    # one-node model, ppocr = the PP-OCR packages (profile and 5 runs each); torch = the
    # issue's models (ResNet-50, MobileNetV3-Large, Whisper-tiny encoder exported here by
    # bench/torch_models.py, needs torch) as fp32 and fp16 packages (STARTUP_PRECISIONS) through
    # bench/cold_start.py: first output and process wall, with A/B variants (STARTUP_VARIANTS), then
    # `ingot profile --cold` of each package (phases on the timeline).
    local i t0 t1 m pkgs="$out/startup-packages" parts=" ${STARTUP_PARTS:-floor relu ppocr torch} "
    mkdir -p "$pkgs"
    wall() { t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); awk "BEGIN {printf \"%.0f\", ($t1 - $t0) * 1000}"; }
    {
      if [[ "$parts" == *" floor "* ]] && [ -x "$dir/bin/ingot-bench-cuda-startup" ]; then
        for i in 1 2 3 4 5; do
          t0=$(date +%s.%N); "$dir/bin/ingot-bench-cuda-startup" >"$out/cuda-startup-$i.txt"; t1=$(date +%s.%N)
          local end_ms wall_ms
          end_ms=$(sed -n 's/^end of main *\([0-9.]*\) ms since start.*/\1/p' "$out/cuda-startup-$i.txt")
          wall_ms=$(awk "BEGIN {printf \"%.0f\", ($t1 - $t0) * 1000}")
          echo "cuda-startup $i: context at $(sed -n 's/^cudaFree(0) (primary context) *\([0-9.]*\) ms since start.*/\1/p' "$out/cuda-startup-$i.txt") ms," \
            "first kernel launch $(sed -n 's/^first kernel launch (module load) .* \([0-9.]*\) ms$/\1/p' "$out/cuda-startup-$i.txt") ms," \
            "end of main at $end_ms ms, process wall $wall_ms ms (exit and exec: $(awk "BEGIN {printf \"%.0f\", $wall_ms - $end_ms}") ms)"
        done
        cat "$out/cuda-startup-1.txt"
      fi
      if [[ "$parts" == *" relu "* ]]; then
        python3 - "$pkgs/relu.onnx" <<'PYEOF'
import sys, onnx
from onnx import helper as h, TensorProto as T
g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "relu", [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 64])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PYEOF
        echo "relu.onnx on cuda, process wall ms: $(for i in 1 2 3 4 5; do echo -n "$(wall "$ingot" run "$pkgs/relu.onnx" --device cuda) "; done)"
      fi
      if [[ "$parts" == *" ppocr "* ]]; then
        local shape name npy
        for m in ch_PP-OCRv4_det_infer:1,3,192,384 ch_PP-OCRv4_rec_infer:1,3,48,320 ch_ppocr_mobile_v2.0_cls_infer:1,3,48,192; do
          name="${m%%:*}" shape="${m#*:}" npy="$pkgs/$name.x.npy"
          python3 -c "import sys, numpy as np; np.save(sys.argv[1], np.random.default_rng(1).uniform(-1, 1, [int(d) for d in sys.argv[2].split(',')]).astype(np.float32))" "$npy" "$shape"
          "$ingot" convert "$dir/data/apps/models/$name.onnx" -o "$pkgs/$name.ingot" --device cuda --input-shape "x=$shape" -q >/dev/null 2>&1 ||
            { echo "$name: convert failed"; continue; }
          "$ingot" profile "$pkgs/$name.ingot" --device cuda --cold --runs 1 -i "x=$npy" >"$out/startup-$name-profile.txt" 2>&1 || true
          sed -n '1,40p' "$out/startup-$name-profile.txt"
          echo "$name.ingot on cuda, process wall ms: $(for i in 1 2 3 4 5; do echo -n "$(wall "$ingot" run "$pkgs/$name.ingot" --device cuda -i "x=$npy") "; done)"
        done
      fi
      if [[ "$parts" == *" torch "* ]] && python3 -c "import torch, torchvision" 2>/dev/null; then
        local tw="$dir/startup-torch" prec p
        mkdir -p "$tw"
        python3 "$ROOT/bench/torch_models.py" export --out "$tw" >"$out/startup-export.log" 2>&1 ||
          echo "torch_models.py export failed (startup-export.log)"
        for prec in ${STARTUP_PRECISIONS:-fp32 fp16}; do
          # The defaults, then A/B variants (STARTUP_VARIANTS: NAME=VALUE ...; by default plans built on
          # first use, by one worker, cuDNN's libraries opened by cuDNN, the context created in order).
          local v variants=()
          for v in ${STARTUP_VARIANTS:-INGOT_CUDNN_PREBUILD=0 INGOT_CUDNN_PREBUILD=1 INGOT_CUDNN_PRELOAD=0 INGOT_CUDA_EARLY_START=0}; do
            variants+=(--also-env "$v")
          done
          python3 "$ROOT/bench/cold_start.py" --ingot "$ingot" --device cuda --spec "$tw/models.json" --cache "$tw" \
            --inputs "$tw" --only-packages --reps 5 --markdown --precision "$prec" --keep "$tw" \
            "${variants[@]}" 2>"$out/startup-cold-$prec.log" || true
        done
        # Which of cuDNN's sub-libraries a package's first run opens (those INGOT_CUDNN_PRELOAD opens ahead).
        for p in "$tw"/resnet50.fp32.ingot "$tw"/resnet50.fp16.ingot; do
          [ -f "$p" ] || continue
          echo "$(basename "$p"), cuDNN libraries opened: $(INGOT_CUDNN_PRELOAD=0 LD_DEBUG=files "$ingot" run "$p" \
            --device cuda 2>&1 >/dev/null | grep -o 'file=libcudnn[a-z_]*\.so\.[0-9]*' | sort -u | tr '\n' ' ')"
        done
        # Where each package's time to first output goes: phases on the timeline, by thread.
        for p in "$tw"/*.fp32.ingot "$tw"/*.fp16.ingot; do
          [ -f "$p" ] || continue
          echo "== $(basename "$p")"
          "$ingot" profile "$p" --device cuda --cold --runs 1 2>&1
        done
      fi
    } 2>&1 | tee "$out/startup.log"
    summary+=("startup: startup.log")
  fi
  if want apps && [ -x "$dir/bin/ingot-ocr" ]; then
    # The apps' tests on the GPU (and the CPU of that machine), then end-to-end times: a cold
    # start that converts the packages, and three launches from them (process wall time too).
    local app_dir="$dir/data/apps" dev rc
    for dev in cuda cpu; do
      rc=0
      python3 "$ROOT/tests/apps/ocr_test.py" --app "$dir/bin/ingot-ocr" --device $dev --page "$app_dir/page.png" \
        --models "$app_dir/models" >"$out/apps-ocr-$dev.log" 2>&1 || rc=$?
      grep -E "errors|FAIL|^ok" "$out/apps-ocr-$dev.log" | tail -n 12
      summary+=("ingot-ocr on $dev: exit $rc")
      rc=0
      python3 "$ROOT/tests/apps/vad_test.py" --app "$dir/bin/ingot-vad" --device $dev --librivox "$app_dir/librivox" \
        --model "$app_dir/models/silero_vad.onnx" --references "$app_dir/vad-references" >"$out/apps-vad-$dev.log" 2>&1 || rc=$?
      grep -E "within|FAIL|^ok" "$out/apps-vad-$dev.log" | tail -n 8
      summary+=("ingot-vad on $dev: exit $rc")
    done
    local packages wav="$app_dir/librivox/sense_and_sensibility_01_austen_64kb-0870.wav" i t0 t1
    for dev in cuda cpu; do
      packages="$(mktemp -d)"
      for i in cold 1 2; do
        t0=$(date +%s.%N)
        "$dir/bin/ingot-ocr" "$app_dir/page.png" --repeat 5 --device $dev --model-dir "$app_dir/models" --package-dir "$packages" 2>/dev/null | grep "^time" | sed "s/^/ocr $dev $i: /"
        t1=$(date +%s.%N)
        echo "ocr $dev $i: process wall $(awk "BEGIN {printf \"%.0f\", ($t1 - $t0) * 1000}") ms"
        t0=$(date +%s.%N)
        "$dir/bin/ingot-vad" "$wav" --device $dev --model "$app_dir/models/silero_vad.onnx" --package-dir "$packages" 2>/dev/null | grep '^time:' | sed "s/^/vad $dev $i: /"
        t1=$(date +%s.%N)
        echo "vad $dev $i: process wall $(awk "BEGIN {printf \"%.0f\", ($t1 - $t0) * 1000}") ms"
      done
    done 2>&1 | tee "$out/apps-times.log"
  fi
  if want memcheck || want racecheck || want synccheck; then
    local sanitizer tool
    sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)"
    for tool in memcheck racecheck synccheck; do
      if [ "$tool" = memcheck ]; then want memcheck || continue; else [[ " $what " == *" $tool "* ]] || continue; fi
      if [ -z "$sanitizer" ]; then
        summary+=("$tool: compute-sanitizer not found")
        continue
      fi
      # The out-of-memory test makes cudaMalloc fail on purpose, which memcheck reports as an API error.
      # SANITIZER_FILTER=PATTERN: only those GPU tests. memcheck runs them in one process.
      if [ "$tool" = memcheck ]; then
        local rc=0
        "$sanitizer" --tool memcheck --error-exitcode 9 "$dir/bin/ingot-gpu-tests" --gtest_brief=1 \
          --gtest_filter="${SANITIZER_FILTER:-*}:-CudaMemory.OutOfMemoryIsAnErrorAndTheProcessStaysUsable" \
          >"$out/memcheck.log" 2>&1 || rc=$?
        tail -n 4 "$out/memcheck.log"
        if [ "$rc" -eq 0 ]; then
          summary+=("memcheck: no errors ($(grep -E '^\[  PASSED  \]' "$out/memcheck.log" | head -1))")
        else
          summary+=("memcheck: exit $rc ($(grep -m1 'ERROR SUMMARY' "$out/memcheck.log"); see memcheck.log)")
        fi
        continue
      fi
      # racecheck and synccheck: one process per test suite (a tool failure stays in its suite, and
      # each gets SANITIZER_SUITE_TIMEOUT seconds, default 120), instrumenting the kernels named
      # ingot::... and NVRTC's ingot_fused* (Ingot's own code); cuDNN's and cuBLAS's run
      # uninstrumented (NVIDIA's to check; racecheck is too slow on them). SANITIZER_KERNELS=all: every
      # kernel. racecheck stops with "Internal Sanitizer Error: failed to handle a hardware exception"
      # in cuDNN's float16/TF32 Hopper convolutions even with no kernel instrumented (the tool's
      # limit, docs/RELIABILITY.md): such a suite is reported as "tool error", apart from hazards.
      local only=() suite src verdict clean
      if [ "${SANITIZER_KERNELS:-ingot}" != all ]; then only=(--kernel-name kns=ingot); fi
      for suite in $("$dir/bin/ingot-gpu-tests" --gtest_list_tests --gtest_filter="${SANITIZER_FILTER:-*}" |
                     awk '/^[A-Za-z0-9_]+\.$/ {suite = substr($1, 1, length($1) - 1); next}
                          /^  [A-Za-z0-9_]/ && $1 !~ /^DISABLED_/ && suite != "" {print suite; suite = ""}'); do
        src=0
        INGOT_MODEL_CACHE="$dir/data/models" timeout "${SANITIZER_SUITE_TIMEOUT:-120}" "$sanitizer" --tool "$tool" "${only[@]}" --error-exitcode 9 \
          "$dir/bin/ingot-gpu-tests" --gtest_brief=1 --gtest_filter="$suite.*:-CudaMemory.OutOfMemoryIsAnErrorAndTheProcessStaysUsable" \
          >"$out/$tool-$suite.log" 2>&1 || src=$?
        verdict="exit $src: $(grep -m1 -E 'SUMMARY' "$out/$tool-$suite.log" || true)"
        [ "$src" -eq 0 ] && verdict=clean
        [ "$src" -eq 124 ] && verdict="over ${SANITIZER_SUITE_TIMEOUT:-120} s"
        grep -q "Internal Sanitizer Error" "$out/$tool-$suite.log" && verdict="tool error"
        echo "$suite: $verdict"
      done | tee "$out/$tool.log"
      clean=$(grep -c ': clean$' "$out/$tool.log" || true)
      local others
      others="$(grep -v ': clean$' "$out/$tool.log" | paste -sd';' - || true)"
      summary+=("$tool: $clean suites clean${others:+; others: $others} ($tool.log, $tool-SUITE.log)")
    done
  fi
  echo "==== summary"
  printf '%s\n' "${summary[@]}"
}

case "${1:-}" in
  bundle) bundle ;;
  run) shift; run "$@" ;;
  # exec CMD [ARGS]: CMD with the bundle's libraries, its binaries in /tmp/ingot-gpu/bin (ad hoc
  # measurements on the GPU machine, e.g. a run-time switch's A/B on packages an earlier run made).
  exec) shift; unpack /tmp/ingot-gpu; exec "$@" ;;
  *) echo "usage: scripts/gpu-test.sh bundle | run [unit node models fp16 profile latency bench memcheck all torch ab] | exec CMD [ARGS]" >&2; exit 2 ;;
esac
