// ReduceX on CUDA, shared by reduce_sum_mean.cu, reduce_max_min.cu and reduce_other.cu: one
// module per group, so that a model's first ReduceMean loads the sum and mean kernels only (CUDA
// loads a whole module at the first launch of any of its kernels, ~1-1.5 ms per MB of device
// code; the one reduction.cu of every reduction was 12.6 MB). The CPU kernels
// (src/backends/cpu/kernels/reduction.cpp) are the semantic reference: same attributes,
// validation, accumulator types and NaN rules.
//
// Plan: size-1 axes are dropped and neighbouring axes of the same kind (reduced / kept) merged, as
// on the CPU. Each output element is then `reduce over r of x[kept.offset(o) + red.offset(r)]`.
// When the innermost merged axis is reduced ("rows"), one warp (short reductions) or one block
// (long ones) folds each output; when it is kept ("columns"), each block covers 32 consecutive
// outputs (coalesced) with 8 threads splitting the reduced range; for sums and means where the
// innermost kept axis is contiguous in 16-byte vectors and one axis is reduced (a channels-last
// spatial mean: [N, H*W, C]), each thread folds a vector of outputs from one 16-byte load per row instead (`reduce_cols_vec`:
// the squeeze-excite means of MobileNetV3 fp16 b32 took 15-21 us each for 3-6 MB on the scalar
// kernel, too few loads in flight). With few outputs and long
// reductions the reduced range is also split across blocks (gridDim.y), the partial accumulators
// combined by a second kernel.
#pragma once
#include <algorithm>

#include "backends/cuda/kernels/reduction_common.cuh"
#include "ops/semantics/reduce_axes.h"

namespace ingot::cuda {
namespace {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Accumulators as on the CPU: float for float/half types, double for double, 64-bit integers for
// integer sums/products (and for integer max/min: exact), double where the result is irrational.
template <ReduceKind K, class T>
struct ReduceOp {
  static constexpr bool kInt = std::is_integral_v<T>;
  static constexpr bool kReal = K == ReduceKind::L2 || K == ReduceKind::LogSum || K == ReduceKind::LogSumExp;
  static constexpr bool kShift = K == ReduceKind::LogSumExp;
  // Columns in 16-byte vectors (reduce_cols_vec_kernel): sums and means of floating types (the spatial
  // means of channels-last networks; the other kinds keep the scalar kernel, which spares their
  // modules the instantiations).
  static constexpr bool kVectorCols = (K == ReduceKind::Sum || K == ReduceKind::Mean) && !kInt;
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

inline ReducePlan make_plan(const Shape& shape, const std::vector<bool>& reduced) {
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
                                   Dims kept, Dims red, bool red_contiguous, int64_t out_n, int64_t count, Op op) {
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
      for (int64_t r = r0 + lane; r < r1; r += width) a = Op::apply(a, op.load_acc(base[r], shift));
    } else {
      for (int64_t r = r0 + lane; r < r1; r += width) a = Op::apply(a, op.load_acc(base[red.offset(r)], shift));
    }
    a = row_fold<kBlock, Op>(a, Op::identity(), buf);
    if (lane == 0) {
      if (gridDim.y > 1) {
        part[int64_t(blockIdx.y) * out_n + o] = a;
      } else {
        y[o] = op.finish(a, count, shift);
      }
    }
  }
}

// Columns: blockDim (32, 8); each block handles 32 consecutive outputs per step.
constexpr int kColY = 8;
template <class Op, class T>
__global__ void reduce_cols_kernel(const T* __restrict__ x, T* __restrict__ y, typename Op::Acc* __restrict__ part,
                                   Dims kept, Dims red, int64_t out_n, int64_t count, Op op) {
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
      for (int64_t r = r0 + ty; r < r1; r += kColY) a = Op::apply(a, op.load_acc(base[red.offset(r)], shift));
    a = fold_column.template operator()<Op>(a);
    if (ty == 0 && valid) {
      if (gridDim.y > 1) {
        part[int64_t(blockIdx.y) * out_n + o] = a;
      } else {
        y[o] = op.finish(a, count, shift);
      }
    }
  }
}

// Columns, V outputs a thread: blockDim (32, kColY); output vector ov = blockIdx.x * 32 + x (its V
// outputs are contiguous and in one kept row: the caller checks the innermost kept axis is
// contiguous with a size divisible by V); the reduced axis is one, of stride `red_stride`. The
// rows a thread reads are r0 + y, r0 + y + kColY, ...; the kColY partial folds are added in y
// order (as reduce_cols_kernel's).
template <class Op, class T, int V>
__global__ void reduce_cols_vec_kernel(const T* __restrict__ x, T* __restrict__ y, typename Op::Acc* __restrict__ part,
                                       Dims kept, int64_t red_stride, int64_t out_vectors, int64_t count, Op op) {
  using Acc = typename Op::Acc;
  __shared__ Acc buf[kColY][32][V + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  int64_t r0, r1;
  split_range(count, r0, r1);
  const int64_t ov = int64_t(blockIdx.x) * 32 + tx;
  const bool valid = ov < out_vectors;
  Acc a[V];
#pragma unroll
  for (int j = 0; j < V; ++j) a[j] = Op::identity();
  if (valid) {
    const T* base = x + kept.offset(ov * V);
#pragma unroll 4
    for (int64_t r = r0 + ty; r < r1; r += kColY) {
      const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(base + r * red_stride);
#pragma unroll
      for (int j = 0; j < V; ++j) a[j] = Op::apply(a[j], op.load_acc(v.v[j], Acc(0)));
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) buf[ty][tx][j] = a[j];
  __syncthreads();
  if (ty != 0 || !valid) return;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    Acc v = buf[0][tx][j];
    for (int k = 1; k < kColY; ++k) v = Op::apply(v, buf[k][tx][j]);
    const int64_t o = ov * V + j;
    if (gridDim.y > 1) {
      part[int64_t(blockIdx.y) * out_vectors * V + o] = v;
    } else {
      y[o] = op.finish(v, count, Acc(0));
    }
  }
}

template <class Op, class T>
__global__ void reduce_combine_kernel(const typename Op::Acc* __restrict__ part, T* __restrict__ y, int64_t out_n,
                                      int splits, int64_t count, Op op) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < out_n; o += int64_t(gridDim.x) * blockDim.x) {
    typename Op::Acc a = Op::identity();
    for (int s = 0; s < splits; ++s) a = Op::apply(a, part[int64_t(s) * out_n + o]);
    y[o] = op.finish(a, count, typename Op::Acc(0));
  }
}

template <class Op, class T>
__global__ void reduce_fill_kernel(T* __restrict__ y, int64_t n, Op op) {
  using Acc = typename Op::Acc;
  // An empty reduction: sum 0, max -inf, mean NaN, LogSumExp -inf (its shift is -inf).
  const T v = op.finish(Op::identity(), 0, -std::numeric_limits<Acc>::infinity());
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) y[i] = v;
}

// reduce_cols_vec_kernel with V elements a thread (and the combine kernel after it when the rows
// are split), when the plan has that form: one reduced axis, the innermost kept axis contiguous in
// V-element vectors. False (nothing launched) otherwise.
template <class Op, class T, int V>
bool launch_cols_vec(const ReducePlan& p, const T* xp, T* yp, const Tensor& y, Op op) {
  using Acc = typename Op::Acc;
  const bool vec = !p.rows && p.red.rank == 1 && p.kept.rank >= 1 && p.kept.stride[p.kept.rank - 1] == 1 &&
                   p.kept.size[p.kept.rank - 1] % V == 0 && p.red.stride[0] % V == 0 &&
                   reinterpret_cast<uintptr_t>(xp) % (V * sizeof(T)) == 0;
  if (!vec) return false;
  const int64_t sms = sm_count();
  const int64_t out_vectors = p.out_n / V, blocks = (out_vectors + 31) / 32;
  // Split the rows until there are ~4 blocks per SM, each split at least 64 rows (8 loads a thread).
  int64_t splits = 1;
  if (blocks < 4 * sms) splits = std::clamp<int64_t>((4 * sms + blocks - 1) / blocks, 1, std::max<int64_t>(1, p.count / 64));
  splits = std::min<int64_t>(splits, 65535);
  Tensor part_buf;
  Acc* part = nullptr;
  if (splits > 1) {
    part_buf = Tensor::empty(DType::UInt8, {int64_t(sizeof(Acc)) * splits * p.out_n}, y.device());
    part = static_cast<Acc*>(part_buf.raw_data());
  }
  reduce_cols_vec_kernel<Op, T, V><<<dim3(unsigned(blocks), unsigned(splits)), dim3(32, kColY), 0, stream()>>>(
      xp, yp, part, p.kept, p.red.stride[0], out_vectors, p.count, op);
  INGOT_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    reduce_combine_kernel<Op, T><<<blocks_for(p.out_n), kThreads, 0, stream()>>>(part, yp, p.out_n, int(splits), p.count, op);
    INGOT_CUDA_LAUNCH_CHECK();
  }
  return true;
}

// y = the reduction `op` (ReduceOp, or another with its members: Acc, kShift, kVectorCols,
// identity, load_acc, apply, finish) of x over the `reduced` axes.
template <class Op, class T>
void launch_reduce(const Tensor& x, Tensor& y, const std::vector<bool>& reduced, Op op = {}) {
  using Acc = typename Op::Acc;
  const int64_t out_numel = y.numel();
  if (out_numel == 0) return;
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) count *= x.shape()[d];
  T* yp = ptr<T>(y);
  if (count == 0) {
    reduce_fill_kernel<Op, T><<<blocks_for(out_numel), kThreads, 0, stream()>>>(yp, out_numel, op);
    INGOT_CUDA_LAUNCH_CHECK();
    return;
  }
  const ReducePlan p = make_plan(x.shape(), reduced);
  const T* xp = ptr<const T>(x);
  const int64_t sms = sm_count();
  constexpr int V = int(16 / sizeof(T));
  if constexpr (Op::kVectorCols && V > 1) {
    if (launch_cols_vec<Op, T, V>(p, xp, yp, y, op)) return;
    // 8-bit values in 8-byte vectors where the kept row is a multiple of 8 only (MobileNetV3's
    // squeeze-excitation means over 72 and 120 channels).
    if constexpr (sizeof(T) == 1) {
      if (launch_cols_vec<Op, T, 8>(p, xp, yp, y, op)) return;
    }
  }
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
                                                                       p.out_n, p.count, op);
    } else {
      reduce_rows_kernel<Op, T, false><<<grid, kThreads, 0, stream()>>>(xp, yp, part, p.kept, p.red,
                                                                        p.red_contiguous, p.out_n, p.count, op);
    }
  } else {
    reduce_cols_kernel<Op, T><<<grid, dim3(32, kColY), 0, stream()>>>(xp, yp, part, p.kept, p.red, p.out_n, p.count, op);
  }
  INGOT_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    reduce_combine_kernel<Op, T><<<blocks_for(p.out_n), kThreads, 0, stream()>>>(part, yp, p.out_n, int(splits), p.count, op);
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
  auto body = [&]<class T>() { launch_reduce<ReduceOp<K, T>, T>(x, y, axes.reduced); };
  if constexpr (K == ReduceKind::Max || K == ReduceKind::Min) {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64, DType::Int8, DType::UInt8>(x.dtype(), body);
  } else {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int32, DType::Int64>(x.dtype(), body);
  }
}

}  // namespace
}  // namespace ingot::cuda
