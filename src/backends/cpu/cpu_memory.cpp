// Host memory for the CPU backend: 64-byte aligned so vector loads and oneDNN are happy.
//
// Large blocks are cached: a model run allocates and frees the same big activation tensors every
// time, and handing them back to the C library returns them to the kernel (munmap / heap trim),
// so the next run page-faults all of them in again. Freed blocks of at least kMinCached bytes go
// to a free list per size class instead, up to kMaxCachedBytes in total.
#include <ingot/tensor.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/cpu/gloo_plugin.h"
#include "core/backend.h"

namespace ingot {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMinCached = size_t(64) << 10;        // smaller blocks are cheap for malloc
constexpr size_t kMaxCachedBytes = size_t(256) << 20;  // idle memory the cache may hold

// Rounds a large size up to one of four classes per power of two (at most 25% slack), so tensors
// of similar sizes (e.g. varying sequence lengths) share blocks.
size_t size_class(size_t nbytes) {
  const int top = std::bit_width(nbytes) - 1;  // nbytes >= kMinCached, so top >= 16
  const size_t quarter = size_t(1) << (top - 2);
  return (nbytes + quarter - 1) / quarter * quarter;
}

// The class (block size) of each cached-size block lives in a header just before the user's
// pointer; small blocks get a header too (with 0) so deallocate can tell them apart.
constexpr size_t kHeader = kAlign;

class BlockCache {
 public:
  void* allocate(size_t nbytes) {
    const size_t cls = nbytes >= kMinCached ? size_class(nbytes) : 0;
    if (cls) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(cls);
      if (it != free_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= cls;
        return static_cast<char*>(block) + kHeader;
      }
    }
    const size_t size = cls ? cls : (nbytes + kAlign - 1) / kAlign * kAlign;
    void* block = std::aligned_alloc(kAlign, size + kHeader);
    if (!block) {
      release_all();  // cached blocks of other sizes may be what is missing
      block = std::aligned_alloc(kAlign, size + kHeader);
      if (!block) fail("out of host memory allocating {} bytes", nbytes);
    }
    std::memcpy(block, &cls, sizeof cls);
    return static_cast<char*>(block) + kHeader;
  }

  void deallocate(void* ptr) {
    if (!ptr) return;
    void* block = static_cast<char*>(ptr) - kHeader;
    size_t cls;
    std::memcpy(&cls, block, sizeof cls);
    if (cls) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_ + cls <= kMaxCachedBytes) {
        free_[cls].push_back(block);
        cached_bytes_ += cls;
        return;
      }
    }
    std::free(block);
  }

 private:
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [cls, blocks] : free_) {
      for (void* block : blocks) std::free(block);
      blocks.clear();
    }
    cached_bytes_ = 0;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // size class -> idle blocks
  size_t cached_bytes_ = 0;
};

// Never destroyed: tensors owned by other static objects may be freed after this file's statics.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

struct CpuMemory final : DeviceMemory {
  void* allocate(size_t nbytes, int) override { return block_cache().allocate(nbytes); }
  void deallocate(void* ptr, int) override { block_cache().deallocate(ptr); }
  void copy(void* dst, Device, const void* src, Device, size_t nbytes) override { std::memcpy(dst, src, nbytes); }
  void fill_zero(void* dst, size_t nbytes, int) override { std::memset(dst, 0, nbytes); }
  void synchronize(int) override {}
  bool available(int) override { return true; }
};

struct CpuBackend final : Backend {
  DeviceType type() const override { return DeviceType::CPU; }
  std::string_view name() const override { return "cpu"; }
  DeviceMemory& memory() override { return cpu_memory; }
  std::unique_ptr<Communicator> connect(const ConnectOptions& options) override { return cpu::connect_gloo(options); }
  CpuMemory cpu_memory;
};

const bool registered = [] {
  static CpuBackend backend;
  register_backend(backend);
  return true;
}();

}  // namespace
}  // namespace ingot
