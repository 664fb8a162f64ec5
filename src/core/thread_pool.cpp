#include "core/thread_pool.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <omp.h>

extern "C" void openblas_set_num_threads(int);

namespace ingot {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(threads(), (n + grain - 1) / grain);
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  // Nested parallel_for from inside a job runs inline: the pool is busy with the outer loop.
  thread_local bool in_job = false;
  if (in_job) {
    fn(0, n);
    return;
  }
  std::unique_lock lock(mutex_);
  job_ = &fn;
  job_n_ = n;
  num_chunks_ = chunks;
  chunk_ = (n + chunks - 1) / chunks;
  next_chunk_ = 0;
  pending_ = chunks;
  error_ = nullptr;
  ++generation_;
  lock.unlock();
  wake_.notify_all();

  in_job = true;
  for (;;) {
    lock.lock();
    if (next_chunk_ >= num_chunks_) break;
    int64_t c = next_chunk_++;
    lock.unlock();
    std::exception_ptr err;
    try {
      fn(c * chunk_, std::min(n, (c + 1) * chunk_));
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    --pending_;
    lock.unlock();
  }
  done_.wait(lock, [&] { return pending_ == 0; });
  in_job = false;
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ && next_chunk_ < num_chunks_); });
    if (stop_) return;
    seen = generation_;
    while (job_ && next_chunk_ < num_chunks_) {
      int64_t c = next_chunk_++;
      const auto* fn = job_;
      int64_t n = job_n_, chunk = chunk_;
      lock.unlock();
      std::exception_ptr err;
      try {
        (*fn)(c * chunk, std::min(n, (c + 1) * chunk));
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

namespace {
int& configured_threads() {
  static int threads = 0;
  return threads;
}
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

int num_threads() {
  int t = configured_threads();
  return t > 0 ? t : std::max(1u, std::thread::hardware_concurrency());
}

void set_num_threads(int threads) {
  if (threads == configured_threads() && pool_slot()) return;
  configured_threads() = threads;
  pool_slot() = std::make_unique<ThreadPool>(num_threads());
  omp_set_num_threads(num_threads());
  openblas_set_num_threads(num_threads());
}

ThreadPool& cpu_pool() {
  if (!pool_slot()) set_num_threads(configured_threads());
  return *pool_slot();
}

}  // namespace ingot
