// Step 1 on the GPU: Softshrink and its gradient as CUDA kernels on Ingot's stream (float32; four
// elements per thread through 16-byte loads where the tensor allows it).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "softshrink.h"

namespace {

__device__ __forceinline__ float shrink(float x, float l) { return x > l ? x - l : x < -l ? x + l : 0.0f; }

__global__ void softshrink_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float l) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
    const float4 v = *reinterpret_cast<const float4*>(x + i);
    *reinterpret_cast<float4*>(y + i) = make_float4(shrink(v.x, l), shrink(v.y, l), shrink(v.z, l), shrink(v.w, l));
  } else {
    for (int64_t k = i; k < n; ++k) y[k] = shrink(x[k], l);
  }
}

__global__ void softshrink_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float l) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = shrink(x[i], l);
}

__global__ void softshrink_grad_kernel(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx,
                                       int64_t n, float l) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = fabsf(x[i]) > l ? dy[i] : 0.0f;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

void softshrink_cuda(ingot::ext::KernelContext& ctx) {
  const ingot::ext::TensorRef x = ctx.input(0);
  const ingot::ext::TensorRef y = ctx.output(0, x.dtype(), x.shape());
  const float l = ctx.attr_float("lambd");
  if (!(l >= 0)) throw std::invalid_argument("lambd must be >= 0, got " + std::to_string(l));
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool aligned = (reinterpret_cast<uintptr_t>(x.raw()) | reinterpret_cast<uintptr_t>(y.raw())) % 16 == 0;
  auto stream = static_cast<cudaStream_t>(ctx.cuda_stream());
  if (aligned) {
    const int64_t threads = (n + 3) / 4;
    softshrink_kernel<<<unsigned((threads + 255) / 256), 256, 0, stream>>>(x.data<float>(), y.data<float>(), n, l);
  } else {  // a view at an offset that is not 16-byte aligned: one element per thread
    softshrink_scalar_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(x.data<float>(), y.data<float>(), n, l);
  }
  check(cudaGetLastError(), "softshrink kernel launch");
}

void softshrink_grad_cuda(ingot::ext::KernelContext& ctx) {
  const ingot::ext::TensorRef x = ctx.input(0), dy = ctx.input(2);
  const ingot::ext::TensorRef dx = ctx.output(0, x.dtype(), x.shape());
  const int64_t n = x.numel();
  if (n == 0) return;
  softshrink_grad_kernel<<<unsigned((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(ctx.cuda_stream())>>>(
      x.data<float>(), dy.data<float>(), dx.data<float>(), n, ctx.attr_float("lambd"));
  check(cudaGetLastError(), "softshrink grad kernel launch");
}
