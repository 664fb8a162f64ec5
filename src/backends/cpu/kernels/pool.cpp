// Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global forms, and MaxUnpool.
// Hand-written: parallel over the N*C planes; each axis' valid kernel range is precomputed per
// output position, so the inner loops carry no padding checks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <immintrin.h>

#include "backends/cpu/kernels/nn_util.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

using sem::Window;

// For one axis and each output position: the first input index of the window and the range of
// kernel taps [lo, hi) that land inside the input; `padded` counts taps inside the padded input.
struct AxisTaps {
  std::vector<int64_t> start, lo, hi, padded;
};

AxisTaps axis_taps(const Window& w, size_t axis) {
  AxisTaps t;
  const int64_t n = w.out[axis], in = w.in[axis], k = w.kernel[axis], d = w.dilations[axis];
  for (int64_t o = 0; o < n; ++o) {
    int64_t s = o * w.strides[axis] - w.pad_begin[axis];
    int64_t lo = 0, hi = 0, padded = 0;
    for (int64_t j = 0; j < k; ++j) {  // k is small; counting is clearer than closed forms here
      int64_t p = s + j * d;
      if (p < 0) lo = j + 1;
      if (p < in) hi = j + 1;
      if (p < in + w.pad_end[axis]) ++padded;
    }
    t.start.push_back(s);
    t.lo.push_back(lo);
    t.hi.push_back(std::max(lo, hi));
    t.padded.push_back(padded);
  }
  return t;
}

Shape pooled_shape(const Tensor& x, const Window& w) {
  Shape s{x.dim(0), x.dim(1)};
  s.insert(s.end(), w.out.begin(), w.out.end());
  return s;
}

using sem::pool_window;

enum class PoolKind { Max, Average, Lp };

// Runs `kind` pooling over every plane. For Max, `indices` (optional) receives flat input offsets.
template <class T>
void pool_planes(PoolKind kind, const Window& w3, int64_t planes, const T* x, T* y, int64_t* indices,
                 bool count_include_pad, int64_t p, bool column_major) {
  using A = sem::acc_t<T>;
  const AxisTaps td = axis_taps(w3, 0), th = axis_taps(w3, 1), tw = axis_taps(w3, 2);
  const int64_t ID = w3.in[0], IH = w3.in[1], IW = w3.in[2];
  const int64_t OD = w3.out[0], OH = w3.out[1], OW = w3.out[2];
  const int64_t dd = w3.dilations[0], dh = w3.dilations[1], dw = w3.dilations[2];
  const int64_t in_plane = ID * IH * IW, out_plane = OD * OH * OW;
  const int64_t work = std::max<int64_t>(1, out_plane * w3.kernel[0] * w3.kernel[1] * w3.kernel[2]);
  parallel_for(planes, std::max<int64_t>(1, (1 << 15) / work), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * in_plane;
      T* yp = y + plane * out_plane;
      int64_t* ip = indices ? indices + plane * out_plane : nullptr;
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t o = (od * OH + oh) * OW + ow;
            if (kind == PoolKind::Max) {
              A best = -std::numeric_limits<A>::infinity();
              int64_t best_at = -1;
              for (int64_t kd = td.lo[od]; kd < td.hi[od]; ++kd) {
                const int64_t id = td.start[od] + kd * dd;
                for (int64_t kh = th.lo[oh]; kh < th.hi[oh]; ++kh) {
                  const int64_t ih = th.start[oh] + kh * dh;
                  const T* row = xp + (id * IH + ih) * IW;
                  for (int64_t kw = tw.lo[ow]; kw < tw.hi[ow]; ++kw) {
                    const int64_t iw = tw.start[ow] + kw * dw;
                    const A v = A(row[iw]);
                    if (v > best || best_at < 0) {
                      best = v;
                      best_at = (id * IH + ih) * IW + iw;
                    }
                  }
                }
              }
              yp[o] = T(best);
              if (ip) {
                int64_t at = best_at < 0 ? 0 : best_at;
                if (column_major) {
                  const int64_t iw = at % IW, ih = (at / IW) % IH, id = at / (IW * IH);
                  at = iw * IH * ID + ih * ID + id;
                }
                ip[o] = plane * in_plane + at;
              }
            } else {
              A acc = 0;
              for (int64_t kd = td.lo[od]; kd < td.hi[od]; ++kd) {
                const int64_t id = td.start[od] + kd * dd;
                for (int64_t kh = th.lo[oh]; kh < th.hi[oh]; ++kh) {
                  const T* row = xp + (id * IH + th.start[oh] + kh * dh) * IW + tw.start[ow];
                  if (kind == PoolKind::Average) {
                    for (int64_t kw = tw.lo[ow]; kw < tw.hi[ow]; ++kw) acc += A(row[kw * dw]);
                  } else if (p == 1) {
                    for (int64_t kw = tw.lo[ow]; kw < tw.hi[ow]; ++kw) acc += std::abs(A(row[kw * dw]));
                  } else if (p == 2) {
                    for (int64_t kw = tw.lo[ow]; kw < tw.hi[ow]; ++kw) acc += A(row[kw * dw]) * A(row[kw * dw]);
                  } else {
                    for (int64_t kw = tw.lo[ow]; kw < tw.hi[ow]; ++kw) acc += std::pow(std::abs(A(row[kw * dw])), A(p));
                  }
                }
              }
              if (kind == PoolKind::Average) {
                int64_t count = count_include_pad
                                    ? td.padded[od] * th.padded[oh] * tw.padded[ow]
                                    : (td.hi[od] - td.lo[od]) * (th.hi[oh] - th.lo[oh]) * (tw.hi[ow] - tw.lo[ow]);
                yp[o] = T(count > 0 ? acc / A(count) : A(0));
              } else {
                yp[o] = T(p == 2 ? std::sqrt(acc) : p == 1 ? acc : std::pow(acc, A(1) / A(p)));
              }
            }
          }
    }
  });
}

// MaxPool 2x2 with stride 2 and no padding on float32 (the downsampling step of many CNNs): two
// input rows per output row, one branch-free sweep that vectorizes. `v > best ? v : best` keeps the
// reference loop's tap order and NaN handling.
bool is_max_pool_2x2s2(const Window& w) {
  if (w.in.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (w.kernel[i] != 2 || w.strides[i] != 2 || w.dilations[i] != 1 || w.pad_begin[i] != 0 || w.pad_end[i] != 0 ||
        2 * w.out[i] > w.in[i]) {
      return false;
    }
  }
  return true;
}

// With `indices` (MaxPool's second output, row-major flat input offsets), the tap that won: the
// first of equal maxima, as the reference loop picks. float32 and 8-bit (int8 graphs' pools): the
// general loop took 0.26 ms on BlazeFace's uint8 [1,24,64,64] pool, this one 5 us.
template <class T>
void max_pool_2x2s2(const Window& w, int64_t planes, const T* x, T* y, int64_t* indices) {
  const int64_t IH = w.in[0], IW = w.in[1], OH = w.out[0], OW = w.out[1];
  parallel_for(planes, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, 4 * OH * OW)), [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t at0 = (plane * IH + 2 * oh) * IW;  // flat offset of the window's first row
        const T* r0 = x + at0;
        const T* r1 = r0 + IW;
        T* out = y + (plane * OH + oh) * OW;
        if (!indices) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            T best = r0[2 * ow];
            T v = r0[2 * ow + 1];
            best = v > best ? v : best;
            v = r1[2 * ow];
            best = v > best ? v : best;
            v = r1[2 * ow + 1];
            best = v > best ? v : best;
            out[ow] = best;
          }
          continue;
        }
        int64_t* idx = indices + (plane * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {
          T best = r0[2 * ow];
          int64_t at = at0 + 2 * ow;
          auto take = [&](T v, int64_t offset) {
            const bool more = v > best;
            best = more ? v : best;
            at = more ? offset : at;
          };
          take(r0[2 * ow + 1], at0 + 2 * ow + 1);
          take(r1[2 * ow], at0 + IW + 2 * ow);
          take(r1[2 * ow + 1], at0 + IW + 2 * ow + 1);
          out[ow] = best;
          idx[ow] = at;
        }
      }
    }
  });
}

// AveragePool over non-overlapping windows (stride == kernel, no pads or dilation, the windows
// inside the input) on float32: one accumulator row per output row, the kernel's rows added into it
// in input order, so it rounds as the general loop does. PP-OCR rec's 3x2 pool ([1, 480, 3, 80],
// one op in a session, 1 thread): 0.282 -> 0.113 ms per run, session overhead included.
bool is_average_pool_tiled_2d(const Window& w) {
  if (w.in.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (w.strides[i] != w.kernel[i] || w.dilations[i] != 1 || w.pad_begin[i] != 0 || w.pad_end[i] != 0 ||
        w.out[i] * w.kernel[i] > w.in[i]) {
      return false;
    }
  }
  return true;
}

void average_pool_tiled_2d(const Window& w, int64_t planes, const float* x, float* y) {
  const int64_t IH = w.in[0], IW = w.in[1], OH = w.out[0], OW = w.out[1], KH = w.kernel[0], KW = w.kernel[1];
  const float count = float(KH * KW);
  parallel_for(planes * OH, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, KH * KW * OW)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const int64_t plane = r / OH, oh = r % OH;
                   float* out = y + r * OW;
                   std::fill(out, out + OW, 0.0f);
                   for (int64_t kh = 0; kh < KH; ++kh) {
                     const float* row = x + (plane * IH + oh * KH + kh) * IW;
                     for (int64_t ow = 0; ow < OW; ++ow) {
                       float acc = out[ow];
                       for (int64_t kw = 0; kw < KW; ++kw) acc += row[ow * KW + kw];
                       out[ow] = acc;
                     }
                   }
                   for (int64_t ow = 0; ow < OW; ++ow) out[ow] /= count;  // (as the general loop rounds)
                 }
               });
}

void pool(KernelContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  const Window w = pool_window(ctx, x);
  Tensor& y = ctx.allocate(0, x.dtype(), pooled_shape(x, w));
  int64_t* indices = nullptr;
  if (kind == PoolKind::Max && ctx.num_outputs() > 1) {
    indices = ctx.allocate(1, DType::Int64, y.shape()).data<int64_t>();
  }
  if (y.numel() == 0) return;
  const bool count_include_pad = kind == PoolKind::Average && ctx.attr_int("count_include_pad") != 0;
  const int64_t p = kind == PoolKind::Lp ? ctx.attr_int("p") : 0;
  if (kind == PoolKind::Lp && p < 1) fail("attribute 'p': expected >= 1, got {}", p);
  const bool column_major = kind == PoolKind::Max && ctx.has_attr("storage_order") && ctx.attr_int("storage_order") == 1;
  const int64_t planes = x.dim(0) * x.dim(1);
  if (kind == PoolKind::Max && !column_major && is_max_pool_2x2s2(w)) {
    if (x.dtype() == DType::Float32) return max_pool_2x2s2(w, planes, x.data<float>(), y.data<float>(), indices);
    if (x.dtype() == DType::UInt8) return max_pool_2x2s2(w, planes, x.data<uint8_t>(), y.data<uint8_t>(), indices);
    if (x.dtype() == DType::Int8) return max_pool_2x2s2(w, planes, x.data<int8_t>(), y.data<int8_t>(), indices);
  }
  if (kind == PoolKind::Average && x.dtype() == DType::Float32 && is_average_pool_tiled_2d(w)) {
    average_pool_tiled_2d(w, planes, x.data<float>(), y.data<float>());
    return;
  }
  auto body = [&]<class T>() {
    pool_planes<T>(kind, sem::to_3d(w), planes, x.data<T>(), y.data<T>(), indices, count_include_pad, p, column_major);
  };
  if (kind == PoolKind::Max) {
    dispatch<INGOT_FLOAT_TYPES, DType::Int8, DType::UInt8>(x.dtype(), body);
  } else {
    dispatch_float(x.dtype(), body);
  }
}

void max_pool(KernelContext& ctx) { pool(ctx, PoolKind::Max); }

// out[k] = max(a[k], b[k], c[k], d[k]) for 8-bit T over the first n - n % 8 channels, 16 and 8 at a
// time (returned: how many; the caller finishes). Channel runs of 24 or 48 bytes (BlazeFace) left
// the compiler's vectorized loop to its scalar remainder.
template <class T>
int64_t max4_bytes(const T* a, const T* b, const T* c, const T* d, T* out, int64_t n) {
  auto max = [](__m128i x, __m128i y) {
    if constexpr (std::is_same_v<T, uint8_t>) return _mm_max_epu8(x, y);
    else return _mm_max_epi8(x, y);
  };
  auto load16 = [](const T* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  auto load8 = [](const T* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); };
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k),
                     max(max(load16(a + k), load16(b + k)), max(load16(c + k), load16(d + k))));
  }
  for (; k + 8 <= n; k += 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + k),
                     max(max(load8(a + k), load8(b + k)), max(load8(c + k), load8(d + k))));
  }
  return k;
}

// ai.ingot.MaxPool layout "NHWC" (the channels-last pass): each window tap is a contiguous run of C
// values, so the max runs across channels (vectorized) and taps are visited in the reference loop's
// order with its comparison (`v > best`, the first tap taken as is: the same NaN handling and ties).
template <class T>
void max_pool_nhwc(const Window& w, int64_t batch, int64_t channels, const T* x, T* y) {
  if (is_max_pool_2x2s2(w)) {
    // The four taps of each window are two pairs of adjacent pixels: no tap tables.
    const int64_t IH = w.in[0], IW = w.in[1], OH = w.out[0], OW = w.out[1], C = channels;
    parallel_for(batch * OH, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, 4 * OW * C)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t n = r / OH, oh = r % OH;
        const T* r0 = x + (n * IH + 2 * oh) * IW * C;
        const T* r1 = r0 + IW * C;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const T* __restrict a = r0 + 2 * ow * C;
          const T* __restrict c = r1 + 2 * ow * C;
          T* __restrict out = y + (r * OW + ow) * C;
          int64_t k = 0;
          if constexpr (sizeof(T) == 1) k = max4_bytes<T>(a, a + C, c, c + C, out, C);
          for (; k < C; ++k) {
            T best = a[k];
            best = a[C + k] > best ? a[C + k] : best;
            best = c[k] > best ? c[k] : best;
            best = c[C + k] > best ? c[C + k] : best;
            out[k] = best;
          }
        }
      }
    });
    return;
  }
  const AxisTaps th = axis_taps(w, 0), tw = axis_taps(w, 1);
  const int64_t IH = w.in[0], IW = w.in[1], OH = w.out[0], OW = w.out[1], dh = w.dilations[0], dw = w.dilations[1];
  const int64_t row_work = std::max<int64_t>(1, OW * channels * w.kernel[0] * w.kernel[1]);
  parallel_for(batch * OH, std::max<int64_t>(1, (1 << 15) / row_work), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / OH, oh = r % OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        T* __restrict out = y + (r * OW + ow) * channels;
        bool first = true;
        for (int64_t kh = th.lo[oh]; kh < th.hi[oh]; ++kh) {
          const int64_t ih = th.start[oh] + kh * dh;
          for (int64_t kw = tw.lo[ow]; kw < tw.hi[ow]; ++kw) {
            const T* __restrict in = x + ((n * IH + ih) * IW + tw.start[ow] + kw * dw) * channels;
            if (first) {
              std::memcpy(out, in, size_t(channels) * sizeof(T));
              first = false;
              continue;
            }
            for (int64_t c = 0; c < channels; ++c) out[c] = in[c] > out[c] ? in[c] : out[c];
          }
        }
        // A window entirely in the padding (the reference loop's -infinity, cast).
        if (first) std::fill(out, out + channels, std::numeric_limits<T>::lowest());
      }
    }
  });
}

void ingot_max_pool(KernelContext& ctx) {
  const std::string& layout = ctx.attr_string("layout");
  if (layout == "NCHW") return pool(ctx, PoolKind::Max);
  if (layout != "NHWC") fail("attribute 'layout': expected 'NCHW' or 'NHWC', got '{}'", layout);
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4) fail("input 0 (X): layout NHWC takes [N, H, W, C], got {}", x.describe());
  const Ints& kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != 2) fail("attribute 'kernel_shape' {}: layout NHWC takes 2-D windows", shape_str(kernel));
  const Window w = sem::resolve_window(ctx, {x.dim(1), x.dim(2)}, kernel, ctx.attr_int("ceil_mode") != 0);
  Tensor& y = ctx.allocate(0, x.dtype(), {x.dim(0), w.out[0], w.out[1], x.dim(3)});
  if (y.numel() == 0) return;
  dispatch<DType::Float32, DType::UInt8, DType::Int8>(x.dtype(), [&]<class T>() {
    max_pool_nhwc<T>(w, x.dim(0), x.dim(3), x.data<T>(), y.data<T>());
  });
}
void average_pool(KernelContext& ctx) { pool(ctx, PoolKind::Average); }
void lp_pool(KernelContext& ctx) { pool(ctx, PoolKind::Lp); }

// Global pools reduce every (n, c) plane to one value.
void global_pool(KernelContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0 (X): expected rank >= 2 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  Shape out_shape = x.shape();
  for (size_t i = 2; i < out_shape.size(); ++i) out_shape[i] = 1;
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  const int64_t planes = x.dim(0) * x.dim(1);
  if (planes == 0) return;
  const int64_t plane = x.numel() / std::max<int64_t>(planes, 1);
  const int64_t p = kind == PoolKind::Lp ? ctx.attr_int("p") : 0;
  if (kind == PoolKind::Lp && p < 1) fail("attribute 'p': expected >= 1, got {}", p);
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(planes, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(plane, 1)), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const T* src = xp + c * plane;
        A r;
        if (kind == PoolKind::Max) {
          r = -std::numeric_limits<A>::infinity();
          for (int64_t i = 0; i < plane; ++i) r = std::max(r, A(src[i]));
        } else if (kind == PoolKind::Average) {
          // Eight independent partial sums: the loop vectorizes (one running sum cannot, since
          // float addition is not associative).
          A lanes[8] = {};
          const int64_t whole = plane / 8 * 8;
          for (int64_t i = 0; i < whole; i += 8)
            for (int j = 0; j < 8; ++j) lanes[j] += A(src[i + j]);
          r = 0;
          for (int j = 0; j < 8; ++j) r += lanes[j];
          for (int64_t i = whole; i < plane; ++i) r += A(src[i]);
          r = plane > 0 ? r / A(plane) : A(0);
        } else {
          r = 0;
          for (int64_t i = 0; i < plane; ++i) r += std::pow(std::abs(A(src[i])), A(p));
          r = std::pow(r, A(1) / A(p));
        }
        yp[c] = T(r);
      }
    });
  });
}

void global_average_pool(KernelContext& ctx) { global_pool(ctx, PoolKind::Average); }
void global_max_pool(KernelContext& ctx) { global_pool(ctx, PoolKind::Max); }
void global_lp_pool(KernelContext& ctx) { global_pool(ctx, PoolKind::Lp); }

void max_unpool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() < 3) fail("input 0 (X): expected rank >= 3 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  if (idx.shape() != x.shape()) {
    fail("input 1 (I): expected the shape of X {}, got {}", shape_str(x.shape()), shape_str(idx.shape()));
  }
  if (idx.dtype() != DType::Int64) fail("input 1 (I): expected int64, got {}", dtype_name(idx.dtype()));
  const size_t nd = size_t(x.rank() - 2);
  const Ints& kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != nd) fail("attribute 'kernel_shape': expected {} values, got {}", nd, kernel.size());
  Ints strides = sem::ints_attr_or(ctx, "strides", nd, 1);
  Ints pads = sem::ints_attr_or(ctx, "pads", 2 * nd, 0);
  Shape inferred{x.dim(0), x.dim(1)};
  for (size_t i = 0; i < nd; ++i) {
    inferred.push_back((x.dim(int64_t(i) + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + nd]);
  }
  Shape out_shape = inferred;
  if (ctx.has_input(2)) {
    out_shape = ctx.input(2).to_int64_vector();
    if (out_shape.size() != inferred.size()) {
      fail("input 2 (output_shape): expected {} values, got {}", inferred.size(), out_shape.size());
    }
  }
  for (int64_t d : out_shape) {
    if (d < 0) fail("MaxUnpool: negative output size in {}", shape_str(out_shape));
  }
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  std::memset(y.raw_data(), 0, y.nbytes());
  // Indices address the inferred output (as MaxPool produced them); an explicit output_shape keeps
  // each value's coordinates, so indices are re-encoded when the shapes differ.
  const int64_t* ip = idx.data<int64_t>();
  const int64_t inferred_total = shape_numel(inferred);
  auto target = [&](int64_t flat) {
    if (flat < 0 || flat >= inferred_total) {
      fail("input 1 (I): index {} is outside the unpooled tensor {}", flat, shape_str(inferred));
    }
    if (out_shape == inferred) return flat;
    int64_t offset = 0, stride = 1;
    for (int64_t d = int64_t(inferred.size()) - 1; d >= 0; --d) {
      const int64_t coord = flat % inferred[size_t(d)];
      flat /= inferred[size_t(d)];
      if (coord >= out_shape[size_t(d)])
        fail("input 2 (output_shape) {} is too small for the indices", shape_str(out_shape));
      offset += coord * stride;
      stride *= out_shape[size_t(d)];
    }
    return offset;
  };
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* xp = static_cast<const T*>(x.raw_data());
    T* yp = static_cast<T*>(y.raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) yp[target(ip[i])] = xp[i];
  });
}

}  // namespace

INGOT_CPU_KERNEL(MaxPool, max_pool).versions(1).dtypes({INGOT_FLOAT_TYPES, DType::Int8, DType::UInt8});
INGOT_CPU_KERNEL(MaxPool, ingot_max_pool).domain(kIngotDomain).versions(1).dtypes({DType::Float32, DType::Int8, DType::UInt8});
INGOT_CPU_KERNEL(AveragePool, average_pool).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(LpPool, lp_pool).versions(2).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(GlobalAveragePool, global_average_pool).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(GlobalMaxPool, global_max_pool).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(GlobalLpPool, global_lp_pool).versions(2).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(MaxUnpool, max_unpool).versions(9).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
