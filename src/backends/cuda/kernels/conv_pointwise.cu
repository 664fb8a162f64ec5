// Float32 1x1 convolutions as a GEMM of Ingot's own, bias, residual and activation in the kernel
// (FFMA: exact float32, as cuDNN's float32 engines are without TF32).
//
// Why: ResNet-50 fp32 at batch 32 spends ~40% of its convolution time in 1x1 layers, where cuDNN's
// exact float32 engines reach 16-30 TFLOP/s of the H200's ~67 (FMA), against cuBLAS's ~45 for the
// same product as a matrix multiply; and a residual, which no graph engine takes in exact float32,
// costs another pass over the output (layer1's conv3: 203 us for 3.3 GFLOP, of which ~75 us is the
// epilogue kernel re-reading and re-writing 102 MB; docs/PERFORMANCE.md).
//
// The GEMM: Y[k][q] = sum over c of W[k][c] X[c][q], W [K][C] as stored, the columns q the batch's
// output pixels (image-major), so that a batch of small images (7x7) still fills whole tiles. A
// block of 2 BM threads owns a BM x 128 tile of (output channels, pixels); 8 input channels at a time
// go through shared memory (two buffers, the next slice read into registers while this one
// multiplies; W's slice transposed there so that a thread's four output channels are one float4),
// and each thread accumulates an 8 x 8 outer product (rows ty*4.. and BM/2 + ty*4.., columns
// tx*4.. and 64 + tx*4..): four 16-byte shared loads per 64 FMAs. The epilogue adds bias and the
// residual and applies the activation as it stores, 16 bytes at a time where four pixels are
// consecutive in memory (stride 1, pixels per image a multiple of 4, aligned tensors).
#include "backends/cuda/kernels/conv_pointwise.h"

#include <atomic>
#include <climits>

#include "backends/cuda/kernels/conv_f32_epilogue.cuh"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/gemm_3xtf32.h"
#include "core/flags.h"

namespace ingot::cuda {
namespace {

std::atomic<int64_t> g_calls{0};

constexpr int kTileN = 128, kSlice = 8;

struct PointwiseDims {
  int c, k;              // input and output channels (the GEMM's K and M)
  int64_t cols;          // batch x output pixels (the GEMM's N)
  int plane, ow;         // output pixels per image, output width
  int64_t in_plane;      // input pixels per image
  int in_w, sh, sw;      // input width, strides
};

// X's offset of column q's pixel in input channel 0 (its channel c: + c in_plane).
__device__ __forceinline__ int64_t x_base(const PointwiseDims& d, int64_t q) {
  const int64_t n = q / d.plane;
  const int rem = int(q - n * d.plane), oy = rem / d.ow, ox = rem - oy * d.ow;
  return n * d.c * d.in_plane + int64_t(oy) * d.sh * d.in_w + int64_t(ox) * d.sw;
}

// Y's offset of output channel 0 at column q (channel k: + k plane).
__device__ __forceinline__ int64_t y_base(const PointwiseDims& d, int64_t q) {
  const int64_t n = q / d.plane;
  return n * d.k * d.plane + (q - n * d.plane);
}

// kVec: four consecutive columns are four consecutive floats of X and Y (stride 1, plane % 4 == 0,
// 16-byte aligned tensors); otherwise every element is addressed on its own. kVecW: C % 4 == 0 and
// W aligned (a thread's four W elements are one float4).
template <int BM, bool kVec, bool kVecW>
// Two blocks of 128 x 128 per SM (128 registers), or three of 64 x 128 (their extra loads' addresses spill at 128).
__global__ void __launch_bounds__(2 * BM, BM == 128 ? 2 : 3)
    pointwise_conv_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                          PointwiseDims d, F32ConvEpilogue e) {
  constexpr int kThreads = 2 * BM;
  constexpr int kXLoads = kSlice * kTileN / 4 / kThreads;  // float4 groups of X per thread and slice
  constexpr int kWStride = BM + 4;                         // W's shared rows: fewer bank conflicts
  __shared__ __align__(16) float ws[2][kSlice][kWStride];
  __shared__ __align__(16) float xs[2][kSlice][kTileN];
  const int tid = int(threadIdx.x);
  const int64_t q0 = int64_t(blockIdx.x) * kTileN;
  const int m0 = int(blockIdx.y) * BM;

  // W: this thread reads output channel m0 + tid / 2, input channels 4 (tid % 2) ..+3 of each slice.
  const int w_row = tid / 2, w_col = (tid % 2) * 4;
  const bool w_ok = m0 + w_row < d.k;
  const float* w_src = w + int64_t(w_ok ? m0 + w_row : 0) * d.c + w_col;
  // X: slice row (tid + i kThreads) / 32, columns 4 ((tid + i kThreads) % 32) ..+3.
  int x_row[kXLoads], x_col[kXLoads];
  int64_t x_off[kXLoads][kVec ? 1 : 4];
  bool x_ok[kXLoads][kVec ? 1 : 4];
#pragma unroll
  for (int i = 0; i < kXLoads; ++i) {
    const int at = tid + i * kThreads;
    x_row[i] = at / 32;
    x_col[i] = (at % 32) * 4;
#pragma unroll
    for (int j = 0; j < (kVec ? 1 : 4); ++j) {
      const int64_t q = q0 + x_col[i] + j;
      x_ok[i][j] = q < d.cols;
      x_off[i][j] = x_ok[i][j] ? x_base(d, q) : 0;
    }
  }

  float4 wr, xr[kXLoads];
  auto load = [&](int c0) {
    if constexpr (kVecW) {
      wr = w_ok && c0 + w_col < d.c ? __ldg(reinterpret_cast<const float4*>(w_src + c0)) : make_float4(0, 0, 0, 0);
    } else {
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = w_ok && c0 + w_col + j < d.c ? __ldg(w_src + c0 + j) : 0.0f;
      wr = make_float4(v[0], v[1], v[2], v[3]);
    }
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) {
      const int c = c0 + x_row[i];
      const int64_t plane_offset = int64_t(c) * d.in_plane;
      if constexpr (kVec) {
        xr[i] = x_ok[i][0] && c < d.c ? __ldg(reinterpret_cast<const float4*>(x + x_off[i][0] + plane_offset))
                                      : make_float4(0, 0, 0, 0);
      } else {
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = x_ok[i][j] && c < d.c ? __ldg(x + x_off[i][j] + plane_offset) : 0.0f;
        xr[i] = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
  };
  auto store = [&](int buf) {
    ws[buf][w_col + 0][w_row] = wr.x;
    ws[buf][w_col + 1][w_row] = wr.y;
    ws[buf][w_col + 2][w_row] = wr.z;
    ws[buf][w_col + 3][w_row] = wr.w;
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) *reinterpret_cast<float4*>(&xs[buf][x_row[i]][x_col[i]]) = xr[i];
  };

  // This thread's outputs: channels m0 + ty*4 + {0..3} and m0 + BM/2 + ty*4 + {0..3}, columns
  // q0 + tx*4 + {0..3} and q0 + 64 + tx*4 + {0..3}.
  const int ty = tid / 16, tx = tid % 16;
  const auto channel = [&](int u) { return m0 + (u < 4 ? ty * 4 + u : BM / 2 + ty * 4 + u - 4); };
  float acc[8][8] = {};
  const int slices = (d.c + kSlice - 1) / kSlice;
  load(0);
  store(0);
  __syncthreads();
  for (int t = 0; t < slices; ++t) {
    const int buf = t & 1;
    if (t + 1 < slices) load((t + 1) * kSlice);
#pragma unroll
    for (int s = 0; s < kSlice; ++s) {
      const float4 a0 = *reinterpret_cast<const float4*>(&ws[buf][s][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&ws[buf][s][BM / 2 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&xs[buf][s][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&xs[buf][s][64 + tx * 4]);
      const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int u = 0; u < 8; ++u) {
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[u][v] = fmaf(av[u], bv[v], acc[u][v]);
      }
    }
    if (t + 1 < slices) store(buf ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {  // column groups tx*4 and 64 + tx*4
    const int64_t qg = q0 + half * 64 + tx * 4;
    if constexpr (kVec) {
      if (qg >= d.cols) continue;
      const int64_t base = y_base(d, qg);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int k = channel(u);
        if (k >= d.k) continue;
        const int64_t out = base + int64_t(k) * d.plane;
        const float b = e.bias ? e.bias[k] : 0.0f;
        float4 r = make_float4(0, 0, 0, 0);
        if (e.residual) r = __ldcs(reinterpret_cast<const float4*>(e.residual + out));
        const float* a = acc[u] + half * 4;
        float4 o;
        o.x = conv_activation(a[0] + b + r.x, e.act);
        o.y = conv_activation(a[1] + b + r.y, e.act);
        o.z = conv_activation(a[2] + b + r.z, e.act);
        o.w = conv_activation(a[3] + b + r.w, e.act);
        *reinterpret_cast<float4*>(y + out) = o;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t q = qg + j;
        if (q >= d.cols) continue;
        const int64_t base = y_base(d, q);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int k = channel(u);
          if (k >= d.k) continue;
          const int64_t out = base + int64_t(k) * d.plane;
          y[out] = conv_finish(acc[u][half * 4 + j], k, out, e);
        }
      }
    }
  }
}

template <int BM>
void launch(const PointwiseDims& d, bool vec, bool vec_w, const float* x, const float* w, float* y,
            const F32ConvEpilogue& e) {
  const dim3 grid(unsigned((d.cols + kTileN - 1) / kTileN), unsigned((d.k + BM - 1) / BM));
  auto go = [&](auto kernel) {
    kernel<<<grid, 2 * BM, 0, stream()>>>(x, w, y, d, e);
    INGOT_CUDA_LAUNCH_CHECK();
  };
  if (vec && vec_w) return go(pointwise_conv_kernel<BM, true, true>);
  if (vec) return go(pointwise_conv_kernel<BM, true, false>);
  if (vec_w) return go(pointwise_conv_kernel<BM, false, true>);
  go(pointwise_conv_kernel<BM, false, false>);
}

// Stride 1: per image, Y [K][pixels] = W [K][C] X [C][pixels], a batch of row-major products with W
// shared, on the 3xTF32 kernel where it takes them (gemm_3xtf32.h).
bool on_tf32x3(const PointwiseDims& d, int64_t batch, const float* x, const float* w, float* y,
               const F32ConvEpilogue& e) {
  Tf32x3Product p;
  p.m = d.k;
  p.n = d.plane;
  p.k = d.c;
  p.batch = batch;
  p.a = w;
  p.lda = d.c;
  p.b = x;
  p.ldb = d.plane;
  p.stride_b = int64_t(d.c) * d.plane;
  p.c = y;
  p.ldc = d.plane;
  p.stride_c = int64_t(d.k) * d.plane;
  p.r = e.residual;
  p.beta = e.residual ? 1.0f : 0.0f;
  p.bias = e.bias;
  p.bias_per_row = true;
  p.act = e.act == sem::FusedActivation::Relu        ? Tf32x3Product::Act::Relu
          : e.act == sem::FusedActivation::HardSwish ? Tf32x3Product::Act::HardSwish
                                                     : Tf32x3Product::Act::None;
  return run_tf32x3(p);
}

}  // namespace

bool run_pointwise_conv(const sem::ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor* bias,
                        const Tensor* residual, sem::FusedActivation act, Tensor& y) {
  const sem::Window& win = g.win;
  if (x.dtype() != DType::Float32 || g.transposed || g.channels_last || g.group != 1 || win.in.empty() ||
      win.in.size() > 2)
    return false;
  for (size_t i = 0; i < win.in.size(); ++i) {
    if (win.kernel[i] != 1 || win.pad_begin[i] != 0 || win.pad_end[i] != 0) return false;
  }
  const bool two_d = win.in.size() == 2;
  const int64_t plane = y.numel() / std::max<int64_t>(1, g.batch * g.out_channels);
  const int64_t in_plane = x.numel() / std::max<int64_t>(1, g.batch * g.in_channels);
  if (g.in_channels > INT_MAX || g.out_channels > INT_MAX || plane > INT_MAX || g.batch * plane > INT64_C(1) << 40 ||
      (y.numel() + kTileN - 1) / kTileN > INT_MAX)
    return false;
  PointwiseDims d{};
  d.c = int(g.in_channels);
  d.k = int(g.out_channels);
  d.cols = g.batch * plane;
  d.plane = int(plane);
  d.ow = int(win.out.back());
  d.in_plane = in_plane;
  d.in_w = int(win.in.back());
  d.sh = two_d ? int(win.strides[0]) : 1;
  d.sw = int(win.strides.back());
  const F32ConvEpilogue e{bias ? ptr<const float>(*bias) : nullptr, residual ? ptr<const float>(*residual) : nullptr,
                          act};
  const bool vec = d.sh == 1 && d.sw == 1 && plane % 4 == 0 && aligned16(x.raw_data()) && aligned16(y.raw_data()) &&
                   (!residual || aligned16(residual->raw_data()));
  const bool vec_w = d.c % 4 == 0 && aligned16(w.raw_data());
  if (vec && on_tf32x3(d, g.batch, ptr<const float>(x), ptr<const float>(w), ptr<float>(y), e)) return true;
  const int64_t mode = flags::integer("INGOT_CONV_POINTWISE");
  if (mode <= 0) return false;
  // Mode 1 (the default): where the kernel measured faster than cuDNN's engines (ResNet-50 fp32 b32 on
  // an H100, per layer, docs/PERFORMANCE.md): the 16-byte path, 64 to 256 input channels, and a grid
  // of at least two blocks per SM. Slower there: the element path (stride 2: 1.3-1.7x; 7x7 images:
  // 1.3-2.4x) and 1,024 input channels over 14x14 (98 or 196 blocks: 1.1-1.4x); 512 was a tie.
  const int bm = d.k <= 64 ? 64 : 128;
  const int64_t blocks = (d.cols + kTileN - 1) / kTileN * ((d.k + bm - 1) / bm);
  if (mode == 1 && (!vec || d.c < 64 || d.c > 256 || blocks < 2 * sm_count())) return false;
  // 64 output channels or fewer: tiles of 64 (half the threads) instead of half-empty tiles of 128.
  if (bm == 64) {
    launch<64>(d, vec, vec_w, ptr<const float>(x), ptr<const float>(w), ptr<float>(y), e);
  } else {
    launch<128>(d, vec, vec_w, ptr<const float>(x), ptr<const float>(w), ptr<float>(y), e);
  }
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t pointwise_conv_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace ingot::cuda
