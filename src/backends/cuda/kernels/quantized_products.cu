// Int8 convolutions and matrix products on the GPU: ai.ingot.QuantizedConv / QuantizedMatMul (what
// fuse-qdq makes of a QDQ model) and ONNX's QLinearConv / QLinearMatMul, computing the math of
// ops/semantics/quantized_args.h. Five ways, fastest first:
//
//   1. Convolutions channels last with int8 X at zero point 0 and int8 W at zero points 0 (the
//      symmetric quantization TensorRT also requires: `ingot quantize --symmetric`), group 1:
//      an implicit GEMM of Ingot's own on the int8 tensor cores (mma.sync m16n8k32), the whole
//      epilogue in the kernel (INGOT_INT8_IMMA; below).
//      Stem convolutions (fewer than 16 input channels: an image's 3) first gather their taps
//      into a [N, OH, OW, R S C] matrix (im2col) and run as a 1x1 convolution on path 1 or 2,
//      instead of padding each tap's channels to 16 (INGOT_INT8_STEM; below).
//   2. The same convolutions through cuDNN's int8 convolution, with the requantization as
//      pointwise steps of one operation graph (cudnn_conv_graph.h), when the epilogue is what those
//      steps express (bias, residual, Relu or a [0, hi] clip; the output int8 at zero point 0, or
//      float32). Otherwise cuDNN writes the real value (float32) and the epilogue kernel here
//      finishes it (residual, the activation and epilogue chain, requantization).
//   3. Matrix products with int8 W at zero point 0: cuBLASLt's int8 GEMM into int32 (X shifted to
//      int8 when it is uint8; X's zero point subtracted per column through W's column sums:
//      sum (x - zx) w = sum x w - zx * sum w), then the epilogue kernel.
//   4. Depthwise convolutions channels last (3x3 or 5x5, stride 1 or 2 along W, channels a multiple
//      of 8, int8 W; any zero points): a vectorized kernel of Ingot's own, like the fp16 one in conv.cu
//      (INGOT_INT8_DEPTHWISE=0: the direct kernel instead).
//   5. Everything else (asymmetric weights, uint8 activations of convolutions, groups, channels
//      first, what cuDNN refuses): a direct kernel, one thread per output, int32 accumulation, the
//      whole epilogue. Correct for every case the CPU takes; not fast.
//
// The scalar parameters (scales, zero points) are host inputs: fixed per package, so the derived
// per-channel vectors are uploaded once per node (again only when they change: dynamic
// quantization's X scale comes from the graph, read on the host at every call).
#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/cudnn_conv_graph.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/quantized_products.h"
#include "backends/cuda/kernels/shared_memory_opt_in.cuh"
#include "backends/cuda/kernels/tensor_core.cuh"
#include "core/flags.h"
#include "ops/kernel.h"
#include "ops/semantics/quantized_args.h"

namespace ingot::cuda {
namespace {

using sem::EpilogueStep;
using sem::QuantizedProductArgs;

constexpr int kMaxSteps = 16;

struct DeviceStep {
  EpilogueStep::Kind kind;
  float a, b;
};

enum class Residual : uint8_t { None, UInt8, Int8, Float32 };

// The epilogue (quantized_args.h) as a kernel parameter. The accumulator's part (multiplier, bias,
// column sums) applies to int32 accumulators; values cuDNN already scaled skip it.
struct Epilogue {
  const float* multiplier = nullptr;   // [channels]: x_scale * w_scale[c]
  const int32_t* bias = nullptr;       // [channels] added to the accumulator, or null
  const float* float_bias = nullptr;   // [channels] added to the real value, or null
  const int32_t* column_sums = nullptr;  // [channels]: acc -= x_offset * column_sums[c], or null
  int32_t x_offset = 0;
  const void* residual = nullptr;
  Residual r_kind = Residual::None;
  float r_scale = 1, r_zp = 0;
  DeviceStep steps[kMaxSteps];
  int n_steps = 0;
  float y_scale = 1, y_zp = 0;
  int64_t channels = 1, inner = 1;  // element i's channel: (i / inner) % channels
};

__device__ __forceinline__ float apply_step(const DeviceStep& s, float v) {
  using K = EpilogueStep::Kind;
  switch (s.kind) {
    case K::Relu: return v < 0 ? s.a * v : v;
    case K::HardSwish: return v * fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f);
    case K::Sigmoid: return 1.0f / (1.0f + expf(-v));
    case K::Tanh: return tanhf(v);
    case K::Exp: return expf(v);
    case K::Abs: return fabsf(v);
    case K::Sqrt: return sqrtf(v);
    case K::Linear: return s.a * v + s.b;
    case K::Clip: return fminf(fmaxf(v, s.a), s.b);
  }
  return v;
}

// The real value of accumulator `acc` of channel c (before the residual).
__device__ __forceinline__ float real_of(const Epilogue& e, int64_t c, int32_t acc) {
  if (e.bias) acc += e.bias[c];
  if (e.column_sums) acc -= e.x_offset * e.column_sums[c];
  float real = float(acc) * e.multiplier[c];
  if (e.float_bias) real += e.float_bias[c];
  return real;
}

// Output element i from its real value (before the residual): the residual, the steps, and the
// requantization (or the real value for a float32 Y).
template <class Y>
__device__ __forceinline__ Y finished(const Epilogue& e, float real, int64_t i) {
  switch (e.r_kind) {
    case Residual::None: break;
    case Residual::UInt8: real += e.r_scale * (float(static_cast<const uint8_t*>(e.residual)[i]) - e.r_zp); break;
    case Residual::Int8: real += e.r_scale * (float(static_cast<const int8_t*>(e.residual)[i]) - e.r_zp); break;
    case Residual::Float32: real += static_cast<const float*>(e.residual)[i]; break;
  }
  for (int s = 0; s < e.n_steps; ++s) real = apply_step(e.steps[s], real);
  if constexpr (std::is_same_v<Y, float>) {
    return real;
  } else {
    constexpr float lo = std::is_same_v<Y, uint8_t> ? 0.0f : -128.0f, hi = std::is_same_v<Y, uint8_t> ? 255.0f : 127.0f;
    const float q = rintf(real / e.y_scale) + e.y_zp;  // round half to even, as QuantizeLinear
    return Y(q != q ? e.y_zp : fminf(fmaxf(q, lo), hi));
  }
}

template <class Y>
__device__ __forceinline__ void finish(const Epilogue& e, float real, int64_t i, Y* y) {
  y[i] = finished<Y>(e, real, i);
}

// Y from int32 accumulators (kFromInt) or from real values cuDNN computed.
template <bool kFromInt, class Acc, class Y>
__global__ void epilogue_kernel(const Acc* __restrict__ acc, Y* __restrict__ y, int64_t n, Epilogue e) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / e.inner) % e.channels;
    float real;
    if constexpr (kFromInt) real = real_of(e, c, acc[i]);
    else real = acc[i];
    finish(e, real, i, y);
  }
}

// The geometry of a 1-D or 2-D convolution (1-D as height 1).
struct ConvDims {
  int64_t n, c, h, w, k, r, s, oh, ow, group;
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  bool nhwc;
};

template <class X, class W, class Y>
__global__ void direct_conv_kernel(const X* __restrict__ x, const W* __restrict__ w, Y* __restrict__ y,
                                   ConvDims d, int32_t x_zp, const int32_t* __restrict__ w_zp, Epilogue e) {
  const int64_t total = d.n * d.k * d.oh * d.ow;
  const int64_t cg = d.c / d.group, kg = d.k / d.group;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, k, oy, ox;
    if (d.nhwc) {
      k = i % d.k;
      ox = (i / d.k) % d.ow;
      oy = (i / (d.k * d.ow)) % d.oh;
      n = i / (d.k * d.ow * d.oh);
    } else {
      ox = i % d.ow;
      oy = (i / d.ow) % d.oh;
      k = (i / (d.ow * d.oh)) % d.k;
      n = i / (d.ow * d.oh * d.k);
    }
    const int64_t c0 = (k / kg) * cg;
    const int32_t wz = w_zp[k];
    int32_t acc = 0;
    for (int64_t ky = 0; ky < d.r; ++ky) {
      const int64_t iy = oy * d.stride_h - d.pad_h + ky * d.dil_h;
      if (iy < 0 || iy >= d.h) continue;  // padding is the zero point: contributes nothing
      for (int64_t kx = 0; kx < d.s; ++kx) {
        const int64_t ix = ox * d.stride_w - d.pad_w + kx * d.dil_w;
        if (ix < 0 || ix >= d.w) continue;
        for (int64_t cc = 0; cc < cg; ++cc) {
          const int64_t xi = d.nhwc ? ((n * d.h + iy) * d.w + ix) * d.c + c0 + cc
                                    : ((n * d.c + c0 + cc) * d.h + iy) * d.w + ix;
          const int64_t wi = d.nhwc ? ((k * d.r + ky) * d.s + kx) * cg + cc : ((k * cg + cc) * d.r + ky) * d.s + kx;
          acc += (int32_t(x[xi]) - x_zp) * (int32_t(w[wi]) - wz);
        }
      }
    }
    finish(e, real_of(e, k, acc), i, y);
  }
}

// The lean epilogue (an int8 Y at zero point 0; bias, an int8 residual, Relu or a [0, hi] clip:
// what path 2's fused cuDNN graph also takes; for the depthwise and pointwise kernels also
// HardSwish), in output units: y = sat(rint(clamp(acc * scale[c] + bias[c] + rq * R))). A few
// instructions per output where the generic one (real_of + finished) costs ~150, most of the first
// kernel's time (docs/QUANTIZATION.md).
struct LeanEpilogue {
  const float* scale = nullptr;  // [K]: x_scale w_scale[c] / y_scale
  const float* bias = nullptr;   // [K]: bias[c] x_scale w_scale[c] / y_scale - rq r_zp
  const int8_t* residual = nullptr;
  float rq = 0;                  // r_scale / y_scale
  float lo = -128, hi = 127;     // the activation's clamp in output units, within int8's range
  bool vec16 = false;            // K a multiple of 16, Y and the residual 16-byte aligned: 16 channels a step
  // > 0: HardSwish before the clamp, y_scale / 6: u x clamp(u y_scale / 6 + 1/2, 0, 1) in output
  // units u (apply_step's form). Only where the caller asked lean_epilogue for it (the depthwise
  // and pointwise kernels); the implicit GEMM does not compute it.
  float hardswish = 0;
};

// The epilogue's conversions without I2F / F2I, which issue at a quarter of the ALU rate on sm_90 (16 a
// clock per SM) and bound the first versions of the pointwise kernel (three per output with a
// residual: ~1,500 clocks a 128 x 64 tile). Each is exact:
// an accumulator |v| <= 2^22 (K <= 256 products of int8 by int8, |x w| <= 2^14) added
// to 1.5 x 2^23's bits lands in its mantissa, and subtracting 1.5 x 2^23 leaves v;
template <bool kSmallK>
__device__ __forceinline__ float accumulator_to_float(int32_t v) {
  if constexpr (kSmallK) return __int_as_float(v + 0x4B400000) - 12582912.0f;
  return float(v);
}
// byte I of `r` (int8) biased to unsigned, under 2^23's exponent, is 2^23 + 128 + r;
template <int I>
__device__ __forceinline__ float int8_byte_to_float(uint32_t r) {
  return __int_as_float(__byte_perm(r ^ 0x80808080u, 0x4B000000u, 0x7540 | I)) - 8388736.0f;
}
// and a value already within [-128, 127] plus 1.5 x 2^23 rounds to the nearest integer, ties to even
// (what __float2int_rn does), two's complement in its low byte.
__device__ __forceinline__ uint32_t float_to_int8_bits(float f) { return uint32_t(__float_as_int(f + 12582912.0f)); }

// The lean epilogue of four neighbouring channels' accumulators (|acc| <= 2^22: the exact add
// conversion), their scale and bias, their residual bytes `r` (read only with lean.residual): the
// four int8 outputs as one word.
__device__ __forceinline__ uint32_t lean_finish4(int32_t a0, int32_t a1, int32_t a2, int32_t a3, float4 sc, float4 bi,
                                                 uint32_t r, const LeanEpilogue& lean) {
  float f[4] = {fmaf(accumulator_to_float<true>(a0), sc.x, bi.x), fmaf(accumulator_to_float<true>(a1), sc.y, bi.y),
                fmaf(accumulator_to_float<true>(a2), sc.z, bi.z), fmaf(accumulator_to_float<true>(a3), sc.w, bi.w)};
  if (lean.residual) {
    f[0] = fmaf(lean.rq, int8_byte_to_float<0>(r), f[0]);
    f[1] = fmaf(lean.rq, int8_byte_to_float<1>(r), f[1]);
    f[2] = fmaf(lean.rq, int8_byte_to_float<2>(r), f[2]);
    f[3] = fmaf(lean.rq, int8_byte_to_float<3>(r), f[3]);
  }
  uint32_t b[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (lean.hardswish > 0) f[k] *= fminf(fmaxf(fmaf(f[k], lean.hardswish, 0.5f), 0.0f), 1.0f);
    b[k] = float_to_int8_bits(fminf(fmaxf(f[k], lean.lo), lean.hi));
  }
  return __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040), 0x5410);
}

// Path 4: a depthwise 2-D convolution channels last (one filter per channel). A thread computes OX
// neighbouring output columns of V = 16 channels: the (OX - 1) * SW + KW input vectors of a row are
// 16-byte loads, each used for every output and tap that reads it (the fp16 kernel's scheme,
// conv.cu); columns outside the input read as X's zero point, so they add nothing. The block's
// weights are staged tap-major in shared memory as int16 with W's zero points taken off, so the
// inner loop is int32 multiply-adds of (x - x_zp) and w'. The epilogue is the other paths' (finish),
// or with kLean (INGOT_INT8_DEPTHWISE_LEAN) the lean one, four channels a step with the conversions
// above, and the weights staged eight loads in flight per thread.
// Why kLean (twenty-fifth session's per-node profile of MobileNetV3-Large int8 b32 on an H100): the
// depthwise layers took 575 of its ~1,700 us of node time, e.g. features.3's 72 channels at 56 x 56,
// 7.2 M outputs, 62 us for ~14 MB of traffic: the generic epilogue's ~150 instructions an output
// (1.1 G at 7.2 M outputs, ~37 us of issue); and features.13-15's 5 x 5 layers on 960 channels at
// 7 x 7, 47 us each for 1.5 M outputs: each block of 7 output pixels first stages 512 channels x 25
// taps of weights, one dependent global load at a time, ~57 per thread.
struct DepthwiseDims {
  int n, h, w, c, oh, ow, kh, sh, ph, pw;
};

template <class X, class W, class Y, int KW, int SW, int OX, int V, bool kLean = false>
__global__ void __launch_bounds__(256)
    depthwise_nhwc_kernel(const X* __restrict__ x, const W* __restrict__ w, Y* __restrict__ y, DepthwiseDims p,
                          int32_t x_zp, const int32_t* __restrict__ w_zp, Epilogue e, LeanEpilogue lean) {
  static_assert(V == 16 || V == 8, "16 channels per 16-byte load, or 8 per 8-byte load");
  static_assert(!kLean || std::is_same_v<Y, int8_t>, "the lean epilogue writes int8");
  using Load = std::conditional_t<V == 16, uint4, uint2>;
  constexpr int NIN = (OX - 1) * SW + KW;
  extern __shared__ uint4 depthwise_int8_smem[];
  int16_t* ws = reinterpret_cast<int16_t*>(depthwise_int8_smem);  // [kh * KW][group]
  const int group = int(blockDim.x) * V, cbase = int(blockIdx.x) * group;
  const int taps = p.kh * KW, channels = min(group, p.c - cbase);
  const int tid = int(threadIdx.y * blockDim.x + threadIdx.x), nthreads = int(blockDim.x * blockDim.y);
  // The group's weights are contiguous; kBatch loads a thread in flight before their stores.
  constexpr int kBatch = kLean ? 8 : 1;
  for (int i0 = tid; i0 < channels * taps; i0 += nthreads * kBatch) {
    int32_t wv[kBatch];
    int at[kBatch];  // where weight i goes: tap-major; -1 past the group's weights
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = i0 + b * nthreads, c = i / taps;
      at[b] = i < channels * taps ? (i - c * taps) * group + c : -1;
      wv[b] = at[b] >= 0 ? int32_t(w[size_t(cbase) * taps + i]) - w_zp[cbase + c] : 0;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (at[b] >= 0) ws[at[b]] = int16_t(wv[b]);
    }
  }
  __syncthreads();
  const int c0 = cbase + int(threadIdx.x) * V;
  const int ox0 = (int(blockIdx.y) * int(blockDim.y) + int(threadIdx.y)) * OX;
  const int n = int(blockIdx.z) / p.oh, oy = int(blockIdx.z) % p.oh;
  if (c0 >= p.c || ox0 >= p.ow) return;
  int32_t acc[OX][V];
#pragma unroll
  for (int o = 0; o < OX; ++o) {
#pragma unroll
    for (int v = 0; v < V; ++v) acc[o][v] = 0;
  }
  const uint32_t zp4 = 0x01010101u * uint32_t(uint8_t(x_zp));  // four bytes of X's zero point
  Load padding;
  if constexpr (V == 16) {
    padding = make_uint4(zp4, zp4, zp4, zp4);
  } else {
    padding = make_uint2(zp4, zp4);
  }
  const int ix0 = ox0 * SW - p.pw;
  for (int ky = 0; ky < p.kh; ++ky) {
    const int iy = oy * p.sh - p.ph + ky;
    if (iy < 0 || iy >= p.h) continue;  // a padding row: (x - x_zp) is 0 throughout
    const X* row = x + (size_t(n) * p.h + iy) * p.w * p.c + c0;
    Load in[NIN];
#pragma unroll
    for (int j = 0; j < NIN; ++j) {
      const int ix = ix0 + j;
      in[j] = ix >= 0 && ix < p.w ? *reinterpret_cast<const Load*>(row + size_t(ix) * p.c) : padding;
    }
#pragma unroll
    for (int kx = 0; kx < KW; ++kx) {
      const int16_t* wk = ws + (ky * KW + kx) * group + int(threadIdx.x) * V;
      int32_t wv[V];
#pragma unroll
      for (int v = 0; v < V; ++v) wv[v] = wk[v];
#pragma unroll
      for (int o = 0; o < OX; ++o) {
        const X* iv = reinterpret_cast<const X*>(&in[o * SW + kx]);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[o][v] += (int32_t(iv[v]) - x_zp) * wv[v];
      }
    }
  }
  // Each column's V outputs stored whole, 16 or 8 bytes at a time. With byte-wide stores (int8
  // outputs a channel vector apart across a warp) the stride-1 layers ran 2-6x slower than the fp16
  // kernel on the H200 (docs/QUANTIZATION.md has the measurements).
  using Store = std::conditional_t<(V * sizeof(Y)) % 16 == 0, uint4, uint2>;
  constexpr int kStores = int(V * sizeof(Y) / sizeof(Store));
  if constexpr (kLean) {
    // |acc| <= 25 taps x 255 x 255 < 2^22: the exact add conversion. Four channels a step: their
    // scale and bias as float4 (c0 is a multiple of 8), the residual's and the output's as a word.
#pragma unroll
    for (int o = 0; o < OX; ++o) {
      if (ox0 + o >= p.ow) break;
      const int64_t out = ((int64_t(n) * p.oh + oy) * p.ow + ox0 + o) * p.c + c0;
      Load r{};
      if (lean.residual) r = *reinterpret_cast<const Load*>(lean.residual + out);
      const uint32_t* rw = reinterpret_cast<const uint32_t*>(&r);
      Load packed;
      uint32_t* pw = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
      for (int q = 0; q < V / 4; ++q) {
        const float4 sc = *reinterpret_cast<const float4*>(lean.scale + c0 + 4 * q);
        const float4 bi = *reinterpret_cast<const float4*>(lean.bias + c0 + 4 * q);
        pw[q] = lean_finish4(acc[o][4 * q], acc[o][4 * q + 1], acc[o][4 * q + 2], acc[o][4 * q + 3], sc, bi, rw[q],
                             lean);
      }
      *reinterpret_cast<Load*>(y + out) = packed;
    }
    return;
  }
#pragma unroll
  for (int o = 0; o < OX; ++o) {
    if (ox0 + o >= p.ow) break;
    const int64_t out = ((int64_t(n) * p.oh + oy) * p.ow + ox0 + o) * p.c + c0;
    float real[V];
#pragma unroll
    for (int v = 0; v < V; ++v) real[v] = real_of(e, c0 + v, acc[o][v]);
    Store packed[kStores];
    Y* values = reinterpret_cast<Y*>(packed);
    // The residual, the steps and the requantization are in the code once per column, not V times:
    // unrolled over every output (64 copies at OX 4, V 16) they made each of the 96 instantiations
    // cost ~2 s of nvcc, and the implicit GEMM's epilogue ran 3-5x slower when unrolled that way.
#pragma unroll 1
    for (int v = 0; v < V; ++v) values[v] = finished<Y>(e, real[v], out + v);
    Store* dst = reinterpret_cast<Store*>(y + out);
#pragma unroll
    for (int j = 0; j < kStores; ++j) dst[j] = packed[j];
  }
}

// Path 4 for the lean epilogue with int8 X (INGOT_INT8_DEPTHWISE_DP2A): the same convolution with
// two taps of a channel per instruction. The kernel above multiplies each (x, w) pair with its own
// IMAD after extracting the byte, and holds OX x 16 int32 accumulators, 16-byte input vectors and the
// extracted operands: 170-220 registers at 16 channels (ptxas), so 8 warps an SM, and MobileNetV3's
// 5 x 5 layers took 36-37 us each at batch 32 on an H100 (ncu) for ~3 M outputs, ~7x their issue
// and traffic bounds. Here a thread owns one 32-bit word of X (4 channels) and OX output columns:
// from the input words j and j + 1 of a row, one `prmt` gathers (x_j, x_j+1) of channels 0 and 1,
// another of channels 2 and 3, and `dp2a` multiplies such a byte pair by the int16 pair of the
// channel's taps (2q, 2q + 1) into its int32 accumulator (an odd window's last tap pairs with a
// zero weight). About 0.8 instructions per multiply-add instead of ~2.5, and ~60 registers.
// Weights are staged once per block as those int16 pairs, W's zero points taken off, with each
// row's sum, and a block then walks many (output row, strip of OX columns) items, so the staging
// is shared by them. X's zero point: padding columns read as it, and sum (x - x_zp) w is
// sum x w - x_zp (the row sums of the rows inside X); |accumulators| stay below 2^22 (25 taps x
// 255 x 255), as the lean epilogue's exact conversion needs.
template <int KW, int SW, int OX>
__global__ void __launch_bounds__(256)
    depthwise_dp2a_kernel(const int8_t* __restrict__ x, const int8_t* __restrict__ w, int8_t* __restrict__ y,
                          DepthwiseDims p, int32_t x_zp, const int32_t* __restrict__ w_zp, int strips, int items,
                          LeanEpilogue lean) {
  constexpr int kPairs = (KW + 1) / 2, kIn = (OX - 1) * SW + KW;
  extern __shared__ uint4 depthwise_dp2a_smem[];
  const int words = p.c / 4, gw = int(blockDim.x), wbase = int(blockIdx.x) * gw, nw = min(gw, words - wbase);
  uint4* pairs = depthwise_dp2a_smem;                               // [KW rows][kPairs][gw]
  int4* row_sums = reinterpret_cast<int4*>(pairs + KW * kPairs * gw);  // [KW rows][gw]
  const int tid = int(threadIdx.y * blockDim.x + threadIdx.x), nthreads = int(blockDim.x * blockDim.y);
  for (int e = tid; e < KW * nw; e += nthreads) {  // one (row, channel word) per thread: 4 x KW loads in flight
    const int ky = e / nw, wd = e - ky * nw;
    uint32_t pr[kPairs][4];
    int32_t sums[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = (wbase + wd) * 4 + j;
      const int8_t* wc = w + size_t(c) * KW * KW + ky * KW;
      const int32_t zp = w_zp[c];
      int32_t t[KW];
      sums[j] = 0;
#pragma unroll
      for (int kx = 0; kx < KW; ++kx) {
        t[kx] = int32_t(wc[kx]) - zp;
        sums[j] += t[kx];
      }
#pragma unroll
      for (int q = 0; q < kPairs; ++q)
        pr[q][j] = (uint32_t(t[2 * q]) & 0xffffu) | (2 * q + 1 < KW ? uint32_t(t[2 * q + 1]) << 16 : 0u);
    }
#pragma unroll
    for (int q = 0; q < kPairs; ++q) pairs[(ky * kPairs + q) * gw + wd] = make_uint4(pr[q][0], pr[q][1], pr[q][2], pr[q][3]);
    row_sums[ky * gw + wd] = make_int4(sums[0], sums[1], sums[2], sums[3]);
  }
  __syncthreads();
  const int tx = int(threadIdx.x);
  if (tx >= nw) return;  // no barrier follows
  const int cw = wbase + tx;
  const float4 sc = reinterpret_cast<const float4*>(lean.scale)[cw];
  const float4 bi = reinterpret_cast<const float4*>(lean.bias)[cw];
  const uint32_t* x32 = reinterpret_cast<const uint32_t*>(x);
  const uint32_t* r32 = reinterpret_cast<const uint32_t*>(lean.residual);
  uint32_t* y32 = reinterpret_cast<uint32_t*>(y);
  const uint32_t padding = 0x01010101u * uint32_t(uint8_t(x_zp));
  for (int item = int(blockIdx.y * blockDim.y + threadIdx.y); item < items; item += int(gridDim.y * blockDim.y)) {
    const int row = item / strips, ox0 = (item - row * strips) * OX;  // row: n * oh + oy
    const int n = row / p.oh, oy = row - n * p.oh, ix0 = ox0 * SW - p.pw;
    int32_t acc[OX][4];
#pragma unroll
    for (int o = 0; o < OX; ++o) acc[o][0] = acc[o][1] = acc[o][2] = acc[o][3] = 0;
    int32_t inside[4] = {0, 0, 0, 0};  // the row sums of the window rows inside X
#pragma unroll
    for (int ky = 0; ky < KW; ++ky) {
      const int iy = oy * p.sh - p.ph + ky;
      if (iy < 0 || iy >= p.h) continue;  // a padding row adds nothing and is not in `inside`
      const uint32_t* in_row = x32 + (size_t(n) * p.h + iy) * p.w * words + cw;
      uint32_t in[kIn + 1];
#pragma unroll
      for (int j = 0; j < kIn; ++j) {
        const int ix = ix0 + j;
        in[j] = ix >= 0 && ix < p.w ? __ldg(in_row + size_t(ix) * words) : padding;
      }
      in[kIn] = padding;  // the odd window's last pair: its second weight is 0
      const int4 rs = row_sums[ky * gw + tx];
      inside[0] += rs.x;
      inside[1] += rs.y;
      inside[2] += rs.z;
      inside[3] += rs.w;
#pragma unroll
      for (int q = 0; q < kPairs; ++q) {
        const uint4 wq = pairs[(ky * kPairs + q) * gw + tx];
#pragma unroll
        for (int o = 0; o < OX; ++o) {
          const int j = o * SW + 2 * q;
          const int lo = int(__byte_perm(in[j], in[j + 1], 0x5140));  // (x_j, x_j+1) of channels 0 and 1
          const int hi = int(__byte_perm(in[j], in[j + 1], 0x7362));  // of channels 2 and 3
          acc[o][0] = __dp2a_lo(int(wq.x), lo, acc[o][0]);
          acc[o][1] = __dp2a_hi(int(wq.y), lo, acc[o][1]);
          acc[o][2] = __dp2a_lo(int(wq.z), hi, acc[o][2]);
          acc[o][3] = __dp2a_hi(int(wq.w), hi, acc[o][3]);
        }
      }
    }
#pragma unroll
    for (int o = 0; o < OX; ++o) {
      if (ox0 + o >= p.ow) break;
      const size_t out = (size_t(row) * p.ow + ox0 + o) * words + cw;
      const uint32_t r = r32 ? r32[out] : 0u;
      y32[out] = lean_finish4(acc[o][0] - x_zp * inside[0], acc[o][1] - x_zp * inside[1], acc[o][2] - x_zp * inside[2],
                              acc[o][3] - x_zp * inside[3], sc, bi, r, lean);
    }
  }
}

// Path 1 (INGOT_INT8_IMMA): a convolution channels last as an implicit GEMM on the int8 tensor
// cores, of Ingot's own. C[m][k] = sum over (r, s, c) of X[pixel m shifted by (r, s)][c] W[k][r][s][c]:
// the rows of A are output pixels gathered from X on the fly, B is W as stored ([K][R S C], each
// output channel's weights contiguous), so both operands are K-contiguous, as mma.sync's
// row.col int8 product wants them. A block owns a BM x BN tile of C; the R S C dimension streams
// through shared memory 64 bytes at a time in kStages buffers (cp.async: the next tiles load while
// this one multiplies; taps in the padding zero-filled, which X's zero point 0 makes exact); each
// warp computes a WM x WN sub-tile with m16n8k32 products into int32 accumulators, fed by
// ldmatrix from rows XOR-swizzled so that eight rows of one 16-byte column hit distinct banks.
// The epilogue is the other paths' (real_of, finished) on each accumulator. Needs channels a
// multiple of 16 (a 16-byte copy never straddles two taps), X int8 at zero point 0, W int8 at zero
// points 0: the symmetric quantization cuDNN's int8 path also requires.
struct ImplicitGemmDims {
  int h, w, c, k, s, oh, ow, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int m, kdim;  // batch * oh * ow output pixels; r * s * c
};

constexpr int kImmaBK = 64, kImmaStages = 3;

// Rows of C the epilogue stages per pass: all BM if they fit the operand buffers, else fewer,
// whole warps' rows (wm) at a time.
constexpr int epilogue_pass_rows(int bm, int wm, int row_bytes, int buffer_bytes) {
  int rows = bm;
  while (rows > wm && (rows * row_bytes > buffer_bytes || bm % rows != 0)) rows -= wm;
  return rows;
}

// Byte offset of 16-byte column `chunk` (0..3) of row `row` in a tile of 64-byte rows.
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * kImmaBK + ((chunk ^ ((row >> 1) & 3)) << 4); }

// One 64-byte K block of a warp's MT x NT m16n8 tiles: A's rows from `as` (the warp's from row
// `row_a`), B's from `bs` (from row `row_b`), both swizzled 64-byte rows, int32 accumulators.
template <int MT, int NT>
__device__ __forceinline__ void multiply_k_block(int32_t (&acc)[MT][NT][4], const int8_t* as, const int8_t* bs,
                                                 int row_a, int row_b, int lane) {
  static_assert(NT % 2 == 0, "B's n-tiles come in pairs");
#pragma unroll
  for (int ks = 0; ks < kImmaBK / 32; ++ks) {
    uint32_t a[MT][4], b[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {  // matrices: rows 0-7 / 8-15 x bytes 0-15 / 16-31
      const int row = row_a + i * 16 + lane % 8 + ((lane / 8) % 2) * 8;
      ldmatrix_x4(a[i], as + swizzled(row, ks * 2 + lane / 16));
    }
#pragma unroll
    for (int j = 0; j < NT; j += 2) {  // matrices: n-tile j bytes 0-15 / 16-31, then n-tile j + 1
      const int row = row_b + j * 8 + lane % 8 + (lane / 16) * 8;
      uint32_t t[4];
      ldmatrix_x4(t, bs + swizzled(row, ks * 2 + (lane / 8) % 2));
      b[j][0] = t[0];
      b[j][1] = t[1];
      b[j + 1][0] = t[2];
      b[j + 1][1] = t[3];
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int j = 0; j < NT; ++j) mma16832_s8(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
}

template <class Y, int BM, int BN, int WARPS_M, int WARPS_N, bool kLean>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32)
    implicit_gemm_conv_kernel(const int8_t* __restrict__ x, const int8_t* __restrict__ w, Y* __restrict__ y,
                              ImplicitGemmDims d, Epilogue e, LeanEpilogue lean) {
  static_assert(!kLean || std::is_same_v<Y, int8_t>, "the lean epilogue writes int8");
  constexpr int kThreads = WARPS_M * WARPS_N * 32, WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MT = WM / 16, NT = WN / 8;  // m16 and n8 tiles per warp
  constexpr int kRowsPerPass = kThreads / 4;  // a tile row is four 16-byte chunks
  constexpr int AR = BM / kRowsPerPass, BR = BN / kRowsPerPass;
  static_assert(NT % 2 == 0 && AR >= 1 && BR >= 1, "tile shape");
  __shared__ __align__(128) int8_t smem[kImmaStages][(BM + BN) * kImmaBK];
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int m0 = int(blockIdx.x) * BM, n0 = int(blockIdx.y) * BN;
  const int chunk = tid % 4;

  // The rows this thread copies: output pixels of A (their first input position), channels of B.
  const int8_t* a_img[AR];
  int a_iy[AR], a_ix[AR];
#pragma unroll
  for (int i = 0; i < AR; ++i) {
    const int m = m0 + tid / 4 + i * kRowsPerPass;
    const int ox = m % d.ow, t = m / d.ow, oy = t % d.oh, img = t / d.oh;
    a_img[i] = x + int64_t(img) * d.h * d.w * d.c;
    a_iy[i] = m < d.m ? oy * d.stride_h - d.pad_h : INT_MIN / 2;  // a row past the end reads padding
    a_ix[i] = ox * d.stride_w - d.pad_w;
  }
  const int8_t* b_row[BR];
  bool b_ok[BR];
#pragma unroll
  for (int i = 0; i < BR; ++i) {
    const int n = n0 + tid / 4 + i * kRowsPerPass;
    b_ok[i] = n < d.k;
    b_row[i] = w + int64_t(b_ok[i] ? n : 0) * d.kdim;
  }

  auto load = [&](int stage, int kb) {
    const int kk = kb * kImmaBK + chunk * 16;
    const bool k_ok = kk < d.kdim;
    int c = 0, r = 0, s = 0;
    if (k_ok) {
      const int rs = kk / d.c;
      c = kk - rs * d.c;
      r = rs / d.s;
      s = rs - r * d.s;
    }
    int8_t* as = smem[stage];
    int8_t* bs = smem[stage] + BM * kImmaBK;
#pragma unroll
    for (int i = 0; i < AR; ++i) {
      const int iy = a_iy[i] + r * d.dil_h, ix = a_ix[i] + s * d.dil_w;
      const bool ok = k_ok && iy >= 0 && iy < d.h && ix >= 0 && ix < d.w;
      const int8_t* src = ok ? a_img[i] + (int64_t(iy) * d.w + ix) * d.c + c : x;
      cp_async16(as + swizzled(tid / 4 + i * kRowsPerPass, chunk), src, ok);
    }
#pragma unroll
    for (int i = 0; i < BR; ++i) {
      const bool ok = k_ok && b_ok[i];
      cp_async16(bs + swizzled(tid / 4 + i * kRowsPerPass, chunk), ok ? b_row[i] + kk : w, ok);
    }
  };

  int32_t acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
  }
  const int kblocks = (d.kdim + kImmaBK - 1) / kImmaBK;
#pragma unroll
  for (int st = 0; st < kImmaStages - 1; ++st) {
    if (st < kblocks) load(st, st);
    cp_async_commit();  // empty groups keep the count that cp_async_wait relies on
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<kImmaStages - 2>();  // block kb has landed (this thread's copies)...
    __syncthreads();                   // ...everyone's, and everyone is done with block kb - 1's buffer
    const int next = kb + kImmaStages - 1;
    if (next < kblocks) load(next % kImmaStages, next);
    cp_async_commit();
    multiply_k_block<MT, NT>(acc, smem[kb % kImmaStages], smem[kb % kImmaStages] + BM * kImmaBK, warp_m * WM,
                             warp_n * WN, lane);
  }
  cp_async_wait<0>();

  // The epilogue. A lane holds C rows lane / 4 and lane / 4 + 8 of each m16 tile, columns
  // 2 (lane % 4), + 1 of each n8 tile; the accumulators go through shared memory (the operand
  // buffers, free now), kPassRows rows at a time, and each thread then finishes four neighbouring
  // channels of a pixel per step. So the epilogue's code is there once (unrolled over every
  // fragment, as it first was, it was tens of KB of instructions and the kernel ran 3-5x slower
  // than cuDNN's int8 engines on an H100), and the residual's loads and Y's stores are coalesced.
  constexpr int LD = BN + 8;  // int32 row stride: a half-warp's 8-byte stores hit distinct banks
  constexpr int kPassRows = epilogue_pass_rows(BM, WM, LD * 4, kImmaStages * (BM + BN) * kImmaBK);
  static_assert(kPassRows >= WM && BM % kPassRows == 0, "whole warps' rows per pass");
  int32_t* tile = reinterpret_cast<int32_t*>(&smem[0][0]);
  struct alignas(4 * sizeof(Y)) Quad {
    Y v[4];
  };
  for (int row0 = 0; row0 < BM; row0 += kPassRows) {
    __syncthreads();  // the operands (first pass), or the previous pass, are done with
    if (warp_m * WM >= row0 && warp_m * WM < row0 + kPassRows) {
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = warp_m * WM - row0 + i * 16 + lane / 4 + half * 8;
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int col = warp_n * WN + j * 8 + (lane % 4) * 2;
            *reinterpret_cast<int2*>(tile + row * LD + col) = make_int2(acc[i][j][half * 2], acc[i][j][half * 2 + 1]);
          }
        }
      }
    }
    __syncthreads();
    if constexpr (kLean) {
      if (lean.vec16) {
        // 16 channels of a pixel per step: one 16-byte residual load and one 16-byte store, the
        // residual loads of all of a thread's steps issued before any of them is used (element by
        // element, each step waited for its own load: the latency, not the bandwidth, bounded
        // the memory-bound 1x1 layers).
        constexpr int kItems = kPassRows * (BN / 16), kSteps = (kItems + kThreads - 1) / kThreads;
        int4 res[kSteps];
#pragma unroll
        for (int it = 0; it < kSteps; ++it) {
          const int t = tid + it * kThreads, row = t / (BN / 16), m = m0 + row0 + row, n = n0 + (t % (BN / 16)) * 16;
          res[it] = make_int4(0, 0, 0, 0);
          if (lean.residual && t < kItems && m < d.m && n < d.k)
            res[it] = *reinterpret_cast<const int4*>(lean.residual + int64_t(m) * d.k + n);
        }
#pragma unroll
        for (int it = 0; it < kSteps; ++it) {
          const int t = tid + it * kThreads, row = t / (BN / 16), col = (t % (BN / 16)) * 16;
          const int m = m0 + row0 + row, n = n0 + col;
          if (t >= kItems || m >= d.m || n >= d.k) continue;
          const int32_t* acc_row = tile + row * LD + col;
          const int8_t* r = reinterpret_cast<const int8_t*>(&res[it]);
          int4 packed;
          int8_t* o = reinterpret_cast<int8_t*>(&packed);
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int4 v = *reinterpret_cast<const int4*>(acc_row + 4 * q);
            const float4 sc = *reinterpret_cast<const float4*>(lean.scale + n + 4 * q);
            const float4 bi = *reinterpret_cast<const float4*>(lean.bias + n + 4 * q);
            float f[4] = {fmaf(float(v.x), sc.x, bi.x), fmaf(float(v.y), sc.y, bi.y), fmaf(float(v.z), sc.z, bi.z),
                          fmaf(float(v.w), sc.w, bi.w)};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              if (lean.residual) f[j] = fmaf(lean.rq, float(r[4 * q + j]), f[j]);
              o[4 * q + j] = int8_t(__float2int_rn(fminf(fmaxf(f[j], lean.lo), lean.hi)));
            }
          }
          *reinterpret_cast<int4*>(y + int64_t(m) * d.k + n) = packed;
        }
        continue;
      }
    }
#pragma unroll 1
    for (int t = tid; t < kPassRows * (BN / 4); t += kThreads) {
      const int row = t / (BN / 4), col = (t % (BN / 4)) * 4;
      const int m = m0 + row0 + row, n = n0 + col;
      if (m >= d.m || n >= d.k) continue;
      const int4 v = *reinterpret_cast<const int4*>(tile + row * LD + col);
      const int64_t out = int64_t(m) * d.k + n;
      if constexpr (kLean) {
        if (n + 4 <= d.k && out % 4 == 0) {
          const float4 sc = *reinterpret_cast<const float4*>(lean.scale + n);
          const float4 bi = *reinterpret_cast<const float4*>(lean.bias + n);
          float f[4] = {fmaf(float(v.x), sc.x, bi.x), fmaf(float(v.y), sc.y, bi.y), fmaf(float(v.z), sc.z, bi.z),
                        fmaf(float(v.w), sc.w, bi.w)};
          if (lean.residual) {
            const char4 r = *reinterpret_cast<const char4*>(lean.residual + out);
            f[0] = fmaf(lean.rq, float(r.x), f[0]);
            f[1] = fmaf(lean.rq, float(r.y), f[1]);
            f[2] = fmaf(lean.rq, float(r.z), f[2]);
            f[3] = fmaf(lean.rq, float(r.w), f[3]);
          }
          char4 o;
          o.x = int8_t(__float2int_rn(fminf(fmaxf(f[0], lean.lo), lean.hi)));
          o.y = int8_t(__float2int_rn(fminf(fmaxf(f[1], lean.lo), lean.hi)));
          o.z = int8_t(__float2int_rn(fminf(fmaxf(f[2], lean.lo), lean.hi)));
          o.w = int8_t(__float2int_rn(fminf(fmaxf(f[3], lean.lo), lean.hi)));
          *reinterpret_cast<char4*>(y + out) = o;
          continue;
        }
#pragma unroll 1
        for (int c = 0; c < 4 && n + c < d.k; ++c) {
          const int32_t a = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
          float f = fmaf(float(a), lean.scale[n + c], lean.bias[n + c]);
          if (lean.residual) f = fmaf(lean.rq, float(lean.residual[out + c]), f);
          y[out + c] = Y(__float2int_rn(fminf(fmaxf(f, lean.lo), lean.hi)));
        }
        continue;
      }
      if (n + 4 <= d.k && out % 4 == 0) {
        Quad q;
        q.v[0] = finished<Y>(e, real_of(e, n, v.x), out);
        q.v[1] = finished<Y>(e, real_of(e, n + 1, v.y), out + 1);
        q.v[2] = finished<Y>(e, real_of(e, n + 2, v.z), out + 2);
        q.v[3] = finished<Y>(e, real_of(e, n + 3, v.w), out + 3);
        *reinterpret_cast<Quad*>(y + out) = q;
      } else {
#pragma unroll 1
        for (int c = 0; c < 4 && n + c < d.k; ++c) {
          const int32_t a = c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
          y[out + c] = finished<Y>(e, real_of(e, n + c, a), out + c);
        }
      }
    }
  }
}

// Path 1's pointwise form (INGOT_INT8_POINTWISE): 1x1 stride-1 convolutions channels last with the
// lean epilogue, Y[m][n] = lean(sum over c of X[m][c] W[n][c]) for the N H W pixels m. These layers
// are memory-bound (ResNet-50 int8 b32's layer1 conv3, 64 -> 256 with an int8 residual, moves ~58 MB
// in ~19 us at 3 TB/s; cuDNN's int8 engines take 52-55 us on an H100, the implicit GEMM above ~59),
// and bound by how many bytes are in flight: at K <= 128 a block of the implicit GEMM loads its one
// or two K blocks, multiplies, then loads its residual and finishes, serially.
// Here a block is persistent: it walks its tiles (BM x BN of Y, the output channels fastest) with the
// K blocks of all of them in one cp.async pipeline of kStages stages, and a tile's residual rows
// travel in the stage of its last K block, so they are requested kStages - 1 steps ahead like the
// operands (the first version loaded them into registers one tile ahead: 40 us for that layer on an
// H100, 38 this way; what holds both, by the instruction count, is the epilogue's conversions,
// below). Each warp finishes its own 32 x 32 piece in that stage's residual area without a block
// barrier: residual bytes read and outputs written over them in place from the mma fragments, then
// the rows stored as 16-byte pieces. The operand tiles, ldmatrix reads and
// mma.sync products are the implicit GEMM's (rows of A are pixels, contiguous here). Needs C and N
// multiples of 16, 16-byte aligned X, W, Y and residual.
struct PointwiseDims {
  int m, c, n;  // pixels, input channels (a multiple of 16), output channels (a multiple of 16)
};

template <int BM, int BN>
struct PointwiseTile {
  static constexpr int kStages = 4;
  static constexpr int kRowLd = BN + 16;  // residual/output row stride: fragment writes on distinct banks
  static constexpr int kA = BM * kImmaBK, kB = BN * kImmaBK, kR = BM * kRowLd;
  static constexpr int kStageBytes = kA + kB + kR;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static_assert(kStageBytes % 128 == 0 && kRowLd % 16 == 0, "stage layout");
};

template <int BM, int BN, int WARPS_M, int WARPS_N, bool kSmallK>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 2)
    pointwise_int8_kernel(const int8_t* __restrict__ x, const int8_t* __restrict__ w, int8_t* __restrict__ y,
                          PointwiseDims d, LeanEpilogue lean) {
  using Tile = PointwiseTile<BM, BN>;
  constexpr int kStages = Tile::kStages, kLd = Tile::kRowLd;
  constexpr int kThreads = WARPS_M * WARPS_N * 32, WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MT = WM / 16, NT = WN / 8;
  constexpr int kRowsPerPass = kThreads / 4;  // a 64-byte operand row is four 16-byte chunks
  constexpr int AR = BM / kRowsPerPass, BR = BN / kRowsPerPass;
  constexpr int kRChunks = BN / 16, kRRows = kThreads / kRChunks, RR = BM / kRRows;  // residual tile rows
  static_assert(WM == 32 && WN == 32 && AR >= 1 && BR >= 1 && RR >= 1 && BM % kRRows == 0,
                "a warp finishes a 32 x 32 piece");
  extern __shared__ __align__(128) int8_t smem[];
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N, chunk = tid % 4;
  const int ntiles = (d.n + BN - 1) / BN, tiles = ((d.m + BM - 1) / BM) * ntiles;
  const int my_tiles = int(blockIdx.x) < tiles ? (tiles - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  const int kblocks = (d.c + kImmaBK - 1) / kImmaBK, steps = my_tiles * kblocks;
  auto stage_at = [&](int q) { return smem + (q % kStages) * Tile::kStageBytes; };
  auto tile_origin = [&](int local, int& m0, int& n0) {
    const int t = int(blockIdx.x) + local * int(gridDim.x);
    m0 = (t / ntiles) * BM;
    n0 = (t % ntiles) * BN;
  };
  // Step q of this block: K block q % kblocks of its tile q / kblocks, and with the last K block
  // the tile's residual rows (zero-filled outside Y).
  auto load = [&](int q) {
    int m0 = 0, n0 = 0;
    tile_origin(q / kblocks, m0, n0);
    const int kb = q % kblocks, kk = kb * kImmaBK + chunk * 16;
    const bool k_ok = kk < d.c;
    int8_t* const as = stage_at(q);
    int8_t* const bs = as + Tile::kA;
#pragma unroll
    for (int i = 0; i < AR; ++i) {
      const int row = tid / 4 + i * kRowsPerPass, m = m0 + row;
      const bool ok = k_ok && m < d.m;
      cp_async16(as + swizzled(row, chunk), ok ? x + int64_t(m) * d.c + kk : x, ok);
    }
#pragma unroll
    for (int i = 0; i < BR; ++i) {
      const int row = tid / 4 + i * kRowsPerPass, n = n0 + row;
      const bool ok = k_ok && n < d.n;
      cp_async16(bs + swizzled(row, chunk), ok ? w + int64_t(n) * d.c + kk : w, ok);
    }
    if (lean.residual && kb == kblocks - 1) {
      int8_t* const rs = bs + Tile::kB;
      const int piece = (tid % kRChunks) * 16, n = n0 + piece;
#pragma unroll
      for (int i = 0; i < RR; ++i) {
        const int row = tid / kRChunks + i * kRRows, m = m0 + row;
        const bool ok = m < d.m && n < d.n;  // d.n is a multiple of 16: a piece is all in or all out
        cp_async16(rs + row * kLd + piece, ok ? lean.residual + int64_t(m) * d.n + n : lean.residual, ok);
      }
    }
  };
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < steps) load(st);
    cp_async_commit();  // empty groups keep the count that cp_async_wait relies on
  }
  const int g = lane / 4, t2 = (lane % 4) * 2;
  int q = 0;
  for (int local = 0; local < my_tiles; ++local) {
    int32_t acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    }
    for (int kb = 0; kb < kblocks; ++kb, ++q) {
      cp_async_wait<kStages - 2>();  // step q has landed (this thread's copies)...
      __syncthreads();               // ...everyone's, and everyone is done with step q - 1's stage
      if (q + kStages - 1 < steps) load(q + kStages - 1);
      cp_async_commit();
      multiply_k_block<MT, NT>(acc, stage_at(q), stage_at(q) + Tile::kA, warp_m * WM, warp_n * WN, lane);
    }

    // The warp's epilogue, in the residual area of the tile's last stage (not reloaded before the
    // next step's barrier, which every warp reaches after this). A lane holds rows g and g + 8 of
    // each m16 tile, columns t2 and t2 + 1 of each n8 tile.
    int m0 = 0, n0 = 0;
    tile_origin(local, m0, n0);
    int8_t* const rows = stage_at(q - 1) + Tile::kA + Tile::kB + (warp_m * WM) * kLd + warp_n * WN;
    const int wm0 = m0 + warp_m * WM, wn0 = n0 + warp_n * WN;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int col = j * 8 + t2, n = wn0 + col;
      if (n >= d.n) continue;  // d.n is a multiple of 16: a pair is all in or all out, as is its 16-byte piece
      const float2 sc = *reinterpret_cast<const float2*>(lean.scale + n);
      const float2 bi = *reinterpret_cast<const float2*>(lean.bias + n);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          uint16_t* const at = reinterpret_cast<uint16_t*>(rows + (i * 16 + g + half * 8) * kLd + col);
          float f0 = fmaf(accumulator_to_float<kSmallK>(acc[i][j][2 * half]), sc.x, bi.x);
          float f1 = fmaf(accumulator_to_float<kSmallK>(acc[i][j][2 * half + 1]), sc.y, bi.y);
          if (lean.residual) {
            const uint32_t r = *at;
            f0 = fmaf(lean.rq, int8_byte_to_float<0>(r), f0);
            f1 = fmaf(lean.rq, int8_byte_to_float<1>(r), f1);
          }
          if (lean.hardswish > 0) {
            f0 *= fminf(fmaxf(fmaf(f0, lean.hardswish, 0.5f), 0.0f), 1.0f);
            f1 *= fminf(fmaxf(fmaf(f1, lean.hardswish, 0.5f), 0.0f), 1.0f);
          }
          *at = uint16_t(__byte_perm(float_to_int8_bits(fminf(fmaxf(f0, lean.lo), lean.hi)),
                                     float_to_int8_bits(fminf(fmaxf(f1, lean.lo), lean.hi)), 0x0040));
        }
      }
    }
    __syncwarp();
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // piece p = lane + 32 h: row p / 2, bytes 16 (p % 2)
      const int p = lane + 32 * h, m = wm0 + p / 2, n = wn0 + (p % 2) * 16;
      if (m < d.m && n < d.n)
        *reinterpret_cast<int4*>(y + int64_t(m) * d.n + n) = *reinterpret_cast<const int4*>(rows + (p / 2) * kLd + (p % 2) * 16);
    }
  }
  cp_async_wait<0>();
}

// Y[m, n] for A [m, kk] and B [kk, n] (row-major).
template <class X, class W, class Y>
__global__ void direct_matmul_kernel(const X* __restrict__ a, const W* __restrict__ b, Y* __restrict__ y, int64_t m,
                                     int64_t kk, int64_t n, int32_t x_zp, const int32_t* __restrict__ w_zp, Epilogue e) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < m * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / n, col = i % n;
    const int32_t wz = w_zp[col];
    int32_t acc = 0;
    for (int64_t j = 0; j < kk; ++j) acc += (int32_t(a[row * kk + j]) - x_zp) * (int32_t(b[j * n + col]) - wz);
    finish(e, real_of(e, col, acc), i, y);
  }
}

// Matrix products of few rows (a classifier's batch: m <= kSmallRows) with int8 W at zero point 0,
// W stored transposed ([n, k], k a multiple of 16, rows 16-byte aligned): Y[r, c] = A[r, :] . Wt[c, :]
// by dp4a, the whole epilogue in the kernel. cuBLASLt's int8 GEMM tiles such a product with at most
// 64-row tiles of which one is used, and writes int32 accumulators for a second kernel to finish.
// Here a block owns kSmallCols columns and its kSmallWarps warps split K: warp w takes the 16-byte
// chunks w, w + kSmallWarps, ...; each lane one row (rows lane, lane + 32), so every lane reads the
// same 16 bytes of each W row (a broadcast) and its row's 16 bytes of A, and A is read once per
// block (kSmallCols columns) rather than once per column. The warps' partial sums meet in shared
// memory, and each thread finishes outputs with consecutive threads on consecutive columns. uint8 A
// (kUnsigned) is moved to int8 by flipping its top bits; the epilogue's column sums take the shift
// (e.x_offset).
constexpr int kSmallRows = 64, kSmallCols = 8, kSmallWarps = 8;

template <bool kUnsigned, class Y>
__global__ void __launch_bounds__(kSmallWarps * 32)
    small_matmul_kernel(const uint8_t* __restrict__ a, const int8_t* __restrict__ wt, Y* __restrict__ y, int m, int k,
                        int n, Epilogue e) {
  constexpr int kRowsPerLane = kSmallRows / 32;
  __shared__ int32_t partial[kSmallWarps][kRowsPerLane * 32][kSmallCols];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int c0 = int(blockIdx.x) * kSmallCols;
  int32_t acc[kRowsPerLane][kSmallCols] = {};
  const int4* w_rows[kSmallCols];
#pragma unroll
  for (int j = 0; j < kSmallCols; ++j) w_rows[j] = reinterpret_cast<const int4*>(wt + int64_t(min(c0 + j, n - 1)) * k);
  const int4* a_rows[kRowsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i)
    a_rows[i] = reinterpret_cast<const int4*>(a + int64_t(min(lane + 32 * i, m - 1)) * k);
  const int rows_per_lane = m > 32 ? 2 : 1;
  const int chunks = k / 16;
#pragma unroll 2
  for (int q = warp; q < chunks; q += kSmallWarps) {
    int4 wv[kSmallCols];
#pragma unroll
    for (int j = 0; j < kSmallCols; ++j) wv[j] = __ldg(w_rows[j] + q);
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      if (i >= rows_per_lane) break;
      int4 av = __ldg(a_rows[i] + q);
      if constexpr (kUnsigned) {
        av.x ^= int(0x80808080u);
        av.y ^= int(0x80808080u);
        av.z ^= int(0x80808080u);
        av.w ^= int(0x80808080u);
      }
#pragma unroll
      for (int j = 0; j < kSmallCols; ++j) {
        int32_t t = acc[i][j];
        t = __dp4a(av.x, wv[j].x, t);
        t = __dp4a(av.y, wv[j].y, t);
        t = __dp4a(av.z, wv[j].z, t);
        t = __dp4a(av.w, wv[j].w, t);
        acc[i][j] = t;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) {
#pragma unroll
    for (int j = 0; j < kSmallCols; ++j) partial[warp][lane + 32 * i][j] = acc[i][j];
  }
  __syncthreads();
  // Output o of the block: row o / kSmallCols, column c0 + o % kSmallCols.
  for (int o = int(threadIdx.x); o < m * kSmallCols; o += kSmallWarps * 32) {
    const int r = o / kSmallCols, j = o % kSmallCols;
    if (c0 + j >= n) continue;
    int32_t sum = 0;
#pragma unroll
    for (int w = 0; w < kSmallWarps; ++w) sum += partial[w][r][j];
    finish(e, real_of(e, c0 + j, sum), int64_t(r) * n + c0 + j, y);
  }
}

// uint8 -> int8 by subtracting 128 (the zero point moves with it).
__global__ void shift_to_int8_kernel(const uint8_t* __restrict__ x, int8_t* __restrict__ y, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = int8_t(int32_t(x[i]) - 128);
  }
}

// [rows, c] -> [rows, cp]: channels c.. cp-1 zero (the zero point of symmetric int8).
__global__ void pad_channels_kernel(const int8_t* __restrict__ x, int8_t* __restrict__ y, int64_t rows, int64_t c,
                                    int64_t cp) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cp; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = i % cp;
    y[i] = ch < c ? x[(i / cp) * c + ch] : int8_t(0);
  }
}

Tensor pad_channels(const Tensor& x, int64_t cp) {
  const int64_t c = x.dim(-1), rows = x.numel() / std::max<int64_t>(c, 1);
  Shape shape = x.shape();
  shape.back() = cp;
  Tensor y = Tensor::empty(DType::Int8, shape, x.device());
  pad_channels_kernel<<<blocks_for(rows * cp), kThreads, 0, stream()>>>(ptr<const int8_t>(x), ptr<int8_t>(y), rows, c, cp);
  INGOT_CUDA_LAUNCH_CHECK();
  return y;
}

// Path 0's gather (im2col) for a stem convolution channels last: cols[pixel][(ky S + kx) C + c] =
// X[n][oy sh - ph + ky dh][ox sw - pw + kx dw][c], zero outside X and in the columns past R S C
// (X's zero point is 0, so zeros add nothing). A block gathers the rows of `block_pixels`
// consecutive pixels into shared memory, a thread per (kernel row, pixel) with the pixel fastest,
// so a warp's byte loads read one input row's neighbouring bytes and its byte stores hit distinct
// banks (the row stride, `smem_row` bytes, is an odd number of words); the block then writes its
// rows out as coalesced words. 32-bit index math (the host checks the sizes): the first version, a
// thread per 4 columns with 64-bit divisions per byte, took ~340 us of ResNet-50 int8 b32's conv1.
// With INGOT_INT8_STEM_RUN (written without a GPU, off until measured): RUN = S C where the window's
// columns are adjacent (dw 1), so that a kernel row's taps are RUN adjacent bytes of X's row, all
// loaded before any is stored (ResNet-50's 21: the H100's ncu table had the byte-by-byte loop, a load
// and a bounds test per tap and channel, at 63 us of conv1's 108), and kWide: 16-byte stores; RUN 0
// for any window.
struct StemDims {
  int pixels, h, w, c, oh, ow, r, s, sh, sw, ph, pw, dh, dw, kdim, kpad, block_pixels, smem_row;
};

template <int RUN, bool kWide>
__global__ void __launch_bounds__(256) stem_im2col_kernel(const int8_t* __restrict__ x, int8_t* __restrict__ cols,
                                                          StemDims d) {
  extern __shared__ __align__(16) int8_t rows[];  // [block_pixels][smem_row]
  const int p0 = int(blockIdx.x) * d.block_pixels, np = min(d.block_pixels, d.pixels - p0);
  const int row_bytes = d.s * d.c;
  for (int item = int(threadIdx.x); item < np * d.r; item += int(blockDim.x)) {
    const int ky = item / np, p = item - ky * np, pixel = p0 + p;
    const int ox = pixel % d.ow, t = pixel / d.ow, oy = t % d.oh, n = t / d.oh;
    const int iy = oy * d.sh - d.ph + ky * d.dh, ix0 = ox * d.sw - d.pw;
    int8_t* row = rows + p * d.smem_row;
    int8_t* dst = row + ky * row_bytes;
    if (iy < 0 || iy >= d.h) {
      for (int b = 0; b < row_bytes; ++b) dst[b] = 0;
    } else if constexpr (RUN > 0) {
      const int8_t* src = x + (int64_t(n) * d.h + iy) * d.w * d.c;
      const int start = ix0 * d.c, end = d.w * d.c;
      int8_t v[RUN];
#pragma unroll
      for (int b = 0; b < RUN; ++b) v[b] = unsigned(start + b) < unsigned(end) ? src[start + b] : int8_t(0);
#pragma unroll
      for (int b = 0; b < RUN; ++b) dst[b] = v[b];
    } else {
      const int8_t* src = x + (int64_t(n) * d.h + iy) * d.w * d.c;
      for (int kx = 0; kx < d.s; ++kx) {
        const int ix = ix0 + kx * d.dw;
        if (ix >= 0 && ix < d.w) {
          for (int c = 0; c < d.c; ++c) dst[kx * d.c + c] = src[ix * d.c + c];
        } else {
          for (int c = 0; c < d.c; ++c) dst[kx * d.c + c] = 0;
        }
      }
    }
    if (ky == 0) {
      for (int b = d.kdim; b < d.kpad; ++b) row[b] = 0;
    }
  }
  __syncthreads();
  if constexpr (kWide) {
    // 16 bytes a store, read as 4 words from the row (whose start is only word-aligned).
    const int pieces = d.kpad / 16;  // kpad is a multiple of 16
    uint4* to = reinterpret_cast<uint4*>(cols + int64_t(p0) * d.kpad);
    for (int v = int(threadIdx.x); v < np * pieces; v += int(blockDim.x)) {
      const int p = v / pieces, q = v - p * pieces;
      const uint32_t* from = reinterpret_cast<const uint32_t*>(rows + p * d.smem_row + q * 16);
      to[v] = make_uint4(from[0], from[1], from[2], from[3]);
    }
  } else {
    const int words = d.kpad / 4;
    uint32_t* to = reinterpret_cast<uint32_t*>(cols + int64_t(p0) * d.kpad);
    for (int v = int(threadIdx.x); v < np * words; v += int(blockDim.x)) {
      const int p = v / words, wd = v - p * words;
      to[v] = *reinterpret_cast<const uint32_t*>(rows + p * d.smem_row + wd * 4);
    }
  }
}

template <class F>
void dispatch_y(DType y, F&& f) {
  dispatch<DType::UInt8, DType::Int8, DType::Float32>(y, std::forward<F>(f));
}
template <class F>
void dispatch_8bit(DType t, F&& f) {
  dispatch<DType::UInt8, DType::Int8>(t, std::forward<F>(f));
}

Tensor upload(const std::vector<float>& v, Device device) {
  return Tensor::from_vector(v, {int64_t(v.size())}).to(device);
}
Tensor upload(const std::vector<int32_t>& v, Device device) {
  return Tensor::from_vector(v, {int64_t(v.size())}).to(device);
}

std::vector<float> per_channel(const std::vector<float>& v, int64_t channels) {
  return v.size() == 1 ? std::vector<float>(size_t(channels), v[0]) : v;
}
std::vector<int32_t> per_channel(const std::vector<int32_t>& v, int64_t channels) {
  return v.size() == 1 ? std::vector<int32_t>(size_t(channels), v[0]) : v;
}

bool all_zero(const std::vector<int32_t>& v) {
  for (int32_t x : v) {
    if (x != 0) return false;
  }
  return true;
}

// The per-node state: vectors derived from the scalar parameters (uploaded when they change), the
// weights as the fast paths want them, and cuDNN graphs per input shape.
struct QuantState {
  std::vector<float> key;  // x_scale, y_scale, r_scale, r_zp the vectors below were made for
  Tensor multiplier, w_zp;
  // cuDNN's int8 graphs (per X shape; null: cuDNN took none) and their per-channel vectors.
  std::map<Shape, std::unique_ptr<ConvGraph>> graphs;
  Tensor graph_scale, graph_bias, graph_residual_scale;
  Tensor lean_scale, lean_bias;  // the implicit GEMM's lean epilogue (undefined until first needed)
  bool graph_fused = false;  // the graph computes the whole epilogue (else the real value, float32)
  Tensor w_padded;  // cuDNN convolutions of few input channels: W with its channels padded to 16
  Tensor w_stem;    // path 0: W as [K, 1, 1, R S C padded to 16]
  // Matrix products through cuBLASLt: W transposed [N, K] int8, its column sums.
  Tensor w_t, column_sums;
};

void refresh(QuantState& st, const std::vector<float>& key, const std::function<void()>& make) {
  if (st.key == key && st.multiplier.defined()) return;
  st.key = key;
  st.graphs.clear();  // the graphs' own vectors change with the parameters
  st.lean_scale = st.lean_bias = Tensor();
  make();
}

Epilogue make_epilogue(const QuantizedProductArgs& a, const QuantState& st, int64_t channels, int64_t inner) {
  Epilogue e;
  e.multiplier = ptr<const float>(st.multiplier);
  e.bias = a.bias ? ptr<const int32_t>(*a.bias) : nullptr;
  e.float_bias = a.float_bias ? ptr<const float>(*a.float_bias) : nullptr;
  if (a.residual) {
    e.residual = a.residual->raw_data();
    e.r_kind = !a.residual_quantized                      ? Residual::Float32
               : a.residual->dtype() == DType::UInt8 ? Residual::UInt8
                                                     : Residual::Int8;
    e.r_scale = a.r_scale;
    e.r_zp = float(a.r_zp);
  }
  if (a.steps.size() > size_t(kMaxSteps))
    fail("the epilogue has {} steps; the CUDA kernels take at most {}", a.steps.size(), kMaxSteps);
  for (const EpilogueStep& s : a.steps) e.steps[e.n_steps++] = {s.kind, s.a, s.b};
  e.y_scale = a.y_scale;
  e.y_zp = float(a.y_zp);
  e.channels = channels;
  e.inner = inner;
  return e;
}

template <bool kFromInt, class Acc>
void run_epilogue(const Acc* acc, Tensor& y, const Epilogue& e) {
  const int64_t n = y.numel();
  dispatch_y(y.dtype(), [&]<class Y>() {
    epilogue_kernel<kFromInt, Acc, Y><<<blocks_for(n), kThreads, 0, stream()>>>(acc, ptr<Y>(y), n, e);
  });
  INGOT_CUDA_LAUNCH_CHECK();
}

// Relu, and a clip to [0, hi] (Relu6: "Max(x0, 0); Min(t0, 6)"), are what cuDNN's Relu step
// computes; anything else goes through the epilogue kernel.
bool graph_takes_steps(const QuantizedProductArgs& a, float* relu_max, bool* relu) {
  using K = EpilogueStep::Kind;
  *relu = false;
  *relu_max = 0;
  if (a.steps.empty()) return true;
  const EpilogueStep& first = a.steps[0];
  if (!((first.kind == K::Relu && first.a == 0) || (first.kind == K::Clip && first.a == 0 && first.b > 0))) return false;
  float hi = first.kind == K::Clip ? first.b : std::numeric_limits<float>::max();
  for (size_t i = 1; i < a.steps.size(); ++i) {
    const EpilogueStep& s = a.steps[i];  // on a value >= 0 already: only an upper bound may act
    if (s.kind == K::Relu && s.a == 0) continue;
    if (s.kind != K::Clip || s.a > 0 || s.b <= 0) return false;
    hi = std::min(hi, s.b);
  }
  *relu = true;
  if (hi < std::numeric_limits<float>::max()) *relu_max = hi;
  return true;
}

// What the tensor-core paths (Ingot's implicit GEMM, cuDNN's int8 engines) take: channels last,
// one group, int8 X at zero point 0 and int8 W at zero points 0.
bool symmetric_int8(const sem::QConvGeometry& g, const QuantizedProductArgs& a) {
  return g.nhwc && g.group == 1 && a.x->dtype() == DType::Int8 && a.w->dtype() == DType::Int8 && a.x_zp == 0 &&
         all_zero(a.w_zp);
}

// X and W with their channels padded with zeros to a multiple of 16 (X per call, W once per node),
// which add nothing to the sums: the tensor-core paths' int8 operands come in 16-byte pieces (a
// first layer's 3 channels).
struct ChannelsBy16 {
  Tensor x_padded;  // undefined: X as it is
  const Tensor* x_in;
  const Tensor* w;
  int64_t channels;
  const Tensor& x() const { return x_padded.defined() ? x_padded : *x_in; }
};
ChannelsBy16 channels_by_16(QuantState& st, const sem::QConvGeometry& g, const QuantizedProductArgs& a) {
  ChannelsBy16 p{Tensor(), a.x, a.w, (g.channels + 15) / 16 * 16};
  if (p.channels != g.channels) {
    if (!st.w_padded.defined()) st.w_padded = pad_channels(*a.w, p.channels);
    p.x_padded = pad_channels(*a.x, p.channels);
    p.w = &st.w_padded;
  }
  return p;
}

std::atomic<int64_t> g_implicit_gemm_calls{0};
std::atomic<int64_t> g_stem_calls{0};

// The lean epilogue's parameters where the node's epilogue is one it computes (scale null
// otherwise: the generic one runs). Its vectors are made once per node (again when the parameters
// change: refresh).
bool lone_hardswish(const QuantizedProductArgs& a) {
  return a.steps.size() == 1 && a.steps[0].kind == EpilogueStep::Kind::HardSwish;
}

// `hardswish_too`: also a lone HardSwish step (lean.hardswish), for a kernel that computes it.
LeanEpilogue lean_epilogue(QuantState& st, const QuantizedProductArgs& a, int64_t k, bool hardswish_too = false) {
  LeanEpilogue lean;
  float relu_max = 0;
  bool relu = false;
  const bool hardswish = hardswish_too && lone_hardswish(a);
  if (!flags::enabled("INGOT_INT8_IMMA_LEAN") || a.y_dtype != DType::Int8 || a.y_zp != 0 || a.float_bias ||
      !(hardswish || graph_takes_steps(a, &relu_max, &relu)) ||
      (a.residual && (!a.residual_quantized || a.residual->dtype() != DType::Int8)))
    return lean;
  const double ys = a.y_scale, rq = a.residual ? double(a.r_scale) / ys : 0.0;
  if (!st.lean_scale.defined()) {
    const std::vector<float> ws = per_channel(a.w_scale, k);
    const std::vector<int32_t> b = a.bias ? a.bias->to(Device::cpu()).to_vector<int32_t>() : std::vector<int32_t>();
    std::vector<float> scale(static_cast<size_t>(k)), bias(static_cast<size_t>(k));
    for (int64_t c = 0; c < k; ++c) {
      const double m = double(a.x_scale) * double(ws[size_t(c)]) / ys;
      scale[size_t(c)] = float(m);
      bias[size_t(c)] = float((b.empty() ? 0.0 : double(b[size_t(c)]) * m) - rq * double(a.r_zp));
    }
    st.lean_scale = upload(scale, a.x->device());
    st.lean_bias = upload(bias, a.x->device());
  }
  lean.scale = ptr<const float>(st.lean_scale);
  lean.bias = ptr<const float>(st.lean_bias);
  lean.residual = a.residual ? ptr<const int8_t>(*a.residual) : nullptr;
  lean.rq = float(rq);
  if (relu) lean.lo = 0;
  if (relu_max > 0) lean.hi = std::min(127.0f, float(double(relu_max) / ys));
  if (hardswish) lean.hardswish = float(ys / 6);
  return lean;
}

// Path 1's launch (INGOT_INT8_IMMA); false where the layer is not one the kernel takes.
bool run_implicit_gemm_conv(QuantState& st, const sem::QConvGeometry& g, const QuantizedProductArgs& a, Tensor& y) {
  if (!flags::enabled("INGOT_INT8_IMMA") || !symmetric_int8(g, a) || g.win.in.size() > 2) return false;
  const sem::Window& win = g.win;
  const bool two_d = win.in.size() == 2;
  const int64_t r = two_d ? win.kernel[0] : 1, oh = two_d ? win.out[0] : 1;
  const int64_t m = g.batch * oh * win.out.back(), kdim = r * win.kernel.back() * ((g.channels + 15) / 16 * 16);
  if (m > INT_MAX / 2 || kdim > INT_MAX / 2 || a.x->numel() / std::max<int64_t>(g.batch, 1) > INT_MAX) return false;
  const ChannelsBy16 padded = channels_by_16(st, g, a);
  const Tensor& x = padded.x();
  if (!aligned16(x.raw_data()) || !aligned16(padded.w->raw_data())) return false;
  ImplicitGemmDims d{};
  d.h = int(two_d ? win.in[0] : 1);
  d.w = int(win.in.back());
  d.c = int(padded.channels);
  d.k = int(g.out_channels);
  d.s = int(win.kernel.back());
  d.oh = int(oh);
  d.ow = int(win.out.back());
  d.pad_h = int(two_d ? win.pad_begin[0] : 0);
  d.pad_w = int(win.pad_begin.back());
  d.stride_h = int(two_d ? win.strides[0] : 1);
  d.stride_w = int(win.strides.back());
  d.dil_h = int(two_d ? win.dilations[0] : 1);
  d.dil_w = int(win.dilations.back());
  d.m = int(m);
  d.kdim = int(kdim);
  // The largest tile that still gives every SM a block: 128 x 128, 128 x 64 (also where K <= 64),
  // else 64 x 64 (batch 1's late layers).
  const auto blocks = [&](int bm, int bn) { return ((m + bm - 1) / bm) * ((g.out_channels + bn - 1) / bn); };
  const int64_t sms = sm_count();
  const int64_t forced = flags::integer("INGOT_INT8_IMMA_TILE");
  const int tile = forced >= 0 && forced <= 2                             ? int(forced)
                   : g.out_channels > 64 && blocks(128, 128) >= sms ? 0
                   : blocks(128, 64) >= sms                           ? 1
                                                                      : 2;
  LeanEpilogue lean = lean_epilogue(st, a, g.out_channels);
  lean.vec16 = lean.scale && g.out_channels % 16 == 0 && aligned16(y.raw_data()) &&
               (!lean.residual || aligned16(lean.residual)) && flags::enabled("INGOT_INT8_IMMA_VEC16");
  const Epilogue e = lean.scale ? Epilogue{} : make_epilogue(a, st, g.out_channels, 1);  // channel = i % k
  dispatch_y(a.y_dtype, [&]<class Y>() {
    auto launch = [&]<int BM, int BN, int WM, int WN>() {
      const dim3 grid{unsigned((m + BM - 1) / BM), unsigned((g.out_channels + BN - 1) / BN)};
      if constexpr (std::is_same_v<Y, int8_t>) {
        if (lean.scale) {
          implicit_gemm_conv_kernel<Y, BM, BN, WM, WN, true><<<grid, WM * WN * 32, 0, stream()>>>(
              ptr<const int8_t>(x), ptr<const int8_t>(*padded.w), ptr<Y>(y), d, e, lean);
          return;
        }
      }
      implicit_gemm_conv_kernel<Y, BM, BN, WM, WN, false><<<grid, WM * WN * 32, 0, stream()>>>(
          ptr<const int8_t>(x), ptr<const int8_t>(*padded.w), ptr<Y>(y), d, e, lean);
    };
    if (tile == 0) launch.template operator()<128, 128, 2, 4>();
    if (tile == 1) launch.template operator()<128, 64, 4, 2>();
    if (tile == 2) launch.template operator()<64, 64, 2, 2>();
  });
  INGOT_CUDA_LAUNCH_CHECK();
  g_implicit_gemm_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::atomic<int64_t> g_pointwise_calls{0};
std::atomic<int64_t> g_depthwise_lean_calls{0};
std::atomic<int64_t> g_depthwise_dp2a_calls{0};
std::atomic<int64_t> g_cudnn_unpadded_calls{0};
std::atomic<int64_t> g_small_matmul_calls{0};

// The pointwise kernel's launch (INGOT_INT8_POINTWISE); false where the layer is not one it takes.
// 1 (the measured rule): 64 to 128 input channels (one or two K blocks), at least 64 output channels
// and at least two tiles per block. On an H100 the kernel won there (ResNet-50's layer1 conv3 55 -> 38
// us) and lost to cuDNN's engines on long K and few tiles (layer4's conv1 14 -> 30 us) and on narrow
// layers, whose tiles are mostly padding (MobileNetV3's 16 -> 16 at 112 x 112: 22 -> 36 us).
// Also, under 1 with INGOT_INT8_POINTWISE_HARDSWISH, layers of at least 64 output channels whose
// epilogue is a lone HardSwish (MobileNetV3's expansions), which cuDNN's graph cannot express: there
// it writes float32 for the epilogue kernel to read back (9 bytes moved an output instead of 1).
// 2: every layer it takes (tests, A/B runs).
bool run_pointwise_conv(QuantState& st, const sem::QConvGeometry& g, const QuantizedProductArgs& a, Tensor& y) {
  const int64_t mode = flags::integer("INGOT_INT8_POINTWISE");
  if (mode <= 0 || !symmetric_int8(g, a) || g.win.in.size() != 2) return false;
  const sem::Window& win = g.win;
  for (size_t i = 0; i < 2; ++i) {
    if (win.kernel[i] != 1 || win.strides[i] != 1 || win.pad_begin[i] != 0 || win.pad_end[i] != 0) return false;
  }
  const int64_t m = g.batch * win.out[0] * win.out[1];
  if (g.out_channels % 16 != 0 || m > INT_MAX / 2 || g.out_channels > INT_MAX / 2) return false;
  constexpr int BM = 128, BN = 64, WARPS_M = 4, WARPS_N = 2;
  using Tile = PointwiseTile<BM, BN>;
  const bool small_k = g.channels <= 4 * kImmaBK;  // accumulators within [-2^22, 2^22]
  const auto kernel = small_k ? pointwise_int8_kernel<BM, BN, WARPS_M, WARPS_N, true>
                              : pointwise_int8_kernel<BM, BN, WARPS_M, WARPS_N, false>;
  static std::atomic<uint64_t> raised_small{0}, raised_large{0};
  opt_in_shared_memory(kernel, Tile::kSmemBytes, small_k ? raised_small : raised_large);
  static const int per_sm = [&] {  // the same for both: one register count and shared memory size
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, WARPS_M * WARPS_N * 32, Tile::kSmemBytes) !=
        cudaSuccess) {
      (void)cudaGetLastError();  // not left for the launch check to report
      blocks = 1;
    }
    return std::max(blocks, 1);
  }();
  const int64_t tiles = ((m + BM - 1) / BM) * ((g.out_channels + BN - 1) / BN);
  const int64_t blocks = int64_t(sm_count()) * per_sm;
  const bool hardswish = lone_hardswish(a) && flags::enabled("INGOT_INT8_POINTWISE_HARDSWISH");
  if (mode == 1 && (g.out_channels < BN ||
                    (!hardswish && (g.channels < kImmaBK || g.channels > 2 * kImmaBK || tiles < 2 * blocks))))
    return false;
  // HardSwish only where the rule took the layer for it (or under 2): with the switch off, a
  // HardSwish layer that meets the other conditions stays where it was.
  const LeanEpilogue lean = lean_epilogue(st, a, g.out_channels, hardswish || mode == 2);
  if (!lean.scale || !aligned16(y.raw_data()) || (lean.residual && !aligned16(lean.residual))) return false;
  const ChannelsBy16 padded = channels_by_16(st, g, a);
  const Tensor& x = padded.x();
  if (!aligned16(x.raw_data()) || !aligned16(padded.w->raw_data()) || padded.channels > INT_MAX / 2) return false;
  const PointwiseDims d{int(m), int(padded.channels), int(g.out_channels)};
  kernel<<<unsigned(std::min(tiles, blocks)), WARPS_M * WARPS_N * 32, Tile::kSmemBytes, stream()>>>(
      ptr<const int8_t>(x), ptr<const int8_t>(*padded.w), ptr<int8_t>(y), d, lean);
  INGOT_CUDA_LAUNCH_CHECK();
  g_pointwise_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Path 2 on X and W as given (`channels` of them): cuDNN's graph for X's shape, built on first use.
// False where cuDNN has no engine for it.
bool run_cudnn_graph(KernelContext& ctx, QuantState& st, const sem::QConvGeometry& g, const QuantizedProductArgs& a,
                     const std::vector<float>& w_scale, const Tensor& x, const Tensor* w, int64_t channels, Tensor& y) {
  if (a.residual && a.residual_quantized && a.residual->dtype() != DType::Int8) return false;
  if (!aligned16(x.raw_data()) || !aligned16(w->raw_data()) || !aligned16(y.raw_data()) ||
      (a.residual && !aligned16(a.residual->raw_data())))
    return false;
  const int64_t k = g.out_channels;
  auto it = st.graphs.find(x.shape());
  if (it == st.graphs.end()) {
    if (st.graphs.size() >= 8) st.graphs.clear();
    // The whole epilogue in cuDNN, in output units (real / y_scale; 1 for a float32 output):
    //   v = acc * m[c] + b[c];  with a residual R (quantized: real r_scale * (R - r_zp)),
    //   v = (acc * m[c] / q + b[c] / q - r_zp + R) * q   with q = r_scale / y_scale.
    float relu_max = 0;
    bool relu = false;
    const bool fused = graph_takes_steps(a, &relu_max, &relu) && (!a.quantized_output() || a.y_zp == 0) &&
                       a.y_dtype != DType::UInt8 && !a.float_bias;
    const float ys = a.quantized_output() ? a.y_scale : 1.0f;
    const float q = !a.residual ? 1.0f : a.residual_quantized ? a.r_scale / ys : 1.0f / ys;
    const float r_zp = a.residual && a.residual_quantized ? float(a.r_zp) : 0.0f;
    std::vector<float> scale(static_cast<size_t>(k)), bias(static_cast<size_t>(k), 0.0f);
    const std::vector<int32_t> b = a.bias ? a.bias->to(Device::cpu()).to_vector<int32_t>() : std::vector<int32_t>();
    for (int64_t c = 0; c < k; ++c) {
      const double m = double(a.x_scale) * double(w_scale[size_t(c)]);
      const double real_bias = b.empty() ? 0.0 : double(b[size_t(c)]) * m;
      if (fused) {
        scale[size_t(c)] = float(m / ys / (a.residual ? q : 1.0));
        bias[size_t(c)] = float(real_bias / ys / (a.residual ? q : 1.0) - (a.residual ? r_zp : 0.0));
      } else {
        scale[size_t(c)] = float(m);
        bias[size_t(c)] = float(real_bias);
      }
    }
    st.graph_fused = fused;
    st.graph_scale = upload(scale, ctx.device());
    st.graph_bias = upload(bias, ctx.device());
    st.graph_residual_scale = upload(std::vector<float>(size_t(k), q), ctx.device());

    ConvGraphSpec s;
    s.dtype = DType::Int8;
    s.channels_last = true;
    s.n = g.batch;
    s.c = channels;
    s.h = g.win.in[0];
    s.w = g.win.in[1];
    s.k = k;
    s.r = g.win.kernel[0];
    s.s = g.win.kernel[1];
    s.out_h = g.win.out[0];
    s.out_w = g.win.out[1];
    for (int i = 0; i < 2; ++i) {
      s.pad_begin[i] = g.win.pad_begin[size_t(i)];
      s.pad_end[i] = g.win.pad_end[size_t(i)];
      s.stride[i] = g.win.strides[size_t(i)];
      s.dilation[i] = g.win.dilations[size_t(i)];
    }
    s.bias = true;
    s.residual = fused && a.residual != nullptr;
    s.residual_dtype = a.residual ? a.residual->dtype() : DType::Int8;
    s.relu = fused && relu;
    s.relu_max = relu_max / ys;
    s.y_dtype = fused ? a.y_dtype : DType::Float32;
    Tensor probe;  // path B's float32 output, for the timing runs
    void* out = y.raw_data();
    if (!fused) {
      probe = Tensor::empty(DType::Float32, y.shape(), ctx.device());
      out = probe.raw_data();
    }
    const ConvGraphArgs args{x.raw_data(), w->raw_data(), st.graph_bias.raw_data(),
                             s.residual ? a.residual->raw_data() : nullptr, out, st.graph_scale.raw_data(),
                             st.graph_residual_scale.raw_data()};
    const std::string key = fmt::format("{}|int8|x={}|w={}|pads={},{},{},{}|stride={}|dil={}|nhwc|y={}|r={}|relu={}|max={}",
                                        arch_name(), shape_str(x.shape()), shape_str(w->shape()), s.pad_begin[0],
                                        s.pad_begin[1], s.pad_end[0], s.pad_end[1], shape_str(g.win.strides),
                                        shape_str(g.win.dilations), dtype_name(s.y_dtype),
                                        s.residual ? dtype_name(s.residual_dtype) : "none", int(s.relu), relu_max);
    it = st.graphs.emplace(x.shape(), ConvGraph::build(s, args, key)).first;
  }
  ConvGraph* graph = it->second.get();
  if (!graph) return false;
  const bool fused = st.graph_fused;
  Tensor real;
  if (!fused) real = Tensor::empty(DType::Float32, y.shape(), ctx.device());
  graph->run({x.raw_data(), w->raw_data(), st.graph_bias.raw_data(),
              graph->spec().residual ? a.residual->raw_data() : nullptr, fused ? y.raw_data() : real.raw_data(),
              st.graph_scale.raw_data(), st.graph_residual_scale.raw_data()});
  if (!fused) {
    Epilogue e = make_epilogue(a, st, k, 1);  // channels last: channel = i % k
    run_epilogue<false>(ptr<const float>(real), y, e);
  }
  return true;
}

// Path 2: cuDNN. False when the problem is not one it takes (the caller runs the direct kernel).
// Channels a multiple of 8 but not of 16 (INGOT_INT8_CUDNN_UNPADDED) first as they are: padding X
// to 16 per call cost MobileNetV3-Large int8 b32 ~0.1 ms an H100 run (ncu: 14-27 us for each of its
// 56 x 56 and 28 x 28 layers of 24, 72 and 120 channels), more than some of the convolutions.
bool run_cudnn_conv(KernelContext& ctx, QuantState& st, const sem::QConvGeometry& g, const QuantizedProductArgs& a,
                    const std::vector<float>& w_scale, Tensor& y) {
  if (!ConvGraph::enabled() || a.x->rank() != 4 || !symmetric_int8(g, a)) return false;
  if (g.channels % 16 != 0 && g.channels % 8 == 0 && flags::enabled("INGOT_INT8_CUDNN_UNPADDED") &&
      run_cudnn_graph(ctx, st, g, a, w_scale, *a.x, a.w, g.channels, y)) {
    g_cudnn_unpadded_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const ChannelsBy16 padded = channels_by_16(st, g, a);
  return run_cudnn_graph(ctx, st, g, a, w_scale, padded.x(), padded.w, padded.channels, y);
}

// Path 0: a stem convolution (channels last, symmetric int8, fewer than 16 input channels, a
// window larger than 1x1) as im2col and a 1x1 convolution over [N, OH, OW, R S C padded to 16] on
// path 1 (its pointwise form first) or 2. Padding each tap's 3 channels to 16 instead made
// ResNet-50's 7x7 conv1 multiply 16/3 as much in 16-byte pieces of one tap each: cuDNN's int8 engine took 0.96 ms of ResNet-50
// int8's 2.59 ms of device time per batch-32 run on an H100 (0.39 ms this way). False where it does not apply or neither path takes the
// 1x1 problem (the caller goes on with the other paths).
bool run_stem_conv(KernelContext& ctx, QuantState& st, const sem::QConvGeometry& g, const QuantizedProductArgs& a,
                   Tensor& y) {
  const sem::Window& win = g.win;
  if (!flags::enabled("INGOT_INT8_STEM") || !symmetric_int8(g, a) || win.in.size() != 2 || g.channels >= 16 ||
      win.kernel[0] * win.kernel[1] == 1 || a.x->rank() != 4)
    return false;
  const int64_t kdim = win.kernel[0] * win.kernel[1] * g.channels, kpad = (kdim + 15) / 16 * 16;
  const int64_t pixels = g.batch * win.out[0] * win.out[1];
  if (kpad > 4096 || pixels * kpad > INT_MAX || a.x->numel() > INT_MAX) return false;  // 32-bit index math
  if (!st.w_stem.defined() || !ctx.input_is_constant(3))  // [K, R, S, C] is [K, R S C]: padded per row
    st.w_stem = pad_channels(a.w->reshape({g.out_channels, 1, 1, kdim}), kpad);
  Tensor cols = Tensor::empty(DType::Int8, {g.batch, win.out[0], win.out[1], kpad}, ctx.device());
  const int smem_row = int(kpad) + 4;  // 4 (mod 8) bytes: an odd number of words
  const int block_pixels = int(std::clamp<int64_t>(16384 / smem_row, 1, 128));
  const StemDims d{int(pixels),         int(win.in[0]),       int(win.in[1]),       int(g.channels),
                   int(win.out[0]),     int(win.out[1]),      int(win.kernel[0]),   int(win.kernel[1]),
                   int(win.strides[0]), int(win.strides[1]),  int(win.pad_begin[0]), int(win.pad_begin[1]),
                   int(win.dilations[0]), int(win.dilations[1]), int(kdim),        int(kpad),
                   block_pixels,        smem_row};
  const unsigned blocks = unsigned((pixels + block_pixels - 1) / block_pixels);
  const size_t smem = size_t(block_pixels) * smem_row;
  const bool runs = flags::enabled("INGOT_INT8_STEM_RUN");
  const int run = runs && win.dilations[1] == 1 ? int(win.kernel[1] * g.channels) : 0;
  if (run == 21) {  // 7x7 over 3 channels (ResNet's)
    stem_im2col_kernel<21, true><<<blocks, 256, smem, stream()>>>(ptr<const int8_t>(*a.x), ptr<int8_t>(cols), d);
  } else if (run == 9) {  // 3x3 over 3 channels (MobileNet's)
    stem_im2col_kernel<9, true><<<blocks, 256, smem, stream()>>>(ptr<const int8_t>(*a.x), ptr<int8_t>(cols), d);
  } else if (runs) {
    stem_im2col_kernel<0, true><<<blocks, 256, smem, stream()>>>(ptr<const int8_t>(*a.x), ptr<int8_t>(cols), d);
  } else {
    stem_im2col_kernel<0, false><<<blocks, 256, smem, stream()>>>(ptr<const int8_t>(*a.x), ptr<int8_t>(cols), d);
  }
  INGOT_CUDA_LAUNCH_CHECK();
  sem::QConvGeometry pointwise = g;
  pointwise.channels = kpad;
  pointwise.win.in = win.out;
  pointwise.win.kernel = pointwise.win.strides = pointwise.win.dilations = {1, 1};
  pointwise.win.pad_begin = pointwise.win.pad_end = {0, 0};
  QuantizedProductArgs pa = a;
  pa.x = &cols;
  pa.w = &st.w_stem;
  const bool ran = run_pointwise_conv(st, pointwise, pa, y) || run_implicit_gemm_conv(st, pointwise, pa, y) ||
                   run_cudnn_conv(ctx, st, pointwise, pa, per_channel(a.w_scale, g.out_channels), y);
  if (ran) g_stem_calls.fetch_add(1, std::memory_order_relaxed);
  return ran;
}

// The multiplier and weight zero points every path's epilogue reads.
void prepare(KernelContext& ctx, QuantState& st, const QuantizedProductArgs& a, int64_t channels) {
  const std::vector<float> key = {a.x_scale, a.y_scale, a.r_scale, float(a.r_zp), float(a.x_zp)};
  refresh(st, key, [&] {
    const std::vector<float> ws = per_channel(a.w_scale, channels);
    std::vector<float> m(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) m[size_t(c)] = float(double(a.x_scale) * double(ws[size_t(c)]));
    st.multiplier = upload(m, ctx.device());
    st.w_zp = upload(per_channel(a.w_zp, channels), ctx.device());
  });
}

// Path 4's dp2a kernel (lean epilogue, int8 X) for a layer run_depthwise_conv has checked; false
// where the sizes leave its 32-bit item count.
bool run_depthwise_dp2a(const DepthwiseDims& p, int kw, int sw, const QuantizedProductArgs& a, QuantState& st,
                        const LeanEpilogue& lean, Tensor& y) {
  constexpr int OX = 4;
  const int words = p.c / 4;
  const int strips = (p.ow + OX - 1) / OX;
  const int64_t items = int64_t(p.n) * p.oh * strips;
  if (items > INT_MAX / 2) return false;
  // A block: up to 32 channel words (128 channels) across, items down, ~256 threads; enough blocks
  // for four an SM, and at least two items a thread where there are more (the staging shared).
  const int bx = std::min(32, words), by = std::clamp(256 / bx, 1, 64);
  const int gx = (words + bx - 1) / bx;
  const int64_t rows_of_items = (items + by - 1) / by;
  const int64_t wanted = std::max<int64_t>((rows_of_items + 1) / 2, (int64_t(sm_count()) * 4 + gx - 1) / gx);
  const int gy = int(std::min<int64_t>({rows_of_items, wanted, 65535}));
  const int pairs = (kw + 1) / 2;
  const size_t smem = size_t(kw) * size_t(pairs + 1) * size_t(bx) * sizeof(uint4);
  const dim3 block{unsigned(bx), unsigned(by)}, grid{unsigned(gx), unsigned(gy)};
  auto launch = [&]<int K, int S>() {
    depthwise_dp2a_kernel<K, S, OX><<<grid, block, smem, stream()>>>(
        ptr<const int8_t>(*a.x), ptr<const int8_t>(*a.w), ptr<int8_t>(y), p, a.x_zp, ptr<const int32_t>(st.w_zp),
        strips, int(items), lean);
  };
  if (kw == 3 && sw == 1) launch.template operator()<3, 1>();
  if (kw == 3 && sw == 2) launch.template operator()<3, 2>();
  if (kw == 5 && sw == 1) launch.template operator()<5, 1>();
  if (kw == 5 && sw == 2) launch.template operator()<5, 2>();
  INGOT_CUDA_LAUNCH_CHECK();
  g_depthwise_lean_calls.fetch_add(1, std::memory_order_relaxed);
  g_depthwise_dp2a_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Path 4's launch; false where the layer is not one the kernel takes.
bool run_depthwise_conv(const sem::QConvGeometry& g, const QuantizedProductArgs& a, QuantState& st,
                        const Epilogue& e, Tensor& y) {
  if (!flags::enabled("INGOT_INT8_DEPTHWISE")) return false;
  const sem::Window& win = g.win;
  if (!g.nhwc || win.in.size() != 2 || g.group != g.channels || g.out_channels != g.channels || g.channels % 8 != 0 ||
      win.dilations[0] != 1 || win.dilations[1] != 1 || win.kernel[1] != win.kernel[0] ||
      (win.kernel[1] != 3 && win.kernel[1] != 5) || (win.strides[1] != 1 && win.strides[1] != 2) ||
      a.w->dtype() != DType::Int8 || !aligned16(a.x->raw_data()) || !aligned16(y.raw_data()))
    return false;
  const int64_t dims[] = {g.batch * win.out[0], win.out[1], g.channels, a.x->numel(), y.numel()};
  if (std::any_of(std::begin(dims), std::end(dims), [](int64_t d) { return d > INT_MAX; }) || dims[0] > 65535)
    return false;  // 32-bit indices and the grid's z limit
  const DepthwiseDims p{int(g.batch),      int(win.in[0]),      int(win.in[1]),        int(g.channels),
                        int(win.out[0]),   int(win.out[1]),     int(win.kernel[0]),    int(win.strides[0]),
                        int(win.pad_begin[0]), int(win.pad_begin[1])};
  const int kw = int(win.kernel[1]), sw = int(win.strides[1]);
  // The lean epilogue (INGOT_INT8_DEPTHWISE_LEAN) where the node's is one (int8 X and Y at zero point
  // 0 on the output: the symmetric scheme's layers; Relu, a clip or HardSwish).
  LeanEpilogue lean;
  if (flags::enabled("INGOT_INT8_DEPTHWISE_LEAN") && a.x->dtype() == DType::Int8) {
    lean = lean_epilogue(st, a, g.channels, true);
    if (lean.residual && !aligned16(lean.residual)) lean = LeanEpilogue();
  }
  if (lean.scale && flags::enabled("INGOT_INT8_DEPTHWISE_DP2A") && run_depthwise_dp2a(p, kw, sw, a, st, lean, y))
    return true;
  // 16 channels per thread (one 16-byte load), or 8 where the channels are not a multiple of 16
  // (MobileNetV3's 72, 120, 184, 200).
  const int V = p.c % 16 == 0 ? 16 : 8;
  const int vectors = p.c / V;
  // Output columns per thread: four, or one where four would leave less than ~1000 threads per SM
  // (batch 1).
  const int64_t work = int64_t(p.n) * p.oh * p.ow * vectors, enough = int64_t(sm_count()) * 1024;
  const int columns = work / 4 >= enough ? 4 : 1;
  const int channel_threads = std::min(32, vectors);
  const int strips = (p.ow + columns - 1) / columns;
  const int column_threads = std::min(256 / channel_threads, strips);
  const size_t smem = size_t(p.kh) * size_t(win.kernel[1]) * size_t(channel_threads) * V * sizeof(int16_t);
  const dim3 block{unsigned(channel_threads), unsigned(column_threads)};
  const dim3 grid{unsigned((vectors + channel_threads - 1) / channel_threads),
                  unsigned((strips + column_threads - 1) / column_threads), unsigned(p.n * p.oh)};
  dispatch_8bit(a.x->dtype(), [&]<class X>() {
    dispatch_y(a.y_dtype, [&]<class Y>() {
      auto launch = [&]<int K, int S, int C>() {
        auto run = [&]<int VV>() {
          if constexpr (std::is_same_v<X, int8_t> && std::is_same_v<Y, int8_t>) {
            if (lean.scale) {
              depthwise_nhwc_kernel<X, int8_t, Y, K, S, C, VV, true><<<grid, block, smem, stream()>>>(
                  ptr<const X>(*a.x), ptr<const int8_t>(*a.w), ptr<Y>(y), p, a.x_zp, ptr<const int32_t>(st.w_zp), e,
                  lean);
              g_depthwise_lean_calls.fetch_add(1, std::memory_order_relaxed);
              return;
            }
          }
          depthwise_nhwc_kernel<X, int8_t, Y, K, S, C, VV><<<grid, block, smem, stream()>>>(
              ptr<const X>(*a.x), ptr<const int8_t>(*a.w), ptr<Y>(y), p, a.x_zp, ptr<const int32_t>(st.w_zp), e,
              LeanEpilogue());
        };
        if (V == 16) run.template operator()<16>();
        if (V == 8) run.template operator()<8>();
      };
      auto with_columns = [&]<int K, int S>() {
        if (columns == 4) launch.template operator()<K, S, 4>();
        if (columns == 1) launch.template operator()<K, S, 1>();
      };
      if (kw == 3 && sw == 1) with_columns.template operator()<3, 1>();
      if (kw == 3 && sw == 2) with_columns.template operator()<3, 2>();
      if (kw == 5 && sw == 1) with_columns.template operator()<5, 1>();
      if (kw == 5 && sw == 2) with_columns.template operator()<5, 2>();
    });
  });
  INGOT_CUDA_LAUNCH_CHECK();
  return true;
}

void quantized_conv(KernelContext& ctx) {
  const Tensor& w = ctx.input(3);
  const sem::QConvGeometry g = sem::quantized_conv_geometry(ctx, ctx.input(0), w);
  QuantizedProductArgs a = sem::quantized_product_args(ctx, g.out_channels, 8);
  sem::quantized_residual_args(ctx, g.out_shape, a);
  Tensor& y = ctx.allocate(0, a.y_dtype, g.out_shape);
  if (y.numel() == 0) return;
  if (g.win.in.size() > 2) fail("input 0 (X) {}: 1-D and 2-D convolutions only on CUDA", a.x->describe());
  QuantState& st = ctx.state<QuantState>();
  prepare(ctx, st, a, g.out_channels);
  if (run_stem_conv(ctx, st, g, a, y)) return;
  if (run_pointwise_conv(st, g, a, y)) return;
  if (run_implicit_gemm_conv(st, g, a, y)) return;
  if (run_cudnn_conv(ctx, st, g, a, per_channel(a.w_scale, g.out_channels), y)) return;

  const bool two_d = g.win.in.size() == 2;
  ConvDims d{};
  d.n = g.batch;
  d.c = g.channels;
  d.h = two_d ? g.win.in[0] : 1;
  d.w = g.win.in.back();
  d.k = g.out_channels;
  d.r = two_d ? g.win.kernel[0] : 1;
  d.s = g.win.kernel.back();
  d.oh = two_d ? g.win.out[0] : 1;
  d.ow = g.win.out.back();
  d.group = g.group;
  d.pad_h = two_d ? g.win.pad_begin[0] : 0;
  d.pad_w = g.win.pad_begin.back();
  d.stride_h = two_d ? g.win.strides[0] : 1;
  d.stride_w = g.win.strides.back();
  d.dil_h = two_d ? g.win.dilations[0] : 1;
  d.dil_w = g.win.dilations.back();
  d.nhwc = g.nhwc;
  const int64_t spatial = d.oh * d.ow;
  const Epilogue e = make_epilogue(a, st, d.k, g.nhwc ? 1 : spatial);
  if (run_depthwise_conv(g, a, st, e, y)) return;
  const int64_t total = y.numel();
  dispatch_8bit(a.x->dtype(), [&]<class X>() {
    dispatch_8bit(a.w->dtype(), [&]<class W>() {
      dispatch_y(a.y_dtype, [&]<class Y>() {
        direct_conv_kernel<X, W, Y><<<blocks_for(total), kThreads, 0, stream()>>>(
            ptr<const X>(*a.x), ptr<const W>(*a.w), ptr<Y>(y), d, a.x_zp, ptr<const int32_t>(st.w_zp), e);
      });
    });
  });
  INGOT_CUDA_LAUNCH_CHECK();
}

void quantized_matmul(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const bool onnx_op = ctx.def().domain != kIngotDomain;
  if (w.rank() != 2) fail("input 3 (B): expected a 2-D [K, N] weight on CUDA, got {}", w.describe());
  if (x.rank() < 1 || x.dim(-1) != w.dim(0)) fail("inner dimensions differ: A {} and B {}", x.describe(), w.describe());
  const int64_t k = w.dim(0), n = w.dim(1), m = x.numel() / std::max<int64_t>(k, 1);
  QuantizedProductArgs a = sem::quantized_product_args(ctx, n, onnx_op ? -1 : 8);
  Shape out_shape = x.shape();
  if (x.rank() == 1) out_shape = {n};
  else out_shape.back() = n;
  Tensor& y = ctx.allocate(0, a.y_dtype, out_shape);
  if (y.numel() == 0) return;
  QuantState& st = ctx.state<QuantState>();
  prepare(ctx, st, a, n);
  Epilogue e = make_epilogue(a, st, n, 1);

  // Path 3: cuBLASLt (int8 W at zero point 0; its IMMA kernels want K and N in multiples of 4).
  const bool gemm_ok = k > 0 && w.dtype() == DType::Int8 && all_zero(a.w_zp) && k % 4 == 0 && n % 4 == 0;
  if (gemm_ok) {
    if (!st.w_t.defined() || !ctx.input_is_constant(3)) {  // a computed W: transposed at every call
      const Tensor host = w.to(Device::cpu());
      const int8_t* b = host.data<int8_t>();
      std::vector<int8_t> t(size_t(k * n));
      std::vector<int32_t> sums(size_t(n), 0);
      for (int64_t j = 0; j < k; ++j) {
        for (int64_t c = 0; c < n; ++c) {
          t[size_t(c * k + j)] = b[j * n + c];
          sums[size_t(c)] += b[j * n + c];
        }
      }
      st.w_t = Tensor::from_vector(t, {n, k}).to(ctx.device());
      st.column_sums = upload(sums, ctx.device());
    }
    // Both ways below take uint8 X as int8 (X - 128), so X's zero point moves by 128 too; it is
    // subtracted through W's column sums.
    const bool unsigned_x = x.dtype() == DType::UInt8;
    if (const int32_t offset = a.x_zp - (unsigned_x ? 128 : 0); offset != 0) {
      e.column_sums = ptr<const int32_t>(st.column_sums);
      e.x_offset = offset;
    }
    if (m <= kSmallRows && k % 16 == 0 && aligned16(x.raw_data()) && flags::enabled("INGOT_INT8_SMALL_MATMUL")) {
      const int blocks = int((n + kSmallCols - 1) / kSmallCols);
      dispatch_y(y.dtype(), [&]<class Y>() {
        auto* kernel = unsigned_x ? small_matmul_kernel<true, Y> : small_matmul_kernel<false, Y>;
        kernel<<<blocks, kSmallWarps * 32, 0, stream()>>>(static_cast<const uint8_t*>(x.raw_data()),
                                                         ptr<const int8_t>(st.w_t), ptr<Y>(y), int(m), int(k), int(n), e);
      });
      INGOT_CUDA_LAUNCH_CHECK();
      g_small_matmul_calls.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Tensor shifted;
    const void* a8 = x.raw_data();
    if (unsigned_x) {
      shifted = Tensor::empty(DType::Int8, x.shape(), ctx.device());
      shift_to_int8_kernel<<<blocks_for(x.numel()), kThreads, 0, stream()>>>(ptr<const uint8_t>(x), ptr<int8_t>(shifted),
                                                                            x.numel());
      INGOT_CUDA_LAUNCH_CHECK();
      a8 = shifted.raw_data();
    }
    Tensor acc = Tensor::empty(DType::Int32, {m, n}, ctx.device());
    GemmArgs g;
    g.dtype = DType::Int8;
    g.trans_b = true;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a8;
    g.lda = k;
    g.b = st.w_t.raw_data();
    g.ldb = k;
    g.c = acc.raw_data();
    g.ldc = n;
    gemm(g);
    run_epilogue<true>(ptr<const int32_t>(acc), y, e);
    return;
  }
  const int64_t total = m * n;
  dispatch_8bit(x.dtype(), [&]<class X>() {
    dispatch_8bit(w.dtype(), [&]<class W>() {
      dispatch_y(a.y_dtype, [&]<class Y>() {
        direct_matmul_kernel<X, W, Y><<<blocks_for(total), kThreads, 0, stream()>>>(
            ptr<const X>(x), ptr<const W>(w), ptr<Y>(y), m, k, n, a.x_zp, ptr<const int32_t>(st.w_zp), e);
      });
    });
  });
  INGOT_CUDA_LAUNCH_CHECK();
}

// 3-D convolutions stay on the CPU.
std::string conv_accepts(const NodeSignature& node) {
  if (!node.inputs.empty() && node.inputs[0].rank > 4)
    return fmt::format("a {}-D convolution (CUDA: 1-D and 2-D)", node.inputs[0].rank - 2);
  return "";
}
// QLinearMatMul's batched B and per-row A parameters stay on the CPU.
std::string matmul_accepts(const NodeSignature& node) {
  if (node.inputs.size() > 3 && node.inputs[3].rank > 2) return "a batched B (CUDA: 2-D weights)";
  for (size_t i : {size_t(1), size_t(2)}) {
    if (node.inputs.size() > i && node.inputs[i].rank > 1) return "per-row A parameters (CUDA: per tensor)";
  }
  return "";
}

}  // namespace

#define INGOT_INT8 DType::UInt8, DType::Int8
INGOT_CUDA_KERNEL(QLinearConv, quantized_conv)
    .versions(10)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8})
    .types("T4", {DType::Int32})
    .host_inputs({1, 2, 4, 5, 6, 7})
    .accepts(conv_accepts);
INGOT_CUDA_KERNEL(QuantizedConv, quantized_conv)
    .domain(kIngotDomain)
    .versions(1)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8})
    .host_inputs({1, 2, 4, 5, 6, 7, 10, 11})
    .accepts(conv_accepts);
INGOT_CUDA_KERNEL(QLinearMatMul, quantized_matmul)
    .versions(10)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8})
    .host_inputs({1, 2, 4, 5, 6, 7})
    .accepts(matmul_accepts);
INGOT_CUDA_KERNEL(QuantizedMatMul, quantized_matmul)
    .domain(kIngotDomain)
    .versions(1)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8})
    .host_inputs({1, 2, 4, 5, 6, 7})
    .accepts(matmul_accepts);
#undef INGOT_INT8

int64_t int8_implicit_gemm_calls() { return g_implicit_gemm_calls.load(std::memory_order_relaxed); }
int64_t int8_stem_calls() { return g_stem_calls.load(std::memory_order_relaxed); }
int64_t int8_pointwise_calls() { return g_pointwise_calls.load(std::memory_order_relaxed); }
int64_t int8_depthwise_lean_calls() { return g_depthwise_lean_calls.load(std::memory_order_relaxed); }
int64_t int8_depthwise_dp2a_calls() { return g_depthwise_dp2a_calls.load(std::memory_order_relaxed); }
int64_t int8_cudnn_unpadded_calls() { return g_cudnn_unpadded_calls.load(std::memory_order_relaxed); }
int64_t int8_small_matmul_calls() { return g_small_matmul_calls.load(std::memory_order_relaxed); }

}  // namespace ingot::cuda
