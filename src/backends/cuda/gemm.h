// Matrix products on the GPU through cuBLASLt, shared by MatMul, Gemm, FusedMatMul and the RNN
// kernels. Row-major operands; batched with strides; optional bias (broadcast over rows) and an
// activation fused into cuBLASLt's epilogue. Runs on cuda::stream(); never synchronizes.
#pragma once
#include <ingot/dtype.h>

#include <cstdint>

namespace ingot::cuda {

enum class Epilogue : uint8_t { None, Relu, Gelu };

struct GemmArgs {
  // Of A, B, C and bias: float32, float16, bfloat16, float64; or int8 A and B with an int32 C (exact
  // integer products, cuBLASLt's CUBLAS_COMPUTE_32I: A not transposed and B transposed, alpha 1,
  // beta 0, no bias or epilogue).
  DType dtype = DType::Float32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;  // C is m x n; op(A) is m x k; op(B) is k x n
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;  // leading dimension (row-major: elements per row) and batch stride
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  const void* c_in = nullptr;  // the C that beta scales, laid out like c (a residual); nullptr: c itself
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;  // c = alpha * op(A) op(B) + beta * (c_in or c)
  const void* bias = nullptr;       // n values added to every row, or nullptr
  Epilogue epilogue = Epilogue::None;
};

// Float32 uses exact float32 arithmetic unless cuda::allow_tf32(); 16-bit types accumulate in float32.
void gemm(const GemmArgs& args);

// Builds the plans of the stored choices in core/tuning.h for the current device (a loaded
// package's matrix products) and runs each once on zeroed scratch buffers, on a stream and
// workspace of its own: CUDA loads each algorithm's kernel (~70-80 ms for the first product of a
// fresh process on the H200) beside the cold start instead of inside the first run, and the first
// run finds the plans made. Stored problems whose operands would take more than 256 MB are left to
// their first call. Returns how many it ran. The CUDA backend runs it on a background thread when a
// session loads (Backend::prepare_async, INGOT_CUBLASLT_WARMUP).
int warm_stored_products();
int64_t cached_products();      // plans in the cache (tests)
void forget_cached_products();  // empties it (tests: as in a fresh process)

}  // namespace ingot::cuda
