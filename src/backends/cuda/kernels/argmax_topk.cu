// ArgMax/ArgMin and TopK on CUDA. The CPU kernels (src/backends/cpu/kernels/reduction.cpp,
// tensor_sort_scan.cpp) are the semantic reference: same attributes, validation and NaN rules.
#include "backends/cuda/kernels/reduction_common.cuh"
#include "ops/semantics/reduce_axes.h"

namespace ingot::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin. NaN counts as the extreme value: the first NaN wins, or the last with
// select_last_index; among equal values the first (or last) index.

template <class T>
using ArgValue = std::conditional_t<std::is_integral_v<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>,
                                    compute_t<T>>;

template <bool kMax, class V>
__device__ __forceinline__ bool arg_better(V a, int64_t ai, V b, int64_t bi, bool last) {
  const bool an = nan_of(a), bn = nan_of(b);
  if (an != bn) return an;
  if (!an && a != b) return kMax ? a > b : a < b;
  return last ? ai > bi : ai < bi;
}

// inner == 1: one warp per row of n contiguous elements.
template <bool kMax, class T>
__global__ void arg_rows_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t rows, int64_t n, bool last) {
  using V = ArgValue<T>;
  const int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
  for (int64_t row = int64_t(blockIdx.x) * warps + (threadIdx.x >> 5); row < rows; row += int64_t(gridDim.x) * warps) {
    const T* src = x + row * n;
    V best = V(0);
    int64_t at = -1;
    for (int64_t k = lane; k < n; k += 32) {
      const V v = V(load(src[k]));
      if (at < 0 || arg_better<kMax>(v, k, best, at, last)) {
        best = v;
        at = k;
      }
    }
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) {
      const V ob = shfl_xor(best, m);
      const int64_t oa = shfl_xor(at, m);
      if (oa >= 0 && (at < 0 || arg_better<kMax>(ob, oa, best, at, last))) {
        best = ob;
        at = oa;
      }
    }
    if (lane == 0) y[row] = at;
  }
}

// inner > 1: one thread per output, the CPU's serial loop.
template <bool kMax, class T>
__global__ void arg_cols_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t n,
                                int64_t inner, bool last) {
  using V = ArgValue<T>;
  const int64_t total = outer * inner;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner, j = i - o * inner;
    const T* src = x + o * n * inner + j;
    V best = V(load(src[0]));
    int64_t at = 0;
    for (int64_t k = 1; k < n; ++k) {
      const V v = V(load(src[k * inner]));
      if (arg_better<kMax>(v, k, best, at, last)) {
        best = v;
        at = k;
      }
    }
    y[i] = at;
  }
}

template <bool kMax>
void arg_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::ArgAxis a = sem::resolve_arg_axis(ctx, x);
  const int64_t axis = a.axis, n = a.n, outer = a.outer, inner = a.inner;
  const bool last = a.last;
  const Shape& out_shape = a.out_shape;
  Tensor& y = ctx.allocate(0, DType::Int64, out_shape);
  if (y.numel() == 0) return;
  INGOT_CHECK(n > 0, "input 0: cannot take Arg{} over axis {} of size 0 (shape {})", kMax ? "Max" : "Min", axis,
              shape_str(x.shape()));
  int64_t* out = ptr<int64_t>(y);
  dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8>(
      x.dtype(), [&]<class T>() {
        const T* in = ptr<const T>(x);
        if (inner == 1) {
          arg_rows_kernel<kMax, T><<<blocks_for(outer * 32), kThreads, 0, stream()>>>(in, out, outer, n, last);
        } else {
          arg_cols_kernel<kMax, T><<<blocks_for(outer * inner), kThreads, 0, stream()>>>(in, out, outer, n, inner, last);
        }
        INGOT_CUDA_LAUNCH_CHECK();
      });
}

// ---------------------------------------------------------------------------------------------
// TopK: one block per row sorts (value, index) pairs with a bitonic network, in shared memory for
// rows up to kTopKShared elements (padded to a power of two), else in a global scratch buffer.
// The order is the CPU's strict total order: NaN ranks above every number, ties go to the lower
// index; padding sorts last.

constexpr int64_t kTopKShared = 4096;

template <class K>
__device__ __forceinline__ bool ranks_above(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (a != a) return b == b;
    if (b != b) return false;
  }
  return a > b;
}

template <class K>
__device__ __forceinline__ bool topk_before(K va, int64_t ia, K vb, int64_t ib, int64_t dim, bool largest) {
  if (ia >= dim) return false;  // padding last
  if (ib >= dim) return true;
  if (largest ? ranks_above(va, vb) : ranks_above(vb, va)) return true;
  if (largest ? ranks_above(vb, va) : ranks_above(va, vb)) return false;
  return ia < ib;
}

template <class T, class I>
__global__ void __launch_bounds__(1024) topk_kernel(const T* __restrict__ x, T* __restrict__ values, int64_t* __restrict__ indices,
                            int64_t rows, int64_t dim, int64_t inner, int64_t k, int64_t padded, bool largest,
                            compute_t<T>* global_keys, I* global_idx) {
  using K = compute_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  K* keys;
  I* idx;
  if (global_keys) {
    keys = global_keys + int64_t(blockIdx.x) * padded;
    idx = global_idx + int64_t(blockIdx.x) * padded;
  } else {
    keys = reinterpret_cast<K*>(smem);
    idx = reinterpret_cast<I*>(smem + padded * int64_t(sizeof(K)));
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t o = row / inner, i = row - o * inner;
    const T* src = x + o * dim * inner + i;
    for (int64_t j = threadIdx.x; j < padded; j += blockDim.x) {
      keys[j] = j < dim ? K(load(src[j * inner])) : K(0);
      idx[j] = I(j);
    }
    __syncthreads();
    for (int64_t size = 2; size <= padded; size <<= 1) {
      for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
        for (int64_t j = threadIdx.x; j < padded; j += blockDim.x) {
          const int64_t partner = j ^ stride;
          if (partner > j) {
            const bool ascending = (j & size) == 0;
            const K a = keys[j], b = keys[partner];
            const int64_t ia = int64_t(idx[j]), ib = int64_t(idx[partner]);
            // In "ascending" runs the element ordered first goes to j.
            const bool swap = ascending ? topk_before(b, ib, a, ia, dim, largest) : topk_before(a, ia, b, ib, dim, largest);
            if (swap) {
              keys[j] = b;
              keys[partner] = a;
              idx[j] = I(ib);
              idx[partner] = I(ia);
            }
          }
        }
        __syncthreads();
      }
    }
    T* vdst = values + o * k * inner + i;
    int64_t* idst = indices + o * k * inner + i;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const int64_t from = int64_t(idx[j]);
      vdst[j * inner] = src[from * inner];
      idst[j * inner] = from;
    }
    __syncthreads();
  }
}

void top_k(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  int64_t k;
  if (ctx.opset() < 10) {
    k = ctx.attr_int("k");
  } else {
    const Tensor& kt = ctx.input(1);
    if (!is_integral(kt.dtype())) fail("input 1 (K): expected an integer tensor, got {}", kt.describe());
    if (kt.numel() != 1) fail("input 1 (K): expected one element, got {}", kt.describe());
    k = kt.item_int(0);
  }
  const int64_t dim = x.shape()[size_t(axis)];
  if (k < 0 || k > dim) fail("K = {} is out of range for axis {} of size {}", k, axis, dim);
  const bool largest = ctx.attr_int("largest") != 0;
  Shape out_shape = x.shape();
  out_shape[size_t(axis)] = k;
  const int64_t outer = shape_numel(x.shape(), 0, size_t(axis));
  const int64_t inner = shape_numel(x.shape(), size_t(axis) + 1, x.shape().size());
  Tensor& values = ctx.allocate(0, x.dtype(), out_shape);
  Tensor& indices = ctx.allocate(1, DType::Int64, out_shape);
  if (values.numel() == 0) return;
  int64_t padded = 1;
  while (padded < dim) padded <<= 1;
  const int64_t rows = outer * inner;
  const int threads = int(std::min<int64_t>(1024, std::max<int64_t>(32, padded / 2)));
  dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64>(x.dtype(), [&]<class T>() {
    using K = compute_t<T>;
    const T* in = ptr<const T>(x);
    T* vout = ptr<T>(values);
    int64_t* iout = ptr<int64_t>(indices);
    if (padded <= kTopKShared) {
      const size_t smem = size_t(padded) * (sizeof(K) + sizeof(int32_t));
      const unsigned grid = unsigned(std::min<int64_t>(rows, int64_t(sm_count()) * 16));
      topk_kernel<T, int32_t><<<grid, threads, smem, stream()>>>(in, vout, iout, rows, dim, inner, k, padded, largest,
                                                                 nullptr, nullptr);
    } else {
      // Long rows: the same network in a global scratch buffer, one slot per block.
      const int64_t grid = std::max<int64_t>(1, std::min<int64_t>(rows, int64_t(sm_count()) * 2));
      Tensor scratch = Tensor::empty(DType::UInt8, {grid * padded * int64_t(sizeof(K) + sizeof(int64_t))}, x.device());
      auto* base = static_cast<unsigned char*>(scratch.raw_data());
      // int64 indices first keep both arrays 8-byte aligned.
      auto* gidx = reinterpret_cast<int64_t*>(base);
      auto* gkeys = reinterpret_cast<K*>(base + grid * padded * int64_t(sizeof(int64_t)));
      topk_kernel<T, int64_t><<<unsigned(grid), 1024, 0, stream()>>>(in, vout, iout, rows, dim, inner, k, padded,
                                                                      largest, gkeys, gidx);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

INGOT_CUDA_KERNEL(ArgMax, arg_kernel<true>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(ArgMin, arg_kernel<false>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});

INGOT_CUDA_KERNEL(TopK, top_k).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});

}  // namespace ingot::cuda
