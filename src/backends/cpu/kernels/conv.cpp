// Conv and ConvTranspose. float32 runs on oneDNN: per node we keep the primitive for the last few
// input shapes and the weights reordered once into the blocked layout oneDNN prefers; only the
// activations are reordered per call when oneDNN wants a blocked layout for them too. Half types
// convert to float32 around the same path; float64 (and geometry oneDNN rejects) uses a
// straightforward reference loop with double accumulation.
// FusedConv (domain ai.ingot, written by the fuse_conv_add_relu pass) is Conv followed by an
// optional residual sum and activation (Relu or HardSwish): on oneDNN's JIT paths they are post-ops of the primitive, so the
// output is written once; the GEMM (pointwise), depthwise and reference paths apply them in one
// extra sweep over the output.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/kernels/elementwise.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/kernels/onednn_util.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/conv_geometry.h"
#include "ops/semantics/fused_conv_args.h"
#include "profiler/hooks.h"

namespace ingot {
namespace {

using dnnl::memory;
using sem::ConvGeometry;
using sem::Window;
using sem::conv_geometry;
using sem::conv_transpose_geometry;

Shape output_shape(const ConvGeometry& g) { return sem::conv_output_shape(g); }

// ---- reference loops (float64, and fallbacks) ----

template <class T>
void conv_reference(const ConvGeometry& g, const T* x, const T* w, const T* b, T* y) {
  const Window win = sem::to_3d(g.win);
  const int64_t icg = g.in_channels / g.group, ocg = g.out_channels / g.group;
  const int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
  const int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
  const int64_t ksize = win.kernel[0] * win.kernel[1] * win.kernel[2];
  parallel_for(g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / g.out_channels, oc = item % g.out_channels, grp = oc / ocg;
      T* yp = y + item * out_plane;
      for (int64_t od = 0; od < win.out[0]; ++od)
        for (int64_t oh = 0; oh < win.out[1]; ++oh)
          for (int64_t ow = 0; ow < win.out[2]; ++ow) {
            double acc = b ? double(b[oc]) : 0.0;
            for (int64_t ic = 0; ic < icg; ++ic) {
              const T* xp = x + (n * g.in_channels + grp * icg + ic) * in_plane;
              const T* wp = w + (oc * icg + ic) * ksize;
              for (int64_t kd = 0; kd < win.kernel[0]; ++kd) {
                int64_t id = od * win.strides[0] - win.pad_begin[0] + kd * win.dilations[0];
                if (id < 0 || id >= win.in[0]) continue;
                for (int64_t kh = 0; kh < win.kernel[1]; ++kh) {
                  int64_t ih = oh * win.strides[1] - win.pad_begin[1] + kh * win.dilations[1];
                  if (ih < 0 || ih >= win.in[1]) continue;
                  for (int64_t kw = 0; kw < win.kernel[2]; ++kw) {
                    int64_t iw = ow * win.strides[2] - win.pad_begin[2] + kw * win.dilations[2];
                    if (iw < 0 || iw >= win.in[2]) continue;
                    acc += double(xp[(id * win.in[1] + ih) * win.in[2] + iw]) *
                           double(wp[(kd * win.kernel[1] + kh) * win.kernel[2] + kw]);
                  }
                }
              }
            }
            yp[(od * win.out[1] + oh) * win.out[2] + ow] = T(acc);
          }
    }
  });
}

template <class T>
void conv_transpose_reference(const ConvGeometry& g, const T* x, const T* w, const T* b, T* y) {
  const Window win = sem::to_3d(g.win);
  const int64_t icg = g.in_channels / g.group, ocg = g.out_channels / g.group;
  const int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
  const int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
  const int64_t ksize = win.kernel[0] * win.kernel[1] * win.kernel[2];
  parallel_for(g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(out_plane));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / g.out_channels, oc = item % g.out_channels, grp = oc / ocg, ocl = oc % ocg;
      std::fill(acc.begin(), acc.end(), b ? double(b[oc]) : 0.0);
      for (int64_t ic = 0; ic < icg; ++ic) {
        const int64_t icx = grp * icg + ic;
        const T* xp = x + (n * g.in_channels + icx) * in_plane;
        const T* wp = w + (icx * ocg + ocl) * ksize;  // W is [C, M/group, k...]
        for (int64_t id = 0; id < win.in[0]; ++id)
          for (int64_t ih = 0; ih < win.in[1]; ++ih)
            for (int64_t iw = 0; iw < win.in[2]; ++iw) {
              const double xv = double(xp[(id * win.in[1] + ih) * win.in[2] + iw]);
              for (int64_t kd = 0; kd < win.kernel[0]; ++kd) {
                int64_t od = id * win.strides[0] + kd * win.dilations[0] - win.pad_begin[0];
                if (od < 0 || od >= win.out[0]) continue;
                for (int64_t kh = 0; kh < win.kernel[1]; ++kh) {
                  int64_t oh = ih * win.strides[1] + kh * win.dilations[1] - win.pad_begin[1];
                  if (oh < 0 || oh >= win.out[1]) continue;
                  for (int64_t kw = 0; kw < win.kernel[2]; ++kw) {
                    int64_t ow = iw * win.strides[2] + kw * win.dilations[2] - win.pad_begin[2];
                    if (ow < 0 || ow >= win.out[2]) continue;
                    acc[size_t((od * win.out[1] + oh) * win.out[2] + ow)] +=
                        xv * double(wp[(kd * win.kernel[1] + kh) * win.kernel[2] + kw]);
                  }
                }
              }
            }
      }
      T* yp = y + item * out_plane;
      for (int64_t i = 0; i < out_plane; ++i) yp[i] = T(acc[size_t(i)]);
    }
  });
}

void run_reference(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* bp = b ? b->data<T>() : nullptr;
    if (g.transposed) {
      conv_transpose_reference<T>(g, x.data<T>(), w.data<T>(), bp, y.data<T>());
    } else {
      conv_reference<T>(g, x.data<T>(), w.data<T>(), bp, y.data<T>());
    }
  });
}

// dW[m, c, k] = sum over n and output positions o of X[n, group(m) * C/g + c, o * s + k * d - p] * dY[n, m, o]
// (ConvWeightGrad's loops: float64, and where oneDNN declines).
template <class T>
void conv_weight_grad_reference(const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  const Window win = sem::to_3d(g.win);
  const int64_t icg = g.in_channels / g.group, ocg = g.out_channels / g.group;
  const int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
  const int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
  const int64_t ksize = win.kernel[0] * win.kernel[1] * win.kernel[2];
  parallel_for(g.out_channels * icg, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t oc = item / icg, ic = item % icg, grp = oc / ocg;
      for (int64_t kd = 0; kd < win.kernel[0]; ++kd)
        for (int64_t kh = 0; kh < win.kernel[1]; ++kh)
          for (int64_t kw = 0; kw < win.kernel[2]; ++kw) {
            double acc = 0.0;
            for (int64_t n = 0; n < g.batch; ++n) {
              const T* xp = x + (n * g.in_channels + grp * icg + ic) * in_plane;
              const T* gp = dy + (n * g.out_channels + oc) * out_plane;
              for (int64_t od = 0; od < win.out[0]; ++od) {
                const int64_t id = od * win.strides[0] - win.pad_begin[0] + kd * win.dilations[0];
                if (id < 0 || id >= win.in[0]) continue;
                for (int64_t oh = 0; oh < win.out[1]; ++oh) {
                  const int64_t ih = oh * win.strides[1] - win.pad_begin[1] + kh * win.dilations[1];
                  if (ih < 0 || ih >= win.in[1]) continue;
                  for (int64_t ow = 0; ow < win.out[2]; ++ow) {
                    const int64_t iw = ow * win.strides[2] - win.pad_begin[2] + kw * win.dilations[2];
                    if (iw < 0 || iw >= win.in[2]) continue;
                    acc += double(xp[(id * win.in[1] + ih) * win.in[2] + iw]) * double(gp[(od * win.out[1] + oh) * win.out[2] + ow]);
                  }
                }
              }
            }
            dw[item * ksize + (kd * win.kernel[1] + kh) * win.kernel[2] + kw] = T(acc);
          }
    }
  });
}

// ---- depthwise 2-D convolution on NCHW (float32) ----
// Memory-bound: oneDNN would reorder activations in and out around it (three passes over the
// data instead of one), so it runs here. Square 3x3 / 5x5 kernels without dilation (nearly every
// depthwise layer in mobile models) take a fast path that computes each output row in one sweep
// with all taps in registers; everything else uses a per-tap row sweep.

bool is_depthwise_2d(const ConvGeometry& g) {
  return !g.transposed && g.win.in.size() == 2 && g.group > 1 && g.group == g.in_channels && g.group == g.out_channels;
}

// One output row of a KxK depthwise convolution with column stride S. `rows` are the K input rows
// of the window (rows above/below the image point at zeros). Columns [lo, hi) have every tap
// inside the input row, so that loop has no branches and vectorizes; the few columns outside it
// check each tap.
// Output columns [lo, hi) of one row, where every tap is inside the input. Kept out of line so
// the vectorized loop gets the registers to itself (inlined into the plane loop it spills).
template <int K, int S>
[[gnu::noinline]] void depthwise_interior(const float* const* rows, const float* w, float bias, float* __restrict out,
                                          int64_t pad_left, int64_t lo, int64_t hi) {
  float wk[K * K];
  for (int i = 0; i < K * K; ++i) wk[i] = w[i];
  const float* src[K];
  for (int r = 0; r < K; ++r) src[r] = rows[r] - pad_left;
  for (int64_t ow = lo; ow < hi; ++ow) {
    // One partial sum per kernel row: K short independent FMA chains instead of one long one.
    float row_sum[K];
    for (int r = 0; r < K; ++r) {
      const float* __restrict s = src[r] + ow * S;
      float acc = wk[r * K] * s[0];
      for (int k = 1; k < K; ++k) acc += wk[r * K + k] * s[k];
      row_sum[r] = acc;
    }
    float acc = bias;
    for (int r = 0; r < K; ++r) acc += row_sum[r];
    out[ow] = acc;
  }
}

// The same over the kernel rows [r_lo, r_hi) only: the rows of a window that lie inside the image,
// when the others would multiply rows of zeros (a 5x5 kernel on a 2- or 3-row image, as in PP-OCR
// cls and rec, has most of its rows outside).
template <int K, int S>
[[gnu::noinline]] void depthwise_interior_rows(const float* const* rows, const float* w, float bias,
                                               float* __restrict out, int64_t pad_left, int64_t lo, int64_t hi,
                                               int r_lo, int r_hi) {
  float wk[K * K];
  for (int i = 0; i < K * K; ++i) wk[i] = w[i];
  for (int64_t ow = lo; ow < hi; ++ow) out[ow] = bias;
  for (int r = r_lo; r < r_hi; ++r) {
    const float* src = rows[r] - pad_left;
    const float* wr = wk + r * K;
    for (int64_t ow = lo; ow < hi; ++ow) {
      const float* __restrict s = src + ow * S;
      float acc = wr[0] * s[0];
      for (int k = 1; k < K; ++k) acc += wr[k] * s[k];
      out[ow] += acc;
    }
  }
}

// One output row of a KxK depthwise convolution with column stride S. `rows` are the K input rows
// of the window (rows above/below the image point at zeros). Columns [lo, hi) have every tap
// inside the input row and take the vectorized loop; the few columns outside it check each tap.
// Kernel rows [r_lo, r_hi) are inside the image; the others point at zeros and are skipped.
template <int K, int S>
void depthwise_row(const float* const* rows, const float* w, float bias, float* out, int64_t OW, int64_t IW,
                   int64_t pad_left, int64_t lo, int64_t hi, int r_lo, int r_hi) {
  auto border = [&](int64_t ow) {
    float acc = bias;
    for (int r = r_lo; r < r_hi; ++r)
      for (int k = 0; k < K; ++k) {
        const int64_t iw = ow * S - pad_left + k;
        if (iw >= 0 && iw < IW) acc += w[r * K + k] * rows[r][iw];
      }
    out[ow] = acc;
  };
  for (int64_t ow = 0; ow < lo; ++ow) border(ow);
  if (r_lo == 0 && r_hi == K) {
    depthwise_interior<K, S>(rows, w, bias, out, pad_left, lo, hi);
  } else {
    depthwise_interior_rows<K, S>(rows, w, bias, out, pad_left, lo, hi, r_lo, r_hi);
  }
  for (int64_t ow = hi; ow < OW; ++ow) border(ow);
}

template <int K, int S>
void depthwise_fast(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y) {
  const Window& win = g.win;
  const int64_t IH = win.in[0], IW = win.in[1], OH = win.out[0], OW = win.out[1];
  const int64_t SH = win.strides[0], PT = win.pad_begin[0], PL = win.pad_begin[1];
  const int64_t PB = win.pad_end[0], PR = win.pad_end[1];
  // Output columns whose whole window is inside the row: ow * S - PL >= 0 and ow * S - PL + K <= IW.
  const int64_t lo = std::clamp<int64_t>((PL + S - 1) / S, 0, OW);
  const int64_t hi = std::max(lo, std::min(OW, IW + PL - K >= 0 ? (IW + PL - K) / S + 1 : 0));
  // Narrow planes have many border columns (the scalar path): copy each plane into a zero-padded
  // buffer instead, so every column takes the vectorized loop.
  const bool pad_planes = (lo + OW - hi) * 16 > OW && PT >= 0 && PL >= 0 && PB >= 0 && PR >= 0;
  const int64_t PH = IH + PT + PB, PW = IW + PL + PR;
  const std::vector<float> zeros(static_cast<size_t>(IW), 0.0f);
  parallel_for(g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> padded(pad_planes ? static_cast<size_t>(PH * PW) : 0, 0.0f);  // borders stay zero
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.out_channels;
      const float* xp = x + plane * IH * IW;
      const float* wp = w + c * K * K;
      const float bias = b ? b[c] : 0.0f;
      float* yp = y + plane * OH * OW;
      if (pad_planes) {
        for (int64_t ih = 0; ih < IH; ++ih) {
          std::memcpy(padded.data() + (ih + PT) * PW + PL, xp + ih * IW, size_t(IW) * sizeof(float));
        }
        for (int64_t oh = 0; oh < OH; ++oh) {
          const float* rows[K];
          for (int r = 0; r < K; ++r) rows[r] = padded.data() + (oh * SH + r) * PW;
          depthwise_interior<K, S>(rows, wp, bias, yp + oh * OW, 0, 0, OW);
        }
        continue;
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float* rows[K];
        int r_lo = K, r_hi = 0;  // the kernel rows inside the image
        for (int r = 0; r < K; ++r) {
          const int64_t ih = oh * SH - PT + r;
          const bool inside = ih >= 0 && ih < IH;
          rows[r] = inside ? xp + ih * IW : zeros.data();
          if (inside) r_lo = std::min(r_lo, r), r_hi = r + 1;
        }
        depthwise_row<K, S>(rows, wp, bias, yp + oh * OW, OW, IW, PL, lo, hi, std::min(r_lo, r_hi), r_hi);
      }
    }
  });
}

void depthwise_conv2d(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y) {
  const Window& win = g.win;
  const int64_t IH = win.in[0], IW = win.in[1], OH = win.out[0], OW = win.out[1];
  const int64_t KH = win.kernel[0], KW = win.kernel[1], SH = win.strides[0], SW = win.strides[1];
  const int64_t DH = win.dilations[0], DW = win.dilations[1], PT = win.pad_begin[0], PL = win.pad_begin[1];
  if (KH == KW && DH == 1 && DW == 1 && (SW == 1 || SW == 2) && (KH == 3 || KH == 5)) {
    if (KH == 3) {
      SW == 1 ? depthwise_fast<3, 1>(g, x, w, b, y) : depthwise_fast<3, 2>(g, x, w, b, y);
    } else {
      SW == 1 ? depthwise_fast<5, 1>(g, x, w, b, y) : depthwise_fast<5, 2>(g, x, w, b, y);
    }
    return;
  }
  // For each kernel column: the output columns whose input column is inside the image.
  std::vector<int64_t> ow_lo(static_cast<size_t>(KW)), ow_hi(static_cast<size_t>(KW));
  for (int64_t kw = 0; kw < KW; ++kw) {
    const int64_t off = kw * DW - PL;  // iw = ow * SW + off
    int64_t lo = off >= 0 ? 0 : (-off + SW - 1) / SW;
    int64_t hi = IW - 1 - off < 0 ? 0 : (IW - 1 - off) / SW + 1;
    ow_lo[size_t(kw)] = std::min(lo, OW);
    ow_hi[size_t(kw)] = std::max(ow_lo[size_t(kw)], std::min(hi, OW));
  }
  const int64_t planes = g.batch * g.out_channels;
  parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.out_channels;
      const float* xp = x + plane * IH * IW;
      const float* wp = w + c * KH * KW;
      const float bias = b ? b[c] : 0.0f;
      for (int64_t oh = 0; oh < OH; ++oh) {
        float* out = y + (plane * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) out[ow] = bias;
        for (int64_t kh = 0; kh < KH; ++kh) {
          const int64_t ih = oh * SH - PT + kh * DH;
          if (ih < 0 || ih >= IH) continue;
          const float* row = xp + ih * IW;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float wv = wp[kh * KW + kw];
            const int64_t off = kw * DW - PL, lo = ow_lo[size_t(kw)], hi = ow_hi[size_t(kw)];
            if (SW == 1) {
              const float* src = row + off;
              for (int64_t ow = lo; ow < hi; ++ow) out[ow] += wv * src[ow];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) out[ow] += wv * row[ow * SW + off];
            }
          }
        }
      }
    }
  });
}

// ---- oneDNN path (float32) ----

using sem::FusedActivation;

// What a FusedConv applies after the convolution: y = act(conv + residual?).
struct Epilogue {
  const Tensor* residual = nullptr;  // same shape and dtype as the output
  FusedActivation act = FusedActivation::None;
  bool empty() const { return !residual && act == FusedActivation::None; }
};

// A compiled primitive for one input shape, with weights and bias already in its formats.
struct ConvPlan {
  Shape x_shape;
  bool sum = false;  // the epilogue this plan was built for (part of the cache key)
  FusedActivation act = FusedActivation::None;
  // Whether the primitive applies them as post-ops. oneDNN's GEMM convolution (pointwise on NCHW)
  // runs post-ops through a slow per-element path (16x slower than the convolution itself on
  // BlazeFace's 1x1 layers), so there we build it without them and the kernel sweeps the output once.
  bool post_ops_fused = false;
  onednn::TensorKey weights_key, bias_key;
  dnnl::primitive primitive;
  memory weights, bias;
  memory user_src, user_dst;  // wrap our tensors (data handles set per call)
  memory src, dst;            // oneDNN's layouts; same objects as user_* when no reorder is needed
  dnnl::reorder src_reorder, dst_reorder;
  dnnl::reorder residual_reorder;  // residual (plain) into dst's layout, for the sum post-op
  bool reorder_src = false, reorder_dst = false;
};

// Per-node cache: a few recent input shapes (dynamic widths in text recognition alternate).
struct ConvState {
  std::vector<std::unique_ptr<ConvPlan>> plans;  // most recent first
  static constexpr size_t kMaxPlans = 4;
};

memory::dims dnnl_dims(const Ints& v, int64_t minus = 0) {
  memory::dims d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = v[i] - minus;
  return d;
}

Tensor as_float32(const Tensor& t) { return t.dtype() == DType::Float32 ? t : t.cast(DType::Float32); }

// The user's weight layout as oneDNN dims/strides: ONNX Conv W is [M, C/g, k...] (plain goihw);
// ConvTranspose W is [C, M/g, k...], i.e. i and o swapped relative to oneDNN's [g, o, i, k...].
memory::desc user_weights_desc(const ConvGeometry& g, const Shape& w_shape) {
  const int64_t ksize = shape_numel(sem::spatial_dims(w_shape));
  const int64_t icg = g.in_channels / g.group, ocg = g.out_channels / g.group;
  memory::dims dims, strides;
  if (g.group > 1) {
    dims.push_back(g.group);
    strides.push_back(icg * ocg * ksize);
  }
  dims.push_back(ocg);
  dims.push_back(icg);
  if (g.transposed) {
    strides.push_back(ksize);
    strides.push_back(ocg * ksize);
  } else {
    strides.push_back(icg * ksize);
    strides.push_back(ksize);
  }
  const Ints k = sem::spatial_dims(w_shape);
  int64_t stride = ksize;
  for (int64_t kd : k) {
    stride /= kd;
    dims.push_back(kd);
    strides.push_back(stride);
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

// Builds the plan; returns nullptr when oneDNN cannot express this geometry (then the reference runs).
std::unique_ptr<ConvPlan> build_plan(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, bool sum,
                                     FusedActivation act) {
  profiler::detail::PhaseScope phase("oneDNN convolution plan");
  const Window& win = g.win;
  memory::dims pad_end = dnnl_dims(win.pad_end);
  if (g.transposed) {
    // oneDNN's deconvolution output is the full output cropped by both pads; output_padding and
    // output_shape enlarge it, which shows up as a smaller end pad (negative ones are not supported).
    for (size_t i = 0; i < win.in.size(); ++i) {
      int64_t full = win.strides[i] * (win.in[i] - 1) + win.extent(i);
      pad_end[i] = full - win.pad_begin[i] - win.out[i];
      if (pad_end[i] < 0 || win.pad_begin[i] < 0) return nullptr;
    }
  }
  dnnl::engine& eng = onednn::engine();
  auto plan = std::make_unique<ConvPlan>();
  plan->x_shape = x.shape();
  plan->sum = sum;
  plan->act = act;
  dnnl::post_ops post_ops;
  if (sum) post_ops.append_sum(1.0f);
  if (act == FusedActivation::Relu) post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (act == FusedActivation::HardSwish) post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  plan->weights_key = onednn::TensorKey::of(w);
  plan->bias_key = b ? onednn::TensorKey::of(*b) : onednn::TensorKey{};

  const memory::dims src_dims = onednn::to_dims(x.shape());
  const memory::dims dst_dims = onednn::to_dims(output_shape(g));
  memory::desc user_w = user_weights_desc(g, w.shape());
  // A pointwise convolution on NCHW is one matrix product per image: oneDNN runs it as a GEMM on
  // our layout directly, which beats blocking plus two activation reorders. Other convolutions
  // let oneDNN pick its (blocked or channels-last) activation layout.
  const bool pointwise = !g.transposed && g.group == 1 &&
                         std::all_of(win.kernel.begin(), win.kernel.end(), [](int64_t k) { return k == 1; }) &&
                         std::all_of(win.strides.begin(), win.strides.end(), [](int64_t s) { return s == 1; }) &&
                         std::all_of(win.pad_begin.begin(), win.pad_begin.end(), [](int64_t p) { return p == 0; }) &&
                         std::all_of(win.pad_end.begin(), win.pad_end.end(), [](int64_t p) { return p == 0; });
  // A stem convolution over a few input channels (an RGB image) has a oneDNN kernel that reads
  // plain NCHW directly; letting oneDNN pick would add a reorder of the (large) input.
  const bool plain_src = pointwise || (!g.transposed && g.group == 1 && g.in_channels <= 4 && win.in.size() == 2);
  memory::desc src_any = plain_src ? onednn::plain_desc(src_dims)
                                   : memory::desc(src_dims, memory::data_type::f32, memory::format_tag::any);
  memory::desc dst_any = pointwise ? onednn::plain_desc(dst_dims)
                                   : memory::desc(dst_dims, memory::data_type::f32, memory::format_tag::any);
  memory::desc w_any(user_w.dims(), memory::data_type::f32, memory::format_tag::any);
  memory::desc b_md({g.out_channels}, memory::data_type::f32, memory::format_tag::x);
  memory::dims strides = dnnl_dims(win.strides), dilations = dnnl_dims(win.dilations, 1);
  memory::dims pad_begin = dnnl_dims(win.pad_begin);

  memory::desc src_md, dst_md, w_md;
  try {
    if (g.transposed) {
      auto d = b ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::deconvolution_direct, src_any, w_any, b_md,
                                                     dst_any, strides, dilations, pad_begin, pad_end)
                 : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::deconvolution_direct, src_any, w_any, dst_any,
                                                     strides, dilations, pad_begin, pad_end);
      dnnl::deconvolution_forward::primitive_desc pd(d, eng);
      src_md = pd.src_desc();
      dst_md = pd.dst_desc();
      w_md = pd.weights_desc();
      plan->primitive = dnnl::deconvolution_forward(pd);
    } else {
      auto d =
          b ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              src_any, w_any, b_md, dst_any, strides, dilations, pad_begin, pad_end)
            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              src_any, w_any, dst_any, strides, dilations, pad_begin, pad_end);
      dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
      plan->post_ops_fused = sum || act != FusedActivation::None;
      if (plan->post_ops_fused && std::string(pd.impl_info_str()).find("gemm") != std::string::npos) {
        pd = dnnl::convolution_forward::primitive_desc(d, eng);
        plan->post_ops_fused = false;
      }
      src_md = pd.src_desc();
      dst_md = pd.dst_desc();
      w_md = pd.weights_desc();
      plan->primitive = dnnl::convolution_forward(pd);
    }
  } catch (const dnnl::error&) {
    return nullptr;
  }

  // Weights (and bias) once, converted to float32 first when the model is half precision.
  profiler::detail::PhaseScope reorder_phase("oneDNN weight reorder");
  dnnl::stream stream(eng);
  Tensor w32 = as_float32(w);
  memory user_w_mem(user_w, eng, w32.raw_data());
  plan->weights = memory(w_md, eng);
  dnnl::reorder(user_w_mem, plan->weights).execute(stream, user_w_mem, plan->weights);
  if (b) {
    Tensor b32 = as_float32(*b);
    plan->bias = memory(b_md, eng);
    std::memcpy(plan->bias.get_data_handle(), b32.raw_data(), size_t(g.out_channels) * sizeof(float));
  }
  stream.wait();

  plan->user_src = memory(onednn::plain_desc(src_dims), eng, DNNL_MEMORY_NONE);
  plan->user_dst = memory(onednn::plain_desc(dst_dims), eng, DNNL_MEMORY_NONE);
  plan->reorder_src = src_md != plan->user_src.get_desc();
  plan->reorder_dst = dst_md != plan->user_dst.get_desc();
  plan->src = plan->user_src;
  plan->dst = plan->user_dst;
  if (plan->reorder_src) {
    plan->src = memory(src_md, eng);
    plan->src_reorder = dnnl::reorder(plan->user_src, plan->src);
  }
  if (plan->reorder_dst) {
    plan->dst = memory(dst_md, eng);
    plan->dst_reorder = dnnl::reorder(plan->dst, plan->user_dst);
    if (plan->post_ops_fused && sum) plan->residual_reorder = dnnl::reorder(plan->user_dst, plan->dst);
  }
  return plan;
}

// `residual` (float32, the output's shape) is required when the plan has the sum post-op: it seeds
// the destination, which the convolution then accumulates into.
void run_plan(ConvPlan& plan, const Tensor& x32, Tensor& y32, const Tensor* residual = nullptr) {
  dnnl::stream stream(onednn::engine());
  plan.user_src.set_data_handle(x32.raw_data());
  plan.user_dst.set_data_handle(y32.raw_data());
  if (plan.reorder_src) plan.src_reorder.execute(stream, plan.user_src, plan.src);
  if (plan.post_ops_fused && plan.sum) {
    if (plan.reorder_dst) {
      memory user_residual(plan.user_dst.get_desc(), onednn::engine(), residual->raw_data());
      plan.residual_reorder.execute(stream, user_residual, plan.dst);
    } else {
      const float* r = residual->data<float>();
      float* y = y32.data<float>();
      parallel_for(y32.numel(), 1 << 14,
                   [&](int64_t b, int64_t e) { std::memcpy(y + b, r + b, size_t(e - b) * sizeof(float)); });
    }
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, plan.src}, {DNNL_ARG_WEIGHTS, plan.weights}, {DNNL_ARG_DST, plan.dst}};
  if (plan.bias) args.emplace(DNNL_ARG_BIAS, plan.bias);
  plan.primitive.execute(stream, args);
  if (plan.reorder_dst) plan.dst_reorder.execute(stream, plan.dst, plan.user_dst);
  stream.wait();
}

// Finds or builds the plan for this call (nullptr: use the reference loop).
ConvPlan* find_plan(KernelContext& ctx, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                    bool sum = false, FusedActivation act = FusedActivation::None) {
  auto& state = ctx.state<ConvState>();
  auto& plans = state.plans;
  // A plan holds the weights (and bias) reordered: kept across runs only for constants. Weights that
  // are graph inputs or computed may change in place at the same address (a compiled training step).
  if (!ctx.input_is_constant(1) || (b && !ctx.input_is_constant(2))) plans.clear();
  for (size_t i = 0; i < plans.size(); ++i) {
    ConvPlan& p = *plans[i];
    if (p.x_shape == x.shape() && p.sum == sum && p.act == act && p.weights_key.matches(w) &&
        (b ? p.bias_key.matches(*b) : !p.bias)) {
      std::rotate(plans.begin(), plans.begin() + i, plans.begin() + i + 1);
      return plans[0].get();
    }
  }
  // Different weights invalidate every plan of this node (they were all reordered from the old ones).
  if (!plans.empty() && !plans[0]->weights_key.matches(w)) plans.clear();
  std::unique_ptr<ConvPlan> plan = build_plan(g, x, w, b, sum, act);
  if (!plan) return nullptr;
  plans.insert(plans.begin(), std::move(plan));
  if (plans.size() > ConvState::kMaxPlans) plans.pop_back();
  return plans[0].get();
}

// y = act(y + residual?), in place: for the paths without oneDNN post-ops.
void apply_epilogue(const Epilogue& ep, Tensor& y) {
  if (ep.empty()) return;
  if (y.dtype() == DType::Float32) {  // separate loops so each vectorizes without a branch
    float* out = y.data<float>();
    const float* r = ep.residual ? ep.residual->data<float>() : nullptr;
    const FusedActivation act = ep.act;
    parallel_for(y.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      if (r && act == FusedActivation::Relu) {
        for (int64_t i = begin; i < end; ++i) {
          const float v = out[i] + r[i];
          out[i] = v > 0.0f ? v : 0.0f;  // like the Relu kernel (NaN -> 0)
        }
        return;
      }
      if (r) {
        for (int64_t i = begin; i < end; ++i) out[i] += r[i];
      }
      if (act == FusedActivation::Relu) {
        for (int64_t i = begin; i < end; ++i) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
      } else if (act == FusedActivation::HardSwish) {
        cpu::hard_swish_f32(out + begin, out + begin, end - begin);
      }
    });
    return;
  }
  dispatch_float(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    const T* r = ep.residual ? ep.residual->data<T>() : nullptr;
    const FusedActivation act = ep.act;
    parallel_for(y.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        // Round after the sum like a separate Add would (matters for half types).
        float v = r ? float(T(float(out[i]) + float(r[i]))) : float(out[i]);
        if (act == FusedActivation::Relu) v = v < 0.0f ? 0.0f : v;
        if (act == FusedActivation::HardSwish) v = v * std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
        out[i] = T(v);
      }
    });
  });
}

// A 2-D ConvTranspose whose windows do not overlap (stride == kernel, no pads, dilation or output
// padding, one group): the upsampling layers of segmentation heads such as PP-OCR det's (2x2,
// stride 2). Each input pixel then writes its own kh x kw block of every output channel, so the
// op is one matrix product per image, T[M*kh*kw, HW] = W^T[M*kh*kw, C] * X[C, HW] (both in their own
// layouts), whose rows (m, a, b) are interleaved into output rows with the bias. oneDNN's
// deconvolution took 0.56 and 1.17 ms for det's two such layers (1 thread; the second has one
// output channel), a few per cent of its FLOP rate elsewhere.
bool is_block_upsample_2d(const ConvGeometry& g) {
  const Window& win = g.win;
  if (!g.transposed || g.group != 1 || win.in.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (win.strides[i] != win.kernel[i] || win.dilations[i] != 1 || win.pad_begin[i] != 0 || win.pad_end[i] != 0 ||
        win.out[i] != win.in[i] * win.strides[i]) {
      return false;
    }
  }
  return true;
}

void block_upsample_2d(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y) {
  const Window& win = g.win;
  const int64_t C = g.in_channels, M = g.out_channels, H = win.in[0], W = win.in[1];
  const int64_t KH = win.kernel[0], KW = win.kernel[1], OH = win.out[0], OW = win.out[1];
  const int64_t rows = M * KH * KW, hw = H * W;
  thread_local std::vector<float> t;
  t.resize(size_t(rows * hw));
  for (int64_t n = 0; n < g.batch; ++n) {
    cpu::gemm<float>(true, false, rows, hw, C, 1.0, w, rows, x + n * C * hw, hw, 0.0, t.data(), hw);
    float* yn = y + n * M * OH * OW;
    const float* tp = t.data();  // (t names each worker's own thread_local inside the loop)
    // One output row per item: row i * KH + a of channel m interleaves T's rows (m, a, 0..KW-1).
    parallel_for(M * OH, std::max<int64_t>(1, 8192 / OW), [&](int64_t begin, int64_t end) {
      for (int64_t mo = begin; mo < end; ++mo) {
        const int64_t m = mo / OH, i = (mo % OH) / KH, a = (mo % OH) % KH;
        const float bias = b ? b[m] : 0.0f;
        float* out = yn + mo * OW;
        const float* src = tp + ((m * KH + a) * KW) * hw + i * W;
        if (KW == 2) {
          const float* s0 = src;
          const float* s1 = src + hw;
          for (int64_t j = 0; j < W; ++j) {
            out[2 * j] = s0[j] + bias;
            out[2 * j + 1] = s1[j] + bias;
          }
        } else {
          for (int64_t bb = 0; bb < KW; ++bb) {
            const float* sb = src + bb * hw;
            for (int64_t j = 0; j < W; ++j) out[j * KW + bb] = sb[j] + bias;
          }
        }
      }
    });
  }
  if (t.size() > (size_t(1) << 22)) std::vector<float>().swap(t);  // keep at most 16 MiB per thread
}

// A 1x1 convolution of a 1x1 image (squeeze-and-excite's fully connected layers written as
// convolutions): y[N, M] = X[N, C] W[M, C]^T + b, one small matrix product. oneDNN's primitive took
// 10-35 us per call for these, 81 us of PP-OCR cls's 0.87 ms run (1 thread).
bool is_pointwise_of_one_pixel(const ConvGeometry& g) {
  if (g.transposed || g.group != 1 || g.channels_last) return false;
  for (size_t i = 0; i < g.win.in.size(); ++i) {
    if (g.win.in[i] != 1 || g.win.kernel[i] != 1 || g.win.out[i] != 1) return false;
  }
  return true;
}

void pointwise_of_one_pixel(const ConvGeometry& g, const float* x, const float* w, const float* b, float* y) {
  const int64_t n = g.batch, c = g.in_channels, m = g.out_channels;
  cpu::gemm<float>(false, true, n, m, c, 1.0, x, c, w, c, 0.0, y, m);
  if (!b) return;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) y[i * m + j] += b[j];
  }
}

void run_conv(KernelContext& ctx, const ConvGeometry& g, const Epilogue& ep = {}) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.allocate(0, x.dtype(), output_shape(g));
  if (y.numel() == 0) return;
  if (x.dtype() == DType::Float32 && x.numel() > 0 && w.numel() > 0 && is_pointwise_of_one_pixel(g)) {
    pointwise_of_one_pixel(g, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
    apply_epilogue(ep, y);
    return;
  }
  if (x.dtype() == DType::Float32 && !is_depthwise_2d(g) && x.numel() > 0 && w.numel() > 0 && !ep.empty()) {
    if (ConvPlan* plan = find_plan(ctx, g, x, w, b, ep.residual != nullptr, ep.act)) {
      run_plan(*plan, x, y, ep.residual);
      if (!plan->post_ops_fused) apply_epilogue(ep, y);
      return;
    }
  }
  if (x.numel() == 0 || w.numel() == 0) {
    // Nothing to accumulate (zero input channels): the output is just the bias.
    dispatch_float(x.dtype(), [&]<class T>() {
      T* out = y.data<T>();
      const int64_t plane = y.numel() / (g.batch * g.out_channels);
      for (int64_t i = 0; i < y.numel(); ++i) out[i] = b ? b->data<T>()[(i / plane) % g.out_channels] : T(0);
    });
    apply_epilogue(ep, y);
    return;
  }
  if (x.dtype() == DType::Float32 && is_depthwise_2d(g)) {
    depthwise_conv2d(g, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
    apply_epilogue(ep, y);
    return;
  }
  if (x.dtype() == DType::Float32 && is_block_upsample_2d(g)) {
    block_upsample_2d(g, x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
    apply_epilogue(ep, y);
    return;
  }
  if (x.dtype() != DType::Float64) {
    if (ConvPlan* plan = find_plan(ctx, g, x, w, b)) {
      if (x.dtype() == DType::Float32) {
        run_plan(*plan, x, y);
      } else {
        Tensor y32 = Tensor::empty(DType::Float32, y.shape());
        run_plan(*plan, x.cast(DType::Float32), y32);
        copy_tensor(y32.cast(y.dtype()), y);
      }
      apply_epilogue(ep, y);
      return;
    }
  }
  run_reference(g, x, w, b, y);
  apply_epilogue(ep, y);
}

void conv_kernel(KernelContext& ctx) { run_conv(ctx, conv_geometry(ctx)); }
void conv_transpose_kernel(KernelContext& ctx) { run_conv(ctx, conv_transpose_geometry(ctx)); }

void fused_conv_kernel(KernelContext& ctx) {
  const ConvGeometry g = conv_geometry(ctx);
  const sem::FusedConvArgs args = sem::fused_conv_args(ctx, g);
  if (g.channels_last) {  // a GPU layout: the CPU runs it for fallbacks and tests
    sem::fused_conv_by_transposes(ctx, ctx.allocate(0, ctx.input(0).dtype(), output_shape(g)));
    return;
  }
  run_conv(ctx, g, Epilogue{args.residual, args.act});
}

// ---- ConvWeightGrad: oneDNN's backward-weights primitive (float32; 16-bit inputs through float32) ----

// oneDNN's convolution_backward_weights for this geometry, with the reorders between our plain
// tensors and its layouts. nullptr when oneDNN cannot express it (the reference loops run).
struct WeightGradPlan {
  Shape x_shape, dy_shape;
  dnnl::primitive primitive;
  memory user_src, user_diff_dst, user_diff_w;  // plain (data handles set per call)
  memory src, diff_dst, diff_w;                 // oneDNN's layouts (the user_* objects when the same)
};
struct WeightGradState {
  std::unique_ptr<WeightGradPlan> plan;
};

std::unique_ptr<WeightGradPlan> build_weight_grad_plan(const ConvGeometry& g, const Shape& xs, const Shape& dys,
                                                       const Shape& dws) {
  profiler::detail::PhaseScope phase("oneDNN convolution plan");
  const Window& win = g.win;
  dnnl::engine& eng = onednn::engine();
  auto plan = std::make_unique<WeightGradPlan>();
  plan->x_shape = xs;
  plan->dy_shape = dys;
  const memory::dims src_dims = onednn::to_dims(xs), dst_dims = onednn::to_dims(dys);
  const memory::desc user_w = user_weights_desc(g, dws);
  auto any = [](const memory::dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); };
  const memory::dims strides = dnnl_dims(win.strides), dilations = dnnl_dims(win.dilations, 1);
  const memory::dims pad_begin = dnnl_dims(win.pad_begin), pad_end = dnnl_dims(win.pad_end);
  try {
    dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                        any(src_dims), any(user_w.dims()), any(dst_dims), strides, dilations, pad_begin,
                                        pad_end);
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd, eng);
    dnnl::convolution_backward_weights::desc bwd(dnnl::algorithm::convolution_direct, any(src_dims), any(user_w.dims()),
                                                 any(dst_dims), strides, dilations, pad_begin, pad_end);
    dnnl::convolution_backward_weights::primitive_desc pd(bwd, eng, fwd_pd);
    plan->primitive = dnnl::convolution_backward_weights(pd);
    plan->user_src = memory(onednn::plain_desc(src_dims), eng, DNNL_MEMORY_NONE);
    plan->user_diff_dst = memory(onednn::plain_desc(dst_dims), eng, DNNL_MEMORY_NONE);
    plan->user_diff_w = memory(user_w, eng, DNNL_MEMORY_NONE);
    auto own = [&](const memory& user, const memory::desc& want) { return want == user.get_desc() ? user : memory(want, eng); };
    plan->src = own(plan->user_src, pd.src_desc());
    plan->diff_dst = own(plan->user_diff_dst, pd.diff_dst_desc());
    plan->diff_w = own(plan->user_diff_w, pd.diff_weights_desc());
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return plan;
}

void run_weight_grad_plan(WeightGradPlan& plan, const Tensor& x32, const Tensor& dy32, Tensor& dw32) {
  dnnl::stream stream(onednn::engine());
  plan.user_src.set_data_handle(x32.raw_data());
  plan.user_diff_dst.set_data_handle(dy32.raw_data());
  plan.user_diff_w.set_data_handle(dw32.raw_data());
  auto in = [&](memory& user, memory& own) {
    if (own != user) dnnl::reorder(user, own).execute(stream, user, own);
  };
  in(plan.user_src, plan.src);
  in(plan.user_diff_dst, plan.diff_dst);
  plan.primitive.execute(stream, {{DNNL_ARG_SRC, plan.src}, {DNNL_ARG_DIFF_DST, plan.diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, plan.diff_w}});
  if (plan.diff_w != plan.user_diff_w) dnnl::reorder(plan.diff_w, plan.user_diff_w).execute(stream, plan.diff_w, plan.user_diff_w);
  stream.wait();
}

void conv_weight_grad_kernel(KernelContext& ctx) {
  const ConvGeometry g = sem::conv_weight_grad_geometry(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const Shape dws = sem::weight_grad_shape(g);
  Tensor& dw = ctx.allocate(0, x.dtype(), dws);
  if (dw.numel() == 0) return;
  if (x.numel() == 0 || dy.numel() == 0) {
    std::memset(dw.raw_data(), 0, dw.nbytes());
    return;
  }
  if (x.dtype() != DType::Float64) {
    auto& state = ctx.state<WeightGradState>();
    if (!state.plan || state.plan->x_shape != x.shape() || state.plan->dy_shape != dy.shape())
      state.plan = build_weight_grad_plan(g, x.shape(), dy.shape(), dws);
    if (state.plan) {
      if (x.dtype() == DType::Float32) {
        run_weight_grad_plan(*state.plan, x, dy, dw);
      } else {
        Tensor dw32 = Tensor::empty(DType::Float32, dws);
        run_weight_grad_plan(*state.plan, x.cast(DType::Float32), dy.cast(DType::Float32), dw32);
        copy_tensor(dw32.cast(dw.dtype()), dw);
      }
      return;
    }
  }
  dispatch_float(x.dtype(), [&]<class T>() { conv_weight_grad_reference<T>(g, x.data<T>(), dy.data<T>(), dw.data<T>()); });
}

}  // namespace

INGOT_CPU_KERNEL(ConvWeightGrad, conv_weight_grad_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES}).eager_state();
INGOT_CPU_KERNEL(Conv, conv_kernel).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(ConvTranspose, conv_transpose_kernel).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(FusedConv, fused_conv_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
