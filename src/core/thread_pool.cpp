#include "core/thread_pool.h"

#include <atomic>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <fstream>
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
  int configured = -1;  // -1: not set up yet; 0: available_cpus()
  ThreadPool pool{1};
  std::atomic<int> generation{0};  // bumped by every set_num_threads
};
// OpenMP's team size is a per-thread setting (its nthreads ICV): a thread that runs kernels after
// set_num_threads was called on another one (a session run from a thread of the caller's) takes it
// on here, or oneDNN and the OpenMP loops would size their teams by OpenMP's default instead, and
// compute other reduction orders than the configured count (other bits).
thread_local int t_generation = -1;
PoolState& state() {
  static PoolState s;
  return s;
}
}  // namespace

// The CPUs this process may run on: its affinity mask, capped by a cgroup v2 CPU quota. In a
// container hardware_concurrency() counts the host's CPUs, and OpenMP teams sized for them on a
// smaller allowance spin against each other.
int available_cpus() {
  int cpus = int(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  std::ifstream quota_file("/sys/fs/cgroup/cpu.max");  // "max 100000" or "QUOTA PERIOD"
  std::string quota;
  double period = 0;
  if (quota_file >> quota >> period && quota != "max" && period > 0) {
    const double allowed = std::stod(quota) / period;
    if (allowed >= 1) cpus = std::min(cpus, int(std::ceil(allowed)));
  }
  return cpus;
}

int num_threads() {
  int t = state().configured;
  return t > 0 ? t : available_cpus();
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
  t_generation = ++s.generation;
}

const ThreadPool& cpu_pool() {
  PoolState& s = state();
  if (s.configured < 0) set_num_threads(0);
  if (const int g = s.generation.load(std::memory_order_acquire); t_generation != g) {
    omp_set_num_threads(num_threads());
    t_generation = g;
  }
  return s.pool;
}

}  // namespace ingot
