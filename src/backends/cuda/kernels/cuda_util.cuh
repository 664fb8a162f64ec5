// Shared pieces of the CUDA kernels: element types, float conversions, launch shapes, grid-stride
// indices, device math, warp/block folds, dtype dispatch to device types, and broadcast and
// strided indexing. Every .cu kernel file includes this.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <ingot/tensor.h>

#include <algorithm>
#include <cstdint>
#include <string>
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

// V elements loaded or stored as one aligned vector access (V * sizeof(T) of 4, 8 or 16 bytes).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

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

// Accumulator type of the float kernels (norms, pools): double for double, float otherwise.
template <class T>
using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// ---- grid-stride loops ----

__device__ __forceinline__ int64_t thread_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

// ---- math in the compute type (double for double, float otherwise) ----

template <class A>
__device__ __forceinline__ A exp_of(A v) {
  if constexpr (std::is_same_v<A, double>) {
    return exp(v);
  } else {
    return expf(float(v));
  }
}
template <class A>
__device__ __forceinline__ A log_of(A v) {
  if constexpr (std::is_same_v<A, double>) {
    return log(v);
  } else {
    return logf(float(v));
  }
}
template <class A>
__device__ __forceinline__ A log1p_of(A v) {
  if constexpr (std::is_same_v<A, double>) {
    return log1p(v);
  } else {
    return log1pf(float(v));
  }
}
template <class A>
__device__ __forceinline__ A tanh_of(A v) {
  if constexpr (std::is_same_v<A, double>) {
    return tanh(v);
  } else {
    return tanhf(float(v));
  }
}
template <class A>
__device__ __forceinline__ A sqrt_of(A v) {
  if constexpr (std::is_same_v<A, double>) {
    return sqrt(v);
  } else {
    return sqrtf(float(v));
  }
}
template <class A>
__device__ __forceinline__ A pow_of(A a, A b) {
  if constexpr (std::is_same_v<A, double>) {
    return pow(a, b);
  } else {
    return powf(float(a), float(b));
  }
}
template <class A>
__device__ __forceinline__ A abs_of(A v) {
  return v < A(0) ? -v : v;
}

// ---- warp and block folds ----

// A fold for warp_fold/block_fold: F::apply(a, b) combines two partial results.
template <class A>
struct SumFold {
  __device__ static A apply(A a, A b) { return a + b; }
};

template <class A>
__device__ __forceinline__ A shfl_xor(A v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}

// Warp-wide fold with F::apply (every lane gets the result).
template <class F, class A>
__device__ __forceinline__ A warp_fold(A v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = F::apply(v, shfl_xor(v, m));
  return v;
}

// Block-wide fold (1-D block, a multiple of 32 threads); every thread gets the result. `buf`
// holds 32 entries of shared memory; the call synchronizes, so every thread must make it.
template <class F, class A>
__device__ __forceinline__ A block_fold(A v, A identity, A* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_fold<F>(v);
  __syncthreads();  // earlier readers of buf are done
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  v = lane < warps ? buf[lane] : identity;
  return warp_fold<F>(v);
}

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  return warp_fold<SumFold<A>>(v);
}
template <class A>
__device__ __forceinline__ A block_sum(A v, A* buf) {
  return block_fold<SumFold<A>>(v, A(0), buf);
}

// The fold of one row's partial results across its warp (kBlock false) or block (kBlock true).
template <bool kBlock, class F, class A>
__device__ __forceinline__ A row_fold(A v, A identity, A* buf) {
  if constexpr (kBlock) {
    return block_fold<F>(v, identity, buf);
  } else {
    return warp_fold<F>(v);
  }
}

// Rows handed out in a grid-stride loop to one warp each (kBlock false: `lane` < width 32) or to
// one block each (kBlock true: width blockDim.x).
struct RowSplit {
  int64_t group, groups;  // this warp's/block's first row and the stride between its rows
  int lane, width;
};
template <bool kBlock>
__device__ __forceinline__ RowSplit row_split() {
  if constexpr (kBlock) {
    return {int64_t(blockIdx.x), int64_t(gridDim.x), int(threadIdx.x), int(blockDim.x)};
  } else {
    const int warps = blockDim.x >> 5;
    return {int64_t(blockIdx.x) * warps + (threadIdx.x >> 5), int64_t(gridDim.x) * warps, int(threadIdx.x & 31), 32};
  }
}

// Typed device pointers of a tensor (which must live on a CUDA device).
template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill the device, never more than needed.
// Whether a pointer allows 16-byte vector accesses.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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
// Element-size dispatch for ops that only move data: core/dispatch.h's dispatch_by_size without
// strings, which are not supported on the device.
template <class F>
void dispatch_size(DType dt, F&& f) {
  if (dt == DType::String || dt == DType::Undefined) fail("dtype {} is not supported on CUDA", dtype_name(dt));
  dispatch_by_size(dt, [&]<class U>() {
    if constexpr (!std::is_same_v<U, std::string>) f.template operator()<U>();
  });
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
    for (int d = kMaxRank - 1; d >= 1; --d) {
      if (d < rank) {
        int64_t q = linear / out_dims[d];
        off += (linear - q * out_dims[d]) * strides[d];
        linear = q;
      }
    }
    return rank > 0 ? off + linear * strides[0] : off;  // the outermost dim needs no division
  }
};

// Up to kMaxRank (size, stride) pairs: maps a row-major linear index over `size` to an offset
// (strided walks over kept or reduced axes).
struct Dims {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};

  __device__ __forceinline__ int64_t offset(int64_t linear) const {
    int64_t off = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 1; --d) {
      if (d < rank) {
        const int64_t q = linear / size[d];
        off += (linear - q * size[d]) * stride[d];
        linear = q;
      }
    }
    return rank > 0 ? off + linear * stride[0] : off;  // the outermost dim needs no division
  }
};

// An indexer reading `in` (shape broadcastable to `out`) at each output position. Adjacent dims
// that broadcast the same way are merged, so a typical bias or scalar broadcast has rank <= 2.
Indexer make_indexer(const Shape& in, const Shape& out);
// Merged output dims shared by several indexers (so their ranks agree).
void make_indexers(const std::vector<const Shape*>& ins, const Shape& out, std::vector<Indexer*> result);

}  // namespace ingot::cuda
