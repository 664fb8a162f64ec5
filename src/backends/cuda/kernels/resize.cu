// CUDA kernels for Resize (opset 10+, no antialias, as the CPU kernel), Upsample (opset 7, 9),
// GridSample (opset 16+, 2-D) and RoiAlign (opset 10+), mirroring src/backends/cpu/kernels/
// resize.cpp and detection.cpp.
//
// Resize: each axis gets a table of source taps (index, weight) per output position, computed on
// the host by the same code as the CPU kernel (ops/semantics/resize_tables.h: coordinate
// transformations, rounding and exclude_outside behave identically) and uploaded once per call. Nearest mode is an N-D gather;
// linear and cubic apply the 1-D filters one axis at a time (last axis first, identity axes
// skipped), in float (double for float64), exactly as the CPU does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "ops/semantics/resize_tables.h"

namespace ingot::cuda {
namespace {

// Host bytes -> a device tensor of uint8 (tables of taps, batch indices).
Tensor upload_bytes(const std::vector<uint8_t>& bytes, Device device) {
  Tensor host = Tensor::empty(DType::UInt8, {int64_t(std::max<size_t>(bytes.size(), 1))});
  if (!bytes.empty()) std::memcpy(host.raw_data(), bytes.data(), bytes.size());
  return host.to(device);
}

// Resize's tables depend only on shapes and attributes: uploaded once per node and input shape and
// kept with the node, so a steady run (and a captured CUDA graph, which keeps using them) makes no
// host copy for them. Entries are never dropped while the node lives: a graph may point at them.
struct TableCache {
  std::vector<std::pair<std::vector<uint8_t>, Tensor>> entries;
};
Tensor upload_cached(KernelContext& ctx, std::vector<uint8_t>&& bytes) {
  constexpr size_t kMaxEntries = 16;  // beyond: many shapes; upload per call
  TableCache& c = ctx.state<TableCache>();
  for (const auto& [host, dev] : c.entries) {
    if (host == bytes && dev.device() == ctx.device()) return dev;
  }
  Tensor dev = upload_bytes(bytes, ctx.device());
  if (c.entries.size() < kMaxEntries) c.entries.emplace_back(std::move(bytes), dev);
  return dev;
}

// Appends a vector to a byte buffer at an 8-byte aligned offset; returns the offset.
template <class V>
size_t pack(std::vector<uint8_t>& bytes, const std::vector<V>& values) {
  const size_t offset = (bytes.size() + 7) / 8 * 8;
  bytes.resize(offset + values.size() * sizeof(V));
  if (!values.empty()) std::memcpy(bytes.data() + offset, values.data(), values.size() * sizeof(V));
  return offset;
}

// ==== Resize: host-side parameters and taps (ops/semantics/resize_tables.h, shared with the CPU) ====

using Mode = sem::ResizeMode;
using sem::AxisTaps;
using sem::ResizeParams;
using sem::axis_taps;

// ==== Resize: device kernels ======================================================================

struct GatherArgs {
  int rank = 0;
  int64_t out_dims[kMaxRank];
  int64_t in_strides[kMaxRank];
  int64_t table[kMaxRank];  // offset of each axis' source-index table (int64 entries; -1: outside)
};

// Nearest: y[o0, o1, ...] = x[idx0[o0], idx1[o1], ...], or the fill value where any axis is outside.
template <class U>
__global__ void gather_nearest_kernel(const U* __restrict__ x, U* __restrict__ y, int64_t n, GatherArgs g,
                                      const int64_t* __restrict__ tables, U fill) {
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    int64_t rem = e, off = 0;
    bool outside = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t q = rem / g.out_dims[d];
      const int64_t j = rem - q * g.out_dims[d];
      rem = q;
      const int64_t src = tables[g.table[d] + j];
      outside |= src < 0;
      off += src * g.in_strides[d];
    }
    y[e] = outside ? fill : x[off];
  }
}

// One separable pass along an axis: [outer, in_len, inner] -> [outer, out_len, inner].
template <class In, class Out, class A>
__global__ void filter_axis_kernel(const In* __restrict__ src, Out* __restrict__ dst, int64_t n, int64_t in_len,
                                   int64_t out_len, int64_t inner, int taps, const int64_t* __restrict__ idx,
                                   const A* __restrict__ w, const char* __restrict__ outside, A fill) {
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t r = e / inner, i = e - r * inner;
    const int64_t o = r / out_len, j = r - o * out_len;
    if (outside[j]) {
      dst[e] = store<Out>(fill);
      continue;
    }
    A acc = A(0);
    for (int k = 0; k < taps; ++k) {
      const A wk = w[j * taps + k];
      if (wk == A(0)) continue;
      acc += wk * A(load(src[(o * in_len + idx[j * taps + k]) * inner + i]));
    }
    dst[e] = store<Out>(acc);
  }
}

template <class Out, class In>
__global__ void roundtrip_kernel(const In* __restrict__ x, Out* __restrict__ y, int64_t n) {
  using A = std::conditional_t<std::is_same_v<In, double>, double, float>;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) y[e] = store<Out>(A(load(x[e])));
}

// Raw bits of the fill value T(extrapolation_value) for an element of `size` bytes.
template <class U>
U fill_bits(DType dt, double value) {
  U bits{};
  dispatch<INGOT_NUMERIC_TYPES, DType::Bool>(dt, [&]<class H>() {
    if constexpr (sizeof(H) == sizeof(U)) {
      const H v = from_double<H>(value);
      std::memcpy(&bits, &v, sizeof(U));
    }
  });
  return bits;
}

void gather_nearest(KernelContext& ctx, const ResizeParams& p, const std::vector<AxisTaps>& taps, const Tensor& x,
                    Tensor& y) {
  const size_t rank = size_t(x.rank());
  GatherArgs g;
  g.rank = int(rank);
  std::vector<int64_t> tables;
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    g.out_dims[d] = p.out_shape[d];
    g.in_strides[d] = stride;
    stride *= x.dim(int64_t(d));
    g.table[d] = int64_t(tables.size());
    for (int64_t j = 0; j < p.out_shape[d]; ++j)
      tables.push_back(taps[d].outside[size_t(j)] ? -1 : taps[d].idx[size_t(j)]);
  }
  std::vector<uint8_t> bytes;
  pack(bytes, tables);
  const Tensor dev = upload_cached(ctx, std::move(bytes));
  const int64_t* tp = ptr<const int64_t>(dev);
  const int64_t n = y.numel();
  dispatch_by_size(x.dtype(), [&]<class U>() {
    if constexpr (std::is_same_v<U, std::string>) {
      fail("input 0 (X): string tensors are not supported on CUDA");
    } else {
      const U fill = fill_bits<U>(x.dtype(), p.extrapolation_value);
      gather_nearest_kernel<U><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const U>(x), ptr<U>(y), n, g, tp, fill);
      INGOT_CUDA_LAUNCH_CHECK();
    }
  });
}

template <class T>
void interpolate(KernelContext& ctx, const ResizeParams& p, const std::vector<AxisTaps>& taps, const Tensor& x,
                 Tensor& y) {
  const Device device = ctx.device();
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const DType adt = std::is_same_v<A, double> ? DType::Float64 : DType::Float32;
  const size_t rank = size_t(x.rank());
  std::vector<size_t> axes;  // filtered axes, last first (the CPU's order)
  for (size_t axis = rank; axis-- > 0;) {
    if (!taps[axis].identity) axes.push_back(axis);
  }
  if (axes.empty()) {  // every axis is the identity: y = T(A(x)), as the CPU's round trip
    const int64_t n = y.numel();
    roundtrip_kernel<T, T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), n);
    INGOT_CUDA_LAUNCH_CHECK();
    return;
  }
  // Tables of every pass in one upload.
  std::vector<uint8_t> bytes;
  struct Offsets {
    size_t idx, w, outside;
  };
  std::vector<Offsets> offsets;
  for (size_t axis : axes) {
    const AxisTaps& t = taps[axis];
    Offsets o;
    o.idx = pack(bytes, t.idx);
    std::vector<A> w(t.w.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = A(t.w[i]);
    o.w = pack(bytes, w);
    o.outside = pack(bytes, t.outside);
    offsets.push_back(o);
  }
  const Tensor dev = upload_cached(ctx, std::move(bytes));
  const uint8_t* base = ptr<const uint8_t>(dev);

  Shape shape = x.shape();
  Tensor cur;  // the previous pass's output (compute type); undefined before the first pass
  const A fill = A(p.extrapolation_value);
  for (size_t pass = 0; pass < axes.size(); ++pass) {
    const size_t axis = axes[pass];
    const AxisTaps& t = taps[axis];
    Shape out = shape;
    out[axis] = p.out_shape[axis];
    int64_t inner = 1;
    for (size_t d = axis + 1; d < rank; ++d) inner *= shape[d];
    const int64_t in_len = shape[axis], out_len = out[axis], n = shape_numel(out);
    const bool first = pass == 0, last = pass + 1 == axes.size();
    const int64_t* idx = reinterpret_cast<const int64_t*>(base + offsets[pass].idx);
    const A* w = reinterpret_cast<const A*>(base + offsets[pass].w);
    const char* outside = reinterpret_cast<const char*>(base + offsets[pass].outside);
    Tensor next = last ? y : Tensor::empty(adt, out, device);
    const unsigned blocks = blocks_for(n);
    if (first && last) {
      filter_axis_kernel<T, T, A><<<blocks, kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(next), n, in_len, out_len,
                                                                     inner, t.n, idx, w, outside, fill);
    } else if (first) {
      filter_axis_kernel<T, A, A><<<blocks, kThreads, 0, stream()>>>(ptr<const T>(x), ptr<A>(next), n, in_len, out_len,
                                                                     inner, t.n, idx, w, outside, fill);
    } else if (last) {
      filter_axis_kernel<A, T, A><<<blocks, kThreads, 0, stream()>>>(ptr<const A>(cur), ptr<T>(next), n, in_len,
                                                                     out_len, inner, t.n, idx, w, outside, fill);
    } else {
      filter_axis_kernel<A, A, A><<<blocks, kThreads, 0, stream()>>>(ptr<const A>(cur), ptr<A>(next), n, in_len,
                                                                     out_len, inner, t.n, idx, w, outside, fill);
    }
    INGOT_CUDA_LAUNCH_CHECK();
    cur = next;
    shape = out;
  }
}

void run_resize(KernelContext& ctx, ResizeParams& p) {
  const Tensor& x = ctx.input(0);
  const size_t rank = size_t(x.rank());
  if (rank == 0) fail("input 0 (X): expected rank >= 1, got a scalar");
  Tensor& y = ctx.allocate(0, x.dtype(), p.out_shape);
  if (y.numel() == 0) return;
  if (x.numel() == 0)
    fail("Resize: cannot resample an empty input {} to {}", shape_str(x.shape()), shape_str(p.out_shape));
  if (rank > size_t(kMaxRank)) fail("input 0 (X): rank {} exceeds the CUDA kernel's limit of {}", rank, kMaxRank);
  std::vector<AxisTaps> taps;
  for (size_t d = 0; d < rank; ++d) taps.push_back(axis_taps(p, d, x.dim(int64_t(d))));
  if (p.mode == Mode::Nearest) {
    gather_nearest(ctx, p, taps, x, y);
  } else {
    if (x.dtype() == DType::Bool || x.dtype() == DType::String)
      fail("input 0 (X): linear and cubic modes need a numeric input, got {} (use mode 'nearest')",
           dtype_name(x.dtype()));
    dispatch_device<INGOT_CUDA_NUMERIC_TYPES>(x.dtype(), [&]<class T>() { interpolate<T>(ctx, p, taps, x, y); });
  }
}

void resize(KernelContext& ctx) {
  ResizeParams p = sem::resize_params(ctx);
  run_resize(ctx, p);
}

void upsample(KernelContext& ctx) {
  ResizeParams p = sem::upsample_params(ctx);
  run_resize(ctx, p);
}

// ==== RoiAlign ====================================================================================

struct RoiAlignArgs {
  int64_t num_rois, channels, height, width, out_h, out_w, sampling_ratio;
  float spatial_scale;
  bool half_pixel, is_max;
};

// One thread per output (roi, channel, ph, pw); the float arithmetic follows the CPU kernel.
template <class T, class R>
__global__ void roi_align_kernel(const T* __restrict__ x, const R* __restrict__ rois,
                                 const int64_t* __restrict__ batch_indices, T* __restrict__ y, int64_t n,
                                 RoiAlignArgs a) {
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t pw = e % a.out_w;
    const int64_t ph = (e / a.out_w) % a.out_h;
    const int64_t c = (e / (a.out_w * a.out_h)) % a.channels;
    const int64_t r = e / (a.out_w * a.out_h * a.channels);
    const R* roi = rois + r * 4;
    const float r0 = float(load(roi[0])), r1 = float(load(roi[1])), r2 = float(load(roi[2])),
                r3 = float(load(roi[3]));
    const float offset = a.half_pixel ? 0.5f : 0.0f;
    const float start_w = r0 * a.spatial_scale - offset, start_h = r1 * a.spatial_scale - offset;
    float roi_w = r2 * a.spatial_scale - offset - start_w, roi_h = r3 * a.spatial_scale - offset - start_h;
    if (!a.half_pixel) {
      roi_w = fmaxf(roi_w, 1.0f);
      roi_h = fmaxf(roi_h, 1.0f);
    }
    const float bin_h = roi_h / float(a.out_h), bin_w = roi_w / float(a.out_w);
    const int64_t grid_h = a.sampling_ratio > 0 ? a.sampling_ratio : int64_t(ceilf(roi_h / float(a.out_h)));
    const int64_t grid_w = a.sampling_ratio > 0 ? a.sampling_ratio : int64_t(ceilf(roi_w / float(a.out_w)));
    const float count = float(grid_h * grid_w > 1 ? grid_h * grid_w : 1);
    const T* plane = x + (batch_indices[r] * a.channels + c) * a.height * a.width;
    const int64_t height = a.height, width = a.width;
    using V = acc_of<compute_t<T>>;  // values accumulate in float64 for float64 inputs, as on the CPU
    V acc = 0;
    int64_t k = 0;
    for (int64_t iy = 0; iy < grid_h; ++iy) {
      const float yy = start_h + float(ph) * bin_h + (float(iy) + 0.5f) * bin_h / float(grid_h);
      for (int64_t ix = 0; ix < grid_w; ++ix, ++k) {
        const float xx = start_w + float(pw) * bin_w + (float(ix) + 0.5f) * bin_w / float(grid_w);
        int64_t pos[4] = {0, 0, 0, 0};
        float w[4] = {0, 0, 0, 0};
        if (!(yy < -1.0f || yy > float(height) || xx < -1.0f || xx > float(width))) {
          float fy = fmaxf(yy, 0.0f), fx = fmaxf(xx, 0.0f);
          int64_t y_low = int64_t(fy), x_low = int64_t(fx), y_high, x_high;
          if (y_low >= height - 1) {
            y_high = y_low = height - 1;
            fy = float(y_low);
          } else {
            y_high = y_low + 1;
          }
          if (x_low >= width - 1) {
            x_high = x_low = width - 1;
            fx = float(x_low);
          } else {
            x_high = x_low + 1;
          }
          const float ly = fy - float(y_low), lx = fx - float(x_low), hy = 1.0f - ly, hx = 1.0f - lx;
          pos[0] = y_low * width + x_low;
          pos[1] = y_low * width + x_high;
          pos[2] = y_high * width + x_low;
          pos[3] = y_high * width + x_high;
          w[0] = hy * hx;
          w[1] = hy * lx;
          w[2] = ly * hx;
          w[3] = ly * lx;
        }
        const V v0 = V(w[0]) * V(load(plane[pos[0]])), v1 = V(w[1]) * V(load(plane[pos[1]]));
        const V v2 = V(w[2]) * V(load(plane[pos[2]])), v3 = V(w[3]) * V(load(plane[pos[3]]));
        if (a.is_max) {
          // std::max(a, b) keeps a unless a < b; spelled out so NaNs propagate as on the CPU.
          const V m01 = v0 < v1 ? v1 : v0, m23 = v2 < v3 ? v3 : v2;
          const V v = m01 < m23 ? m23 : m01;
          acc = k == 0 ? v : (acc < v ? v : acc);
        } else {
          acc += v0 + v1 + v2 + v3;
        }
      }
    }
    y[e] = store<T>(a.is_max ? acc : acc / V(count));
  }
}

void roi_align(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4) fail("input 0 (X): expected [N, C, H, W], got {}", x.describe());
  const Tensor& rois = ctx.input(1);
  const std::vector<int64_t> batch_indices = ctx.input(2).to_int64_vector();  // a host input
  if (rois.rank() != 2 || rois.dim(1) != 4) fail("input 1 (rois): expected [num_rois, 4], got {}", rois.describe());
  if (!is_floating(rois.dtype())) fail("input 1 (rois): expected a floating-point tensor, got {}", rois.describe());
  if (int64_t(batch_indices.size()) != rois.dim(0) || ctx.input(2).rank() != 1) {
    fail("input 2 (batch_indices): expected [{}] to match rois, got {}", rois.dim(0), ctx.input(2).describe());
  }
  const int64_t n = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  if ((height == 0 || width == 0) && channels > 0 && rois.dim(0) > 0) {
    fail("input 0 (X): cannot pool from an empty feature map {}", x.describe());
  }
  for (int64_t b : batch_indices) {
    if (b < 0 || b >= n) fail("input 2 (batch_indices): index {} is out of range for batch {}", b, n);
  }
  const int64_t out_h = ctx.attr_int("output_height"), out_w = ctx.attr_int("output_width");
  if (out_h < 1 || out_w < 1) fail("attributes 'output_height'/'output_width' must be >= 1, got {}x{}", out_h, out_w);
  const int64_t sampling_ratio = ctx.attr_int("sampling_ratio");
  if (sampling_ratio < 0) fail("attribute 'sampling_ratio': expected >= 0, got {}", sampling_ratio);
  const std::string& mode = ctx.attr_string("mode");
  if (mode != "avg" && mode != "max") fail("attribute 'mode': expected 'avg' or 'max', got '{}'", mode);
  std::string transform = ctx.opset() < 16 ? "output_half_pixel" : ctx.attr_string("coordinate_transformation_mode");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    fail("attribute 'coordinate_transformation_mode': expected 'half_pixel' or 'output_half_pixel', got '{}'",
         transform);
  }
  const int64_t num_rois = rois.dim(0);
  Tensor& y = ctx.allocate(0, x.dtype(), {num_rois, channels, out_h, out_w});
  const int64_t total = y.numel();
  if (total == 0) return;
  RoiAlignArgs a;
  a.num_rois = num_rois, a.channels = channels, a.height = height, a.width = width;
  a.out_h = out_h, a.out_w = out_w, a.sampling_ratio = sampling_ratio;
  a.spatial_scale = ctx.attr_float("spatial_scale");
  a.half_pixel = transform == "half_pixel";
  a.is_max = mode == "max";
  std::vector<uint8_t> bytes;
  pack(bytes, batch_indices);
  const Tensor indices = upload_bytes(bytes, ctx.device());
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(rois.dtype(), [&]<class R>() {
      roi_align_kernel<T, R><<<blocks_for(total), kThreads, 0, stream()>>>(
          ptr<const T>(x), ptr<const R>(rois), ptr<const int64_t>(indices), ptr<T>(y), total, a);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

// ==== GridSample ==================================================================================

enum class Padding : int { Zeros, Border, Reflection };

// Reflects x into [lo, hi] by repeated mirroring at both ends (as the CPU kernel).
__device__ float reflect(float x, float lo, float hi) {
  const double range = double(hi) - double(lo);
  if (range <= 0) return lo;
  const bool below = x < lo;
  if (!below && x <= hi) return x;
  const double dx = below ? double(lo) - x : double(x) - hi;
  const double n = floor(dx / range);
  const float r = float(__dsub_rn(dx, __dmul_rn(n, range)));
  const bool even = fmod(n, 2.0) == 0.0;
  return below == even ? lo + r : hi - r;
}

// Cubic convolution weights (alpha = -0.75, as PyTorch) for the 4 taps around fraction t.
__device__ __forceinline__ void cubic_weights(float t, float w[4]) {
  constexpr float a = -0.75f;
  auto near = [&](float d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  auto far = [&](float d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

struct GridArgs {
  int64_t channels, h, w, oh, ow;
  int mode;  // 0 nearest, 1 linear, 3 cubic
  Padding padding;
  bool align;
};

template <class T, class V>
struct Plane {
  const T* data;
  int64_t h, w;
  Padding padding;
  float lo_x, hi_x, lo_y, hi_y;

  __device__ __forceinline__ V at(int64_t iy, int64_t ix) const {
    if (padding == Padding::Zeros) {
      if (iy < 0 || iy >= h || ix < 0 || ix >= w) return V(0);
    } else if (padding == Padding::Border) {
      iy = iy < 0 ? 0 : (iy > h - 1 ? h - 1 : iy);
      ix = ix < 0 ? 0 : (ix > w - 1 ? w - 1 : ix);
    } else {
      iy = int64_t(reflect(float(iy), lo_y, hi_y));
      ix = int64_t(reflect(float(ix), lo_x, hi_x));
      iy = iy < 0 ? 0 : (iy > h - 1 ? h - 1 : iy);
      ix = ix < 0 ? 0 : (ix > w - 1 ? w - 1 : ix);
    }
    return V(load(data[iy * w + ix]));
  }
};

// One thread per output (n, c, i); V: float, or double for float64 images (as the CPU).
template <class T, class G, class V>
__global__ void grid_sample_kernel(const T* __restrict__ x, const G* __restrict__ grid, T* __restrict__ y, int64_t n,
                                   GridArgs a) {
  const int64_t h = a.h, w = a.w, hw_out = a.oh * a.ow;
  const float lo_x = a.align ? 0.0f : -0.5f, hi_x = a.align ? float(w - 1) : float(w) - 0.5f;
  const float lo_y = a.align ? 0.0f : -0.5f, hi_y = a.align ? float(h - 1) : float(h) - 0.5f;
  auto unnormalize = [&](float g, int64_t size) {
    return a.align ? (g + 1) / 2 * float(size - 1) : ((g + 1) * float(size) - 1) / 2;
  };
  auto fit = [&](float v, float lo, float hi, int64_t size) {
    if (v >= lo && v <= hi) return v;
    if (a.padding == Padding::Border) return fminf(fmaxf(v, 0.0f), float(size - 1));
    if (a.padding == Padding::Reflection) return reflect(v, lo, hi);
    return fminf(fmaxf(v, -4.0f), float(size) + 3.0f);
  };
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t i = e % hw_out, nc = e / hw_out, b = nc / a.channels;
    const Plane<T, V> plane{x + nc * h * w, h, w, a.padding, lo_x, hi_x, lo_y, hi_y};
    const G* g = grid + (b * hw_out + i) * 2;
    float fx = unnormalize(float(load(g[0])), w), fy = unnormalize(float(load(g[1])), h);
    if (!isfinite(fx) || !isfinite(fy)) {
      y[e] = store<T>(V(0));
      continue;
    }
    if (a.mode == 0) {
      fx = rintf(fx);
      fy = rintf(fy);
    }
    fx = fit(fx, lo_x, hi_x, w);
    fy = fit(fy, lo_y, hi_y, h);
    V out;
    if (a.mode == 0) {
      out = plane.at(int64_t(fy), int64_t(fx));
    } else if (a.mode == 1) {
      const float x0 = floorf(fx), y0 = floorf(fy);
      const float tx = fx - x0, ty = fy - y0;
      const int64_t ix = int64_t(x0), iy = int64_t(y0);
      const V vx = tx, vy = ty;
      out = (1 - vy) * ((1 - vx) * plane.at(iy, ix) + vx * plane.at(iy, ix + 1)) +
            vy * ((1 - vx) * plane.at(iy + 1, ix) + vx * plane.at(iy + 1, ix + 1));
    } else {
      const float x0 = floorf(fx), y0 = floorf(fy);
      float wx[4], wy[4];
      cubic_weights(fx - x0, wx);
      cubic_weights(fy - y0, wy);
      const int64_t ix = int64_t(x0) - 1, iy = int64_t(y0) - 1;
      V acc = 0;
      for (int64_t r = 0; r < 4; ++r) {
        V row = 0;
        for (int64_t c = 0; c < 4; ++c) row += V(wx[c]) * plane.at(iy + r, ix + c);
        acc += V(wy[r]) * row;
      }
      out = acc;
    }
    y[e] = store<T>(out);
  }
}

void grid_sample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  if (x.rank() != 4) fail("input 0 (X): expected [N, C, H, W] (2-D sampling only), got {}", x.describe());
  if (grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2) {
    fail("input 1 (grid): expected [{}, H_out, W_out, 2], got {}", x.dim(0), grid.describe());
  }
  if (!is_floating(grid.dtype())) fail("input 1 (grid): expected a floating-point tensor, got {}", grid.describe());
  const std::string& mode_name = ctx.attr_string("mode");
  GridArgs a;
  if (mode_name == "nearest")
    a.mode = 0;
  else if (mode_name == "bilinear" || mode_name == "linear")
    a.mode = 1;
  else if (mode_name == "bicubic" || mode_name == "cubic")
    a.mode = 3;
  else
    fail("attribute 'mode': expected bilinear/linear, nearest or bicubic/cubic, got '{}'", mode_name);
  const std::string& pad_name = ctx.attr_string("padding_mode");
  if (pad_name == "zeros")
    a.padding = Padding::Zeros;
  else if (pad_name == "border")
    a.padding = Padding::Border;
  else if (pad_name == "reflection")
    a.padding = Padding::Reflection;
  else
    fail("attribute 'padding_mode': expected zeros, border or reflection, got '{}'", pad_name);
  a.align = ctx.attr_int("align_corners") != 0;
  const int64_t n = x.dim(0), channels = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t oh = grid.dim(1), ow = grid.dim(2);
  if ((h == 0 || w == 0) && channels * oh * ow > 0) fail("input 0 (X): cannot sample an empty image {}", x.describe());
  a.channels = channels, a.h = h, a.w = w, a.oh = oh, a.ow = ow;
  Tensor& y = ctx.allocate(0, x.dtype(), {n, channels, oh, ow});
  const int64_t total = y.numel();
  if (total == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using V = std::conditional_t<std::is_same_v<T, double>, double, float>;
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(grid.dtype(), [&]<class G>() {
      grid_sample_kernel<T, G, V><<<blocks_for(total), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<const G>(grid),
                                                                                ptr<T>(y), total, a);
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace

INGOT_CUDA_KERNEL(Resize, resize).versions(10).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool}).host_inputs({1, 2, 3});
INGOT_CUDA_KERNEL(Upsample, upsample).versions(7, 9).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool}).host_inputs({1});
INGOT_CUDA_KERNEL(RoiAlign, roi_align).versions(10).dtypes({INGOT_CUDA_FLOAT_TYPES}).host_inputs({2});
INGOT_CUDA_KERNEL(GridSample, grid_sample).versions(16).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot::cuda
