// ReduceX, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax and TopK on CUDA. The CPU kernels
// (src/backends/cpu/kernels/reduction.cpp, softmax.cpp, tensor_sort_scan.cpp) are the semantic
// reference: same attributes, validation, accumulator types and NaN rules.
//
// ReduceX plan: size-1 axes are dropped and neighbouring axes of the same kind (reduced / kept)
// merged, as on the CPU. Each output element is then `reduce over r of x[kept.offset(o) +
// red.offset(r)]`. When the innermost merged axis is reduced ("rows"), one warp (short
// reductions) or one block (long ones) folds each output; when it is kept ("columns"), each
// block covers 32 consecutive outputs (coalesced) with 8 threads splitting the reduced range.
// With few outputs and long reductions the reduced range is also split across blocks
// (gridDim.y), the partial accumulators combined by a second kernel.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/reduction.h"
#include "ops/semantics/reduce_axes.h"

namespace ingot::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers.

template <class A>
__device__ __forceinline__ bool nan_of(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t k = begin; k < end; ++k) n *= shape[k];
  return n;
}

// ---------------------------------------------------------------------------------------------
// ReduceX.

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Accumulators as on the CPU: float for float/half types, double for double, 64-bit integers for
// integer sums/products (and for integer max/min: exact), double where the result is irrational.
template <ReduceKind K, class T>
struct ReduceOp {
  static constexpr bool kInt = std::is_integral_v<T>;
  static constexpr bool kReal = K == ReduceKind::L2 || K == ReduceKind::LogSum || K == ReduceKind::LogSumExp;
  static constexpr bool kShift = K == ReduceKind::LogSumExp;
  using Acc = std::conditional_t<
      std::is_same_v<T, double>, double,
      std::conditional_t<!kInt, float,
                         std::conditional_t<kReal, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>>;

  __device__ static Acc identity() {
    if constexpr (K == ReduceKind::Max) {
      if constexpr (kInt) {
        return Acc(std::numeric_limits<T>::lowest());
      } else {
        return -std::numeric_limits<Acc>::infinity();
      }
    } else if constexpr (K == ReduceKind::Min) {
      if constexpr (kInt) {
        return Acc(std::numeric_limits<T>::max());
      } else {
        return std::numeric_limits<Acc>::infinity();
      }
    } else if constexpr (K == ReduceKind::Prod) {
      return Acc(1);
    } else {
      return Acc(0);
    }
  }
  __device__ static Acc load_acc(T v, Acc shift) {
    const Acc a = Acc(::ingot::cuda::load(v));
    if constexpr (K == ReduceKind::SumSquare || K == ReduceKind::L2) {
      return a * a;
    } else if constexpr (K == ReduceKind::L1) {
      if constexpr (std::is_unsigned_v<Acc>) {
        return a;
      } else {
        return a < Acc(0) ? Acc(0) - a : a;
      }
    } else if constexpr (K == ReduceKind::LogSumExp) {
      return exp_of(a - shift);
    } else {
      return a;
    }
  }
  __device__ static Acc apply(Acc a, Acc b) {
    if constexpr (K == ReduceKind::Max) {
      return ((b > a) || nan_of(b)) ? b : a;
    } else if constexpr (K == ReduceKind::Min) {
      return ((b < a) || nan_of(b)) ? b : a;
    } else if constexpr (K == ReduceKind::Prod) {
      return a * b;
    } else {
      return a + b;
    }
  }
  __device__ static T finish(Acc a, int64_t count, Acc shift) {
    if constexpr (K == ReduceKind::Mean) {
      if constexpr (std::is_integral_v<Acc>) {
        return T(count == 0 ? Acc(0) : Acc(a / Acc(count)));
      } else {
        return store<T>(a / Acc(count));  // 0/0 = NaN for an empty reduction, as the CPU
      }
    } else if constexpr (K == ReduceKind::L2) {
      return store<T>(sqrt(a));
    } else if constexpr (K == ReduceKind::LogSum) {
      return store<T>(log_of(a));
    } else if constexpr (K == ReduceKind::LogSumExp) {
      if (isinf(shift)) return store<T>(shift);
      return store<T>(log_of(a) + shift);
    } else {
      return store<T>(a);
    }
  }
};

// LogSumExp's first pass: the NaN-sticky maximum in the accumulator type.
template <class Acc>
struct MaxFold {
  __device__ static Acc apply(Acc a, Acc b) { return ((b > a) || nan_of(b)) ? b : a; }
};

struct ReducePlan {
  Dims kept, red;         // output index -> offset; reduced index -> offset
  int64_t out_n = 1, count = 1;
  bool rows = true;       // innermost merged axis reduced (or nothing left)
  bool red_contiguous = false;  // red.offset(r) == r
};

ReducePlan make_plan(const Shape& shape, const std::vector<bool>& reduced) {
  std::vector<int64_t> sizes, strides;
  std::vector<bool> kinds;
  std::vector<int64_t> all_strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    all_strides[d] = stride;
    stride *= shape[d];
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!kinds.empty() && kinds.back() == reduced[d]) {
      sizes.back() *= shape[d];
      strides.back() = all_strides[d];
    } else {
      sizes.push_back(shape[d]);
      strides.push_back(all_strides[d]);
      kinds.push_back(reduced[d]);
    }
  }
  ReducePlan p;
  for (size_t k = 0; k < kinds.size(); ++k) {
    Dims& dims = kinds[k] ? p.red : p.kept;
    if (dims.rank == kMaxRank) fail("input 0: too many alternating reduced/kept axes for the CUDA reduction ({})", shape_str(shape));
    dims.size[dims.rank] = sizes[k];
    dims.stride[dims.rank] = strides[k];
    ++dims.rank;
    (kinds[k] ? p.count : p.out_n) *= sizes[k];
  }
  p.rows = kinds.empty() || kinds.back();
  p.red_contiguous = p.red.rank == 0 || (p.red.rank == 1 && p.red.stride[0] == 1);
  return p;
}

// Splits of the reduced range: blockIdx.y covers [r0, r1). With gridDim.y > 1 the raw
// accumulators go to part[blockIdx.y * out_n + o] instead of finished outputs.
__device__ __forceinline__ void split_range(int64_t count, int64_t& r0, int64_t& r1) {
  const int64_t chunk = (count + gridDim.y - 1) / gridDim.y;
  r0 = int64_t(blockIdx.y) * chunk;
  r1 = min(count, r0 + chunk);
}

// Rows: one warp per output (kBlock false, blockDim 256 = 8 warps) or one block per output.
template <class Op, class T, bool kBlock>
__global__ void reduce_rows_kernel(const T* __restrict__ x, T* __restrict__ y, typename Op::Acc* __restrict__ part,
                                   Dims kept, Dims red, bool red_contiguous, int64_t out_n, int64_t count) {
  using Acc = typename Op::Acc;
  __shared__ Acc buf[32];
  const RowSplit rs = row_split<kBlock>();
  const int64_t group = rs.group, groups = rs.groups;
  const int lane = rs.lane, width = rs.width;
  int64_t r0, r1;
  split_range(count, r0, r1);
  for (int64_t o = group; o < out_n; o += groups) {
    const T* base = x + kept.offset(o);
    Acc shift = Acc(0);
    if constexpr (Op::kShift) {
      Acc m = -std::numeric_limits<Acc>::infinity();
      for (int64_t r = r0 + lane; r < r1; r += width)
        m = MaxFold<Acc>::apply(m, Acc(load(base[red_contiguous ? r : red.offset(r)])));
      shift = row_fold<kBlock, MaxFold<Acc>>(m, -std::numeric_limits<Acc>::infinity(), buf);
    }
    Acc a = Op::identity();
    if (red_contiguous) {
      for (int64_t r = r0 + lane; r < r1; r += width) a = Op::apply(a, Op::load_acc(base[r], shift));
    } else {
      for (int64_t r = r0 + lane; r < r1; r += width) a = Op::apply(a, Op::load_acc(base[red.offset(r)], shift));
    }
    a = row_fold<kBlock, Op>(a, Op::identity(), buf);
    if (lane == 0) {
      if (gridDim.y > 1) {
        part[int64_t(blockIdx.y) * out_n + o] = a;
      } else {
        y[o] = Op::finish(a, count, shift);
      }
    }
  }
}

// Columns: blockDim (32, 8); each block handles 32 consecutive outputs per step.
constexpr int kColY = 8;
template <class Op, class T>
__global__ void reduce_cols_kernel(const T* __restrict__ x, T* __restrict__ y, typename Op::Acc* __restrict__ part,
                                   Dims kept, Dims red, int64_t out_n, int64_t count) {
  using Acc = typename Op::Acc;
  __shared__ Acc buf[kColY][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  int64_t r0, r1;
  split_range(count, r0, r1);
  auto fold_column = [&]<class F>(Acc v) {
    buf[ty][tx] = v;
    __syncthreads();
    if (ty == 0) {
      for (int k = 1; k < kColY; ++k) v = F::apply(v, buf[k][tx]);
      buf[0][tx] = v;
    }
    __syncthreads();
    v = buf[0][tx];
    __syncthreads();
    return v;
  };
  for (int64_t o0 = int64_t(blockIdx.x) * 32; o0 < out_n; o0 += int64_t(gridDim.x) * 32) {
    const int64_t o = o0 + tx;
    const bool valid = o < out_n;
    const T* base = x + (valid ? kept.offset(o) : 0);
    Acc shift = Acc(0);
    if constexpr (Op::kShift) {
      Acc m = -std::numeric_limits<Acc>::infinity();
      if (valid)
        for (int64_t r = r0 + ty; r < r1; r += kColY) m = MaxFold<Acc>::apply(m, Acc(load(base[red.offset(r)])));
      shift = fold_column.template operator()<MaxFold<Acc>>(m);
    }
    Acc a = Op::identity();
    if (valid)
      for (int64_t r = r0 + ty; r < r1; r += kColY) a = Op::apply(a, Op::load_acc(base[red.offset(r)], shift));
    a = fold_column.template operator()<Op>(a);
    if (ty == 0 && valid) {
      if (gridDim.y > 1) {
        part[int64_t(blockIdx.y) * out_n + o] = a;
      } else {
        y[o] = Op::finish(a, count, shift);
      }
    }
  }
}

template <class Op, class T>
__global__ void reduce_combine_kernel(const typename Op::Acc* __restrict__ part, T* __restrict__ y, int64_t out_n,
                                      int splits, int64_t count) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < out_n; o += int64_t(gridDim.x) * blockDim.x) {
    typename Op::Acc a = Op::identity();
    for (int s = 0; s < splits; ++s) a = Op::apply(a, part[int64_t(s) * out_n + o]);
    y[o] = Op::finish(a, count, typename Op::Acc(0));
  }
}

template <class Op, class T>
__global__ void reduce_fill_kernel(T* __restrict__ y, int64_t n) {
  using Acc = typename Op::Acc;
  // An empty reduction: sum 0, max -inf, mean NaN, LogSumExp -inf (its shift is -inf).
  const T v = Op::finish(Op::identity(), 0, -std::numeric_limits<Acc>::infinity());
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) y[i] = v;
}

template <ReduceKind K, class T>
void launch_reduce(const Tensor& x, Tensor& y, const std::vector<bool>& reduced) {
  using Op = ReduceOp<K, T>;
  using Acc = typename Op::Acc;
  const int64_t out_numel = y.numel();
  if (out_numel == 0) return;
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) count *= x.shape()[d];
  T* yp = ptr<T>(y);
  if (count == 0) {
    reduce_fill_kernel<Op, T><<<blocks_for(out_numel), kThreads, 0, stream()>>>(yp, out_numel);
    INGOT_CUDA_LAUNCH_CHECK();
    return;
  }
  const ReducePlan p = make_plan(x.shape(), reduced);
  const T* xp = ptr<const T>(x);
  const int64_t sms = sm_count();
  // Parallelism from the outputs alone, in blocks; split the reduced range when it is too little.
  const bool block_rows = p.rows && p.count >= 2048;
  const int64_t out_blocks = p.rows ? (block_rows ? p.out_n : (p.out_n + 7) / 8) : (p.out_n + 31) / 32;
  int64_t splits = 1;
  if (!Op::kShift && out_blocks < 2 * sms) {
    const int64_t min_chunk = p.rows ? (block_rows ? 4096 : 1024) : 256;
    splits = std::min<int64_t>({(4 * sms + out_blocks - 1) / out_blocks, p.count / min_chunk, 65535});
    splits = std::max<int64_t>(1, splits);
  }
  Tensor part_buf;
  Acc* part = nullptr;
  if (splits > 1) {
    part_buf = Tensor::empty(DType::UInt8, {int64_t(sizeof(Acc)) * splits * p.out_n}, y.device());
    part = static_cast<Acc*>(part_buf.raw_data());
  }
  const dim3 grid(unsigned(std::max<int64_t>(1, std::min<int64_t>(out_blocks, sms * 32))), unsigned(splits));
  if (p.rows) {
    if (block_rows) {
      reduce_rows_kernel<Op, T, true><<<grid, kThreads, 0, stream()>>>(xp, yp, part, p.kept, p.red, p.red_contiguous,
                                                                       p.out_n, p.count);
    } else {
      reduce_rows_kernel<Op, T, false><<<grid, kThreads, 0, stream()>>>(xp, yp, part, p.kept, p.red,
                                                                        p.red_contiguous, p.out_n, p.count);
    }
  } else {
    reduce_cols_kernel<Op, T><<<grid, dim3(32, kColY), 0, stream()>>>(xp, yp, part, p.kept, p.red, p.out_n, p.count);
  }
  INGOT_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    reduce_combine_kernel<Op, T><<<blocks_for(p.out_n), kThreads, 0, stream()>>>(part, yp, p.out_n, int(splits), p.count);
    INGOT_CUDA_LAUNCH_CHECK();
  }
}

using sem::ReduceAxes;

template <ReduceKind K>
void reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ReduceAxes axes = sem::resolve_reduce_axes(ctx, x);
  if (axes.identity) {
    ctx.set_output(0, x);
    return;
  }
  Tensor& y = ctx.allocate(0, x.dtype(), axes.out_shape);
  auto body = [&]<class T>() { launch_reduce<K, T>(x, y, axes.reduced); };
  if constexpr (K == ReduceKind::Max || K == ReduceKind::Min) {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8>(x.dtype(), body);
  } else {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64>(x.dtype(), body);
  }
}

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
// Softmax / LogSoftmax / Hardmax over an [outer, dim, inner] view. The maximum ignores NaN (as the
// CPU's `v > best` loop); Hardmax marks the first index of the maximum (index 0 when no element
// exceeds -inf).

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

using sem::AxisView;

AxisView axis_view(const KernelContext& ctx, const Tensor& x) { return sem::softmax_axis_view(ctx, x); }

template <class A>
struct MaxIgnoreNan {
  __device__ static A apply(A a, A b) { return b > a ? b : a; }
};
struct MinIndex {
  __device__ static int64_t apply(int64_t a, int64_t b) { return b < a ? b : a; }
};

// Rows (inner == 1): one warp per row (kBlock false) or one block per row.
template <SoftmaxKind K, class T, bool kBlock>
__global__ void softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t dim) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  __shared__ A abuf[32];
  __shared__ int64_t ibuf[32];
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const RowSplit rs = row_split<kBlock>();
  const int64_t group = rs.group, groups = rs.groups;
  const int lane = rs.lane, width = rs.width;
  for (int64_t row = group; row < rows; row += groups) {
    const T* src = x + row * dim;
    T* dst = y + row * dim;
    A best = kNegInf;
    for (int64_t d = lane; d < dim; d += width) {
      const A v = A(load(src[d]));
      if (v > best) best = v;
    }
    best = row_fold<kBlock, MaxIgnoreNan<A>>(best, kNegInf, abuf);
    if constexpr (K == SoftmaxKind::Hardmax) {
      // The first index holding the maximum (0 when the maximum is -inf or everything is NaN).
      int64_t arg = INT64_MAX;
      if (best != kNegInf) {
        for (int64_t d = lane; d < dim; d += width) {
          if (A(load(src[d])) == best) {
            arg = d;
            break;
          }
        }
      }
      arg = row_fold<kBlock, MinIndex>(arg, int64_t(INT64_MAX), ibuf);
      if (arg == INT64_MAX) arg = 0;
      for (int64_t d = lane; d < dim; d += width) dst[d] = store<T>(A(d == arg ? 1 : 0));
    } else {
      A sum = 0;
      for (int64_t d = lane; d < dim; d += width) sum += exp_of(A(load(src[d])) - best);
      sum = row_fold<kBlock, SumFold<A>>(sum, A(0), abuf);
      if constexpr (K == SoftmaxKind::Softmax) {
        const A inv = A(1) / sum;
        for (int64_t d = lane; d < dim; d += width) dst[d] = store<T>(exp_of(A(load(src[d])) - best) * inv);
      } else {
        const A shift = best + log_of(sum);
        for (int64_t d = lane; d < dim; d += width) dst[d] = store<T>(A(load(src[d])) - shift);
      }
    }
  }
}

// Softmax / LogSoftmax rows of at most 32 * kPer * kVec elements in 16/32-bit floats: one warp per
// row, the row read once into registers and written once, so each byte moves once
// (softmax_rows_kernel reads the row three times). kVec elements travel per access (2 for 16-bit
// rows of even length: 4-byte loads); lane l holds vectors l, l + 32, ... The same arithmetic as
// softmax_rows_kernel: NaN is ignored by the maximum and propagates through the sum.
template <class T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <SoftmaxKind K, class T, int kPer, int kVec>
__global__ void softmax_warp_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int dim) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  using P = Pack<T, kVec>;
  const int lane = threadIdx.x & 31;
  const int packs = dim / kVec;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = thread_index() >> 5; row < rows; row += warps) {
    const P* src = reinterpret_cast<const P*>(x + row * dim);
    P* dst = reinterpret_cast<P*>(y + row * dim);
    float v[kPer][kVec];
    float best = kNegInf;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int d = lane + 32 * k;
      if (d < packs) {
        const P p = src[d];
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[k][j] = float(load(p.v[j]));
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[k][j] = kNegInf;
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) best = v[k][j] > best ? v[k][j] : best;
    }
    best = warp_fold<MaxIgnoreNan<float>>(best);
    float sum = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (lane + 32 * k < packs) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float e = exp_of(v[k][j] - best);
          sum += e;
          if constexpr (K == SoftmaxKind::Softmax) v[k][j] = e;
        }
      }
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sum, shift = best + log_of(sum);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int d = lane + 32 * k;
      if (d < packs) {
        P p;
#pragma unroll
        for (int j = 0; j < kVec; ++j) p.v[j] = store<T>(K == SoftmaxKind::Softmax ? v[k][j] * inv : v[k][j] - shift);
        dst[d] = p;
      }
    }
  }
}

// Vectors per lane for a warp-per-row softmax of `dim` elements in vectors of `vec`, 0 when the
// row is too long for registers.
inline int softmax_warp_per_lane(int64_t dim, int vec) {
  for (int per : {1, 2, 4, 8, 12, 16, 24, 32}) {
    if (dim <= int64_t(32) * per * vec) return per;
  }
  return 0;
}

// Launches the warp-per-row kernel where it measured faster than softmax_rows_kernel; false
// otherwise. H200, 0.9-1.7 GB per call (ingot bench of one Softmax, 2026-11-30): rows of 64 and 256
// 1.3-1.5x faster in float16 and float32-64 1.3x; 1500-long float16 rows (Whisper's attention) 1.15x
// faster than the block-per-row kernel; but 1000-long rows (warp-per-row there too) and 2048-long
// float16 rows slower (more registers per lane, fewer warps resident).
template <SoftmaxKind K, class T>
bool launch_softmax_warp_rows(const T* in, T* out, int64_t rows, int64_t dim) {
  const int vec = sizeof(T) == 2 && dim % 2 == 0 ? 2 : 1;
  const int per = softmax_warp_per_lane(dim, vec);
  const int values = per * vec;  // floats each lane keeps
  if (per == 0 || !(values <= 8 || (dim > 1024 && values <= 48))) return false;
  const unsigned blocks = blocks_for(rows * 32);
  auto go = [&]<int V>() {
    switch (per) {
#define INGOT_PER(N) \
  case N: softmax_warp_rows_kernel<K, T, N, V><<<blocks, kThreads, 0, stream()>>>(in, out, rows, int(dim)); break;
      INGOT_PER(1) INGOT_PER(2) INGOT_PER(4) INGOT_PER(8) INGOT_PER(12) INGOT_PER(16) INGOT_PER(24) INGOT_PER(32)
#undef INGOT_PER
    }
  };
  if (vec == 2) {
    go.template operator()<2>();
  } else {
    go.template operator()<1>();
  }
  return true;
}

// inner > 1: one thread per (outer, inner) column, serial over dim (coalesced across inner).
template <SoftmaxKind K, class T>
__global__ void softmax_cols_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t dim,
                                    int64_t inner) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t total = outer * inner;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner, j = i - o * inner;
    const T* src = x + o * dim * inner + j;
    T* dst = y + o * dim * inner + j;
    A best = -std::numeric_limits<A>::infinity();
    int64_t arg = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const A v = A(load(src[d * inner]));
      if (v > best) {
        best = v;
        arg = d;
      }
    }
    if constexpr (K == SoftmaxKind::Hardmax) {
      for (int64_t d = 0; d < dim; ++d) dst[d * inner] = store<T>(A(d == arg ? 1 : 0));
    } else {
      A sum = 0;
      for (int64_t d = 0; d < dim; ++d) sum += exp_of(A(load(src[d * inner])) - best);
      if constexpr (K == SoftmaxKind::Softmax) {
        const A inv = A(1) / sum;
        for (int64_t d = 0; d < dim; ++d) dst[d * inner] = store<T>(exp_of(A(load(src[d * inner])) - best) * inv);
      } else {
        const A shift = best + log_of(sum);
        for (int64_t d = 0; d < dim; ++d) dst[d * inner] = store<T>(A(load(src[d * inner])) - shift);
      }
    }
  }
}

// Contiguous rows: the warp-per-row kernel where it measured faster, else one warp (rows up to
// 1024) or one block per row.
template <SoftmaxKind K, class T>
void launch_softmax_rows(const T* in, T* out, int64_t rows, int64_t dim) {
  if constexpr (K != SoftmaxKind::Hardmax && !std::is_same_v<T, double>) {
    if (launch_softmax_warp_rows<K, T>(in, out, rows, dim)) return;
  }
  if (dim > 1024) {
    softmax_rows_kernel<K, T, true><<<blocks_for(rows * kThreads), kThreads, 0, stream()>>>(in, out, rows, dim);
  } else {
    softmax_rows_kernel<K, T, false><<<blocks_for(rows * 32), kThreads, 0, stream()>>>(in, out, rows, dim);
  }
}

template <SoftmaxKind K>
void softmax_family(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const AxisView v = axis_view(ctx, x);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    const T* in = ptr<const T>(x);
    T* out = ptr<T>(y);
    if (v.inner == 1) {
      launch_softmax_rows<K, T>(in, out, v.outer, v.dim);
    } else {
      softmax_cols_kernel<K, T><<<blocks_for(v.outer * v.inner), kThreads, 0, stream()>>>(in, out, v.outer, v.dim,
                                                                                           v.inner);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ai.ingot.SoftmaxGrad: dX = Y (dY - sum(dY Y)). Contiguous rows: one warp (rows up to 1024) or
// one block per row, two passes over the row; columns (inner > 1): one thread each, serial.
template <class T, bool kBlock>
__global__ void softmax_grad_rows_kernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                         int64_t rows, int64_t dim) {
  using A = acc_of<T>;
  __shared__ A buf[32];
  const RowSplit rs = row_split<kBlock>();
  for (int64_t row = rs.group; row < rows; row += rs.groups) {
    const T *g = dy + row * dim, *p = y + row * dim;
    T* out = dx + row * dim;
    A s = 0;
    for (int64_t d = rs.lane; d < dim; d += rs.width) s += A(load(g[d])) * A(load(p[d]));
    s = row_fold<kBlock, SumFold<A>>(s, A(0), buf);
    for (int64_t d = rs.lane; d < dim; d += rs.width) out[d] = store<T>(A(load(p[d])) * (A(load(g[d])) - s));
  }
}

template <class T>
__global__ void softmax_grad_cols_kernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                         int64_t outer, int64_t dim, int64_t inner) {
  using A = acc_of<T>;
  for (int64_t c = thread_index(); c < outer * inner; c += grid_stride()) {
    const int64_t base = (c / inner) * dim * inner + c % inner;
    A s = 0;
    for (int64_t d = 0; d < dim; ++d) s += A(load(dy[base + d * inner])) * A(load(y[base + d * inner]));
    for (int64_t d = 0; d < dim; ++d) {
      const int64_t i = base + d * inner;
      dx[i] = store<T>(A(load(y[i])) * (A(load(dy[i])) - s));
    }
  }
}

void softmax_grad(KernelContext& ctx) {
  const Tensor &dy = ctx.input(0), &y = ctx.input(1);
  const AxisView v = sem::softmax_grad_view(ctx);
  Tensor& dx = ctx.allocate(0, y.dtype(), y.shape());
  if (y.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(y.dtype(), [&]<class T>() {
    const T *g = ptr<const T>(dy), *p = ptr<const T>(y);
    T* out = ptr<T>(dx);
    if (v.inner != 1) {
      softmax_grad_cols_kernel<T><<<blocks_for(v.outer * v.inner), kThreads, 0, stream()>>>(g, p, out, v.outer, v.dim, v.inner);
    } else if (v.dim > 1024) {
      softmax_grad_rows_kernel<T, true><<<blocks_for(v.outer * kThreads), kThreads, 0, stream()>>>(g, p, out, v.outer, v.dim);
    } else {
      softmax_grad_rows_kernel<T, false><<<blocks_for(v.outer * 32), kThreads, 0, stream()>>>(g, p, out, v.outer, v.dim);
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
  const int64_t outer = product(x.shape(), 0, size_t(axis));
  const int64_t inner = product(x.shape(), size_t(axis) + 1, x.shape().size());
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

void softmax_rows(DType dtype, const void* in, void* out, int64_t rows, int64_t dim) {
  if (rows == 0 || dim == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(dtype, [&]<class T>() {
    launch_softmax_rows<SoftmaxKind::Softmax, T>(static_cast<const T*>(in), static_cast<T*>(out), rows, dim);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

INGOT_CUDA_KERNEL(ReduceSum, reduce_kernel<ReduceKind::Sum>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceMean, reduce_kernel<ReduceKind::Mean>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceMax, reduce_kernel<ReduceKind::Max>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(ReduceMin, reduce_kernel<ReduceKind::Min>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(ReduceProd, reduce_kernel<ReduceKind::Prod>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceL1, reduce_kernel<ReduceKind::L1>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceL2, reduce_kernel<ReduceKind::L2>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceLogSum, reduce_kernel<ReduceKind::LogSum>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceLogSumExp, reduce_kernel<ReduceKind::LogSumExp>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});
INGOT_CUDA_KERNEL(ReduceSumSquare, reduce_kernel<ReduceKind::SumSquare>).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});

INGOT_CUDA_KERNEL(ArgMax, arg_kernel<true>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(ArgMin, arg_kernel<false>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8});

INGOT_CUDA_KERNEL(Softmax, softmax_family<SoftmaxKind::Softmax>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(SoftmaxGrad, softmax_grad).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LogSoftmax, softmax_family<SoftmaxKind::LogSoftmax>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(Hardmax, softmax_family<SoftmaxKind::Hardmax>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});

INGOT_CUDA_KERNEL(TopK, top_k).versions(1).host_inputs({1}).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64});

}  // namespace ingot::cuda
