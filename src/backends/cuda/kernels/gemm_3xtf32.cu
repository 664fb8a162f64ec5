// Float32 matrix products on the TF32 tensor cores at float32's accuracy: every product of two
// float32 values as three TF32 products (3xTF32, tensor_core.cuh), accumulated in float32.
//
// Why: exact float32 GEMMs run on the FMA units, at ~45 of the H100/H200's ~67 TFLOP/s through
// cuBLAS (Whisper-tiny's encoder at batch 32 spends 15.5 of its 26.8 ms there,
// docs/PERFORMANCE.md), and cuDNN's exact float32 1x1 convolutions at 16-30. The TF32 tensor cores
// run mma.sync at several times the FMA rate, so three of their products per product still leave
// the FMA units behind, at float32's accuracy: each operand is split into a TF32 big part and the
// TF32 remainder, and a b = big_a big_b + big_a small_b + small_a big_b (small_a small_b is below
// float32's rounding). CUTLASS's OpMultiplyAddFastF32 computes the same.
//
// The kernel: a block of 8 warps owns a 128 x 128 tile of C; K goes through shared memory 32 at a
// time in a three-stage cp.async pipeline (A's tile [128][32 + 4], B's [32][128 + 8] or, transposed,
// [128][32 + 4]: the padding makes every fragment load conflict-free). Warps are 2 x 4 over the
// tile, each accumulating 64 x 32 of C as 4 x 4 m16n8k8 fragments; at each k8 step it loads and
// splits its B fragments once and, per m-tile, the A fragment, and runs the three terms for its four
// (m, n) pairs term by term (products into the same sum four apart). The tensor core's adds
// truncate (round toward zero), so a sum kept on it over all of K drifts toward zero (one output
// 1.3e-3 off at K = 1536 on an H100): each k8 step's three terms go into a fresh sum that is added
// to the accumulator in float32, rounded to nearest (16 FADDs per m-tile and k8 step beside 12
// mma.sync), with the k8 loop rolled (unrolled, the compiler loads a whole k tile's fragments ahead
// and spills 76-180 bytes at 128 registers; rolled, 8-24). INGOT_GEMM_3XTF32_STEP_SUMS=0 keeps one
// sum over K on the tensor core, for A/B runs and the accuracy test. (Sums restarted per k tile
// instead, the loop m-tile by m-tile with B's fragments loaded per m-tile, were slower: Whisper-tiny
// fp32 b32 25.9 ms against 24.1 for k8-step sums and 22.1 for one sum, H100.)
// Two blocks fit per SM (~108 KB of shared memory and at most 128 registers each; two m-tiles at a
// time spilled more).
// The epilogue scales, adds the residual and bias and applies the activation as it stores two
// columns at a time.
#include "backends/cuda/kernels/gemm_3xtf32.h"

#include <atomic>
#include <climits>

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/shared_memory_opt_in.cuh"
#include "backends/cuda/kernels/tensor_core.cuh"
#include "core/flags.h"

namespace ingot::cuda {
namespace {

std::atomic<int64_t> g_calls{0};

using Act = Tf32x3Product::Act;

constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 3, kThreads = 256;
constexpr int kAStride = kBK + 4;   // A's tile, and a transposed B's: [rows][k]
constexpr int kBStride = kBN + 8;   // B's tile: [k][columns]
constexpr int kATile = kBM * kAStride;
template <bool kTransB>
constexpr int kBTile = kTransB ? kBN * kAStride : kBK * kBStride;
template <bool kTransB>
constexpr int kSmemBytes = kStages * (kATile + kBTile<kTransB>) * int(sizeof(float));

__device__ __forceinline__ float activate(float v, Act act) {
  switch (act) {
    case Act::Relu: return v > 0.0f ? v : 0.0f;  // NaN -> 0, like the CPU's
    case Act::GeluTanh: {                         // cuBLASLt's GELU epilogue (gemm.cu's fallback)
      const float k0 = 0.7978845608028654f, k1 = 0.044715f;
      return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
    }
    case Act::HardSwish: return v * fminf(fmaxf(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    default: return v;
  }
}

// kStepSums: INGOT_GEMM_3XTF32_STEP_SUMS (above).
template <bool kTransB, bool kStepSums>
__global__ void __launch_bounds__(kThreads, 2) gemm_3xtf32_kernel(const Tf32x3Product p) {
  extern __shared__ __align__(16) float smem[];
  float* const a_tiles = smem;
  float* const b_tiles = smem + kStages * kATile;
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN, z = blockIdx.z;
  const float* const a = p.a + z * p.stride_a;
  const float* const b = p.b + z * p.stride_b;

  // This thread's 16-byte copies, four per operand and stage. A 128 x 32 tile of rows by k (A's, and
  // a transposed B's): rows tid / 8 + 32 i, k 4 (tid % 8). B's 32 x 128 tile of k by columns: k
  // tid / 32 + 8 i, columns 4 (tid % 32).
  const int row_kc = (tid % 8) * 4, row0 = tid / 8;
  const int col_c = (tid % 32) * 4, col_k0 = tid / 32;
  auto copy_rows = [&](float* dst, const float* src, int64_t r0, int64_t rows, int64_t ld, int64_t k0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = row0 + 32 * i;
      const bool ok = r0 + r < rows && k0 + row_kc < p.k;  // K % 4 == 0: a chunk is all in or all out
      cp_async16(dst + r * kAStride + row_kc, ok ? src + (r0 + r) * ld + k0 + row_kc : src, ok);
    }
  };
  auto load = [&](int stage, int kt) {
    const int64_t k0 = int64_t(kt) * kBK;
    copy_rows(a_tiles + stage * kATile, a, m0, p.m, p.lda, k0);
    float* const bt = b_tiles + stage * kBTile<kTransB>;
    if constexpr (kTransB) {
      copy_rows(bt, b, n0, p.n, p.ldb, k0);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int kr = col_k0 + 8 * i;
        const bool ok = k0 + kr < p.k && n0 + col_c < p.n;  // N % 4 == 0 too
        cp_async16(bt + kr * kBStride + col_c, ok ? b + (k0 + kr) * p.ldb + n0 + col_c : b, ok);
      }
    }
  };

  // The warp's 64 x 32 of C: rows wm + 16 mt (+ 8), columns wn + 8 nt; a lane holds rows g and g + 8,
  // columns 2 t and 2 t + 1 of each m16n8 fragment, and reads A at (g | g + 8, t | t + 4), B at
  // (k t | t + 4, column g).
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32, g = lane / 4, t = lane % 4;
  // B's fragments of the warp's four n-tiles at k step ks, split: [big, small][n-tile][k t, t + 4].
  auto b_fragments = [&](const float* bt, int ks, uint32_t (&bf)[2][4][2]) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int col = wn + nt * 8 + g;
      const float* const b0 = kTransB ? bt + col * kAStride + ks + t : bt + (ks + t) * kBStride + col;
      const float* const b1 = kTransB ? b0 + 4 : b0 + 4 * kBStride;
      const float v0 = *b0, v1 = *b1;
      split_tf32<true>(v0, bf[0][nt][0], bf[1][nt][0]);
      split_tf32<true>(v1, bf[0][nt][1], bf[1][nt][1]);
    }
  };
  // A's fragment of m-tile mt at k step ks, split: [big, small][1][fragment].
  auto a_fragment = [&](const float* at, int mt, int ks, uint32_t (&af)[2][1][4]) {
    const float* const r = at + (wm + mt * 16 + g) * kAStride + ks + t;
    const float v[4] = {r[0], r[8 * kAStride], r[4], r[8 * kAStride + 4]};
#pragma unroll
    for (int j = 0; j < 4; ++j) split_tf32<true>(v[j], af[0][0][j], af[1][0][j]);
  };
  float acc[4][1][4][4] = {};  // [m-tile][1][n-tile][fragment]
  const int ktiles = int((p.k + kBK - 1) / kBK);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's, and tile kt - 1's stage is free again
    if (kt + kStages - 1 < ktiles) load((kt + kStages - 1) % kStages, kt + kStages - 1);
    cp_async_commit();  // an empty group at the end keeps the wait's count right
    const float* const at = a_tiles + (kt % kStages) * kATile;
    const float* const bt = b_tiles + (kt % kStages) * kBTile<kTransB>;
#pragma unroll(kStepSums ? 1 : 4)
    for (int ks = 0; ks < kBK; ks += 8) {
      uint32_t bf[2][4][2];  // [big, small][n-tile][k t, t + 4]
      b_fragments(bt, ks, bf);
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        uint32_t af[2][1][4];  // [big, small][m-tile][fragment]
        a_fragment(at, mt, ks, af);
        if constexpr (kStepSums) {
          float part[1][4][4] = {};  // this k8 step's three terms, summed apart, then added rounded to nearest
          mma_3xtf32<1, 4>(part, af, bf);
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[mt][0][nt][j] += part[0][nt][j];
          }
        } else {
          mma_3xtf32<1, 4>(acc[mt], af, bf);
        }
      }
    }
  }

  float* const c = p.c + z * p.stride_c;
  const float* const res = p.r ? p.r + z * p.stride_c : nullptr;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t row = m0 + wm + mt * 16 + g + half * 8;
      if (row >= p.m) continue;
      const float row_bias = p.bias && p.bias_per_row ? p.bias[row] : 0.0f;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t col = n0 + wn + nt * 8 + 2 * t;
        if (col >= p.n) continue;
        const float* const f = acc[mt][0][nt] + 2 * half;
        float v[2] = {p.alpha * f[0], p.alpha * f[1]};
        const int64_t at = row * p.ldc + col;  // even: a float2 (N and ldc are multiples of 4)
        if (res) {
          const float2 rv = *reinterpret_cast<const float2*>(res + at);
          v[0] += p.beta * rv.x;
          v[1] += p.beta * rv.y;
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float bias = !p.bias ? 0.0f : p.bias_per_row ? row_bias : p.bias[col + j];
          v[j] = activate(v[j] + bias, p.act);
        }
        *reinterpret_cast<float2*>(c + at) = make_float2(v[0], v[1]);
      }
    }
  }
}

template <bool kTransB, bool kStepSums>
void launch(const Tf32x3Product& p) {
  static std::atomic<uint64_t> raised{};
  opt_in_shared_memory(gemm_3xtf32_kernel<kTransB, kStepSums>, kSmemBytes<kTransB>, raised);
  const dim3 grid(unsigned((p.n + kBN - 1) / kBN), unsigned((p.m + kBM - 1) / kBM), unsigned(p.batch));
  gemm_3xtf32_kernel<kTransB, kStepSums><<<grid, kThreads, kSmemBytes<kTransB>, stream()>>>(p);
  INGOT_CUDA_LAUNCH_CHECK();
}

bool fits(const Tf32x3Product& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0) return false;
  if (p.n % 4 || p.k % 4 || p.lda % 4 || p.ldb % 4 || p.ldc % 4 || p.stride_a % 4 || p.stride_b % 4 || p.stride_c % 4)
    return false;
  if (!aligned16(p.a) || !aligned16(p.b) || !aligned16(p.c) || (p.r && !aligned16(p.r))) return false;
  return p.batch <= 65535 && (p.m + kBM - 1) / kBM <= 65535 && (p.n + kBN - 1) / kBN <= INT_MAX &&
         p.k <= int64_t(INT_MAX) - kBK;
}

}  // namespace

bool run_tf32x3(const Tf32x3Product& p) {
  const int64_t mode = flags::integer("INGOT_GEMM_3XTF32");
  if (mode <= 0 || allow_tf32() || !fits(p)) return false;
  // Mode 1: a grid of at least one block per SM whose tiles are mostly filled (the share of the
  // 128 x 128 x 32 tiles' products that are the product's: narrow layers such as MobileNetV3's
  // 24 -> 72 1x1 convolutions stay on the libraries' kernels, which are made for them).
  if (mode == 1) {
    const int64_t mt = (p.m + kBM - 1) / kBM, nt = (p.n + kBN - 1) / kBN, kt = (p.k + kBK - 1) / kBK;
    const double fill = double(p.m) / double(mt * kBM) * double(p.n) / double(nt * kBN) * double(p.k) / double(kt * kBK);
    if (mt * nt * p.batch < sm_count() || 100.0 * fill < double(flags::integer("INGOT_GEMM_3XTF32_MIN_FILL")))
      return false;
  }
  const bool step_sums = flags::enabled("INGOT_GEMM_3XTF32_STEP_SUMS");
  if (p.trans_b) {
    step_sums ? launch<true, true>(p) : launch<true, false>(p);
  } else {
    step_sums ? launch<false, true>(p) : launch<false, false>(p);
  }
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool gemm_on_tf32x3(const GemmArgs& g) {
  if (g.dtype != DType::Float32 || g.trans_a) return false;
  Tf32x3Product p;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.batch = g.batch;
  p.a = static_cast<const float*>(g.a);
  p.lda = g.lda;
  p.stride_a = g.stride_a;
  p.b = static_cast<const float*>(g.b);
  p.ldb = g.ldb;
  p.stride_b = g.stride_b;
  p.trans_b = g.trans_b;
  p.c = static_cast<float*>(g.c);
  p.ldc = g.ldc;
  p.stride_c = g.stride_c;
  if (g.beta != 0.0f) p.r = static_cast<const float*>(g.c_in ? g.c_in : g.c);
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.bias = static_cast<const float*>(g.bias);
  p.act = g.epilogue == Epilogue::Relu ? Act::Relu : g.epilogue == Epilogue::Gelu ? Act::GeluTanh : Act::None;
  return run_tf32x3(p);
}

int64_t tf32x3_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace ingot::cuda
