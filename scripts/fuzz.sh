#!/usr/bin/env bash
# libFuzzer over the loaders of what users download (docs/RELIABILITY.md), in a clang build with
# AddressSanitizer and UndefinedBehaviorSanitizer (build-fuzz/, CPU only):
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s each, all targets
#   FUZZ_RUNS=N scripts/fuzz.sh 0 [TARGET...]            N inputs each from seed 1, a fresh corpus:
#                                                        the same inputs every time (CI's smoke run)
#   TARGET: onnx_import package npy tensorproto graph (random small models from the op catalogue, run)
#
# Seed corpora are made from the ONNX backend suite (models and their .pb tensors), packages
# converted from some of its models, and .npy files numpy writes (build-fuzz/seeds/, not committed);
# what a run adds goes to build-fuzz/corpus/TARGET, crashes to build-fuzz/findings/. Prints one line
# per target: executions, coverage, and "ok" or the finding. Exit status 1 when a target found one.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(onnx_import package npy tensorproto graph)
B=build-fuzz

if ! command -v clang++ >/dev/null; then bash scripts/bootstrap.sh; fi
if [ ! -f "$B/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
    -DCMAKE_C_FLAGS="-O1" -DINGOT_WITH_CUDA=OFF -DINGOT_PYTHON=OFF -DINGOT_FUZZ=ON -DINGOT_SANITIZE=address,undefined >/dev/null
fi
cmake --build "$B" --target ingot-cli $(printf 'fuzz_%s ' "${TARGETS[@]}")

export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
NODE=/usr/share/libonnx-testdata/data/node
seeds="$B/seeds"
if [ ! -d "$seeds/package" ]; then
  rm -rf "$seeds"
  mkdir -p "$seeds"/{onnx_import,tensorproto,npy,package,graph}
  # Models: the node suite's (small, every op), named after their case.
  for m in "$NODE"/*/model.onnx; do cp "$m" "$seeds/onnx_import/$(basename "$(dirname "$m")").onnx"; done
  # Tensors: the node suite's inputs and outputs under 64 KB.
  find "$NODE" -name '*.pb' -size -64k | while read -r f; do
    cp "$f" "$seeds/tensorproto/$(basename "$(dirname "$(dirname "$f")")")_$(basename "$f")"
  done
  /usr/bin/python3 - "$seeds/npy" <<'EOF'
import sys, numpy as np
out = sys.argv[1]
arrays = {"f32": np.arange(12, dtype=np.float32).reshape(3, 4), "f64": np.linspace(0, 1, 5), "i8": np.array([-1, 2], np.int8),
          "u8": np.zeros((2, 2, 2), np.uint8), "i64": np.array(7, np.int64), "bool": np.array([True, False]),
          "f16": np.ones(3, np.float16), "empty": np.zeros((0, 3), np.float32), "fortran": np.asfortranarray(np.eye(3)),
          "bigendian": np.arange(4, dtype=">f4")}
for name, a in arrays.items():
    np.save(f"{out}/{name}.npy", a)
with open(f"{out}/v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.arange(6, dtype=np.int32), version=(2, 0))
EOF
  # Packages: a spread of node-suite models converted by this build.
  for c in test_add test_conv_with_strides_padding test_gemm_default_single_elem_vector_bias test_lstm_defaults \
           test_if test_loop11 test_resize_upsample_scales_linear test_softmax_axis_0 test_gather_0 test_cast_FLOAT_to_STRING \
           test_maxpool_2d_default test_reduce_mean_keepdims_example test_matmul_2d test_einsum_batch_matmul; do
    [ -f "$NODE/$c/model.onnx" ] && "$B/tools/ingot/ingot" convert "$NODE/$c/model.onnx" -o "$seeds/package/$c.ingot" -q >/dev/null 2>&1 || true
  done
fi

status=0
for t in "${TARGETS[@]}"; do
  corpus="$B/corpus/$t"
  findings="$B/findings/$t"
  limit=(-max_total_time="$SECONDS_PER_TARGET")
  if [ -n "${FUZZ_RUNS:-}" ]; then
    corpus="$B/corpus-deterministic/$t"
    rm -rf "$corpus"
    limit=(-runs="$FUZZ_RUNS" -seed=1)
  fi
  mkdir -p "$corpus" "$findings"
  log="$B/fuzz-$t.log"
  rc=0
  "$B/fuzz/fuzz_$t" "$corpus" "$seeds/$t" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 \
    -max_len=1048576 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
  execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')"
  if [ "$rc" -eq 0 ]; then
    how="in ${SECONDS_PER_TARGET} s"
    [ -n "${FUZZ_RUNS:-}" ] && how="from seed 1"
    echo "fuzz $t: $execs executions $how, coverage $cov, $(ls "$corpus" | wc -l) corpus inputs: ok"
  else
    echo "fuzz $t: FINDING after $execs executions (exit $rc), see $log and $findings/"
    grep -E "^==[0-9]+==ERROR|runtime error|SUMMARY|deadly signal|timeout" "$log" | head -5
    status=1
  fi
done
exit $status
