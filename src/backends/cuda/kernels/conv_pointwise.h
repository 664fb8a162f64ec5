// Float32 1x1 convolutions (channels first, one group, no padding, any stride) as a GEMM of
// Ingot's own with the epilogue in the kernel (conv_pointwise.cu), called by conv.cu's FusedConv /
// Conv dispatch before cuDNN.
#pragma once

#include <ingot/tensor.h>

#include <cstdint>

#include "ops/semantics/conv_geometry.h"
#include "ops/semantics/fused_conv_args.h"

namespace ingot::cuda {

// y = act(conv(x, w) + bias + residual) when the convolution is one the kernels take (float32, NCHW
// or NCW, 1x1, one group, zero pads, not transposed): on the 3xTF32 tensor-core kernel
// (gemm_3xtf32.h) where INGOT_GEMM_3XTF32 gives it products and the layout suits it (stride 1,
// channels and pixels per image multiples of 4), else on the FFMA kernel here where
// INGOT_CONV_POINTWISE gives it the convolution (1: where it measured faster than cuDNN; 2:
// always); false otherwise, with nothing run.
bool run_pointwise_conv(const sem::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                        const Tensor* residual, sem::FusedActivation act, Tensor& y);
// Convolutions run by the FFMA kernel in this process (tests check that the kernel ran).
int64_t pointwise_conv_calls();

}  // namespace ingot::cuda
