// Reductions that other CUDA kernels launch directly (softmax.cu).
#pragma once
#include <ingot/dtype.h>

#include <cstdint>

namespace ingot::cuda {

// Softmax over `rows` contiguous rows of `dim` elements of a float dtype, on cuda::stream(): the
// Softmax op's kernels (float32 accumulation for 16-bit types). `in` may equal `out`.
void softmax_rows(DType dtype, const void* in, void* out, int64_t rows, int64_t dim);

}  // namespace ingot::cuda
