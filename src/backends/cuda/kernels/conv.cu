// Conv, ConvTranspose and ai.ingot FusedConv on cuDNN (legacy descriptor API). Geometry,
// validation and error messages are shared with the CPU kernel (ops/semantics/conv_geometry.h
// computes pads and output sizes, auto_pad included).
//
// Per node and input shape a plan is kept in ctx.state: descriptors and the algorithm chosen once
// by cudnnFind*AlgorithmEx. 1-D convolutions run as 2-D with a unit height. cuDNN wants symmetric
// pads: a forward convolution with begin != end pads copies the input into a zero-padded
// temporary (only the asymmetric excess; the symmetric part stays in the descriptor); a transposed
// convolution whose pads or output size cuDNN cannot express computes the full output into a
// temporary and crops it. Bias, the residual and Relu are applied by one epilogue kernel, except
// float32 + Relu which goes through cudnnConvolutionBiasActivationForward when cuDNN accepts it.
// Channels-last FusedConv (layout "NHWC", the channels-last pass's 16-bit layout) uses cuDNN's NHWC
// descriptors for 2-D convolutions with symmetric pads (bias, residual and activation in the epilogue kernel); other
// geometries go through transposed copies (sem::fused_conv_by_transposes).
// When cuDNN has no algorithm for a geometry (or sizes exceed its 32-bit limits), a direct CUDA
// loop computes the convolution instead, so a registered dtype never fails.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/cudnn_conv_graph.h"
#include "backends/cuda/kernels/conv_pointwise.h"
#include "backends/cuda/kernels/conv_split_k.h"
#include "core/flags.h"
#include "backends/cuda/kernels/tiled_product.cuh"
#include "core/tuning.h"
#include "profiler/hooks.h"
#include "ops/semantics/conv_geometry.h"
#include "ops/semantics/fast_divmod.h"
#include "ops/semantics/fused_conv_args.h"
#include "backends/cuda/kernels/cuda_util.cuh"

namespace ingot {
namespace {

using sem::Window;

// ---- geometry (ops/semantics/conv_geometry.h, shared with the CPU kernel) ----

using sem::ConvGeometry;
using sem::conv_geometry;
using sem::conv_transpose_geometry;
Shape output_shape(const ConvGeometry& g) { return sem::conv_output_shape(g); }

// ---- small kernels ----

using cuda::aligned16;
using cuda::blocks_for;
using cuda::compute_t;
using cuda::kThreads;
using cuda::load;
using cuda::store;

// Three spatial axes (leading ones of size 1 for 1-D/2-D).
struct Spatial3 {
  int64_t v[3];
};
Spatial3 spatial3(const Ints& s, int64_t fill) {
  Spatial3 r{{fill, fill, fill}};
  const size_t off = 3 - s.size();
  for (size_t i = 0; i < s.size(); ++i) r.v[off + i] = s[i];
  return r;
}

// out[nc, o] = in[nc, o + offset] when inside `in`, else 0 (pads an input or crops an output).
template <class T>
__global__ void window_copy_kernel(const T* in, T* out, int64_t total, Spatial3 in_dims, Spatial3 out_dims,
                                   Spatial3 offset) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = i;
    const int64_t ow = t % out_dims.v[2];
    t /= out_dims.v[2];
    const int64_t oh = t % out_dims.v[1];
    t /= out_dims.v[1];
    const int64_t od = t % out_dims.v[0];
    const int64_t nc = t / out_dims.v[0];
    const int64_t id = od + offset.v[0], ih = oh + offset.v[1], iw = ow + offset.v[2];
    const bool inside = id >= 0 && id < in_dims.v[0] && ih >= 0 && ih < in_dims.v[1] && iw >= 0 && iw < in_dims.v[2];
    out[i] = inside ? in[((nc * in_dims.v[0] + id) * in_dims.v[1] + ih) * in_dims.v[2] + iw] : store<T>(0.0f);
  }
}

template <class T>
void window_copy(const Tensor& in, Tensor& out, const Ints& in_sp, const Ints& out_sp, const Ints& offset) {
  const int64_t total = out.numel();
  if (total == 0) return;
  window_copy_kernel<T><<<blocks_for(total), kThreads, 0, cuda::stream()>>>(
      cuda::ptr<const T>(in), cuda::ptr<T>(out), total, spatial3(in_sp, 1), spatial3(out_sp, 1), spatial3(offset, 0));
  INGOT_CUDA_LAUNCH_CHECK();
}

using sem::FusedActivation;

// y = act(round(y + bias) + residual), rounding between the steps like separate ops would.
template <class T>
__global__ void epilogue_kernel(T* y, const T* bias, const T* residual, int64_t total, int64_t plane,
                                int64_t channels, FusedActivation act) {
  using C = compute_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    C v = load(y[i]);
    if (bias) v += load(bias[(i / plane) % channels]);
    if (residual) v = load(store<T>(v)) + load(residual[i]);
    if (act == FusedActivation::Relu) v = v > C(0) ? v : C(0);  // NaN -> 0, like the CPU Relu
    if (act == FusedActivation::HardSwish) {  // like the HardSwish kernel: NaN stays NaN
      C t = v * C(1.0 / 6.0) + C(0.5);
      t = t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
      v = v * t;
    }
    y[i] = store<T>(v);
  }
}

// The epilogue without a bias, V elements per access: y = act(y + residual).
template <class T, int V>
__global__ void residual_epilogue_kernel(cuda::Vec<T, V>* y, const cuda::Vec<T, V>* residual, int64_t vectors,
                                         FusedActivation act) {
  using C = compute_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += int64_t(gridDim.x) * blockDim.x) {
    cuda::Vec<T, V> a = y[i];
    const cuda::Vec<T, V> r = residual ? residual[i] : cuda::Vec<T, V>{};
#pragma unroll
    for (int j = 0; j < V; ++j) {
      C v = load(a.v[j]);
      if (residual) v += load(r.v[j]);
      if (act == FusedActivation::Relu) v = v > C(0) ? v : C(0);
      if (act == FusedActivation::HardSwish) {
        C t = v * C(1.0 / 6.0) + C(0.5);
        t = t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
        v = v * t;
      }
      a.v[j] = store<T>(v);
    }
    y[i] = a;
  }
}

// Depthwise 2-D convolution, channels last (one filter per channel): cuDNN's NHWC depthwise
// kernels measured 2x slower than its NCHW ones on the H200 (MobileNetV3-Large fp16, batch 32:
// 2.26 vs 1.11 ms for its 15 depthwise layers), so this kernel does them, with the epilogue. A
// thread computes two neighbouring channels of one output pixel (x: channel pairs, so neighbouring
// threads read neighbouring inputs; y: output columns; z: batch x output rows), with 32-bit
// coordinates and no division in the loop.
struct DepthwiseParams {
  int n, h, w, c, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

constexpr int kDepthwiseChannelThreads = 32, kDepthwiseColumnThreads = 8;

// The epilogue kernel's steps and rounding: y = round(conv), then + bias, + residual, activation.
template <class T>
__device__ __forceinline__ void depthwise_epilogue(float acc, const T* bias, const T* residual, FusedActivation act,
                                                   T& out) {
  using C = compute_t<T>;
  C v = load(store<T>(C(acc)));
  if (bias) v += load(*bias);
  if (residual) v = load(store<T>(v)) + load(*residual);
  if (act == FusedActivation::Relu) v = v > C(0) ? v : C(0);
  if (act == FusedActivation::HardSwish) {
    C h = v * C(1.0 / 6.0) + C(0.5);
    h = h < C(0) ? C(0) : (h > C(1) ? C(1) : h);
    v = v * h;
  }
  out = store<T>(v);
}

#define INGOT_CUDA_CONV_TYPES DType::Float32, DType::Float16, DType::BFloat16

// ---- the cold tier: a convolution as an implicit GEMM on the tiled kernel (tiled_product.cuh) ----
// M = batch x output pixels, N = output channels, K = input channels x window (group 1), ordered
// as the weights are laid out: KCRS (channels first) or KRSC (channels last).
struct ColdConvGeometry {
  int n, c, h, w, k, r, s, oh, ow, ph, pw, sh, sw, dh, dw;
  sem::FastDivmod by_c, by_r, by_s, by_ow, by_oh;  // the index decompositions' divisors
};

template <class T, bool NHWC>
struct ConvInput {
  static constexpr bool k_inner = NHWC;  // channels last: neighbouring k, neighbouring channels
  struct Line {  // output pixel m: its image and its window's top-left corner
    const T* image;
    int ih, iw;
  };
  const T* x;
  ColdConvGeometry g;
  __device__ Line line(int64_t, int64_t m) const {
    uint32_t t, ow, nb, oh;
    g.by_ow.divmod(uint32_t(m), t, ow);
    g.by_oh.divmod(t, nb, oh);
    return {x + int64_t(nb) * g.c * g.h * g.w, int(oh) * g.sh - g.ph, int(ow) * g.sw - g.pw};
  }
  __device__ float operator()(const Line& l, int64_t kk) const {
    uint32_t c, r, s, t;
    if (NHWC) {  // k = (r * S + s) * C + c
      g.by_c.divmod(uint32_t(kk), t, c);
      g.by_s.divmod(t, r, s);
    } else {  // k = (c * R + r) * S + s
      g.by_s.divmod(uint32_t(kk), t, s);
      g.by_r.divmod(t, c, r);
    }
    const int ih = l.ih + int(r) * g.dh, iw = l.iw + int(s) * g.dw;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return 0.0f;
    return float(load(l.image[NHWC ? (ih * g.w + iw) * g.c + int(c) : (int(c) * g.h + ih) * g.w + iw]));
  }
};

template <class T>
struct ConvWeights {  // W as [K][C x window]
  static constexpr bool k_inner = true;
  using Line = const T*;
  const T* w;
  int64_t kdim;
  __device__ Line line(int64_t, int64_t oc) const { return w + oc * kdim; }
  __device__ float operator()(Line l, int64_t kk) const { return float(load(l[kk])); }
};

template <class T, bool NHWC>
struct ConvOutput {  // the epilogue kernel's steps and rounding
  T* y;
  const T *bias, *residual;
  int64_t k, plane;  // output channels, output pixels per image
  FusedActivation act;
  __device__ void operator()(int64_t, int64_t m, int64_t oc, float acc) const {
    const int64_t at = NHWC ? m * k + oc : (m / plane * k + oc) * plane + m % plane;
    depthwise_epilogue<T>(acc, bias ? bias + oc : nullptr, residual ? residual + at : nullptr, act, y[at]);
  }
};

// The convolution with its epilogue on the cold tier; false for what it does not take (transposed,
// grouped, 3-D, sizes past the kernel's grid).
bool run_cold_conv(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* residual,
                   FusedActivation act, Tensor& y) {
  const size_t rank = g.win.in.size();
  if (g.transposed || g.group != 1 || (rank != 1 && rank != 2)) return false;
  // 32-bit addressing within an image and over the output pixels and K.
  if (x.numel() / std::max<int64_t>(g.batch, 1) >= INT32_MAX || w.numel() >= INT32_MAX) return false;
  auto axis = [&](const Ints& v, int i, int64_t unit) { return int(rank == 2 ? v[size_t(i)] : i == 0 ? unit : v[0]); };
  ColdConvGeometry cg{int(g.batch),
                      int(g.in_channels),
                      axis(g.win.in, 0, 1),
                      axis(g.win.in, 1, 1),
                      int(g.out_channels),
                      axis(g.win.kernel, 0, 1),
                      axis(g.win.kernel, 1, 1),
                      axis(g.win.out, 0, 1),
                      axis(g.win.out, 1, 1),
                      axis(g.win.pad_begin, 0, 0),
                      axis(g.win.pad_begin, 1, 0),
                      axis(g.win.strides, 0, 1),
                      axis(g.win.strides, 1, 1),
                      axis(g.win.dilations, 0, 1),
                      axis(g.win.dilations, 1, 1),
                      {}, {}, {}, {}, {}};
  cg.by_c = sem::FastDivmod(cg.c);
  cg.by_r = sem::FastDivmod(cg.r);
  cg.by_s = sem::FastDivmod(cg.s);
  cg.by_ow = sem::FastDivmod(cg.ow);
  cg.by_oh = sem::FastDivmod(cg.oh);
  const int64_t plane = int64_t(cg.oh) * cg.ow, m = g.batch * plane, kdim = int64_t(cg.c) * cg.r * cg.s;
  if (m >= INT32_MAX || !cuda::tiled_product_fits(m, cg.k, 1)) return false;
  profiler::detail::PhaseScope phase("convolution on the cold tier");
  cuda::count_cold_kernel_call();
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(), [&]<class T>() {
    const T* bias = b ? cuda::ptr<const T>(*b) : nullptr;
    const T* res = residual ? cuda::ptr<const T>(*residual) : nullptr;
    const ConvWeights<T> wl{cuda::ptr<const T>(w), kdim};
    if (g.channels_last) {
      cuda::launch_tiled_product(m, cg.k, kdim, 1, ConvInput<T, true>{cuda::ptr<const T>(x), cg}, wl,
                                 ConvOutput<T, true>{cuda::ptr<T>(y), bias, res, cg.k, plane, act});
    } else {
      cuda::launch_tiled_product(m, cg.k, kdim, 1, ConvInput<T, false>{cuda::ptr<const T>(x), cg}, wl,
                                 ConvOutput<T, false>{cuda::ptr<T>(y), bias, res, cg.k, plane, act});
    }
  });
  return true;
}

template <class T>
__global__ void depthwise_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ wt, const T* bias,
                                      const T* residual, T* __restrict__ y, DepthwiseParams p, FusedActivation act) {
  using C = compute_t<T>;
  const int c0 = (int(blockIdx.x) * kDepthwiseChannelThreads + int(threadIdx.x)) * 2;
  const int ox = int(blockIdx.y) * kDepthwiseColumnThreads + int(threadIdx.y);
  const int n = int(blockIdx.z) / p.oh, oy = int(blockIdx.z) % p.oh;
  if (c0 >= p.c || ox >= p.ow) return;
  const bool pair = c0 + 1 < p.c;
  C acc0 = C(0), acc1 = C(0);
  for (int ky = 0; ky < p.kh; ++ky) {
    const int iy = oy * p.sh - p.ph + ky * p.dh;
    if (iy < 0 || iy >= p.h) continue;
    const T* row = x + (size_t(n) * p.h + iy) * p.w * p.c;
    const T* taps = wt + ky * p.kw;
    for (int kx = 0; kx < p.kw; ++kx) {
      const int ix = ox * p.sw - p.pw + kx * p.dw;
      if (ix < 0 || ix >= p.w) continue;
      const T* in = row + size_t(ix) * p.c + c0;
      const int k = p.kh * p.kw;
      acc0 += C(load(in[0])) * C(load(taps[size_t(c0) * k + kx]));
      if (pair) acc1 += C(load(in[1])) * C(load(taps[size_t(c0 + 1) * k + kx]));
    }
  }
  const size_t out = ((size_t(n) * p.oh + oy) * p.ow + ox) * p.c + c0;
  for (int j = 0; j < (pair ? 2 : 1); ++j) {
    depthwise_epilogue<T>(j ? acc1 : acc0, bias ? bias + c0 + j : nullptr, residual ? residual + out + j : nullptr, act,
                          y[out + j]);
  }
}

// The same convolution, vectorized, for the common case (no dilation, channels a multiple of 16
// bytes' worth, 16-byte aligned tensors; MobileNet's 3x3 and 5x5 layers at stride 1 and 2). A thread
// computes OX neighbouring output columns of V = 16 / sizeof(T) channels: it loads the (OX - 1) * SW +
// KW input vectors of a row once and uses each for every output and tap that reads it (16-byte loads
// instead of the kernel above's 2-byte ones, and up to KW / SW times fewer of them; OX is 4 unless
// that leaves the GPU too few threads, as at batch 1). The block's weights are staged in shared
// memory tap-major ([tap][channel]), so a tap's V weights are one 16-byte load. Same epilogue steps
// and rounding as the kernel above.

template <class T, int KW, int SW, int OX>
__global__ void __launch_bounds__(256)
    depthwise_nhwc_vec_kernel(const T* __restrict__ x, const T* __restrict__ wt, const T* __restrict__ bias,
                              const T* __restrict__ residual, T* __restrict__ y, DepthwiseParams p,
                              FusedActivation act) {
  constexpr int V = 16 / int(sizeof(T));
  constexpr int NIN = (OX - 1) * SW + KW;  // input columns of one row the thread's outputs read
  extern __shared__ uint4 depthwise_smem[];
  T* ws = reinterpret_cast<T*>(depthwise_smem);  // [kh * KW][group]
  const int group = int(blockDim.x) * V, cbase = int(blockIdx.x) * group;
  const int taps = p.kh * KW, channels = min(group, p.c - cbase);
  const int tid = int(threadIdx.y * blockDim.x + threadIdx.x), nthreads = int(blockDim.x * blockDim.y);
  for (int i = tid; i < channels * taps; i += nthreads) {  // the group's weights are contiguous
    const int c = i / taps, t = i - c * taps;
    ws[t * group + c] = wt[size_t(cbase) * taps + i];
  }
  __syncthreads();
  const int c0 = cbase + int(threadIdx.x) * V;
  const int ox0 = (int(blockIdx.y) * int(blockDim.y) + int(threadIdx.y)) * OX;
  const int n = int(blockIdx.z) / p.oh, oy = int(blockIdx.z) % p.oh;
  if (c0 >= p.c || ox0 >= p.ow) return;
  float acc[OX][V];
#pragma unroll
  for (int o = 0; o < OX; ++o) {
#pragma unroll
    for (int v = 0; v < V; ++v) acc[o][v] = 0.f;
  }
  const int ix0 = ox0 * SW - p.pw;
  for (int ky = 0; ky < p.kh; ++ky) {
    const int iy = oy * p.sh - p.ph + ky;
    if (iy < 0 || iy >= p.h) continue;
    const T* row = x + (size_t(n) * p.h + iy) * p.w * p.c + c0;
    uint4 in[NIN];
#pragma unroll
    for (int j = 0; j < NIN; ++j) {
      const int ix = ix0 + j;
      in[j] = ix >= 0 && ix < p.w ? *reinterpret_cast<const uint4*>(row + size_t(ix) * p.c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int kx = 0; kx < KW; ++kx) {
      const uint4 wv = *reinterpret_cast<const uint4*>(ws + (ky * KW + kx) * group + int(threadIdx.x) * V);
      const T* w = reinterpret_cast<const T*>(&wv);
#pragma unroll
      for (int o = 0; o < OX; ++o) {
        const T* iv = reinterpret_cast<const T*>(&in[o * SW + kx]);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[o][v] += float(load(iv[v])) * float(load(w[v]));
      }
    }
  }
  uint4 bv = make_uint4(0, 0, 0, 0);
  if (bias) bv = *reinterpret_cast<const uint4*>(bias + c0);
  const T* b = reinterpret_cast<const T*>(&bv);
#pragma unroll
  for (int o = 0; o < OX; ++o) {
    if (ox0 + o >= p.ow) break;
    const size_t out = ((size_t(n) * p.oh + oy) * p.ow + ox0 + o) * p.c + c0;
    uint4 rv = make_uint4(0, 0, 0, 0), yv;
    if (residual) rv = *reinterpret_cast<const uint4*>(residual + out);
    const T* r = reinterpret_cast<const T*>(&rv);
    T* yo = reinterpret_cast<T*>(&yv);
#pragma unroll
    for (int v = 0; v < V; ++v) depthwise_epilogue<T>(acc[o][v], bias ? b + v : nullptr, residual ? r + v : nullptr, act, yo[v]);
    *reinterpret_cast<uint4*>(y + out) = yv;
  }
}

// Depthwise 2-D convolution, channels first (float32 keeps NCHW: cuDNN's float32 kernels are
// channels first). cuDNN's grouped direct kernel took 1.38 of MobileNetV3-Large fp32 b32's 3.57 ms
// of kernel time on the H200 (ncu); PyTorch also runs its own kernel for float32 depthwise layers.
// Square K x K windows, the same stride S along both axes, no dilation. A thread computes OX
// neighbouring outputs of one row (threads of a warp: neighbouring strips of a row, then rows and
// planes), loading the (OX - 1) * S + K inputs of each window row once for all of them; a plane's
// K x K weights are the same for every thread of it (broadcast loads). Same epilogue as above.
template <class T, int K, int S, int OX>
__global__ void __launch_bounds__(256)
    depthwise_nchw_kernel(const T* __restrict__ x, const T* __restrict__ wt, const T* __restrict__ bias,
                          const T* __restrict__ residual, T* __restrict__ y, DepthwiseParams p, FusedActivation act,
                          int strips, int total) {
  constexpr int NIN = (OX - 1) * S + K;
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i >= total) return;
  const int strip = i % strips, row = i / strips;  // row: (n * c + ch) * oh + oy
  const int oy = row % p.oh, plane = row / p.oh, ch = plane % p.c;
  const int ox0 = strip * OX, ix0 = ox0 * S - p.pw;
  const T* xp = x + size_t(plane) * p.h * p.w;
  const T* w = wt + ch * K * K;
  float acc[OX];
#pragma unroll
  for (int o = 0; o < OX; ++o) acc[o] = 0.f;
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
    const int iy = oy * S - p.ph + ky;
    if (iy < 0 || iy >= p.h) continue;
    const T* in_row = xp + iy * p.w;
    float in[NIN];
#pragma unroll
    for (int j = 0; j < NIN; ++j) {
      const int ix = ix0 + j;
      in[j] = ix >= 0 && ix < p.w ? float(load(in_row[ix])) : 0.f;
    }
#pragma unroll
    for (int kx = 0; kx < K; ++kx) {
      const float wv = float(load(w[ky * K + kx]));
#pragma unroll
      for (int o = 0; o < OX; ++o) acc[o] += in[o * S + kx] * wv;
    }
  }
  const size_t out = size_t(row) * p.ow + ox0;
#pragma unroll
  for (int o = 0; o < OX; ++o) {
    if (ox0 + o >= p.ow) break;
    depthwise_epilogue<T>(acc[o], bias ? bias + ch : nullptr, residual ? residual + out + o : nullptr, act, y[out + o]);
  }
}

// Direct convolution loops: the fallback when cuDNN has no algorithm for a geometry.
struct DirectParams {
  int64_t n, c, m, group;  // batch, input channels, output channels, groups
  Spatial3 in, out, k, s, d, pb;
};

template <class T>
__global__ void conv_direct_kernel(const T* x, const T* w, T* y, DirectParams p) {
  using A = compute_t<T>;
  const int64_t in_plane = p.in.v[0] * p.in.v[1] * p.in.v[2];
  const int64_t out_plane = p.out.v[0] * p.out.v[1] * p.out.v[2];
  const int64_t ksize = p.k.v[0] * p.k.v[1] * p.k.v[2];
  const int64_t icg = p.c / p.group, ocg = p.m / p.group;
  const int64_t total = p.n * p.m * out_plane;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = i;
    const int64_t ow = t % p.out.v[2];
    t /= p.out.v[2];
    const int64_t oh = t % p.out.v[1];
    t /= p.out.v[1];
    const int64_t od = t % p.out.v[0];
    t /= p.out.v[0];
    const int64_t oc = t % p.m, n = t / p.m, grp = oc / ocg;
    A acc = A(0);
    for (int64_t ic = 0; ic < icg; ++ic) {
      const T* xp = x + (n * p.c + grp * icg + ic) * in_plane;
      const T* wp = w + (oc * icg + ic) * ksize;
      for (int64_t kd = 0; kd < p.k.v[0]; ++kd) {
        const int64_t id = od * p.s.v[0] - p.pb.v[0] + kd * p.d.v[0];
        if (id < 0 || id >= p.in.v[0]) continue;
        for (int64_t kh = 0; kh < p.k.v[1]; ++kh) {
          const int64_t ih = oh * p.s.v[1] - p.pb.v[1] + kh * p.d.v[1];
          if (ih < 0 || ih >= p.in.v[1]) continue;
          for (int64_t kw = 0; kw < p.k.v[2]; ++kw) {
            const int64_t iw = ow * p.s.v[2] - p.pb.v[2] + kw * p.d.v[2];
            if (iw < 0 || iw >= p.in.v[2]) continue;
            acc += A(load(xp[(id * p.in.v[1] + ih) * p.in.v[2] + iw])) *
                   A(load(wp[(kd * p.k.v[1] + kh) * p.k.v[2] + kw]));
          }
        }
      }
    }
    y[i] = store<T>(acc);
  }
}

// Transposed convolution as a gather: each output sums the inputs whose taps land on it.
template <class T>
__global__ void conv_transpose_direct_kernel(const T* x, const T* w, T* y, DirectParams p) {
  using A = compute_t<T>;
  const int64_t in_plane = p.in.v[0] * p.in.v[1] * p.in.v[2];
  const int64_t out_plane = p.out.v[0] * p.out.v[1] * p.out.v[2];
  const int64_t ksize = p.k.v[0] * p.k.v[1] * p.k.v[2];
  const int64_t icg = p.c / p.group, ocg = p.m / p.group;
  const int64_t total = p.n * p.m * out_plane;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = i;
    const int64_t ow = t % p.out.v[2];
    t /= p.out.v[2];
    const int64_t oh = t % p.out.v[1];
    t /= p.out.v[1];
    const int64_t od = t % p.out.v[0];
    t /= p.out.v[0];
    const int64_t oc = t % p.m, n = t / p.m, grp = oc / ocg, ocl = oc % ocg;
    A acc = A(0);
    for (int64_t ic = 0; ic < icg; ++ic) {
      const int64_t icx = grp * icg + ic;
      const T* xp = x + (n * p.c + icx) * in_plane;
      const T* wp = w + (icx * ocg + ocl) * ksize;  // W is [C, M/group, k...]
      for (int64_t kd = 0; kd < p.k.v[0]; ++kd) {
        const int64_t td = od + p.pb.v[0] - kd * p.d.v[0];
        if (td < 0 || td % p.s.v[0] != 0) continue;
        const int64_t id = td / p.s.v[0];
        if (id >= p.in.v[0]) continue;
        for (int64_t kh = 0; kh < p.k.v[1]; ++kh) {
          const int64_t th = oh + p.pb.v[1] - kh * p.d.v[1];
          if (th < 0 || th % p.s.v[1] != 0) continue;
          const int64_t ih = th / p.s.v[1];
          if (ih >= p.in.v[1]) continue;
          for (int64_t kw = 0; kw < p.k.v[2]; ++kw) {
            const int64_t tw = ow + p.pb.v[2] - kw * p.d.v[2];
            if (tw < 0 || tw % p.s.v[2] != 0) continue;
            const int64_t iw = tw / p.s.v[2];
            if (iw >= p.in.v[2]) continue;
            acc += A(load(xp[(id * p.in.v[1] + ih) * p.in.v[2] + iw])) *
                   A(load(wp[(kd * p.k.v[1] + kh) * p.k.v[2] + kw]));
          }
        }
      }
    }
    y[i] = store<T>(acc);
  }
}

DirectParams direct_params(const ConvGeometry& g) {
  DirectParams p;
  p.n = g.batch;
  p.c = g.in_channels;
  p.m = g.out_channels;
  p.group = g.group;
  p.in = spatial3(g.win.in, 1);
  p.out = spatial3(g.win.out, 1);
  p.k = spatial3(g.win.kernel, 1);
  p.s = spatial3(g.win.strides, 1);
  p.d = spatial3(g.win.dilations, 1);
  p.pb = spatial3(g.win.pad_begin, 0);
  return p;
}

void run_direct(const ConvGeometry& g, const Tensor& x, const Tensor& w, Tensor& y) {
  const DirectParams p = direct_params(g);
  const int64_t total = y.numel();
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(), [&]<class T>() {
    if (g.transposed) {
      conv_transpose_direct_kernel<T><<<blocks_for(total), kThreads, 0, cuda::stream()>>>(
          cuda::ptr<const T>(x), cuda::ptr<const T>(w), cuda::ptr<T>(y), p);
    } else {
      conv_direct_kernel<T><<<blocks_for(total), kThreads, 0, cuda::stream()>>>(
          cuda::ptr<const T>(x), cuda::ptr<const T>(w), cuda::ptr<T>(y), p);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---- cuDNN plans ----

constexpr size_t kFindWorkspaceBytes = size_t(256) << 20;
constexpr size_t kMaxPlans = 8;

cudnnDataType_t cudnn_dtype(DType dt) {
  switch (dt) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: fail("cuDNN convolution: unsupported dtype {}", dtype_name(dt));
  }
}

// Calls of one convolution on the cold tier at most (INGOT_CUDA_COLD_KERNELS=1): a queue no worker
// drains (one that failed to start) then no longer keeps it there.
constexpr int kMaxColdCalls = 2;

struct ConvPlan {
  // key
  Shape x_shape, w_shape;
  DType dtype = DType::Float32;
  bool tf32 = false, want_fused = false, channels_last = false;

  bool described = false;  // build_plan ran: the legacy API's descriptors (not needed by the graph API)
  bool use_cudnn = false;
  bool algo_chosen = false;
  // Forward: X is copied into a zero-padded temporary of spatial size `x_sp` first.
  bool pad_input = false;
  // Transposed: cuDNN writes a temporary of spatial size `y_sp`, cropped into Y at `crop_offset`.
  bool crop_output = false;
  Ints x_sp, y_sp, pad_offset, crop_offset;
  Shape x_tmp_shape, y_tmp_shape;

  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr, bias_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  cudnnActivationDescriptor_t act_desc = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  size_t workspace = 0;
  std::string tuning_key;  // names the cuDNN problem in core/tuning.h
  bool fused = false;  // float32 + Relu through cudnnConvolutionBiasActivationForward
  Tensor zero_bias;    // for the fused call without B
  // 1-D and 2-D forward convolutions: the graph API with bias, residual and Relu in it.
  std::unique_ptr<cuda::ConvGraph> graph;
  bool graph_tried = false;
  // The graph holds the convolution and bias only; the residual and Relu follow on the epilogue
  // kernel (float32 with a residual, which no graph engine takes: docs/PERFORMANCE.md).
  bool residual_after = false;
  int cold_calls = 0;  // calls that ran on the cold tier while a worker prepared the graph's plan (or any plan)

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    // Destroy failures are not actionable (and must not throw from a destructor).
    if (x_desc) cudnnDestroyTensorDescriptor(x_desc);
    if (y_desc) cudnnDestroyTensorDescriptor(y_desc);
    if (bias_desc) cudnnDestroyTensorDescriptor(bias_desc);
    if (w_desc) cudnnDestroyFilterDescriptor(w_desc);
    if (conv_desc) cudnnDestroyConvolutionDescriptor(conv_desc);
    if (act_desc) cudnnDestroyActivationDescriptor(act_desc);
  }
};

struct ConvState {
  std::vector<std::unique_ptr<ConvPlan>> plans;
};

bool fits_int(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t d) { return d >= 0 && d <= INT_MAX; });
}

// cuDNN's N-d dims: [N, C, spatial...] with 1-D promoted to 2-D (unit height).
std::vector<int> cudnn_dims(int64_t n, int64_t c, const Ints& sp) {
  std::vector<int> d{int(n), int(c)};
  if (sp.size() == 1) d.push_back(1);
  for (int64_t s : sp) d.push_back(int(s));
  return d;
}
std::vector<int> cudnn_spatial(const Ints& sp, int fill) {
  std::vector<int> d;
  if (sp.size() == 1) d.push_back(fill);
  for (int64_t s : sp) d.push_back(int(s));
  return d;
}

void set_tensor(cudnnTensorDescriptor_t desc, cudnnDataType_t t, const std::vector<int>& dims) {
  std::vector<int> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = int(s);
    s *= std::max(dims[i], 1);
  }
  INGOT_CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc, t, int(dims.size()), dims.data(), strides.data()));
}

cudnnMathType_t base_math(DType dt, bool tf32) {
  if (dt == DType::Float32) return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  return CUDNN_TENSOR_OP_MATH;
}

// Builds the legacy API's descriptors (no algorithm yet; on the plan's first call the graph API
// does not take); leaves use_cudnn false when cuDNN cannot express the problem, in which case the
// direct loops run.
void build_plan(ConvPlan& p, const ConvGeometry& g, const Tensor& x, const Tensor& w) {
  profiler::detail::PhaseScope phase("cuDNN descriptors");
  const Window& win = g.win;
  const size_t nd = win.in.size();
  Ints pads(nd, 0), x_sp = win.in, y_sp = win.out;
  p.pad_offset.assign(nd, 0);
  p.crop_offset.assign(nd, 0);
  if (!g.transposed) {
    for (size_t i = 0; i < nd; ++i) {
      const int64_t sym = std::min(win.pad_begin[i], win.pad_end[i]);
      const int64_t extra_b = win.pad_begin[i] - sym, extra_e = win.pad_end[i] - sym;
      pads[i] = sym;
      x_sp[i] = win.in[i] + extra_b + extra_e;
      p.pad_offset[i] = -extra_b;  // input coordinate = padded coordinate - extra_b
      if (extra_b != 0 || extra_e != 0) p.pad_input = true;
    }
  } else {
    // Y = the full output cropped by pad_begin; cuDNN handles symmetric non-negative pads with
    // output padding below the stride directly, anything else goes through a temporary.
    bool direct = true;
    for (size_t i = 0; i < nd; ++i) {
      const int64_t reach = win.strides[i] * (win.in[i] - 1) + win.extent(i);
      const int64_t op = win.out[i] + win.pad_begin[i] + win.pad_end[i] - reach;
      if (win.pad_begin[i] != win.pad_end[i] || win.pad_begin[i] < 0 || op < 0 || op >= win.strides[i]) direct = false;
    }
    for (size_t i = 0; i < nd; ++i) {
      const int64_t reach = win.strides[i] * (win.in[i] - 1) + win.extent(i);
      if (direct) {
        pads[i] = win.pad_begin[i];
      } else {
        y_sp[i] = reach;
        p.crop_offset[i] = win.pad_begin[i];  // temporary coordinate = output coordinate + pad_begin
      }
    }
    p.crop_output = !direct;
    for (size_t i = 0; i < nd; ++i) {
      if (win.in[i] < 1) return;  // nothing reaches the output: the direct loop writes zeros
    }
  }
  p.x_sp = x_sp;
  p.y_sp = y_sp;
  Shape xs{g.batch, g.in_channels}, ys{g.batch, g.out_channels};
  xs.insert(xs.end(), x_sp.begin(), x_sp.end());
  ys.insert(ys.end(), y_sp.begin(), y_sp.end());
  p.x_tmp_shape = xs;
  p.y_tmp_shape = ys;

  // cuDNN's legacy API has 32-bit dims and element counts.
  std::vector<int64_t> all = xs;
  all.insert(all.end(), ys.begin(), ys.end());
  all.insert(all.end(), w.shape().begin(), w.shape().end());
  all.insert(all.end(), pads.begin(), pads.end());
  all.insert(all.end(), win.strides.begin(), win.strides.end());
  all.insert(all.end(), win.dilations.begin(), win.dilations.end());
  all.push_back(shape_numel(xs));
  all.push_back(shape_numel(ys));
  all.push_back(w.numel());
  all.push_back(g.group);
  if (!fits_int(all)) return;

  // Channels last: cuDNN's NHWC descriptors take 2-D convolutions; no padded copy (window_copy is
  // channels-first).
  if (g.channels_last && (nd != 2 || p.pad_input || g.transposed)) return;
  const cudnnDataType_t t = cudnn_dtype(x.dtype());
  INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x_desc));
  INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y_desc));
  INGOT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w_desc));
  INGOT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv_desc));
  // For a transposed convolution cuDNN's "x" (dy) is our X and its "y" (dx) is our Y.
  const int64_t w_per_group = g.transposed ? w.dim(1) : g.in_channels / g.group;
  std::vector<int> wd = g.transposed ? cudnn_dims(w.dim(0), w.dim(1), win.kernel)
                                     : cudnn_dims(g.out_channels, w_per_group, win.kernel);
  if (g.channels_last) {
    INGOT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x_desc, CUDNN_TENSOR_NHWC, t, int(g.batch), int(g.in_channels),
                                                 int(x_sp[0]), int(x_sp[1])));
    INGOT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y_desc, CUDNN_TENSOR_NHWC, t, int(g.batch), int(g.out_channels),
                                                 int(y_sp[0]), int(y_sp[1])));
    INGOT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w_desc, t, CUDNN_TENSOR_NHWC, wd[0], wd[1], wd[2], wd[3]));
  } else {
    set_tensor(p.x_desc, t, cudnn_dims(g.batch, g.in_channels, x_sp));
    set_tensor(p.y_desc, t, cudnn_dims(g.batch, g.out_channels, y_sp));
    INGOT_CUDNN_CHECK(cudnnSetFilterNdDescriptor(p.w_desc, t, CUDNN_TENSOR_NCHW, int(wd.size()), wd.data()));
  }
  std::vector<int> cp = cudnn_spatial(pads, 0), cs = cudnn_spatial(win.strides, 1),
                   cd = cudnn_spatial(win.dilations, 1);
  INGOT_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(p.conv_desc, int(cp.size()), cp.data(), cs.data(), cd.data(),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  INGOT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p.conv_desc, int(g.group)));
  INGOT_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv_desc, base_math(x.dtype(), p.tf32)));

  // The forward convolution's output must be cuDNN's "y" (or, transposed, our X).
  std::vector<int> expect = g.transposed ? cudnn_dims(g.batch, g.in_channels, win.in)
                                         : cudnn_dims(g.batch, g.out_channels, y_sp);
  std::vector<int> got(expect.size());
  cudnnTensorDescriptor_t fwd_in = g.transposed ? p.y_desc : p.x_desc;
  if (cudnnGetConvolutionNdForwardOutputDim(p.conv_desc, fwd_in, p.w_desc, int(got.size()), got.data()) !=
          CUDNN_STATUS_SUCCESS ||
      got != expect) {
    return;
  }
  p.tuning_key = fmt::format("{}conv.{}.{}|{}|tf32={}|x={}|y={}|w={}|pad={}|stride={}|dil={}|g={}|fused={}{}",
                             cuda::cudnn_key_prefix(), g.transposed ? "bwd_data" : "fwd", cuda::arch_name(), dtype_name(x.dtype()),
                             int(p.tf32), shape_str(xs), shape_str(ys), shape_str(Shape(wd.begin(), wd.end())),
                             shape_str(pads), shape_str(win.strides), shape_str(win.dilations), g.group,
                             int(p.want_fused), g.channels_last ? "|nhwc" : "");
  if (p.want_fused) {
    INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.bias_desc));
    std::vector<int> bd(wd.size(), 1);
    bd[1] = int(g.out_channels);
    set_tensor(p.bias_desc, t, bd);
    INGOT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&p.act_desc));
    INGOT_CUDNN_CHECK(cudnnSetActivationDescriptor(p.act_desc, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    p.fused = true;
  }
  p.use_cudnn = true;
}

bool exact_float32(const ConvPlan& p) { return p.dtype == DType::Float32 && !p.tf32; }

bool acceptable_math(const ConvPlan& p, cudnnMathType_t m) {
  // Exact float32 unless TF32 is allowed.
  return !exact_float32(p) || m == CUDNN_FMA_MATH;
}

// The algorithms that multiply in a transformed domain (FFT, and Winograd's larger tiles, which cuDNN
// runs unfused): not float32's accuracy. On an H100 the legacy path (INGOT_CUDNN_GRAPH=0) put a
// float32 3x3 convolution of 512 channels at 7 x 7 1.4e-3 off (1.7278 against the CPU's 1.7254) with
// FMA math, which only these algorithms explain (excluding them not yet run on a GPU).
bool transform_algo(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transform_algo(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}

// Exact float32 takes FMA math and no transformed-domain algorithm.
template <class Algo>
bool acceptable(const ConvPlan& p, Algo algo, cudnnMathType_t m) {
  return acceptable_math(p, m) && !(exact_float32(p) && transform_algo(algo));
}

// A choice stored earlier (core/tuning.h: this process, or a package made by `ingot convert`):
// "ALGO MATH", used when cuDNN still takes it for this problem.
bool reuse_algo(ConvPlan& p, bool transposed) {
  std::optional<std::string> stored = tuning::algorithms().find(p.tuning_key);
  int algo = 0, math = 0;
  if (!stored || std::sscanf(stored->c_str(), "%d %d", &algo, &math) != 2) return false;
  const auto m = cudnnMathType_t(math);
  const bool ok = transposed ? acceptable(p, cudnnConvolutionBwdDataAlgo_t(algo), m)
                             : acceptable(p, cudnnConvolutionFwdAlgo_t(algo), m);
  if (!ok || cudnnSetConvolutionMathType(p.conv_desc, m) != CUDNN_STATUS_SUCCESS) return false;
  size_t ws = 0;
  cudnnStatus_t st =
      transposed ? cudnnGetConvolutionBackwardDataWorkspaceSize(cuda::cudnn(), p.w_desc, p.x_desc, p.conv_desc,
                                                                p.y_desc, cudnnConvolutionBwdDataAlgo_t(algo), &ws)
                 : cudnnGetConvolutionForwardWorkspaceSize(cuda::cudnn(), p.x_desc, p.w_desc, p.conv_desc, p.y_desc,
                                                           cudnnConvolutionFwdAlgo_t(algo), &ws);
  if (st != CUDNN_STATUS_SUCCESS) return false;
  if (transposed) {
    p.bwd_algo = cudnnConvolutionBwdDataAlgo_t(algo);
  } else {
    p.fwd_algo = cudnnConvolutionFwdAlgo_t(algo);
  }
  p.workspace = ws;
  return true;
}

// Picks the algorithm (unless a stored choice exists) and records it for later runs and packages:
// cuDNN's Find call times every algorithm once on these buffers and ranks them; the first
// acceptable one is kept. INGOT_CONV_RETIME=N (an experiment switch) times the first N acceptable
// ones again by cuda::fastest_of (a warm-up, then the best of three) and keeps the fastest. Measured
// on the H200 (fp32, paired conversions, 2026-11-30): ResNet-50 b32 10.18 / 9.67 -> 9.59 / 9.34 ms,
// but b1 2.78 / 3.18 -> 2.99 / 3.28 ms (timed alone, with the layer's data hot in the 60 MB L2, an
// algorithm need not be the fastest inside the network), so it is off by default. Conversions of
// the same model differ by up to 15% at b1 either way (cuDNN's single timings are noisy).
int retimed_algorithms() { return int(std::max<int64_t>(1, flags::integer("INGOT_CONV_RETIME"))); }

template <class Perf>
void choose_from(ConvPlan& p, const Perf* perf, int returned, const std::function<bool(const Perf&)>& run,
                 const std::function<void(const Perf&)>& keep) {
  std::vector<const Perf*> candidates;
  for (int i = 0; i < returned && int(candidates.size()) < retimed_algorithms(); ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && acceptable(p, perf[i].algo, perf[i].mathType))
      candidates.push_back(&perf[i]);
  }
  if (candidates.empty()) {
    p.use_cudnn = false;  // no algorithm: the direct loops run
    return;
  }
  size_t best = 0;
  if (candidates.size() > 1) {
    best = cuda::fastest_of(candidates.size(), [&](size_t i) {
             return cudnnSetConvolutionMathType(p.conv_desc, candidates[i]->mathType) == CUDNN_STATUS_SUCCESS &&
                    run(*candidates[i]);
           }).value_or(0);
  }
  const Perf& chosen = *candidates[best];
  INGOT_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv_desc, chosen.mathType));
  keep(chosen);
  p.workspace = chosen.memory;
  tuning::algorithms().put(p.tuning_key, fmt::format("{} {}", int(chosen.algo), int(chosen.mathType)));
}

void choose_algo(ConvPlan& p, bool transposed, const void* x, const void* w, void* y) {
  profiler::detail::PhaseScope phase("cuDNN algorithm");
  p.algo_chosen = true;
  if (reuse_algo(p, transposed)) return;
  void* ws = cuda::workspace(kFindWorkspaceBytes);
  const float one = 1.0f, zero = 0.0f;  // (the scaling type of float and 16-bit convolutions)
  int returned = 0;
  if (!transposed) {
    using Perf = cudnnConvolutionFwdAlgoPerf_t;
    Perf perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (cudnnFindConvolutionForwardAlgorithmEx(cuda::cudnn(), p.x_desc, x, p.w_desc, w, p.conv_desc, p.y_desc, y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws,
                                               kFindWorkspaceBytes) != CUDNN_STATUS_SUCCESS) {
      p.use_cudnn = false;
      return;
    }
    choose_from<Perf>(
        p, perf, returned,
        [&](const Perf& c) {
          return cudnnConvolutionForward(cuda::cudnn(), &one, p.x_desc, x, p.w_desc, w, p.conv_desc, c.algo, ws,
                                         c.memory, &zero, p.y_desc, y) == CUDNN_STATUS_SUCCESS;
        },
        [&](const Perf& c) { p.fwd_algo = c.algo; });
  } else {
    using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
    Perf perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (cudnnFindConvolutionBackwardDataAlgorithmEx(cuda::cudnn(), p.w_desc, w, p.x_desc, x, p.conv_desc, p.y_desc, y,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, ws,
                                                    kFindWorkspaceBytes) != CUDNN_STATUS_SUCCESS) {
      p.use_cudnn = false;
      return;
    }
    choose_from<Perf>(
        p, perf, returned,
        [&](const Perf& c) {
          return cudnnConvolutionBackwardData(cuda::cudnn(), &one, p.w_desc, w, p.x_desc, x, p.conv_desc, c.algo, ws,
                                              c.memory, &zero, p.y_desc, y) == CUDNN_STATUS_SUCCESS;
        },
        [&](const Perf& c) { p.bwd_algo = c.algo; });
  }
}

ConvPlan& find_plan(KernelContext& ctx, const ConvGeometry& g, const Tensor& x, const Tensor& w, bool want_fused) {
  auto& plans = ctx.state<ConvState>().plans;
  const bool tf32 = x.dtype() == DType::Float32 && cuda::allow_tf32();
  for (size_t i = 0; i < plans.size(); ++i) {
    ConvPlan& p = *plans[i];
    if (p.x_shape == x.shape() && p.w_shape == w.shape() && p.dtype == x.dtype() && p.tf32 == tf32 &&
        p.want_fused == want_fused && p.channels_last == g.channels_last) {
      std::rotate(plans.begin(), plans.begin() + i, plans.begin() + i + 1);
      return *plans[0];
    }
  }
  auto plan = std::make_unique<ConvPlan>();
  plan->x_shape = x.shape();
  plan->w_shape = w.shape();
  plan->dtype = x.dtype();
  plan->tf32 = tf32;
  plan->want_fused = want_fused;
  plan->channels_last = g.channels_last;
  plans.insert(plans.begin(), std::move(plan));
  if (plans.size() > kMaxPlans) plans.pop_back();
  return *plans[0];
}

void apply_epilogue(Tensor& y, const Tensor* bias, const Tensor* residual, FusedActivation act, int64_t channels,
                    bool channels_last = false) {
  if (!bias && !residual && act == FusedActivation::None) return;
  const int64_t total = y.numel();
  // Channels last: the channel is the innermost index (a plane of 1).
  const int64_t plane = channels_last ? 1 : total / std::max<int64_t>(1, y.dim(0) * channels);
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(y.dtype(), [&]<class T>() {
    constexpr int V = int(16 / sizeof(T));
    auto aligned16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    if (!bias && total % V == 0 && aligned16(y.raw_data()) && (!residual || aligned16(residual->raw_data()))) {
      // A residual (and activation) alone, as after a graph convolution without its residual: 16 bytes an access.
      using Vt = cuda::Vec<T, V>;
      residual_epilogue_kernel<T, V><<<blocks_for(total / V), kThreads, 0, cuda::stream()>>>(
          static_cast<Vt*>(y.raw_data()), residual ? static_cast<const Vt*>(residual->raw_data()) : nullptr, total / V,
          act);
      INGOT_CUDA_LAUNCH_CHECK();
      return;
    }
    epilogue_kernel<T><<<blocks_for(total), kThreads, 0, cuda::stream()>>>(
        cuda::ptr<T>(y), bias ? cuda::ptr<const T>(*bias) : nullptr, residual ? cuda::ptr<const T>(*residual) : nullptr,
        total, std::max<int64_t>(1, plane), channels, act);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// INGOT_DEPTHWISE_VEC=0 keeps every depthwise layer on the scalar kernel (for A/B runs and tests).
bool depthwise_vec_enabled() {
  return flags::enabled("INGOT_DEPTHWISE_VEC");
}

// depthwise_nhwc_vec_kernel where it applies (3x3 or 5x5, stride 1 or 2 along W, no dilation,
// 16-byte vectors of channels, aligned tensors); false otherwise.
// A 2-D depthwise layer's DepthwiseParams (32-bit: the callers check the sizes).
DepthwiseParams depthwise_params(const ConvGeometry& g) {
  const Window& win = g.win;
  return {int(g.batch),         int(win.in[0]),        int(win.in[1]),        int(g.in_channels),
          int(win.out[0]),      int(win.out[1]),       int(win.kernel[0]),    int(win.kernel[1]),
          int(win.strides[0]),  int(win.strides[1]),   int(win.pad_begin[0]), int(win.pad_begin[1]),
          int(win.dilations[0]), int(win.dilations[1])};
}

// Output columns per thread for `work` units of work (vectors or outputs): four, fewer where that
// would leave less than ~1000 threads per SM.
int depthwise_columns(int64_t work) {
  const int64_t enough = int64_t(cuda::sm_count()) * 1024;
  return work / 4 >= enough ? 4 : work / 2 >= enough ? 2 : 1;
}

// Calls launch.template operator()<K, S, C>() for the layer's window K (3 or 5, square), stride S (1
// or 2, the same both ways) and columns C (1, 2 or 4): the instantiations both depthwise kernels have.
template <class F>
void dispatch_depthwise(const DepthwiseParams& p, int columns, F&& launch) {
  auto with_columns = [&]<int K, int S>() {
    if (columns == 4) launch.template operator()<K, S, 4>();
    if (columns == 2) launch.template operator()<K, S, 2>();
    if (columns == 1) launch.template operator()<K, S, 1>();
  };
  if (p.kw == 3 && p.sw == 1) with_columns.template operator()<3, 1>();
  if (p.kw == 3 && p.sw == 2) with_columns.template operator()<3, 2>();
  if (p.kw == 5 && p.sw == 1) with_columns.template operator()<5, 1>();
  if (p.kw == 5 && p.sw == 2) with_columns.template operator()<5, 2>();
}

bool run_depthwise_nhwc_vec(const DepthwiseParams& p, const Tensor& x, const Tensor& w, const Tensor* b,
                            const Tensor* residual, FusedActivation act, Tensor& y) {
  if (!depthwise_vec_enabled()) return false;
  const int v = 16 / int(dtype_size(x.dtype()));
  if (p.dh != 1 || p.dw != 1 || (p.kw != 3 && p.kw != 5) || (p.sw != 1 && p.sw != 2) || p.c % v != 0) return false;
  for (const Tensor* t : {&x, static_cast<const Tensor*>(&y), b, residual}) {
    if (t && !aligned16(t->raw_data())) return false;
  }
  const int channel_threads = std::min(32, p.c / v);
  const int columns = depthwise_columns(int64_t(p.n) * p.oh * p.ow * (p.c / v));
  const int strips = (p.ow + columns - 1) / columns;
  const int column_threads = std::min(256 / channel_threads, strips);
  const size_t smem = size_t(p.kh) * p.kw * channel_threads * v * dtype_size(x.dtype());
  if (smem > 48 * 1024) return false;
  const dim3 block{unsigned(channel_threads), unsigned(column_threads)};
  const dim3 grid{unsigned((p.c / v + channel_threads - 1) / channel_threads),
                  unsigned((strips + column_threads - 1) / column_threads), unsigned(p.n * p.oh)};
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(), [&]<class T>() {
    const T* xp = cuda::ptr<const T>(x);
    const T* wp = cuda::ptr<const T>(w);
    const T* bp = b ? cuda::ptr<const T>(*b) : nullptr;
    const T* rp = residual ? cuda::ptr<const T>(*residual) : nullptr;
    T* yp = cuda::ptr<T>(y);
    dispatch_depthwise(p, columns, [&]<int K, int S, int C>() {
      depthwise_nhwc_vec_kernel<T, K, S, C><<<grid, block, smem, cuda::stream()>>>(xp, wp, bp, rp, yp, p, act);
    });
    INGOT_CUDA_LAUNCH_CHECK();
  });
  return true;
}

// A channels-last depthwise 2-D convolution (group == channels in == channels out) with its
// epilogue; false for anything else.
bool run_depthwise_nhwc(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                        const Tensor* residual, FusedActivation act, Tensor& y) {
  if (!g.channels_last || g.transposed || g.win.in.size() != 2 || g.group != g.in_channels ||
      g.out_channels != g.in_channels) {
    return false;
  }
  const Window& win = g.win;
  const int64_t dims[] = {g.batch * win.out[0], win.out[1], g.in_channels, x.numel(), y.numel()};
  if (std::any_of(std::begin(dims), std::end(dims), [](int64_t d) { return d > INT_MAX; }) || dims[0] > 65535) {
    return false;  // 32-bit indices and the grid's z limit: cuDNN takes it
  }
  const DepthwiseParams p = depthwise_params(g);
  if (run_depthwise_nhwc_vec(p, x, w, b, residual, act, y)) return true;
  const dim3 block(kDepthwiseChannelThreads, kDepthwiseColumnThreads);
  const dim3 grid(unsigned((p.c + 2 * kDepthwiseChannelThreads - 1) / (2 * kDepthwiseChannelThreads)),
                  unsigned((p.ow + kDepthwiseColumnThreads - 1) / kDepthwiseColumnThreads), unsigned(p.n * p.oh));
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(), [&]<class T>() {
    depthwise_nhwc_kernel<T><<<grid, block, 0, cuda::stream()>>>(
        cuda::ptr<const T>(x), cuda::ptr<const T>(w), b ? cuda::ptr<const T>(*b) : nullptr,
        residual ? cuda::ptr<const T>(*residual) : nullptr, cuda::ptr<T>(y), p, act);
    INGOT_CUDA_LAUNCH_CHECK();
  });
  return true;
}

// INGOT_DEPTHWISE_NCHW=0 leaves channels-first depthwise layers to cuDNN (for A/B runs and tests).
bool depthwise_nchw_enabled() {
  return flags::enabled("INGOT_DEPTHWISE_NCHW");
}

// A channels-first depthwise 2-D convolution that depthwise_nchw_kernel takes (3x3 or 5x5, equal
// strides of 1 or 2, no dilation, 32-bit indices), with its epilogue; false for anything else
// (cuDNN then).
bool run_depthwise_nchw(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                        const Tensor* residual, FusedActivation act, Tensor& y) {
  const Window& win = g.win;
  if (!depthwise_nchw_enabled() || g.channels_last || g.transposed || win.in.size() != 2 ||
      g.group != g.in_channels || g.out_channels != g.in_channels || win.kernel[0] != win.kernel[1] || (win.kernel[0] != 3 && win.kernel[0] != 5) ||
      win.strides[0] != win.strides[1] || (win.strides[0] != 1 && win.strides[0] != 2) || win.dilations[0] != 1 ||
      win.dilations[1] != 1 || x.numel() > INT_MAX || y.numel() > INT_MAX) {
    return false;
  }
  const DepthwiseParams p = depthwise_params(g);  // dilations 1 (checked above)
  const int columns = depthwise_columns(y.numel());
  const int strips = (p.ow + columns - 1) / columns;
  const int64_t total = int64_t(p.n) * p.c * p.oh * strips;
  constexpr int kBlock = 256;
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(), [&]<class T>() {
    dispatch_depthwise(p, columns, [&]<int K, int S, int C>() {
      depthwise_nchw_kernel<T, K, S, C><<<unsigned((total + kBlock - 1) / kBlock), kBlock, 0, cuda::stream()>>>(
          cuda::ptr<const T>(x), cuda::ptr<const T>(w), b ? cuda::ptr<const T>(*b) : nullptr,
          residual ? cuda::ptr<const T>(*residual) : nullptr, cuda::ptr<T>(y), p, act, strips, int(total));
    });
    INGOT_CUDA_LAUNCH_CHECK();
  });
  return true;
}

// A 1-D or 2-D forward convolution through cuDNN's graph API (backends/cuda/cudnn_conv_graph.h),
// bias, residual and Relu included (HardSwish after it, by the epilogue kernel); 1-D as 2-D of unit
// height (the same memory in either layout). False when the problem is not one (float64,
// transposed, other ranks, unaligned buffers) or no engine takes it: the caller's legacy path runs
// then. Float32 through it instead of the legacy API on the H200 (exact float32 engines both):
// MobileNetV3-Large b1 1.08 -> 0.78 ms, ResNet-50 b1 2.50 -> 2.12 ms, b32 equal.
bool run_graph_conv(ConvPlan& p, const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* b,
                    const Tensor* residual, FusedActivation act, Tensor& y) {
  const size_t rank = g.win.in.size();
  if (g.transposed || (rank != 1 && rank != 2)) return false;
  cuda::ConvGraphArgs args{x.raw_data(), w.raw_data(), b ? b->raw_data() : nullptr,
                           residual ? residual->raw_data() : nullptr, y.raw_data()};
  if (!aligned16(args.x) || !aligned16(args.w) || !aligned16(args.y) || (b && !aligned16(args.bias)) ||
      (residual && !aligned16(args.residual))) {
    return false;
  }
  const bool relu = act == FusedActivation::Relu;
  if (p.graph && (p.graph->spec().bias != (b != nullptr) ||
                  (p.graph->spec().residual || p.residual_after) != (residual != nullptr) ||
                  (p.graph->spec().relu || (p.residual_after && relu)) != relu)) {
    p.graph.reset();  // the same node called with another set of inputs: build again
    p.graph_tried = false;
    p.residual_after = false;
  }
  if (!p.graph_tried) {
    p.graph_tried = true;
    cuda::ConvGraphSpec s;
    s.dtype = x.dtype();
    s.tf32 = p.tf32;
    s.channels_last = g.channels_last;
    s.n = g.batch;
    s.c = g.in_channels;
    // Axis i of the 2-D problem: the window's axis, or the unit height a 1-D problem gets.
    auto axis = [&](const Ints& v, int i, int64_t unit) { return rank == 2 ? v[size_t(i)] : i == 0 ? unit : v[0]; };
    s.h = axis(g.win.in, 0, 1);
    s.w = axis(g.win.in, 1, 1);
    s.k = g.out_channels;
    s.r = axis(g.win.kernel, 0, 1);
    s.s = axis(g.win.kernel, 1, 1);
    s.group = g.group;
    s.out_h = axis(g.win.out, 0, 1);
    s.out_w = axis(g.win.out, 1, 1);
    for (int i = 0; i < 2; ++i) {
      s.pad_begin[i] = axis(g.win.pad_begin, i, 0);
      s.pad_end[i] = axis(g.win.pad_end, i, 0);
      s.stride[i] = axis(g.win.strides, i, 1);
      s.dilation[i] = axis(g.win.dilations, i, 1);
    }
    s.bias = b != nullptr;
    // Exact float32 with a residual: no graph engine takes it, and the legacy API's fused call runs
    // cuDNN's oldest implicit GEMM (ResNet-50 fp32 b32: 160-230 us for each 1x1 convolution with a
    // residual, 1.3-2x the same products without one). The graph then computes the convolution and
    // bias, the epilogue kernel the residual and Relu (INGOT_CONV_RESIDUAL_AFTER=0: the legacy path).
    p.residual_after = residual && x.dtype() == DType::Float32 && !p.tf32 && flags::enabled("INGOT_CONV_RESIDUAL_AFTER");
    s.residual = residual != nullptr && !p.residual_after;
    s.relu = relu && !p.residual_after;
    const std::string key = fmt::format(
        "{}|{}{}|x={}|w={}|pads={}|stride={}|dil={}|g={}|{}|b={}|r={}|relu={}", cuda::arch_name(),
        dtype_name(x.dtype()), s.tf32 ? "|tf32" : "", shape_str(x.shape()), shape_str(w.shape()),
        shape_str(Ints{s.pad_begin[0], s.pad_begin[1], s.pad_end[0], s.pad_end[1]}), shape_str(g.win.strides),
        shape_str(g.win.dilations), g.group, g.channels_last ? "nhwc" : "nchw", int(s.bias), int(s.residual),
        int(s.relu));
    // A plan a background worker has queued or is building: this call on the cold tier, the plan
    // next time. A few calls at most: a queue no worker drains (one that failed to start) is then
    // taken over by build(), as without the cold tier.
    if (cuda::cold_kernels() == cuda::ColdKernels::WhilePreparing && p.cold_calls < kMaxColdCalls &&
        cuda::ConvGraph::being_built(key) && !cuda::capturing() && run_cold_conv(g, x, w, b, residual, act, y)) {
      ++p.cold_calls;
      p.graph_tried = false;
      return true;
    }
    p.graph = cuda::ConvGraph::build(s, args, key);
  }
  if (!p.graph) return false;
  if (p.residual_after) {
    cuda::ConvGraphArgs conv_only = args;
    conv_only.residual = nullptr;
    p.graph->run(conv_only);
    apply_epilogue(y, nullptr, residual, act, g.out_channels, g.channels_last);
    return true;
  }
  p.graph->run(args);
  if (act == FusedActivation::HardSwish) apply_epilogue(y, nullptr, nullptr, act, g.out_channels, g.channels_last);
  return true;
}

// A convolution cuDNN does not run: channels last as the fused channels-first op between transposes,
// channels first on the direct loops plus the epilogue.
void run_without_cudnn(KernelContext& ctx, const ConvGeometry& g, const Tensor* residual, FusedActivation act,
                       Tensor& y) {
  if (g.channels_last) {
    sem::fused_conv_by_transposes(ctx, y);
    return;
  }
  run_direct(g, ctx.input(0), ctx.input(1), y);
  apply_epilogue(y, ctx.has_input(2) ? &ctx.input(2) : nullptr, residual, act, g.out_channels);
}

void run_conv(KernelContext& ctx, const ConvGeometry& g, const Tensor* residual = nullptr,
              FusedActivation act = FusedActivation::None) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor& y = ctx.allocate(0, x.dtype(), output_shape(g));
  if (y.numel() == 0) return;
  if (x.numel() == 0 || w.numel() == 0) {
    // Nothing to accumulate (zero input channels): the output is the bias (then the epilogue).
    INGOT_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda::stream()));
    apply_epilogue(y, b, residual, act, g.out_channels, g.channels_last);
    return;
  }
  // cuDNN's fused bias + Relu: float32 only (16-bit channels last through it measured slower than
  // the convolution plus the epilogue kernel on the H200: docs/PERFORMANCE.md).
  const bool want_fused = !g.transposed && act == FusedActivation::Relu && x.dtype() == DType::Float32;
  if (run_depthwise_nhwc(g, x, w, b, residual, act, y) || run_depthwise_nchw(g, x, w, b, residual, act, y) ||
      cuda::run_split_k_conv(g, x, w, b, residual, act, y) || cuda::run_pointwise_conv(g, x, w, b, residual, act, y))
    return;
  if (cuda::cold_kernels() == cuda::ColdKernels::Always && run_cold_conv(g, x, w, b, residual, act, y)) return;
  static const bool direct_only = flags::enabled("INGOT_CONV_DIRECT");  // an experiment: docs/PERFORMANCE.md
  if (direct_only) return run_without_cudnn(ctx, g, residual, act, y);
  ConvPlan& p = find_plan(ctx, g, x, w, want_fused);
  if (run_graph_conv(p, g, x, w, b, residual, act, y)) return;
  if (!p.described) {  // only where the graph API did not take it (~80 us each on an H100)
    p.described = true;
    build_plan(p, g, x, w);
  }
  if (g.channels_last && !p.use_cudnn) {
    sem::fused_conv_by_transposes(ctx, y);
    return;
  }
  // The legacy API's first calls (exact float32 with a residual has no graph engine) while a package's
  // plans are still being prepared: on the cold tier, as the graph API's are, instead of choosing an
  // algorithm and loading cuDNN's legacy kernels in the first run (ResNet-50 fp32 on an H100: the
  // first of its 16 took 11 ms of the first run, the others 0.2-0.4 ms each).
  if (p.use_cudnn && !p.algo_chosen && p.cold_calls < kMaxColdCalls &&
      cuda::cold_kernels() == cuda::ColdKernels::WhilePreparing && !cuda::capturing() &&
      cuda::ConvGraph::preparing() && run_cold_conv(g, x, w, b, residual, act, y)) {
    ++p.cold_calls;
    return;
  }
  if (p.use_cudnn) {
    const Device dev = ctx.device();
    Tensor xin = x;
    if (p.pad_input) {
      xin = Tensor::empty(x.dtype(), p.x_tmp_shape, dev);
      cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(),
                                                   [&]<class T>() { window_copy<T>(x, xin, g.win.in, p.x_sp, p.pad_offset); });
    }
    Tensor yout = p.crop_output ? Tensor::empty(x.dtype(), p.y_tmp_shape, dev) : y;
    if (!p.algo_chosen) choose_algo(p, g.transposed, xin.raw_data(), w.raw_data(), yout.raw_data());
    if (p.use_cudnn) {
      void* ws = p.workspace > 0 ? cuda::workspace(p.workspace) : nullptr;
      const float one = 1.0f, zero = 0.0f;
      if (p.fused) {
        if (!b && !p.zero_bias.defined()) {
          p.zero_bias = Tensor::empty(x.dtype(), {g.out_channels}, dev);
          INGOT_CUDA_CHECK(cudaMemsetAsync(p.zero_bias.raw_data(), 0, p.zero_bias.nbytes(), cuda::stream()));
        }
        const float alpha2 = residual ? 1.0f : 0.0f;
        const void* z = residual ? residual->raw_data() : y.raw_data();
        const void* bias = b ? b->raw_data() : p.zero_bias.raw_data();
        cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
            cuda::cudnn(), &one, p.x_desc, xin.raw_data(), p.w_desc, w.raw_data(), p.conv_desc, p.fwd_algo, ws,
            p.workspace, &alpha2, p.y_desc, z, p.bias_desc, bias, p.act_desc, p.y_desc, y.raw_data());
        if (st == CUDNN_STATUS_SUCCESS) return;
        p.fused = false;  // not supported for this geometry: separate epilogue from now on
      }
      if (!g.transposed) {
        INGOT_CUDNN_CHECK(cudnnConvolutionForward(cuda::cudnn(), &one, p.x_desc, xin.raw_data(), p.w_desc,
                                                  w.raw_data(), p.conv_desc, p.fwd_algo, ws, p.workspace, &zero,
                                                  p.y_desc, yout.raw_data()));
      } else {
        INGOT_CUDNN_CHECK(cudnnConvolutionBackwardData(cuda::cudnn(), &one, p.w_desc, w.raw_data(), p.x_desc,
                                                       xin.raw_data(), p.conv_desc, p.bwd_algo, ws, p.workspace,
                                                       &zero, p.y_desc, yout.raw_data()));
      }
      if (p.crop_output) {
        cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(
            x.dtype(), [&]<class T>() { window_copy<T>(yout, y, p.y_sp, g.win.out, p.crop_offset); });
      }
      apply_epilogue(y, b, residual, act, g.out_channels, g.channels_last);
      return;
    }
  }
  run_without_cudnn(ctx, g, residual, act, y);  // cuDNN found no algorithm
}

// ---- ConvWeightGrad: cuDNN's backward-filter (legacy API), the direct kernel where cuDNN declines ----

// One thread per weight element: the sum over the batch and the output positions (a fallback).
template <class T>
__global__ void conv_weight_grad_direct_kernel(const T* x, const T* dy, T* dw, DirectParams p) {
  using A = compute_t<T>;
  const int64_t in_plane = p.in.v[0] * p.in.v[1] * p.in.v[2];
  const int64_t out_plane = p.out.v[0] * p.out.v[1] * p.out.v[2];
  const int64_t ksize = p.k.v[0] * p.k.v[1] * p.k.v[2];
  const int64_t icg = p.c / p.group, ocg = p.m / p.group;
  const int64_t total = p.m * icg * ksize;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t kw = i % p.k.v[2], kh = (i / p.k.v[2]) % p.k.v[1], kd = (i / (p.k.v[2] * p.k.v[1])) % p.k.v[0];
    const int64_t ic = (i / ksize) % icg, oc = i / (ksize * icg), grp = oc / ocg;
    A acc = A(0);
    for (int64_t n = 0; n < p.n; ++n) {
      const T* xp = x + (n * p.c + grp * icg + ic) * in_plane;
      const T* gp = dy + (n * p.m + oc) * out_plane;
      for (int64_t od = 0; od < p.out.v[0]; ++od) {
        const int64_t id = od * p.s.v[0] - p.pb.v[0] + kd * p.d.v[0];
        if (id < 0 || id >= p.in.v[0]) continue;
        for (int64_t oh = 0; oh < p.out.v[1]; ++oh) {
          const int64_t ih = oh * p.s.v[1] - p.pb.v[1] + kh * p.d.v[1];
          if (ih < 0 || ih >= p.in.v[1]) continue;
          for (int64_t ow = 0; ow < p.out.v[2]; ++ow) {
            const int64_t iw = ow * p.s.v[2] - p.pb.v[2] + kw * p.d.v[2];
            if (iw < 0 || iw >= p.in.v[2]) continue;
            acc += A(load(xp[(id * p.in.v[1] + ih) * p.in.v[2] + iw])) * A(load(gp[(od * p.out.v[1] + oh) * p.out.v[2] + ow]));
          }
        }
      }
    }
    dw[i] = store<T>(acc);
  }
}

// out[i] = in[i] converted (16-bit <-> float32), for the 16-bit weight gradients computed in float32.
template <class D, class S>
__global__ void convert_kernel(const S* in, D* out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = store<D>(float(load(in[i])));
}

struct WeightGradPlan {
  Shape x_shape, dy_shape;
  DType dtype = DType::Float32;
  bool tf32 = false;
  bool use_cudnn = false;
  // X copied into a zero-padded temporary when the pads are not symmetric (cuDNN's are).
  bool pad_input = false;
  Ints x_sp, pad_offset;
  Shape x_tmp_shape;
  cudnnTensorDescriptor_t x_desc = nullptr, dy_desc = nullptr;
  cudnnFilterDescriptor_t dw_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  cudnnConvolutionBwdFilterAlgo_t algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  size_t workspace = 0;

  WeightGradPlan() = default;
  WeightGradPlan(const WeightGradPlan&) = delete;
  WeightGradPlan& operator=(const WeightGradPlan&) = delete;
  ~WeightGradPlan() {
    if (x_desc) cudnnDestroyTensorDescriptor(x_desc);
    if (dy_desc) cudnnDestroyTensorDescriptor(dy_desc);
    if (dw_desc) cudnnDestroyFilterDescriptor(dw_desc);
    if (conv_desc) cudnnDestroyConvolutionDescriptor(conv_desc);
  }
};
struct WeightGradState {
  std::unique_ptr<WeightGradPlan> plan;
};

// Descriptors and cuDNN's first ranked algorithm that fits (exact float32 unless TF32 is allowed);
// use_cudnn stays false when cuDNN cannot express the problem.
void build_weight_grad_plan(WeightGradPlan& p, const ConvGeometry& g, DType dtype, const Tensor& dy, const Shape& dws) {
  const Window& win = g.win;
  const size_t nd = win.in.size();
  Ints pads(nd, 0);
  p.x_sp = win.in;
  p.pad_offset.assign(nd, 0);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t sym = std::min(win.pad_begin[i], win.pad_end[i]);
    const int64_t extra_b = win.pad_begin[i] - sym, extra_e = win.pad_end[i] - sym;
    pads[i] = sym;
    p.x_sp[i] = win.in[i] + extra_b + extra_e;
    p.pad_offset[i] = -extra_b;
    if (extra_b != 0 || extra_e != 0) p.pad_input = true;
  }
  p.x_tmp_shape = {g.batch, g.in_channels};
  p.x_tmp_shape.insert(p.x_tmp_shape.end(), p.x_sp.begin(), p.x_sp.end());
  std::vector<int64_t> all = p.x_tmp_shape;
  all.insert(all.end(), dy.shape().begin(), dy.shape().end());
  all.insert(all.end(), dws.begin(), dws.end());
  all.push_back(shape_numel(p.x_tmp_shape));
  all.push_back(dy.numel());
  if (!fits_int(all) || pads.size() > 3) return;
  const cudnnDataType_t t = cudnn_dtype(dtype);
  INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x_desc));
  INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.dy_desc));
  INGOT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.dw_desc));
  INGOT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv_desc));
  set_tensor(p.x_desc, t, cudnn_dims(g.batch, g.in_channels, p.x_sp));
  set_tensor(p.dy_desc, t, cudnn_dims(g.batch, g.out_channels, win.out));
  const std::vector<int> wd = cudnn_dims(dws[0], dws[1], win.kernel);
  INGOT_CUDNN_CHECK(cudnnSetFilterNdDescriptor(p.dw_desc, t, CUDNN_TENSOR_NCHW, int(wd.size()), wd.data()));
  const std::vector<int> cp = cudnn_spatial(pads, 0), cs = cudnn_spatial(win.strides, 1), cd = cudnn_spatial(win.dilations, 1);
  INGOT_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(p.conv_desc, int(cp.size()), cp.data(), cs.data(), cd.data(),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  INGOT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p.conv_desc, int(g.group)));
  // The forward of X with these weights must make dY's shape.
  std::vector<int> got(wd.size()), want = cudnn_dims(g.batch, g.out_channels, win.out);
  if (cudnnGetConvolutionNdForwardOutputDim(p.conv_desc, p.x_desc, p.dw_desc, int(got.size()), got.data()) !=
          CUDNN_STATUS_SUCCESS ||
      got != want)
    return;
  // The heuristics' ranking for the math this problem may use (exact float32: FMA, no TF32), then
  // the first algorithm that runs with it within the workspace limit.
  const bool exact = dtype == DType::Float32 && !p.tf32;
  INGOT_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv_desc, base_math(dtype, p.tf32)));
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int returned = 0;
  if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(cuda::cudnn(), p.x_desc, p.dy_desc, p.conv_desc, p.dw_desc,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf) !=
      CUDNN_STATUS_SUCCESS)
    return;
  for (int i = 0; i < returned; ++i) {
    const auto& c = perf[i];
    if (c.status != CUDNN_STATUS_SUCCESS) continue;
    const cudnnMathType_t math = exact ? CUDNN_FMA_MATH : c.mathType;
    size_t ws = 0;
    if (cudnnSetConvolutionMathType(p.conv_desc, math) != CUDNN_STATUS_SUCCESS ||
        cudnnGetConvolutionBackwardFilterWorkspaceSize(cuda::cudnn(), p.x_desc, p.dy_desc, p.conv_desc, p.dw_desc, c.algo,
                                                       &ws) != CUDNN_STATUS_SUCCESS ||
        ws > kFindWorkspaceBytes)
      continue;
    p.algo = c.algo;
    p.workspace = ws;
    p.use_cudnn = true;
    return;
  }
}

// dw = cuDNN's backward-filter of x and dy (all of the plan's dtype), X padded first where the
// pads are not symmetric.
void run_weight_grad(const WeightGradPlan& p, const ConvGeometry& g, const Tensor& x, const Tensor& dy, Tensor& dw,
                     Device device) {
  Tensor xin = x;
  if (p.pad_input) {
    xin = Tensor::empty(x.dtype(), p.x_tmp_shape, device);
    cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(),
                                                 [&]<class T>() { window_copy<T>(x, xin, g.win.in, p.x_sp, p.pad_offset); });
  }
  void* ws = p.workspace > 0 ? cuda::workspace(p.workspace) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  INGOT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cuda::cudnn(), &one, p.x_desc, xin.raw_data(), p.dy_desc, dy.raw_data(),
                                                   p.conv_desc, p.algo, ws, p.workspace, &zero, p.dw_desc, dw.raw_data()));
}

// dst = src converted to dst's dtype (same shape, on the device).
void copy_converted(const Tensor& src, Tensor& dst) {
  if (src.numel() == 0) return;
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(src.dtype(), [&]<class S>() {
    cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(dst.dtype(), [&]<class D>() {
      convert_kernel<D, S><<<blocks_for(src.numel()), kThreads, 0, cuda::stream()>>>(cuda::ptr<const S>(src),
                                                                                    cuda::ptr<D>(dst), src.numel());
      INGOT_CUDA_LAUNCH_CHECK();
    });
  });
}
Tensor converted(const Tensor& t, DType to) {
  Tensor out = Tensor::empty(to, t.shape(), t.device());
  copy_converted(t, out);
  return out;
}

void conv_weight_grad_kernel(KernelContext& ctx) {
  const ConvGeometry g = sem::conv_weight_grad_geometry(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  const Shape dws = sem::weight_grad_shape(g);
  Tensor& dw = ctx.allocate(0, x.dtype(), dws);
  if (dw.numel() == 0) return;
  if (x.numel() == 0 || dy.numel() == 0) {
    INGOT_CUDA_CHECK(cudaMemsetAsync(dw.raw_data(), 0, dw.nbytes(), cuda::stream()));
    return;
  }
  // widen 1 (autograd's choice under INGOT_CONV_WGRAD_16BIT=2): 16-bit inputs computed in float32 with
  // TF32 tensor cores (no less precise than the inputs); measured a little slower than cuDNN's 16-bit
  // backward-filter on the H200 (ResNet-50 bf16 step at batch 128: 238 against 229 ms).
  const bool widen = ctx.attr_int("widen") != 0 && (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16);
  const DType compute = widen ? DType::Float32 : x.dtype();
  auto& state = ctx.state<WeightGradState>();
  const bool tf32 = widen || (x.dtype() == DType::Float32 && cuda::allow_tf32());
  WeightGradPlan* p = state.plan.get();
  if (!p || p->x_shape != x.shape() || p->dy_shape != dy.shape() || p->dtype != compute || p->tf32 != tf32) {
    state.plan = std::make_unique<WeightGradPlan>();
    p = state.plan.get();
    p->x_shape = x.shape();
    p->dy_shape = dy.shape();
    p->dtype = compute;
    p->tf32 = tf32;
    build_weight_grad_plan(*p, g, compute, dy, dws);
  }
  if (p->use_cudnn && widen) {
    const Tensor x32 = converted(x, DType::Float32), dy32 = converted(dy, DType::Float32);
    Tensor dw32 = Tensor::empty(DType::Float32, dws, ctx.device());
    run_weight_grad(*p, g, x32, dy32, dw32, ctx.device());
    copy_converted(dw32, dw);
    return;
  }
  if (p->use_cudnn) {
    run_weight_grad(*p, g, x, dy, dw, ctx.device());
    return;
  }
  const DirectParams d = direct_params(g);
  cuda::dispatch_device<INGOT_CUDA_CONV_TYPES>(x.dtype(), [&]<class T>() {
    conv_weight_grad_direct_kernel<T><<<blocks_for(dw.numel()), kThreads, 0, cuda::stream()>>>(
        cuda::ptr<const T>(x), cuda::ptr<const T>(dy), cuda::ptr<T>(dw), d);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

void conv_kernel(KernelContext& ctx) { run_conv(ctx, conv_geometry(ctx)); }
void conv_transpose_kernel(KernelContext& ctx) { run_conv(ctx, conv_transpose_geometry(ctx)); }

void fused_conv_kernel(KernelContext& ctx) {
  const ConvGeometry g = conv_geometry(ctx);
  const sem::FusedConvArgs args = sem::fused_conv_args(ctx, g);
  run_conv(ctx, g, args.residual, args.act);
}

}  // namespace

INGOT_CUDA_KERNEL(Conv, conv_kernel).versions(1).dtypes({INGOT_CUDA_CONV_TYPES}).eager_state();
INGOT_CUDA_KERNEL(ConvTranspose, conv_transpose_kernel).versions(1).dtypes({INGOT_CUDA_CONV_TYPES}).eager_state();
INGOT_CUDA_KERNEL(FusedConv, fused_conv_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_CONV_TYPES});
INGOT_CUDA_KERNEL(ConvWeightGrad, conv_weight_grad_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_CONV_TYPES}).eager_state();

}  // namespace ingot
