// The float32 epilogue of Ingot's own convolution kernels (conv_split_k.cu, conv_pointwise.cu):
// y = act(acc + bias[k] + residual[out]), as conv.cu's epilogue kernel computes it for float32.
#pragma once
#include <cstdint>

#include "ops/semantics/fused_conv_args.h"

namespace ingot::cuda {

struct F32ConvEpilogue {
  const float* bias = nullptr;      // [output channels] or null
  const float* residual = nullptr;  // y's shape and layout, or null
  sem::FusedActivation act = sem::FusedActivation::None;
};

// Relu sends NaN to 0, like the CPU's; HardSwish keeps it.
__device__ __forceinline__ float conv_activation(float v, sem::FusedActivation act) {
  if (act == sem::FusedActivation::Relu) v = v > 0.0f ? v : 0.0f;
  if (act == sem::FusedActivation::HardSwish) v *= fminf(fmaxf(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
  return v;
}

// Output channel k's value at y's element `out`.
__device__ __forceinline__ float conv_finish(float v, int k, int64_t out, const F32ConvEpilogue& e) {
  if (e.bias) v += e.bias[k];
  if (e.residual) v += e.residual[out];
  return conv_activation(v, e.act);
}

}  // namespace ingot::cuda
