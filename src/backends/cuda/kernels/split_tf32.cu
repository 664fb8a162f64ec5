// The 3xTF32 operand split (split_tf32.h).
#include "backends/cuda/kernels/split_tf32.h"

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernels/cuda_util.cuh"

namespace ingot::cuda {
namespace {

__global__ void split_tf32_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t ld_outer,
                                  int64_t c, int64_t ld_c, int64_t inner, unsigned order) {
  const int64_t row = 3 * c * inner, total = outer * row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / row, rest = i - o * row, block = rest / inner, in = rest - block * inner;
    const int64_t part = block / c, ch = block - part * c;
    const float v = x[o * ld_outer + ch * ld_c + in];
    uint32_t bits;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(v));
    float big = __uint_as_float(bits);
    if (isinf(big) && isfinite(v)) big = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
    const unsigned which = (order >> (2 * part)) & 3u;
    y[i] = which == 1 ? (isfinite(v) ? v - big : 0.0f) : which == 2 && !isfinite(big) ? 0.0f : big;
  }
}

}  // namespace

void split_tf32_operand(const float* x, float* y, int64_t outer, int64_t ld_outer, int64_t c, int64_t ld_c, int64_t inner,
                unsigned order) {
  const int64_t total = 3 * outer * c * inner;
  if (total == 0) return;
  split_tf32_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x, y, outer, ld_outer, c, ld_c, inner, order);
  INGOT_CUDA_LAUNCH_CHECK();
}

}  // namespace ingot::cuda
