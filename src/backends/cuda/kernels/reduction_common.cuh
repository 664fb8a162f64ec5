// Device helpers shared by the reduction modules (reduce.cuh's reduce_*.cu, argmax_topk.cu, softmax.cu).
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

}  // namespace
}  // namespace ingot::cuda
