#include "core/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

extern "C" void openblas_set_num_threads(int);

namespace ingot {

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(threads_, (n + grain - 1) / grain);
  if (chunks <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + chunks - 1) / chunks;
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      fn(c * chunk, std::min(n, (c + 1) * chunk));
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

namespace {
struct PoolState {
  int configured = -1;  // -1: not set up yet; 0: all hardware threads
  ThreadPool pool{1};
};
PoolState& state() {
  static PoolState s;
  return s;
}
}  // namespace

int num_threads() {
  int t = state().configured;
  return t > 0 ? t : int(std::max(1u, std::thread::hardware_concurrency()));
}

void set_num_threads(int threads) {
  PoolState& s = state();
  if (threads == s.configured) return;
  s.configured = std::max(threads, 0);
  s.pool = ThreadPool(num_threads());
  // Each OpenBLAS call runs on its calling thread: cpu::gemm splits large products across OpenMP's
  // team itself (backends/cpu/kernels/gemm.h), calling OpenBLAS from several of its threads at once,
  // which OpenBLAS's OpenMP build allows (CMakeLists.txt links that one; its pthread build keeps a
  // second pool of threads spinning on the same cores: PP-OCR det at 2 threads, medians 7.6-15.7 ms
  // and p90 up to 73 ms with that pool at work, 7.65-7.79 / p90 <= 8.1 ms without). The OpenMP
  // build's openblas_set_num_threads also sets OpenMP's team size, so OpenMP's is set after it.
  openblas_set_num_threads(1);
  omp_set_num_threads(num_threads());
}

const ThreadPool& cpu_pool() {
  if (state().configured < 0) set_num_threads(0);
  return state().pool;
}

}  // namespace ingot
