// Add and Sub with numpy broadcasting on the GPU: a module of their own, since nearly every model
// launches them early (kernels: elementwise.cuh, which says why the elementwise ops are split).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {

INGOT_CUDA_KERNEL(Add, arith_numeric<AddOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Sub, arith_numeric<SubOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES});

}  // namespace ingot::cuda
