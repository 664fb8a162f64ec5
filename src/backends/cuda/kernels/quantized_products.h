// What the CUDA int8 products (quantized_products.cu) report to tests.
#pragma once
#include <cstdint>

namespace ingot::cuda {

// How many convolutions ran on Ingot's int8 implicit GEMM (INGOT_INT8_IMMA) in this process.
int64_t int8_implicit_gemm_calls();

}  // namespace ingot::cuda
