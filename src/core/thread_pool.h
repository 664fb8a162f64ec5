// A small persistent thread pool and parallel_for. Work is split into at most one chunk per thread
// (never smaller than `grain` items) so per-task overhead stays negligible for elementwise loops.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ingot {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int threads() const { return int(workers_.size()) + 1; }  // the caller works too
  // Runs fn(begin, end) over [0, n) in chunks; returns when all are done. Exceptions propagate.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, chunk_ = 0, num_chunks_ = 0;
  int64_t next_chunk_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

// The process-wide pool used by CPU kernels. set_num_threads(0) means all hardware threads; it also
// sets oneDNN's and OpenBLAS's thread counts so that library calls agree with our own loops.
ThreadPool& cpu_pool();
void set_num_threads(int threads);
int num_threads();

inline void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  cpu_pool().parallel_for(n, grain, fn);
}

}  // namespace ingot
