// Pooling on CUDA: MaxPool (with Indices), AveragePool, LpPool, the global forms and ai.ingot.MaxPool
// (channels last, what the channels-last pass writes between NHWC convolutions). The window
// geometry (output sizes, pads, auto_pad, ceil_mode) comes from the shared sem::pool_window (ops/semantics/window.h),
// and each kernel walks the taps in the CPU kernel's order with its comparisons, so outputs and
// indices match src/backends/cpu/kernels/pool.cpp. Direct kernels: one thread per output element
// (sliding windows; 2-D max pools without Indices on 32-bit index arithmetic), one thread per
// output pixel and 16 bytes of channels (channels last), one warp or block per plane (global pools).
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/flags.h"
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

// 2-D sliding windows in 32-bit arithmetic (the sizes are checked to fit), for the max pools
// without Indices: ResNet-50's 3x3 stride-2 pool at batch 32 spent ~0.29 ms per run on the general
// kernel's 64-bit divisions and tap tables, against ~0.03 ms of memory traffic.
struct Window2d {
  int ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

// f(ih, iw) for each tap of output (oh, ow) inside the input, in the reference loop's order. K > 0:
// a K x K window known at compile time (the loops unroll, so a thread's loads are all in flight
// together); 0: g.kh x g.kw.
template <int K = 0, class F>
__device__ __forceinline__ void for_each_tap(const Window2d& g, int oh, int ow, F&& f) {
  const int y0 = oh * g.sh - g.ph, x0 = ow * g.sw - g.pw;
  const int kh_n = K > 0 ? K : g.kh, kw_n = K > 0 ? K : g.kw;
#pragma unroll
  for (int kh = 0; kh < kh_n; ++kh) {
    const int ih = y0 + kh * g.dh;
    if (ih < 0 || ih >= g.ih) continue;
#pragma unroll
    for (int kw = 0; kw < kw_n; ++kw) {
      const int iw = x0 + kw * g.dw;
      if (iw >= 0 && iw < g.iw) f(ih, iw);
    }
  }
}

// Channels first: one thread per output element.
template <class T, int K>
__global__ void max_pool_2d_kernel(const T* __restrict__ x, T* __restrict__ y, Window2d g, int total) {
  using A = acc_of<T>;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < total; i += int(gridDim.x * blockDim.x)) {
    const int ow = i % g.ow, rest = i / g.ow, oh = rest % g.oh, plane = rest / g.oh;
    const T* xp = x + int64_t(plane) * g.ih * g.iw;
    A best = -std::numeric_limits<A>::infinity();
    bool first = true;
    for_each_tap<K>(g, oh, ow, [&](int ih, int iw) {
      const A v = A(load(xp[ih * g.iw + iw]));
      if (v > best || first) best = v, first = false;  // the reference loop's comparison (NaN, ties)
    });
    y[i] = store<T>(best);
  }
}

// Channels last ([N, H, W, C]): one thread per output pixel and V channels (one 16-byte load per tap
// where C allows, else one value), the taps in the reference loop's order and comparison per channel;
// a window wholly in the padding gives the lowest value (the reference's -infinity, cast).
template <class T, int V, int K>
__global__ void max_pool_nhwc_kernel(const T* __restrict__ x, T* __restrict__ y, Window2d g, int c, int total) {
  using A = acc_of<T>;
  using Load = std::conditional_t<V == 1, T, uint4>;
  static_assert(V == 1 || V * sizeof(T) == sizeof(uint4), "V values fill one 16-byte load");
  const int vectors = c / V;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < total; i += int(gridDim.x * blockDim.x)) {
    const int cv = i % vectors, pix = i / vectors;
    const int ow = pix % g.ow, rest = pix / g.ow, oh = rest % g.oh, n = rest / g.oh;
    T best[V];
    bool first = true;
    for_each_tap<K>(g, oh, ow, [&](int ih, int iw) {
      const Load in = reinterpret_cast<const Load*>(x + ((int64_t(n) * g.ih + ih) * g.iw + iw) * c)[cv];
      const T* v = reinterpret_cast<const T*>(&in);
#pragma unroll
      for (int j = 0; j < V; ++j) best[j] = first || A(load(v[j])) > A(load(best[j])) ? v[j] : best[j];
      first = false;
    });
    if (first) {
      T lowest;
      if constexpr (std::is_integral_v<T>) {
        lowest = std::numeric_limits<T>::lowest();
      } else {
        lowest = store<T>(std::numeric_limits<A>::lowest());
      }
#pragma unroll
      for (int j = 0; j < V; ++j) best[j] = lowest;
    }
    Load out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int j = 0; j < V; ++j) o[j] = best[j];
    reinterpret_cast<Load*>(y + int64_t(pix) * c)[cv] = out;
  }
}

// Channels last, 8-bit values in 16-byte vectors: four bytes a SIMD max (__vmaxs4 / __vmaxu4) from
// the lowest value, which is also an empty window's result (INGOT_CUDA_POOL_SIMD8, written without a
// GPU: off until measured). The kernel above, byte by byte, took ResNet-50 int8 b32's 3x3 pool 32 us
// on an H100: as long as the fp16 pool over twice the bytes.
template <class T, int K>
__global__ void max_pool_nhwc_bytes_kernel(const T* __restrict__ x, T* __restrict__ y, Window2d g, int c, int total) {
  static_assert(sizeof(T) == 1 && std::is_integral_v<T>);
  constexpr uint32_t kLowest = std::is_signed_v<T> ? 0x80808080u : 0u;
  const int vectors = c / 16;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < total; i += int(gridDim.x * blockDim.x)) {
    const int cv = i % vectors, pix = i / vectors;
    const int ow = pix % g.ow, rest = pix / g.ow, oh = rest % g.oh, n = rest / g.oh;
    uint4 best = make_uint4(kLowest, kLowest, kLowest, kLowest);
    for_each_tap<K>(g, oh, ow, [&](int ih, int iw) {
      const uint4 in = reinterpret_cast<const uint4*>(x + ((int64_t(n) * g.ih + ih) * g.iw + iw) * c)[cv];
      if constexpr (std::is_signed_v<T>) {
        best = make_uint4(__vmaxs4(best.x, in.x), __vmaxs4(best.y, in.y), __vmaxs4(best.z, in.z), __vmaxs4(best.w, in.w));
      } else {
        best = make_uint4(__vmaxu4(best.x, in.x), __vmaxu4(best.y, in.y), __vmaxu4(best.z, in.z), __vmaxu4(best.w, in.w));
      }
    });
    reinterpret_cast<uint4*>(y + int64_t(pix) * c)[cv] = best;
  }
}

// The 2-D window in 32-bit form; false when a size does not fit (the general kernel takes it).
bool window_2d(const sem::Window& w, int64_t elements, Window2d* g) {
  if (w.in.size() != 2 || elements > INT_MAX) return false;
  const int64_t v[] = {w.in[0], w.in[1], w.out[0], w.out[1], w.kernel[0], w.kernel[1], w.strides[0], w.strides[1],
                       w.pad_begin[0], w.pad_begin[1], w.dilations[0], w.dilations[1]};
  for (int64_t d : v) {
    if (d > (1 << 20)) return false;
  }
  *g = {int(v[0]), int(v[1]), int(v[2]), int(v[3]), int(v[4]), int(v[5]),
        int(v[6]), int(v[7]), int(v[8]), int(v[9]), int(v[10]), int(v[11])};
  return true;
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
  Window2d g2;
  if (K == PoolKind::Max && !indices && window_2d(w, std::max(x.numel(), total), &g2)) {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::UInt8>(x.dtype(), [&]<class T>() {
      if (g2.kh == 3 && g2.kw == 3) {
        max_pool_2d_kernel<T, 3><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g2, int(total));
      } else {
        max_pool_2d_kernel<T, 0><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g2, int(total));
      }
      INGOT_CUDA_LAUNCH_CHECK();
    });
    return;
  }
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

// ai.ingot.MaxPool: ONNX's MaxPool without Indices; layout "NHWC" takes X and Y channels last.
void ingot_max_pool(KernelContext& ctx) {
  const std::string& layout = ctx.attr_string("layout");
  if (layout == "NCHW") return pool<PoolKind::Max>(ctx);
  if (layout != "NHWC") fail("attribute 'layout': expected 'NCHW' or 'NHWC', got '{}'", layout);
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4) fail("input 0 (X): layout NHWC takes [N, H, W, C], got {}", x.describe());
  const Ints& kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != 2) fail("attribute 'kernel_shape' {}: layout NHWC takes 2-D windows", shape_str(kernel));
  const sem::Window w = sem::resolve_window(ctx, {x.dim(1), x.dim(2)}, kernel, ctx.attr_int("ceil_mode") != 0);
  Tensor& y = ctx.allocate(0, x.dtype(), {x.dim(0), w.out[0], w.out[1], x.dim(3)});
  if (y.numel() == 0) return;
  Window2d g;
  if (!window_2d(w, std::max(x.numel(), y.numel()), &g))
    fail("input 0 (X) {}: more than 2^31 elements in a channels-last max pool", x.describe());
  const int c = int(x.dim(3));
  dispatch_device<INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::UInt8>(x.dtype(), [&]<class T>() {
    constexpr int V = int(sizeof(uint4) / sizeof(T));
    const bool vectors = c % V == 0 && reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(y.raw_data()) % 16 == 0;
    const int total = int(y.numel() / (vectors ? V : 1));
    if constexpr (std::is_integral_v<T>) {
      if (vectors && flags::enabled("INGOT_CUDA_POOL_SIMD8")) {
        if (g.kh == 3 && g.kw == 3) {  // ResNet's 3x3 stride-2 pool: the taps unrolled
          max_pool_nhwc_bytes_kernel<T, 3><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g, c, total);
        } else {
          max_pool_nhwc_bytes_kernel<T, 0><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g, c, total);
        }
        INGOT_CUDA_LAUNCH_CHECK();
        return;
      }
    }
    if (vectors && g.kh == 3 && g.kw == 3) {  // ResNet's 3x3 stride-2 pool: the taps unrolled
      max_pool_nhwc_kernel<T, V, 3><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g, c, total);
    } else if (vectors) {
      max_pool_nhwc_kernel<T, V, 0><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g, c, total);
    } else {
      max_pool_nhwc_kernel<T, 1, 0><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), g, c, total);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
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
INGOT_CUDA_KERNEL(MaxPool, ingot_max_pool)
    .domain(kIngotDomain)
    .versions(1)
    .dtypes({INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::UInt8});
INGOT_CUDA_KERNEL(AveragePool, pool<PoolKind::Average>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LpPool, pool<PoolKind::Lp>).versions(2).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GlobalAveragePool, global_pool<PoolKind::Average>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GlobalMaxPool, global_pool<PoolKind::Max>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GlobalLpPool, global_pool<PoolKind::Lp>).versions(2).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot::cuda
