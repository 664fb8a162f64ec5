// Device helpers shared by the reduction modules (reduce_*.cu, argmax_topk.cu, softmax.cu).
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cuda/kernels/cuda_util.cuh"

namespace ingot::cuda {
namespace {

template <class A>
__device__ __forceinline__ bool nan_of(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

inline int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t k = begin; k < end; ++k) n *= shape[k];
  return n;
}

}  // namespace
}  // namespace ingot::cuda
