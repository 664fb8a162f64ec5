// Float32 convolutions with few output pixels on a split-K implicit GEMM of Ingot's own
// (conv_split_k.cu), called by conv.cu's FusedConv / Conv dispatch before cuDNN.
#pragma once

#include <ingot/tensor.h>

#include <cstdint>

#include "ops/semantics/conv_geometry.h"
#include "ops/semantics/fused_conv_args.h"

namespace ingot::cuda {

// y = act(conv(x, w) + bias + residual) when the problem is one the kernel takes (float32, channels
// first, 1-D or 2-D, one group, not transposed, few output pixels: INGOT_CONV_SPLIT_K); false
// otherwise, with nothing run.
bool run_split_k_conv(const sem::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor* residual, sem::FusedActivation act, Tensor& y);
// Convolutions run by run_split_k_conv in this process (tests check that the kernel ran).
int64_t split_k_conv_calls();

}  // namespace ingot::cuda
