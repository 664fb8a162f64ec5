// QuantizeLinear and DequantizeLinear on the GPU, per tensor and per axis, so that a QDQ model runs
// on the device (its products in float: the CUDA backend has no integer products yet,
// docs/QUANTIZATION.md) instead of falling back to the CPU at every Q/DQ node. The scale and zero
// point stay on the device and are read by the kernel (no host synchronization, CUDA graphs capture
// it); the semantics are the CPU kernels' (backends/cpu/kernels/quantization.cpp): round half to
// even, saturate, NaN to the zero point.
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "ops/kernel.h"

namespace ingot::cuda {
namespace {

// x is [outer, channels, inner] around `axis` (channels 1 per tensor).
struct AxisSplit {
  int64_t channels = 1, inner = 1;
};

AxisSplit split(const KernelContext& ctx, const Tensor& x, const Tensor& scale, size_t scale_index) {
  if (ctx.attr_int("block_size") != 0) fail("attribute 'block_size': blocked quantization is not supported");
  AxisSplit s;
  if (scale.numel() == 1 && scale.rank() <= 1) {
    s.inner = x.numel();
    return s;
  }
  if (scale.rank() != 1) fail("input {} (scale): expected a scalar or 1-D tensor, got {}", scale_index, scale.describe());
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "attribute 'axis'");
  s.channels = x.dim(axis);
  if (scale.dim(0) != s.channels) {
    fail("input {} (scale) {}: expected {} values for axis {} of x {}", scale_index, scale.describe(), s.channels, axis,
         shape_str(x.shape()));
  }
  for (int64_t d = axis + 1; d < x.rank(); ++d) s.inner *= x.dim(d);
  return s;
}

template <class In, class Q>
__global__ void quantize_kernel(const In* __restrict__ x, const float* __restrict__ scale, const Q* __restrict__ zp,
                                Q* __restrict__ y, int64_t n, int64_t channels, int64_t inner) {
  constexpr float lo = float(std::numeric_limits<Q>::lowest()), hi = float(std::numeric_limits<Q>::max());
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
    const float z = zp ? float(zp[c]) : 0.0f;
    float v = rintf(float(load(x[i])) / scale[c]);  // round half to even
    v = v == v ? v + z : z;
    y[i] = Q(fminf(fmaxf(v, lo), hi));
  }
}

// Per tensor, four elements per thread step: one vector load and one 4-byte store (ResNet-50 int8's
// input at batch 32, 4.8 M values: 21 us element by element on an H100). Same arithmetic as above.
template <class In, class Q>
__global__ void quantize_tensor_x4_kernel(const Vec<In, 4>* __restrict__ x, const float* __restrict__ scale,
                                          const Q* __restrict__ zp, Vec<Q, 4>* __restrict__ y, int64_t quads) {
  constexpr float lo = float(std::numeric_limits<Q>::lowest()), hi = float(std::numeric_limits<Q>::max());
  const float s = scale[0], z = zp ? float(zp[0]) : 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += int64_t(gridDim.x) * blockDim.x) {
    const Vec<In, 4> in = x[i];
    Vec<Q, 4> out;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v = rintf(float(load(in.v[j])) / s);
      v = v == v ? v + z : z;
      out.v[j] = Q(fminf(fmaxf(v, lo), hi));
    }
    y[i] = out;
  }
}

template <class Q>
__global__ void dequantize_kernel(const Q* __restrict__ x, const float* __restrict__ scale, const Q* __restrict__ zp,
                                  float* __restrict__ y, int64_t n, int64_t channels, int64_t inner) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channels == 1 ? 0 : (i / inner) % channels;
    y[i] = (float(x[i]) - (zp ? float(zp[c]) : 0.0f)) * scale[c];
  }
}

void check_params(const KernelContext& ctx, const Tensor& scale, DType data) {
  if (scale.dtype() != DType::Float32) fail("input 1 (scale): expected float32 on CUDA, got {}", scale.describe());
  if (ctx.has_input(2)) {
    const Tensor& zp = ctx.input(2);
    if (zp.dtype() != data) fail("input 2 (zero_point): expected {} like the data, got {}", dtype_name(data), zp.describe());
    if (zp.numel() != scale.numel()) fail("input 2 (zero_point) {}: expected the scale's shape {}", zp.describe(), scale.describe());
  }
}

void quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  DType out = DType::UInt8;
  if (ctx.has_input(2)) out = ctx.input(2).dtype();
  else if (ctx.attr_int("output_dtype") != 0) out = DType(ctx.attr_int("output_dtype"));
  if (out != DType::UInt8 && out != DType::Int8) fail("output: uint8 or int8 on CUDA, got {}", dtype_name(out));
  check_params(ctx, scale, out);
  const AxisSplit s = split(ctx, x, scale, 1);
  Tensor& y = ctx.allocate(0, out, x.shape());
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_device<DType::Float32, DType::Float16, DType::BFloat16>(x.dtype(), [&]<class In>() {
    dispatch<DType::UInt8, DType::Int8>(out, [&]<class Q>() {
      const Q* zp = ctx.has_input(2) ? ptr<const Q>(ctx.input(2)) : nullptr;
      const auto aligned = [](const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
      if (s.channels == 1 && n % 4 == 0 && aligned(x.raw_data(), 4 * sizeof(In)) && aligned(y.raw_data(), 4)) {
        quantize_tensor_x4_kernel<In, Q><<<blocks_for(n / 4), kThreads, 0, stream()>>>(
            ptr<const Vec<In, 4>>(x), ptr<const float>(scale), zp, ptr<Vec<Q, 4>>(y), n / 4);
        return;
      }
      quantize_kernel<In, Q><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const In>(x), ptr<const float>(scale), zp,
                                                                        ptr<Q>(y), n, s.channels, s.inner);
    });
  });
  INGOT_CUDA_LAUNCH_CHECK();
}

void dequantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  check_params(ctx, scale, x.dtype());
  const AxisSplit s = split(ctx, x, scale, 1);
  Tensor& y = ctx.allocate(0, DType::Float32, x.shape());
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch<DType::UInt8, DType::Int8, DType::Int32>(x.dtype(), [&]<class Q>() {
    const Q* zp = ctx.has_input(2) ? ptr<const Q>(ctx.input(2)) : nullptr;
    dequantize_kernel<Q><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const Q>(x), ptr<const float>(scale), zp,
                                                                   ptr<float>(y), n, s.channels, s.inner);
  });
  INGOT_CUDA_LAUNCH_CHECK();
}

}  // namespace

INGOT_CUDA_KERNEL(QuantizeLinear, quantize_linear).versions(10).dtypes({DType::Float32, DType::Float16, DType::BFloat16});
INGOT_CUDA_KERNEL(DequantizeLinear, dequantize_linear).versions(10).dtypes({DType::UInt8, DType::Int8, DType::Int32});

}  // namespace ingot::cuda
