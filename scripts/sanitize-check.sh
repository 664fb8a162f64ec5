#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer over the unit tests and the ONNX node suite, then a
# short run of every libFuzzer target (scripts/fuzz.sh), in one clang build (build-fuzz/, CPU only,
# -O1 with line tables). CI runs it after the main tests (scripts/test.sh); docs/RELIABILITY.md.
#
#   bash scripts/sanitize-check.sh [FUZZ_RUNS]    inputs per fuzz target, default 20000 (graph: a fortieth)
# The fuzz smoke is deterministic (seed 1, a fresh corpus): CI fails on a change, not on luck.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_RUNS="${1:-20000}"
B=build-fuzz
bash scripts/bootstrap.sh
if [ ! -f "$B/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
    -DCMAKE_C_FLAGS="-O1" -DINGOT_WITH_CUDA=OFF -DINGOT_PYTHON=OFF -DINGOT_FUZZ=ON -DINGOT_SANITIZE=address,undefined >/dev/null
fi
cmake --build "$B" --target ingot-unit-tests ingot-cli fuzz_onnx_import fuzz_package fuzz_npy fuzz_tensorproto fuzz_graph

# Leaks are not checked: process-lifetime singletons (the op catalogue, kernel tables, library
# handles) are never freed on purpose. OpenMP's runtime is not instrumented; its threads are fine
# under ASan.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
# Two at a time (CI has 2 cores; each step is one process): a step's output is printed when both are
# done, and either failing fails the check.
both() {
  local a b ra=0 rb=0
  a=$(mktemp) b=$(mktemp)
  bash -o pipefail -c "$1" >"$a" 2>&1 & local pa=$!
  bash -o pipefail -c "$2" >"$b" 2>&1 & local pb=$!
  wait "$pa" || ra=$?
  wait "$pb" || rb=$?
  cat "$a" "$b"
  rm -f "$a" "$b"
  if [ "$ra" != 0 ] || [ "$rb" != 0 ]; then
    echo "sanitize-check: failed (exit $ra, $rb)"
    return 1
  fi
}
echo "sanitize-check: unit tests under ASan+UBSan (two shards side by side)"
shard() { echo "cd $B/tests && GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$1 ./ingot-unit-tests --gtest_brief=1"; }
both "$(shard 0)" "$(shard 1)"
echo "sanitize-check: the ONNX node suite under ASan+UBSan, as imported and optimized"
suite="$B/tools/ingot/ingot test-onnx /usr/share/libonnx-testdata/data/node --expected-failures tests/onnx/node_expected_failures.txt"
both "$suite | tail -n 3" "$suite --optimize | tail -n 3"
echo "sanitize-check: fuzz smoke, ${FUZZ_RUNS} inputs per target from seed 1"
FUZZ_RUNS="$FUZZ_RUNS" bash scripts/fuzz.sh 0 onnx_import package npy tensorproto
FUZZ_RUNS="$((FUZZ_RUNS / 40))" bash scripts/fuzz.sh 0 graph
