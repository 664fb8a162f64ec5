// What the CUDA int8 products (quantized_products.cu) report to tests.
#pragma once
#include <cstdint>

namespace ingot::cuda {

// How many convolutions ran on Ingot's int8 implicit GEMM (INGOT_INT8_IMMA) in this process.
int64_t int8_implicit_gemm_calls();
// How many stem convolutions ran as im2col and a 1x1 convolution (INGOT_INT8_STEM) in this process.
int64_t int8_stem_calls();
// How many 1x1 convolutions ran on Ingot's pointwise int8 kernel (INGOT_INT8_POINTWISE) in this process.
int64_t int8_pointwise_calls();
// How many depthwise convolutions ran with the lean epilogue (INGOT_INT8_DEPTHWISE_LEAN) in this process.
int64_t int8_depthwise_lean_calls();
// How many of those ran on the dp2a kernel (INGOT_INT8_DEPTHWISE_DP2A) in this process.
int64_t int8_depthwise_dp2a_calls();
// How many convolutions cuDNN ran on X with its channels unpadded (INGOT_INT8_CUDNN_UNPADDED) in this process.
int64_t int8_cudnn_unpadded_calls();
// How many matrix products of few rows ran on the dp4a kernel (INGOT_INT8_SMALL_MATMUL) in this process.
int64_t int8_small_matmul_calls();

}  // namespace ingot::cuda
