// Shared pieces of the CUDA kernels: element types, float conversions, launch shapes, dtype
// dispatch to device types, and broadcast indexing. Every .cu kernel file includes this.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <ingot/tensor.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_runtime.h"
#include "core/dispatch.h"
#include "ops/kernel.h"

namespace ingot::cuda {

// Ingot's host half types -> CUDA's (same 16-bit layout).
template <class T>
struct device_type {
  using type = T;
};
template <>
struct device_type<Half> {
  using type = __half;
};
template <>
struct device_type<BFloat16> {
  using type = __nv_bfloat16;
};
template <class T>
using device_t = typename device_type<T>::type;

// Arithmetic type for an element type: float for the 16-bit floats, itself otherwise.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<__half> {
  using type = float;
};
template <>
struct compute_type<__nv_bfloat16> {
  using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

template <class T>
__device__ __forceinline__ compute_t<T> load(const T& v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

template <class T, class C>
__device__ __forceinline__ T store(C v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(float(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(float(v));
  } else {
    return T(v);
  }
}

template <class T>
inline constexpr bool is_float_v =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Typed device pointers of a tensor (which must live on a CUDA device).
template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill the device, never more than needed.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t needed = (n + threads - 1) / threads;
  int64_t cap = int64_t(sm_count()) * 32;
  return unsigned(std::max<int64_t>(1, std::min(needed, cap)));
}

// dispatch<DType...> that hands the body the device type (Half -> __half, BFloat16 -> __nv_bfloat16).
template <DType... Ds, class F>
void dispatch_device(DType dt, F&& f) {
  dispatch<Ds...>(dt, [&]<class H>() { f.template operator()<device_t<H>>(); });
}
#define INGOT_CUDA_FLOAT_TYPES DType::Float32, DType::Float16, DType::BFloat16, DType::Float64
#define INGOT_CUDA_NUMERIC_TYPES INGOT_CUDA_FLOAT_TYPES, INGOT_INT_TYPES

inline std::vector<DType> float_dtypes() { return {INGOT_CUDA_FLOAT_TYPES}; }
inline std::vector<DType> numeric_dtypes() { return {INGOT_CUDA_NUMERIC_TYPES}; }

// Broadcast indexing for up to kMaxRank dims: maps an output linear index to an input offset.
constexpr int kMaxRank = 8;
struct Indexer {
  int rank = 0;
  int64_t out_dims[kMaxRank];
  int64_t strides[kMaxRank];  // input element strides per output dim (0 where broadcast)

  __device__ __forceinline__ int64_t offset(int64_t linear) const {
    int64_t off = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < rank) {
        int64_t q = linear / out_dims[d];
        off += (linear - q * out_dims[d]) * strides[d];
        linear = q;
      }
    }
    return off;
  }
};

// An indexer reading `in` (shape broadcastable to `out`) at each output position. Adjacent dims
// that broadcast the same way are merged, so a typical bias or scalar broadcast has rank <= 2.
Indexer make_indexer(const Shape& in, const Shape& out);
// Merged output dims shared by several indexers (so their ranks agree).
void make_indexers(const std::vector<const Shape*>& ins, const Shape& out, std::vector<Indexer*> result);

}  // namespace ingot::cuda
