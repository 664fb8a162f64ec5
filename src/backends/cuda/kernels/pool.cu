// Pooling on CUDA: MaxPool (with Indices), AveragePool, LpPool and the global forms. The window
// geometry (output sizes, pads, auto_pad, ceil_mode) comes from the shared sem::pool_window (ops/semantics/window.h),
// and each kernel walks the taps in the CPU kernel's order with its comparisons, so outputs and
// indices match src/backends/cpu/kernels/pool.cpp. Direct kernels: one thread per output element
// (sliding windows), one warp or block per plane (global pools).
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/semantics/window.h"
#include "backends/cuda/kernels/cuda_util.cuh"

namespace ingot::cuda {
namespace {

// 3-D window geometry (leading size-1 axes for 1-D and 2-D pools).
struct Geometry {
  int64_t in[3], out[3], kernel[3], strides[3], dilations[3], pad_begin[3], pad_end[3];
};

// One axis of one output position, as the CPU's axis_taps: the window's first input index and
// the tap range [lo, hi) inside the input; `padded` counts taps inside the padded input.
struct Taps {
  int64_t start, lo, hi, padded;
};

__device__ __forceinline__ Taps taps_of(const Geometry& g, int axis, int64_t o) {
  Taps t;
  t.start = o * g.strides[axis] - g.pad_begin[axis];
  int64_t lo = 0, hi = 0, padded = 0;
  for (int64_t j = 0; j < g.kernel[axis]; ++j) {
    const int64_t p = t.start + j * g.dilations[axis];
    if (p < 0) lo = j + 1;
    if (p < g.in[axis]) hi = j + 1;
    if (p < g.in[axis] + g.pad_end[axis]) ++padded;
  }
  t.lo = lo;
  t.hi = hi > lo ? hi : lo;
  t.padded = padded;
  return t;
}

enum class PoolKind { Max, Average, Lp };

template <PoolKind K, class T>
__global__ void pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ indices, Geometry g,
                            int64_t total, bool count_include_pad, int64_t p, bool column_major) {
  using A = acc_of<T>;
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t in_plane = ID * IH * IW, out_plane = OD * OH * OW;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = i / out_plane;
    int64_t rest = i - plane * out_plane;
    const int64_t od = rest / (OH * OW);
    rest -= od * OH * OW;
    const int64_t oh = rest / OW, ow = rest - oh * OW;
    const Taps td = taps_of(g, 0, od), th = taps_of(g, 1, oh), tw = taps_of(g, 2, ow);
    const T* xp = x + plane * in_plane;
    if constexpr (K == PoolKind::Max) {
      A best = -std::numeric_limits<A>::infinity();
      int64_t best_at = -1;
      for (int64_t kd = td.lo; kd < td.hi; ++kd) {
        const int64_t id = td.start + kd * g.dilations[0];
        for (int64_t kh = th.lo; kh < th.hi; ++kh) {
          const int64_t ih = th.start + kh * g.dilations[1];
          const T* row = xp + (id * IH + ih) * IW;
          for (int64_t kw = tw.lo; kw < tw.hi; ++kw) {
            const int64_t iw = tw.start + kw * g.dilations[2];
            const A v = A(load(row[iw]));
            if (v > best || best_at < 0) {
              best = v;
              best_at = (id * IH + ih) * IW + iw;
            }
          }
        }
      }
      y[i] = store<T>(best);
      if (indices) {
        int64_t at = best_at < 0 ? 0 : best_at;
        if (column_major) {
          const int64_t iw = at % IW, ih = (at / IW) % IH, id = at / (IW * IH);
          at = iw * IH * ID + ih * ID + id;
        }
        indices[i] = plane * in_plane + at;
      }
    } else {
      A acc = 0;
      for (int64_t kd = td.lo; kd < td.hi; ++kd) {
        const int64_t id = td.start + kd * g.dilations[0];
        for (int64_t kh = th.lo; kh < th.hi; ++kh) {
          const T* row = xp + (id * IH + th.start + kh * g.dilations[1]) * IW + tw.start;
          for (int64_t kw = tw.lo; kw < tw.hi; ++kw) {
            const A v = A(load(row[kw * g.dilations[2]]));
            if constexpr (K == PoolKind::Average) {
              acc += v;
            } else {
              if (p == 1) {
                acc += abs_of(v);
              } else if (p == 2) {
                acc += v * v;
              } else {
                acc += pow_of(abs_of(v), A(p));
              }
            }
          }
        }
      }
      if constexpr (K == PoolKind::Average) {
        const int64_t count = count_include_pad ? td.padded * th.padded * tw.padded
                                                : (td.hi - td.lo) * (th.hi - th.lo) * (tw.hi - tw.lo);
        y[i] = store<T>(count > 0 ? acc / A(count) : A(0));
      } else {
        y[i] = store<T>(p == 2 ? sqrt_of(acc) : p == 1 ? acc : pow_of(acc, A(1) / A(p)));
      }
    }
  }
}

using sem::pool_window;

template <PoolKind K>
void pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::Window w = pool_window(ctx, x);
  Shape out_shape{x.dim(0), x.dim(1)};
  out_shape.insert(out_shape.end(), w.out.begin(), w.out.end());
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  int64_t* indices = nullptr;
  if (K == PoolKind::Max && ctx.num_outputs() > 1) indices = ptr<int64_t>(ctx.allocate(1, DType::Int64, y.shape()));
  if (y.numel() == 0) return;
  const bool count_include_pad = K == PoolKind::Average && ctx.attr_int("count_include_pad") != 0;
  const int64_t p = K == PoolKind::Lp ? ctx.attr_int("p") : 0;
  if (K == PoolKind::Lp && p < 1) fail("attribute 'p': expected >= 1, got {}", p);
  const bool column_major = K == PoolKind::Max && ctx.attr_int("storage_order") == 1;
  const sem::Window w3 = sem::to_3d(w);
  Geometry g;
  for (int a = 0; a < 3; ++a) {
    g.in[a] = w3.in[size_t(a)];
    g.out[a] = w3.out[size_t(a)];
    g.kernel[a] = w3.kernel[size_t(a)];
    g.strides[a] = w3.strides[size_t(a)];
    g.dilations[a] = w3.dilations[size_t(a)];
    g.pad_begin[a] = w3.pad_begin[size_t(a)];
    g.pad_end[a] = w3.pad_end[size_t(a)];
  }
  const int64_t total = y.numel();
  auto body = [&]<class T>() {
    pool_kernel<K, T><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), indices, g, total,
                                                                    count_include_pad, p, column_major);
    INGOT_CUDA_LAUNCH_CHECK();
  };
  if constexpr (K == PoolKind::Max) {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::UInt8>(x.dtype(), body);
  } else {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), body);
  }
}

// ---------------------------------------------------------------------------------------------
// Global pools: one warp (planes up to 2048 elements) or one block per (n, c) plane.

// std::max(a, b) as the CPU folds a max pool (NaN is skipped).
template <class A>
struct PoolMaxFold {
  __device__ static A apply(A a, A b) { return a < b ? b : a; }
};

template <PoolKind K, class T, bool kBlock>
__global__ void global_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t plane,
                                   int64_t p) {
  using A = acc_of<T>;
  __shared__ A buf[32];
  const RowSplit rs = row_split<kBlock>();
  const int64_t group = rs.group, groups = rs.groups;
  const int lane = rs.lane, width = rs.width;
  const A identity = K == PoolKind::Max ? -std::numeric_limits<A>::infinity() : A(0);
  for (int64_t c = group; c < planes; c += groups) {
    const T* src = x + c * plane;
    A r = identity;
    for (int64_t i = lane; i < plane; i += width) {
      const A v = A(load(src[i]));
      if constexpr (K == PoolKind::Max) {
        r = r < v ? v : r;  // std::max(r, v): NaN is skipped
      } else if constexpr (K == PoolKind::Average) {
        r += v;
      } else {
        r += pow_of(abs_of(v), A(p));
      }
    }
    using Fold = std::conditional_t<K == PoolKind::Max, PoolMaxFold<A>, SumFold<A>>;
    r = row_fold<kBlock, Fold>(r, identity, buf);
    if (lane == 0) {
      if constexpr (K == PoolKind::Average) {
        r = plane > 0 ? r / A(plane) : A(0);
      } else if constexpr (K == PoolKind::Lp) {
        r = pow_of(r, A(1) / A(p));
      }
      y[c] = store<T>(r);
    }
  }
}

template <PoolKind K>
void global_pool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0 (X): expected rank >= 2 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  Shape out_shape = x.shape();
  for (size_t i = 2; i < out_shape.size(); ++i) out_shape[i] = 1;
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  const int64_t planes = x.dim(0) * x.dim(1);
  if (planes == 0) return;
  const int64_t plane = x.numel() / planes;
  const int64_t p = K == PoolKind::Lp ? ctx.attr_int("p") : 0;
  if (K == PoolKind::Lp && p < 1) fail("attribute 'p': expected >= 1, got {}", p);
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    if (plane > 2048) {
      global_pool_kernel<K, T, true><<<blocks_for(planes * kThreads), kThreads, 0, stream()>>>(ptr<const T>(x),
                                                                                               ptr<T>(y), planes, plane, p);
    } else {
      global_pool_kernel<K, T, false><<<blocks_for(planes * 32), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y),
                                                                                          planes, plane, p);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

INGOT_CUDA_KERNEL(MaxPool, pool<PoolKind::Max>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(AveragePool, pool<PoolKind::Average>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LpPool, pool<PoolKind::Lp>).versions(2).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GlobalAveragePool, global_pool<PoolKind::Average>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GlobalMaxPool, global_pool<PoolKind::Max>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GlobalLpPool, global_pool<PoolKind::Lp>).versions(2).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot::cuda
