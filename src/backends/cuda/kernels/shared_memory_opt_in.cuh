// Kernels that take more than 48 KB of dynamic shared memory must opt in (CUDA's
// cudaFuncAttributeMaxDynamicSharedMemorySize), once per kernel and device.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "backends/cuda/cuda_runtime.h"

namespace ingot::cuda {

// `raised` holds one bit per device (devices 0-63) of the kernel it belongs to: a static beside the
// launch, one per kernel variant.
template <class Kernel>
void opt_in_shared_memory(Kernel kernel, int bytes, std::atomic<uint64_t>& raised) {
  int device = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = uint64_t(1) << (device & 63);
  if (raised.load(std::memory_order_acquire) & bit) return;
  INGOT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  raised.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace ingot::cuda
