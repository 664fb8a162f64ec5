// ReduceSum and ReduceMean on CUDA: the reductions models launch most, in a module of their own
// (kernels: reduce.cuh).
#include "backends/cuda/kernels/reduce.cuh"

namespace ingot::cuda {

INGOT_CUDA_KERNEL(ReduceSum, reduce_kernel<ReduceKind::Sum>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceMean, reduce_kernel<ReduceKind::Mean>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});

}  // namespace ingot::cuda
