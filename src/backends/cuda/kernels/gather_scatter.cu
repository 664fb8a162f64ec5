// CUDA indexing ops: Gather, GatherElements, GatherND, ScatterElements (and its deprecated alias
// Scatter), ScatterND, OneHot. Indices are read on the device (int32 or int64; negative ones count
// from the end of their axis). The CPU kernels (backends/cpu/kernels/tensor_gather_scatter.cpp)
// are the reference for shapes, validation and messages. Differences, since the device cannot
// throw: an index outside [-dim, dim) gathers zeros and scatters nothing (the CPU kernel fails).
// Scatter reductions combine through compare-and-swap loops, so duplicate indices are safe for
// add/mul/max/min (their order, and so float rounding, may differ from the CPU's); with reduction
// 'none' duplicates leave one of the updates, unspecified which (ONNX leaves it undefined).
#include <cstring>
#include <string>
#include <type_traits>

#include "backends/cuda/kernels/cuda_util.cuh"

namespace ingot::cuda {
namespace {

// int32 or int64 indices.
template <class F>
void dispatch_index(DType dt, F&& f) {
  if (dt == DType::Int32) {
    f.template operator()<int32_t>();
  } else {
    f.template operator()<int64_t>();
  }
}

std::vector<DType> data_dtypes() { return {INGOT_CUDA_NUMERIC_TYPES, DType::Bool}; }

using Strides = std::vector<int64_t>;

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= shape[k];
  }
  return s;
}

void check_index_dtype(const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64) {
    fail("{}: expected int32 or int64 indices, got {}", what, t.describe());
  }
}

#define INGOT_GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// An index along an axis of size dim, wrapped when negative; -1 when out of range.
template <class Idx>
__device__ __forceinline__ int64_t wrap_index(Idx raw, int64_t dim) {
  int64_t index = int64_t(raw);
  if (index < 0) index += dim;
  return index >= 0 && index < dim ? index : -1;
}

// ---- Scatter reductions ----------------------------------------------------------------------------

enum Reduction : int { kNone = 0, kAdd, kMul, kMax, kMin };

Reduction parse_reduction(KernelContext& ctx) {
  if (!ctx.def().find_attr("reduction")) return kNone;  // Scatter has no reduction
  const std::string& r = ctx.attr_string("reduction");
  if (r == "none") return kNone;
  if (r == "add") return kAdd;
  if (r == "mul") return kMul;
  if (r == "max") return kMax;
  if (r == "min") return kMin;
  fail("attribute 'reduction': unknown value '{}' (none, add, mul, max or min)", r);
}

// dst combined with v, rounded like the CPU kernel (16-bit floats compute in float).
template <class T>
__device__ __forceinline__ T combine(T dst, T v, int r) {
  using C = compute_t<T>;
  C a = load(dst), b = load(v);
  switch (r) {
    case kAdd: return store<T>(a + b);
    case kMul: return store<T>(a * b);
    case kMax: return b > a ? v : dst;
    case kMin: return b < a ? v : dst;
    default: return v;
  }
}

template <class To, class From>
__device__ __forceinline__ To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To r;
  memcpy(&r, &v, sizeof(To));
  return r;
}

// *addr = combine(*addr, v, r), atomically. 1- and 2-byte elements go through the aligned 32-bit
// word that holds them (tensor storage is at least 4-byte aligned).
template <class T>
__device__ void atomic_combine(T* addr, T v, int r) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using W = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
    W* p = reinterpret_cast<W*>(addr);
    W old = *p, assumed;
    do {
      assumed = old;
      W next = bits_as<W>(combine(bits_as<T>(assumed), v, r));
      if (next == assumed) break;
      old = atomicCAS(p, assumed, next);
    } while (old != assumed);
  } else {
    using B = std::conditional_t<sizeof(T) == 1, unsigned char, unsigned short>;
    uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
    unsigned int shift = unsigned(a & 3) * 8;
    unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      T cur = bits_as<T>(B((assumed & mask) >> shift));
      unsigned int bits = (unsigned(bits_as<B>(combine(cur, v, r))) << shift) & mask;
      unsigned int next = (assumed & ~mask) | bits;
      if (next == assumed) break;
      old = atomicCAS(word, assumed, next);
    } while (old != assumed);
  }
}

template <bool kReduce, class T>
__device__ __forceinline__ void scatter_store(T* at, T v, int r) {
  if constexpr (kReduce) {
    atomic_combine(at, v, r);
  } else {
    *at = v;
  }
}

// Copies data into output 0 (same shape and dtype).
Tensor& copy_of_data(KernelContext& ctx, const Tensor& data) {
  Tensor& y = ctx.allocate(0, data.dtype(), data.shape());
  if (data.nbytes() > 0) {
    INGOT_CUDA_CHECK(cudaMemcpyAsync(y.raw_data(), data.raw_data(), data.nbytes(), cudaMemcpyDeviceToDevice, stream()));
  }
  return y;
}

// Runs body<T>() with the real (device) dtype when combining values, else by element size.
template <class F>
void dispatch_scatter(DType dtype, Reduction r, F&& body) {
  if (r == kNone) {
    dispatch_size(dtype, [&]<class T>() { body.template operator()<T, false>(); });
  } else {
    dispatch_device<INGOT_CUDA_NUMERIC_TYPES>(dtype, [&]<class T>() { body.template operator()<T, true>(); });
  }
}

// ---- Gather ----------------------------------------------------------------------------------------

template <class T, class Idx>
__global__ void gather_kernel(T* __restrict__ out, const T* __restrict__ in, const Idx* __restrict__ idx, int64_t m,
                              int64_t inner, int64_t dim, int64_t n) {
  INGOT_GRID_STRIDE(linear, n) {
    int64_t row = linear / inner;
    int64_t j = linear - row * inner;
    int64_t o = row / m, i = row - o * m;
    int64_t index = wrap_index(idx[i], dim);
    out[linear] = index >= 0 ? in[(o * dim + index) * inner + j] : T{};
  }
}

void gather(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  check_index_dtype(idx, "input 1 (indices)");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  int64_t dim = x.shape()[size_t(axis)];
  Shape out_shape(x.shape().begin(), x.shape().begin() + axis);
  out_shape.insert(out_shape.end(), idx.shape().begin(), idx.shape().end());
  out_shape.insert(out_shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  int64_t inner = shape_numel(x.shape(), size_t(axis) + 1, x.shape().size());
  int64_t m = idx.numel();
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  int64_t n = y.numel();
  if (n == 0) return;
  dispatch_size(x.dtype(), [&]<class T>() {
    dispatch_index(idx.dtype(), [&]<class Idx>() {
      gather_kernel<T, Idx>
          <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(x), ptr<Idx>(idx), m, inner, dim, n);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

// ---- GatherElements, ScatterElements -------------------------------------------------------------

// Walks the positions of the indices tensor; `strides` are the data's, 0 on the indexed axis.
struct ElementParams {
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
  int64_t axis_stride = 0, dim = 0;
};

__device__ __forceinline__ int64_t element_offset(const ElementParams& p, int64_t linear) {
  int64_t off = 0;
#pragma unroll
  for (int k = kMaxRank - 1; k >= 0; --k) {
    if (k < p.rank) {
      int64_t q = linear / p.dims[k];
      off += (linear - q * p.dims[k]) * p.strides[k];
      linear = q;
    }
  }
  return off;
}

// Checks that `indices` has the data's rank and fits inside it on every axis but `axis`.
void check_element_indices(const Tensor& data, const Tensor& idx, int64_t axis, std::string_view what) {
  check_index_dtype(idx, what);
  bool fits = idx.rank() == data.rank();
  for (int64_t k = 0; fits && k < idx.rank(); ++k)
    fits = k == axis || idx.shape()[size_t(k)] <= data.shape()[size_t(k)];
  if (!fits) fail("{}: shape {} does not fit data of shape {}", what, shape_str(idx.shape()), shape_str(data.shape()));
}

ElementParams element_params(const Tensor& data, const Tensor& idx, int64_t axis) {
  if (data.rank() > kMaxRank) fail("input 0: rank {} exceeds the CUDA limit of {}", data.rank(), kMaxRank);
  ElementParams p;
  Strides strides = contiguous_strides(data.shape());
  p.rank = int(idx.rank());
  for (size_t k = 0; k < size_t(p.rank); ++k) {
    p.dims[k] = idx.shape()[k];
    p.strides[k] = int64_t(k) == axis ? 0 : strides[k];
  }
  p.axis_stride = strides[size_t(axis)];
  p.dim = data.shape()[size_t(axis)];
  return p;
}

template <class T, class Idx>
__global__ void gather_elements_kernel(T* __restrict__ out, const T* __restrict__ in, const Idx* __restrict__ idx,
                                       ElementParams p, int64_t n) {
  INGOT_GRID_STRIDE(linear, n) {
    int64_t index = wrap_index(idx[linear], p.dim);
    out[linear] = index >= 0 ? in[element_offset(p, linear) + index * p.axis_stride] : T{};
  }
}

void gather_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  check_element_indices(x, idx, axis, "input 1 (indices)");
  Tensor& y = ctx.allocate(0, x.dtype(), idx.shape());
  int64_t n = y.numel();
  if (n == 0) return;
  ElementParams p = element_params(x, idx, axis);
  dispatch_size(x.dtype(), [&]<class T>() {
    dispatch_index(idx.dtype(), [&]<class Idx>() {
      gather_elements_kernel<T, Idx>
          <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(x), ptr<Idx>(idx), p, n);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

template <class T, class Idx, bool kReduce>
__global__ void scatter_elements_kernel(T* __restrict__ out, const T* __restrict__ upd, const Idx* __restrict__ idx,
                                        ElementParams p, int r, int64_t n) {
  INGOT_GRID_STRIDE(linear, n) {
    int64_t index = wrap_index(idx[linear], p.dim);
    if (index < 0) continue;
    scatter_store<kReduce>(out + element_offset(p, linear) + index * p.axis_stride, upd[linear], r);
  }
}

void scatter_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  check_element_indices(x, idx, axis, "input 1 (indices)");
  if (updates.shape() != idx.shape() || updates.dtype() != x.dtype()) {
    fail("input 2 (updates): expected {}{}, got {}", dtype_name(x.dtype()), shape_str(idx.shape()), updates.describe());
  }
  Reduction reduction = parse_reduction(ctx);
  Tensor& y = copy_of_data(ctx, x);
  int64_t n = idx.numel();
  if (n == 0) return;
  ElementParams p = element_params(x, idx, axis);
  dispatch_scatter(x.dtype(), reduction, [&]<class T, bool kReduce>() {
    dispatch_index(idx.dtype(), [&]<class Idx>() {
      scatter_elements_kernel<T, Idx, kReduce>
          <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(updates), ptr<Idx>(idx), p, int(reduction), n);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

// ---- GatherND, ScatterND ----------------------------------------------------------------------------

// Tuples of k indices address slices of `slice` elements after `batch_dims` leading axes.
struct NdParams {
  int k = 0;
  int64_t dims[kMaxRank];     // sizes of the indexed axes
  int64_t strides[kMaxRank];  // data strides of the indexed axes
  int64_t per_batch = 1, batch_size = 0, slice = 1;
};

// Element offset of tuple t's slice in the data, or -1 when an index is out of range.
template <class Idx>
__device__ __forceinline__ int64_t nd_offset(const NdParams& p, const Idx* idx, int64_t t) {
  int64_t offset = (t / p.per_batch) * p.batch_size;
  const Idx* tuple = idx + t * p.k;
  for (int j = 0; j < p.k; ++j) {
    int64_t index = wrap_index(tuple[j], p.dims[j]);
    if (index < 0) return -1;
    offset += index * p.strides[j];
  }
  return offset;
}

// Validates like the CPU's nd_offsets (minus the index values, read on the device).
NdParams nd_params(const Tensor& data, const Tensor& idx, int64_t batch_dims, std::string_view what) {
  check_index_dtype(idx, what);
  int64_t q = idx.rank(), r = data.rank();
  if (q < 1 || batch_dims >= q) fail("{}: rank {} is too small for batch_dims {}", what, q, batch_dims);
  int64_t k = idx.shape().back();
  if (batch_dims + k > r) {
    fail("{}: tuples of {} indices (after {} batch axes) exceed data rank {}", what, k, batch_dims, r);
  }
  for (int64_t b = 0; b < batch_dims; ++b) {
    if (idx.shape()[size_t(b)] != data.shape()[size_t(b)]) {
      fail("{}: batch axis {} has size {}, data has {}", what, b, idx.shape()[size_t(b)], data.shape()[size_t(b)]);
    }
  }
  if (k > kMaxRank) fail("{}: tuples of {} indices exceed the CUDA limit of {}", what, k, kMaxRank);
  NdParams p;
  Strides strides = contiguous_strides(data.shape());
  p.k = int(k);
  for (int64_t j = 0; j < k; ++j) {
    p.dims[j] = data.shape()[size_t(batch_dims + j)];
    p.strides[j] = strides[size_t(batch_dims + j)];
  }
  p.per_batch = std::max<int64_t>(1, shape_numel(idx.shape(), size_t(batch_dims), size_t(q - 1)));
  p.batch_size = shape_numel(data.shape(), size_t(batch_dims), size_t(r));
  p.slice = shape_numel(data.shape(), size_t(batch_dims + k), size_t(r));
  return p;
}

template <class T, class Idx>
__global__ void gather_nd_kernel(T* __restrict__ out, const T* __restrict__ in, const Idx* __restrict__ idx, NdParams p,
                                 int64_t n) {
  INGOT_GRID_STRIDE(linear, n) {
    int64_t t = linear / p.slice;
    int64_t s = linear - t * p.slice;
    int64_t offset = nd_offset(p, idx, t);
    out[linear] = offset >= 0 ? in[offset + s] : T{};
  }
}

void gather_nd(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  int64_t batch_dims = ctx.attr_int("batch_dims");
  if (batch_dims < 0) fail("attribute 'batch_dims': must be >= 0, got {}", batch_dims);
  NdParams p = nd_params(x, idx, batch_dims, "input 1 (indices)");
  size_t slice_begin = size_t(batch_dims + idx.shape().back());
  Shape out_shape(idx.shape().begin(), idx.shape().end() - 1);
  out_shape.insert(out_shape.end(), x.shape().begin() + int64_t(slice_begin), x.shape().end());
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  int64_t n = y.numel();
  if (n == 0) return;
  dispatch_size(x.dtype(), [&]<class T>() {
    dispatch_index(idx.dtype(), [&]<class Idx>() {
      gather_nd_kernel<T, Idx><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(x), ptr<Idx>(idx), p, n);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

template <class T, class Idx, bool kReduce>
__global__ void scatter_nd_kernel(T* __restrict__ out, const T* __restrict__ upd, const Idx* __restrict__ idx,
                                  NdParams p, int r, int64_t n) {
  INGOT_GRID_STRIDE(linear, n) {
    int64_t t = linear / p.slice;
    int64_t s = linear - t * p.slice;
    int64_t offset = nd_offset(p, idx, t);
    if (offset < 0) continue;
    scatter_store<kReduce>(out + offset + s, upd[linear], r);
  }
}

void scatter_nd(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  NdParams p = nd_params(x, idx, 0, "input 1 (indices)");
  size_t slice_begin = size_t(idx.shape().back());
  Shape expected(idx.shape().begin(), idx.shape().end() - 1);
  expected.insert(expected.end(), x.shape().begin() + int64_t(slice_begin), x.shape().end());
  if (updates.shape() != expected || updates.dtype() != x.dtype()) {
    fail("input 2 (updates): expected {}{}, got {}", dtype_name(x.dtype()), shape_str(expected), updates.describe());
  }
  Reduction reduction = parse_reduction(ctx);
  Tensor& y = copy_of_data(ctx, x);
  int64_t n = updates.numel();
  if (n == 0) return;
  dispatch_scatter(x.dtype(), reduction, [&]<class T, bool kReduce>() {
    dispatch_index(idx.dtype(), [&]<class Idx>() {
      scatter_nd_kernel<T, Idx, kReduce>
          <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(updates), ptr<Idx>(idx), p, int(reduction), n);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

// ---- OneHot ------------------------------------------------------------------------------------------

// values[1] where the inserted axis position equals the (wrapped) index, else values[0]; both read
// from the device.
template <class I, class V>
__global__ void one_hot_kernel(V* __restrict__ out, const I* __restrict__ idx, const V* __restrict__ values,
                               int64_t depth, int64_t inner, int64_t n) {
  const V off = values[0], on = values[1];
  INGOT_GRID_STRIDE(linear, n) {
    int64_t row = linear / inner;
    int64_t i = linear - row * inner;
    int64_t o = row / depth, j = row - o * depth;
    int64_t v = int64_t(double(load(idx[o * inner + i])));
    if (v < 0) v += depth;
    out[linear] = v == j ? on : off;
  }
}

void one_hot(KernelContext& ctx) {
  const Tensor& idx = ctx.input(0);
  const Tensor& depth_t = ctx.input(1);
  const Tensor& values = ctx.input(2);
  if (depth_t.numel() != 1) fail("input 1 (depth): expected one element, got {}", depth_t.describe());
  if (values.numel() != 2) fail("input 2 (values): expected [off, on], got {}", values.describe());
  int64_t depth = int64_t(depth_t.item_double());
  if (depth <= 0) fail("input 1 (depth): must be positive, got {}", depth);
  int64_t axis = normalize_axis(ctx.attr_int("axis"), idx.rank() + 1, "axis");
  Shape out_shape = idx.shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  int64_t inner = shape_numel(idx.shape(), size_t(axis), idx.shape().size());
  Tensor& y = ctx.allocate(0, values.dtype(), out_shape);
  int64_t n = y.numel();
  if (n == 0) return;
  dispatch_device<INGOT_CUDA_NUMERIC_TYPES>(idx.dtype(), [&]<class I>() {
    dispatch_size(values.dtype(), [&]<class V>() {
      one_hot_kernel<I, V>
          <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<V>(y), ptr<I>(idx), ptr<V>(values), depth, inner, n);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace

INGOT_CUDA_KERNEL(Gather, gather).versions(1).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(GatherElements, gather_elements).versions(11).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(GatherND, gather_nd).versions(11).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(ScatterElements, scatter_elements).versions(11).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(Scatter, scatter_elements).versions(9, 10).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(ScatterND, scatter_nd).versions(11).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(OneHot, one_hot).versions(9).dtypes(numeric_dtypes()).host_inputs({1});

}  // namespace ingot::cuda
