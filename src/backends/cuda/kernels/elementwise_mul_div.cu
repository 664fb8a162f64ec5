// Mul and Div with numpy broadcasting on the GPU: a module of their own (squeeze-and-excite
// blocks and normalizations launch them early; kernels: elementwise.cuh). Integer division by zero
// is an error on the CPU; checking it here would need the data on the host, so integer Div stays
// on the CPU.
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {

INGOT_CUDA_KERNEL(Mul, arith_numeric<MulOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Div, arith_float<DivOp>).versions(7).dtypes(float_dtypes());

}  // namespace ingot::cuda
