// Host memory for the CPU backend: 64-byte aligned so vector loads and oneDNN are happy.
#include <cstdlib>
#include <cstring>

#include <ingot/tensor.h>

namespace ingot {
namespace {

struct CpuMemory final : DeviceMemory {
  void* allocate(size_t nbytes, int) override {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!p) fail("out of host memory allocating {} bytes", nbytes);
    return p;
  }
  void deallocate(void* ptr, int) override { std::free(ptr); }
  void copy(void* dst, Device, const void* src, Device, size_t nbytes) override { std::memcpy(dst, src, nbytes); }
};

CpuMemory cpu_memory;
const bool registered = (register_device_memory(DeviceType::CPU, &cpu_memory), true);

}  // namespace
}  // namespace ingot
