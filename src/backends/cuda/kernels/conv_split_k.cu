// Float32 convolutions with few output pixels as a split-K implicit GEMM of Ingot's own (FFMA:
// exact float32, as cuDNN's float32 engines are without TF32).
//
// Why: at batch 1 ResNet-50's late layers have 49-196 output pixels and reductions of 1,152-4,608
// (C R S); cuDNN's exact float32 engines tile the pixels and the output channels only, so a 3x3
// 512 -> 512 layer at 7x7 runs on 8-16 blocks of a 132-SM H100: 162 us for 116 M multiply-adds
// (1.4 TFLOP/s), and layers 3 and 4 took 1.7 of the model's 2.1 ms per run (`ingot profile`,
// docs/PERFORMANCE.md). Here the reduction is split too, so every layer fills the GPU.
//
// The GEMM: Y[k][p] = sum over d = (c, r, s) of W[k][d] X[c][pixel p moved by (r, s)], W as stored
// (KCRS: d contiguous per output channel), X's columns gathered on the fly (zero in the padding).
// A block owns a 64 x 64 tile of (output channels, pixels) and a range of d (its split); 16 d at a
// time go through shared memory (two buffers; the next slice is read into registers while this one
// multiplies), W transposed there so that a thread's four output channels are one float4, and each
// thread accumulates a 4 x 4 outer product. One split writes Y with the epilogue (bias, residual,
// activation: conv_f32_epilogue.cuh); several write partial sums that a second
// kernel adds in split order (deterministic), then the epilogue.
#include "backends/cuda/kernels/conv_split_k.h"

#include <algorithm>
#include <atomic>
#include <climits>

#include "backends/cuda/kernels/conv_f32_epilogue.cuh"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "core/flags.h"

namespace ingot::cuda {
namespace {

using sem::FusedActivation;

std::atomic<int64_t> g_calls{0};

constexpr int kTileK = 64, kTileP = 64, kSlice = 16, kBlock = 256;
constexpr int kPadK = kTileK + 4;  // W's shared rows: a float4 per thread stays aligned, fewer conflicts

struct SplitKDims {
  int c, h, w, k, r, s, oh, ow, sh, sw, ph, pw, dh, dw;
  int pixels;  // batch * oh * ow
  int depth;   // c * r * s
  int chunk;   // reduction elements per split (a multiple of kSlice)
};

// Y's offset of output channel k at pixel p (channels first).
__device__ __forceinline__ int64_t y_offset(const SplitKDims& d, int k, int p) {
  const int plane = d.oh * d.ow, n = p / plane;
  return (int64_t(n) * d.k + k) * plane + (p - n * plane);
}

// Grid: (pixel tiles, output-channel tiles, splits). `partial` is [splits][k][pixels] when there are
// several splits, else null (Y written with the epilogue).
__global__ void __launch_bounds__(kBlock)
    split_k_conv_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                        float* __restrict__ partial, SplitKDims d, F32ConvEpilogue e) {
  __shared__ __align__(16) float ws[2][kSlice][kPadK];
  __shared__ __align__(16) float xs[2][kSlice][kTileP];
  const int tid = int(threadIdx.x);
  const int p0 = int(blockIdx.x) * kTileP, k0 = int(blockIdx.y) * kTileK;
  const int d_begin = int(blockIdx.z) * d.chunk, d_end = min(d.depth, d_begin + d.chunk);

  // The W elements this thread reads per slice: output channel k0 + tid / 4, reductions 4 (tid % 4) ..+3.
  const int w_row = tid / 4, w_col = (tid % 4) * 4;
  const bool w_ok = k0 + w_row < d.k;
  const float* w_src = w + int64_t(w_ok ? k0 + w_row : 0) * d.depth;
  // The X elements: reduction tid / 16 of the slice, pixels 4 (tid % 16) ..+3, whose input origins
  // (image plane offset, top-left row and column) are fixed for the whole kernel.
  const int x_row = tid / 16, x_col = (tid % 16) * 4;
  int64_t x_image[4];
  int x_iy[4], x_ix[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int p = p0 + x_col + j, plane = d.oh * d.ow;
    const int n = p / plane, rem = p - n * plane, oy = rem / d.ow, ox = rem - oy * d.ow;
    x_image[j] = int64_t(n) * d.c * d.h * d.w;
    x_iy[j] = p < d.pixels ? oy * d.sh - d.ph : INT_MIN / 2;  // a pixel past the end reads padding
    x_ix[j] = ox * d.sw - d.pw;
  }

  float wr[4], xr[4];
  auto load = [&](int d0) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int dd = d0 + w_col + j;
      wr[j] = w_ok && dd < d_end ? w_src[dd] : 0.0f;
    }
    const int dd = d0 + x_row;
    int c = 0, ky = 0, kx = 0;
    const bool d_ok = dd < d_end;
    if (d_ok) {
      const int rs = d.r * d.s;
      c = dd / rs;
      const int t = dd - c * rs;
      ky = t / d.s;
      kx = t - ky * d.s;
    }
    const int64_t plane_offset = int64_t(c) * d.h * d.w;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int iy = x_iy[j] + ky * d.dh, ix = x_ix[j] + kx * d.dw;
      const bool ok = d_ok && iy >= 0 && iy < d.h && ix >= 0 && ix < d.w;
      xr[j] = ok ? x[x_image[j] + plane_offset + int64_t(iy) * d.w + ix] : 0.0f;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int j = 0; j < 4; ++j) ws[buf][w_col + j][w_row] = wr[j];
    *reinterpret_cast<float4*>(&xs[buf][x_row][x_col]) = make_float4(xr[0], xr[1], xr[2], xr[3]);
  };

  // This thread's outputs: channels k0 + 4 (tid / 16) ..+3, pixels p0 + 4 (tid % 16) ..+3.
  const int tk = (tid / 16) * 4, tp = (tid % 16) * 4;
  float acc[4][4] = {};
  const int slices = (d_end - d_begin + kSlice - 1) / kSlice;
  load(d_begin);
  store(0);
  __syncthreads();
  for (int t = 0; t < slices; ++t) {
    const int buf = t & 1;
    if (t + 1 < slices) load(d_begin + (t + 1) * kSlice);
#pragma unroll
    for (int i = 0; i < kSlice; ++i) {
      const float4 a = *reinterpret_cast<const float4*>(&ws[buf][i][tk]);
      const float4 b = *reinterpret_cast<const float4*>(&xs[buf][i][tp]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[u][v] = fmaf(av[u], bv[v], acc[u][v]);
      }
    }
    if (t + 1 < slices) store(buf ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int k = k0 + tk + u;
    if (k >= d.k) continue;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int p = p0 + tp + v;
      if (p >= d.pixels) continue;
      if (partial) {
        partial[(int64_t(blockIdx.z) * d.k + k) * d.pixels + p] = acc[u][v];
      } else {
        const int64_t out = y_offset(d, k, p);
        y[out] = conv_finish(acc[u][v], k, out, e);
      }
    }
  }
}

// Y from the splits' partial sums, added in split order, and the epilogue.
__global__ void split_k_reduce_kernel(const float* __restrict__ partial, float* __restrict__ y, int splits,
                                      SplitKDims d, F32ConvEpilogue e) {
  const int64_t n = int64_t(d.k) * d.pixels;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = 0.0f;
    for (int z = 0; z < splits; ++z) v += partial[z * n + i];
    const int k = int(i / d.pixels), p = int(i - int64_t(k) * d.pixels);
    const int64_t out = y_offset(d, k, p);
    y[out] = conv_finish(v, k, out, e);
  }
}

}  // namespace

bool run_split_k_conv(const sem::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor* residual, FusedActivation act, Tensor& y) {
  const sem::Window& win = g.win;
  if (!flags::enabled("INGOT_CONV_SPLIT_K") || x.dtype() != DType::Float32 || g.transposed || g.channels_last ||
      g.group != 1 || win.in.empty() || win.in.size() > 2)
    return false;
  const bool two_d = win.in.size() == 2;
  const int64_t kh = two_d ? win.kernel[0] : 1, kw = win.kernel.back();
  const int64_t pixels = y.numel() / std::max<int64_t>(1, g.out_channels);  // batch x output positions
  const int64_t depth = g.in_channels * kh * kw;
  // Few output pixels and a modest product: where cuDNN's float32 engines leave most SMs idle
  // (batch 1). Larger problems fill the GPU on cuDNN's tiles (INGOT_CONV_SPLIT_K_MAX_MACS).
  const int64_t max_macs = flags::integer("INGOT_CONV_SPLIT_K_MAX_MACS");
  if (pixels > 4096 || depth < 32 || pixels * g.out_channels * depth > max_macs ||
      x.numel() > INT_MAX || y.numel() > INT_MAX || w.numel() > INT_MAX)
    return false;
  SplitKDims d{};
  d.c = int(g.in_channels);
  d.h = two_d ? int(win.in[0]) : 1;
  d.w = int(win.in.back());
  d.k = int(g.out_channels);
  d.r = int(kh);
  d.s = int(kw);
  d.oh = two_d ? int(win.out[0]) : 1;
  d.ow = int(win.out.back());
  d.sh = two_d ? int(win.strides[0]) : 1;
  d.sw = int(win.strides.back());
  d.ph = two_d ? int(win.pad_begin[0]) : 0;
  d.pw = int(win.pad_begin.back());
  d.dh = two_d ? int(win.dilations[0]) : 1;
  d.dw = int(win.dilations.back());
  d.pixels = int(pixels);
  d.depth = int(depth);
  // Splits: enough blocks for two per SM, each split at least four slices.
  const int64_t tiles = ((pixels + kTileP - 1) / kTileP) * ((g.out_channels + kTileK - 1) / kTileK);
  const int64_t slices = (depth + kSlice - 1) / kSlice;
  int64_t splits = std::clamp<int64_t>((2 * sm_count() + tiles - 1) / tiles, 1, std::max<int64_t>(1, slices / 4));
  const int64_t per_split = (slices + splits - 1) / splits;
  splits = (slices + per_split - 1) / per_split;
  d.chunk = int(per_split * kSlice);
  const F32ConvEpilogue e{bias ? ptr<const float>(*bias) : nullptr, residual ? ptr<const float>(*residual) : nullptr,
                         act};
  Tensor partial;
  if (splits > 1) partial = Tensor::empty(DType::Float32, {splits * g.out_channels * pixels}, y.device());
  const dim3 grid(unsigned((pixels + kTileP - 1) / kTileP), unsigned((g.out_channels + kTileK - 1) / kTileK),
                  unsigned(splits));
  split_k_conv_kernel<<<grid, kBlock, 0, stream()>>>(ptr<const float>(x), ptr<const float>(w), ptr<float>(y),
                                                     splits > 1 ? ptr<float>(partial) : nullptr, d, e);
  INGOT_CUDA_LAUNCH_CHECK();
  if (splits > 1) {
    split_k_reduce_kernel<<<blocks_for(g.out_channels * pixels), kThreads, 0, stream()>>>(
        ptr<const float>(partial), ptr<float>(y), int(splits), d, e);
    INGOT_CUDA_LAUNCH_CHECK();
  }
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t split_k_conv_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace ingot::cuda
