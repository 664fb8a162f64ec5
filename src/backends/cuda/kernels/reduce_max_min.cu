// ReduceMax and ReduceMin on CUDA (kernels: reduce.cuh).
#include "backends/cuda/kernels/reduce.cuh"

namespace ingot::cuda {

INGOT_CUDA_KERNEL(ReduceMax, reduce_kernel<ReduceKind::Max>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(ReduceMin, reduce_kernel<ReduceKind::Min>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});

}  // namespace ingot::cuda
