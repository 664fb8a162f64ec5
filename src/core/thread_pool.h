// The CPU thread pool and parallel_for. The pool's workers are OpenMP's persistent thread team, the
// same team oneDNN runs on: two separate pools would spin against each other on the same cores
// (measured: a PP-OCR det run took twice as long with a std::thread pool beside oneDNN's team).
// Work is split into at most one chunk per thread, never smaller than `grain` items.
#pragma once
#include <cstdint>
#include <functional>

namespace ingot {

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : threads_(threads < 1 ? 1 : threads) {}
  int threads() const { return threads_; }
  // Runs fn(begin, end) over [0, n) in chunks; returns when all are done. The first exception
  // thrown by a chunk is rethrown here. Nested calls run inline on the calling thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const;

 private:
  int threads_;
};

// The process-wide pool used by CPU kernels. set_num_threads(0) means every CPU the process may use (available_cpus()); it also
// sets oneDNN's (OpenMP) thread count so that library calls agree with our loops, and keeps
// OpenBLAS on the calling thread (cpu::gemm shares large products across this pool itself).
const ThreadPool& cpu_pool();
void set_num_threads(int threads);
int num_threads();
// CPUs this process may use (affinity mask and cgroup CPU quota); the default thread count.
int available_cpus();

inline void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  cpu_pool().parallel_for(n, grain, fn);
}

}  // namespace ingot
