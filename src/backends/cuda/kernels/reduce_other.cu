// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare on CUDA
// (kernels: reduce.cuh).
#include "backends/cuda/kernels/reduce.cuh"

namespace ingot::cuda {

INGOT_CUDA_KERNEL(ReduceProd, reduce_kernel<ReduceKind::Prod>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceL1, reduce_kernel<ReduceKind::L1>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceL2, reduce_kernel<ReduceKind::L2>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceLogSum, reduce_kernel<ReduceKind::LogSum>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceLogSumExp, reduce_kernel<ReduceKind::LogSumExp>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceSumSquare, reduce_kernel<ReduceKind::SumSquare>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});

}  // namespace ingot::cuda
