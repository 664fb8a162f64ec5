#!/usr/bin/env bash
# ThreadSanitizer over the concurrent-use tests: one Session run from 8 threads on the real models,
# and the kernel registry grown while it is read. Builds a CPU-only TSan build in build-tsan/ (about
# 10 minutes on 2 cores the first time) and runs those tests in it.
#
#   bash scripts/tsan-check.sh [--gtest_filter=PATTERN]
#
# OpenMP's runtime (libgomp) is not instrumented, so its barriers would read as races: every
# thread runs with OMP_NUM_THREADS=1 (the test's sessions use one CPU thread per run; the 8 runs
# are the parallelism under test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGOT_WITH_CUDA=OFF -DINGOT_SANITIZE=thread >/dev/null
cmake --build build-tsan --target ingot-unit-tests
bash scripts/fetch-models.sh >/dev/null
filter="${1:---gtest_filter=Concurrency.*:KernelRegistry.*:Isolated.*}"
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/tests/ingot-unit-tests "$filter"
