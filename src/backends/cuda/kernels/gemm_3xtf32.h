// Float32 matrix products on the TF32 tensor cores at float32's accuracy (3xTF32, tensor_core.cuh):
// a kernel of Ingot's own with alpha, a residual, bias and the activation in its stores. cuda::gemm
// gives it MatMul / Gemm / FusedMatMul products, conv_pointwise.cu 1x1 convolutions.
#pragma once
#include <cstdint>

#include "backends/cuda/gemm.h"

namespace ingot::cuda {

// c = act(alpha A op(B) + beta r + bias), row-major float32 operands, batched with strides.
struct Tf32x3Product {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const float* a = nullptr;  // [m][k]
  int64_t lda = 0, stride_a = 0;
  const float* b = nullptr;  // [k][n], or [n][k] when trans_b
  int64_t ldb = 0, stride_b = 0;
  bool trans_b = false;
  float* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  const float* r = nullptr;  // laid out like c (the residual beta scales), or nullptr
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  // n values, one per column; m, one per row, when bias_per_row
  bool bias_per_row = false;
  enum class Act : uint8_t { None, Relu, GeluTanh, HardSwish } act = Act::None;
};

// Runs the product on cuda::stream() where INGOT_GEMM_3XTF32 gives it to the kernel (1: grids of at
// least one block per SM whose tiles are INGOT_GEMM_3XTF32_MIN_FILL percent the product's; 2: every
// product it takes), TF32 is not allowed, and the operands fit
// (16-byte aligned, N, K, leading dimensions and batch strides multiples of 4, grid sizes within
// CUDA's); false otherwise, with nothing run.
bool run_tf32x3(const Tf32x3Product& p);

// cuda::gemm's float32 product through run_tf32x3; false where it is not one.
bool gemm_on_tf32x3(const GemmArgs& g);

// Products run on the kernel in this process (tests check that it ran).
int64_t tf32x3_calls();

}  // namespace ingot::cuda
