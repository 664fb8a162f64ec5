// ai.ingot.Attention on CUDA: Y = Softmax(scale * Q K^T + mask) V (ops/semantics/attention_args.h).
//
// cuDNN path first (float16 and bfloat16 without a mask, K and V not shared across heads or
// batches, INGOT_CUDNN_ATTENTION): cuDNN's fused flash attention (cudnn_attention_graph.h), whose
// Hopper kernels (warpgroup MMA) run Whisper-tiny's attention at ~380 TFLOP/s on an H100 against the
// flash kernel's ~230; the flash kernel below when cuDNN has no engine for the problem.
//
// Flash path (float16, bfloat16 and float32, head size D == Dv of 32, 64 or 128): FlashAttention-2's
// schedule. A block of 4 warps owns 128 query rows of one batch (64 for head size 128); K and V
// stream through shared memory in tiles of 64 keys (cp.async, two stages, so the next tile loads
// while this one computes); each warp computes its 32 (16) x 64 score tile with mma.sync m16n8k16
// (float32 accumulation; each K and V fragment read once for both m16 tiles), keeps
// the running row maximum and sum (online softmax in base 2) and accumulates P V in registers; Y is
// written once; Q, K, V and Y may be [B, T, H, D] (row strides of H * D, the `transposed` flags).
// Scores never reach global memory: per batch the traffic is Q, K, V and Y (plus the
// mask, read where the scores are, through broadcast strides) instead of Tq x Tk scores written and
// read three times. Rows are padded by 8 elements in shared memory so that the fragment loads and
// ldmatrix hit 32 distinct banks. Float32 runs the same schedule on m16n8k8 TF32 products, three
// per product (3xTF32, tensor_core.cuh: about float32's accuracy).
//
// Materialized path (everything else: float64, other head sizes, leading dims that do not
// fold into two levels, INGOT_FLASH_ATTENTION=0): what the unfused graph does, in chunks of batches
// so the scores stay below kChunkBytes: S = mask (broadcast) or nothing, S = scale * Q K^T + S
// (cuBLASLt), the Softmax kernel in place, Y = S V (cuBLASLt).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "backends/cuda/cudnn_attention_graph.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/shared_memory_opt_in.cuh"
#include "backends/cuda/kernels/tensor_core.cuh"
#include "core/flags.h"
#include "backends/cuda/kernels/reduction.h"
#include "ops/semantics/attention_args.h"

namespace ingot {
namespace {

using cuda::load;

constexpr int kWarps = 4;
constexpr int kKeys = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;
  void* y;
  int64_t tq, tk;
  int64_t inner;  // batch = outer * inner; blockIdx.x is the batch
  int64_t q_stride[2], k_stride[2], v_stride[2], y_stride[2], mask_stride[2];
  int64_t q_row, k_row, v_row, y_row;  // element strides between rows (along T)
  int64_t mask_q, mask_k;
  float scale_log2;  // scale * log2(e): scores in base 2
};

// ---- sm_80+ building blocks (tensor_core.cuh; Ingot builds for sm_90) ----

using cuda::aligned16;
using cuda::cp_async16;
using cuda::cp_async_commit;
using cuda::cp_async_wait;
using cuda::ldmatrix_x4;
using cuda::ldmatrix_x4_trans;
using cuda::mma16816;
using cuda::mma_3xtf32;
using cuda::split_tf32;

// 2^x by the SFU alone (ex2.approx.ftz: ~2 ulp, subnormal results flushed to 0, 2^-inf = 0): the
// probabilities are rounded to 16 bits right after, and exp2f's extra range handling is a few
// instructions per score.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Shared-memory row stride (elements) of a tile of head size D: rows padded by 16 bytes, so that
// the fragment loads (and ldmatrix) of eight consecutive rows hit distinct banks.
template <class T, int D>
constexpr int smem_row() {
  return D + 16 / int(sizeof(T));
}

// `kTileRows` rows of D elements (`stride` apart) from global row `row0` on (rows past `rows`
// zero-filled) into shared memory rows of smem_row<T, D>().
template <class T, int D, int kTileRows>
__device__ __forceinline__ void load_tile(T* smem, const T* g, int64_t stride, int64_t row0, int64_t rows) {
  constexpr int kVec = 16 / int(sizeof(T));
  constexpr int kChunks = D / kVec;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < kTileRows * kChunks; c += kWarps * 32) {
    const int r = c / kChunks, col = (c % kChunks) * kVec;
    const bool valid = row0 + r < rows;
    cp_async16(smem + r * smem_row<T, D>() + col, g + (valid ? row0 + r : 0) * stride + col, valid);
  }
}

// Query rows per warp, in m16 tiles: two for head sizes up to 64 (each K and V fragment read from
// shared memory then serves two products; Whisper-tiny fp16 b32 on the H200: 6.04 -> 5.53 ms, the
// attention 2.45 -> 2.11 ms per run), one for 128 (the accumulators would not fit in registers).
template <int D>
constexpr int flash_m_tiles() {
  return D <= 64 ? 2 : 1;
}
template <int M>
constexpr int flash_block_rows() {
  return 16 * M * kWarps;
}
template <class T, int D, int M>
constexpr int flash_smem_bytes() {
  // Q, then K and V in two stages each.
  return (flash_block_rows<M>() + 4 * kKeys) * smem_row<T, D>() * int(sizeof(T));
}

// What both flash kernels do around their products: the block's batch pointers, the online softmax
// of a score tile, the output. A warp's fragments follow mma's C layout: s[m][n] holds rows r_lo and
// r_lo + 8 of m-tile m, columns c2 and c2 + 1 of n-tile n (8 keys).
template <class T, int D, int M, bool kMask>
struct FlashBlock {
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const FlashParams& p;
  const T *q, *k, *v, *mask = nullptr;
  int64_t outer, inner;
  int64_t warp_row0;  // this warp's first query row
  int r_lo, c2;
  float row_max[M][2], row_sum[M][2];  // rows r_lo and r_lo + 8 of each m-tile

  __device__ explicit FlashBlock(const FlashParams& params) : p(params) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    r_lo = lane >> 2, c2 = (lane & 3) * 2;
    const int64_t b = blockIdx.x;
    outer = b / p.inner, inner = b - outer * p.inner;
    q = static_cast<const T*>(p.q) + outer * p.q_stride[0] + inner * p.q_stride[1];
    k = static_cast<const T*>(p.k) + outer * p.k_stride[0] + inner * p.k_stride[1];
    v = static_cast<const T*>(p.v) + outer * p.v_stride[0] + inner * p.v_stride[1];
    if constexpr (kMask) mask = static_cast<const T*>(p.mask) + outer * p.mask_stride[0] + inner * p.mask_stride[1];
    warp_row0 = int64_t(blockIdx.y) * flash_block_rows<M>() + warp * 16 * M;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      row_max[m][0] = row_max[m][1] = kNegInf;
      row_sum[m][0] = row_sum[m][1] = 0.0f;
    }
  }

  // Scores of keys [key0, key0 + kKeys) -> probabilities exp2(logit - running maximum) in place
  // (logits: scale, mask, -inf past the last key, in base 2); o and the sums rescaled to the new
  // maximum.
  __device__ __forceinline__ void softmax_tile(float (&s)[M][kKeys / 8][4], float (&o)[M][D / 8][4], int64_t key0) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float tile_max[2] = {kNegInf, kNegInf};
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1;
          const int64_t key = key0 + n * 8 + c2 + (e & 1);
          float x = s[m][n][e] * p.scale_log2;
          if constexpr (kMask) {
            const int64_t qrow = warp_row0 + m * 16 + r_lo + h * 8;
            if (key < p.tk && qrow < p.tq) x += float(load(mask[qrow * p.mask_q + key * p.mask_k])) * kLog2e;
          }
          if (key >= p.tk) x = kNegInf;
          s[m][n][e] = x;
          tile_max[h] = fmaxf(tile_max[h], x);
        }
      }
      float base[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const float mx = fmaxf(row_max[m][h], tile_max[h]);
        base[h] = mx == kNegInf ? 0.0f : mx;  // a row masked so far: exp2(-inf - 0) = 0, no NaN
        const float corr = fast_exp2(row_max[m][h] - base[h]);
        row_max[m][h] = mx;
        row_sum[m][h] *= corr;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
          o[m][j][2 * h] *= corr;
          o[m][j][2 * h + 1] *= corr;
        }
      }
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[m][n][e] = fast_exp2(s[m][n][e] - base[e >> 1]);
          row_sum[m][e >> 1] += s[m][n][e];
        }
      }
    }
  }

  // Y = O / row sums, written once.
  __device__ __forceinline__ void store(const float (&o)[M][D / 8][4]) {
    T* y = static_cast<T*>(p.y) + outer * p.y_stride[0] + inner * p.y_stride[1];
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = row_sum[m][h];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = 1.0f / sum;  // a fully masked row: 0 * inf = NaN, as the unfused graph
        const int64_t row = warp_row0 + m * 16 + r_lo + h * 8;
        if (row >= p.tq) continue;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
          T* at = y + row * p.y_row + j * 8 + c2;
          if constexpr (std::is_same_v<T, float>) {
            *reinterpret_cast<float2*>(at) = make_float2(o[m][j][2 * h] * inv, o[m][j][2 * h + 1] * inv);
          } else {
            *reinterpret_cast<uint32_t*>(at) = pack2<T>(o[m][j][2 * h] * inv, o[m][j][2 * h + 1] * inv);
          }
        }
      }
    }
  }
};

template <int M, int D>
__device__ __forceinline__ void zero(float (&f)[M][D][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int j = 0; j < D; ++j) f[m][j][0] = f[m][j][1] = f[m][j][2] = f[m][j][3] = 0.0f;
  }
}

// Both kernels' shared memory (Q, then K and V in two stages each: flash_smem_bytes()) and their
// first loads: the block's Q rows and K/V tile 0, in flight when the constructor returns.
template <class T, int D, int M>
struct FlashTiles {
  T *q, *k, *v;
  template <bool kMask>
  __device__ FlashTiles(unsigned char* smem, const FlashBlock<T, D, M, kMask>& blk) {
    constexpr int kBlockRows = flash_block_rows<M>(), S = smem_row<T, D>();
    q = reinterpret_cast<T*>(smem);
    k = q + kBlockRows * S;
    v = k + 2 * kKeys * S;
    load_tile<T, D, kBlockRows>(q, blk.q, blk.p.q_row, int64_t(blockIdx.y) * kBlockRows, blk.p.tq);
    load_tile<T, D, kKeys>(k, blk.k, blk.p.k_row, 0, blk.p.tk);
    load_tile<T, D, kKeys>(v, blk.v, blk.p.v_row, 0, blk.p.tk);
    cp_async_commit();
  }
};

// The K/V pipeline of both kernels: tile t + 1 loads into the other stage while tile t computes.
// Returns after tile t has arrived and is visible to the block.
template <class T, int D, int M, bool kMask>
__device__ __forceinline__ void next_kv_tile(const FlashBlock<T, D, M, kMask>& blk, T* sk, T* sv, int t, int tiles) {
  constexpr int S = smem_row<T, D>();
  const int stage = t & 1;
  if (t + 1 < tiles) {
    load_tile<T, D, kKeys>(sk + (stage ^ 1) * kKeys * S, blk.k, blk.p.k_row, int64_t(t + 1) * kKeys, blk.p.tk);
    load_tile<T, D, kKeys>(sv + (stage ^ 1) * kKeys * S, blk.v, blk.p.v_row, int64_t(t + 1) * kKeys, blk.p.tk);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
  __syncthreads();
}

// 16-bit inputs: mma.sync m16n8k16, probabilities rounded to the input type for P V.
template <class T, int D, int M, bool kMask>
__global__ void __launch_bounds__(kWarps * 32) flash_attention_kernel(FlashParams p) {
  constexpr int S = smem_row<T, D>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  FlashBlock<T, D, M, kMask> blk(p);
  const FlashTiles<T, D, M> tiles_in(smem_raw, blk);
  T* const sq = tiles_in.q;
  T* const sk = tiles_in.k;
  T* const sv = tiles_in.v;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tiles = int((p.tk + kKeys - 1) / kKeys);

  float o[M][D / 8][4];
  zero(o);
  for (int t = 0; t < tiles; ++t) {
    next_kv_tile(blk, sk, sv, t, tiles);
    const int stage = t & 1;
    // Scores of this warp's rows against the tile's 64 keys. Q's fragments come from shared memory
    // one k-step at a time (registers kept for the accumulators), K's two n-tiles per ldmatrix
    // (lanes 0-15 address tile n's keys, 16-31 tile n + 1's; odd groups of 8 the upper 8 columns),
    // each K fragment used by every m-tile.
    const T* kt = sk + stage * kKeys * S;
    float s[M][kKeys / 8][4];
    zero(s);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[M][4];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        ldmatrix_x4(a[m], sq + ((warp * M + m) * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + kk * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int n = 0; n < kKeys / 8; n += 2) {
        uint32_t r[4];
        ldmatrix_x4(r, kt + ((n + (lane >> 4)) * 8 + (lane & 7)) * S + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          mma16816<T>(s[m][n], a[m], r[0], r[1]);
          mma16816<T>(s[m][n + 1], a[m], r[2], r[3]);
        }
      }
    }
    blk.softmax_tile(s, o, int64_t(t) * kKeys);
    // P as 16-bit A fragments: n-tiles 2i and 2i + 1 form k-step i.
    uint32_t pf[M][kKeys / 16][4];
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        pf[m][n / 2][(n & 1) * 2] = pack2<T>(s[m][n][0], s[m][n][1]);
        pf[m][n / 2][(n & 1) * 2 + 1] = pack2<T>(s[m][n][2], s[m][n][3]);
      }
    }
    // O += P V, each V fragment used by every m-tile.
    const T* vt = sv + stage * kKeys * S;
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < D / 16; ++j) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, vt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + j * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          mma16816<T>(o[m][2 * j], pf[m][kk], r[0], r[1]);
          mma16816<T>(o[m][2 * j + 1], pf[m][kk], r[2], r[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's loads overwrite the other stage
  }
  blk.store(o);
}

// ---- float32: three TF32 products per product (3xTF32: split_tf32 and mma_3xtf32 in
// tensor_core.cuh); the materialized path's float32 cuBLASLt products run on the FMA units ----

// Fragments of m16n8k8 (lane = 4 g + i): A holds (g, i), (g + 8, i), (g, i + 4), (g + 8, i + 4);
// B holds (k = i, n = g), (k = i + 4, n = g). P V takes P's C fragment (row g, keys 2i and 2i + 1
// of an n-tile) as its A fragment with the key order permuted (key 2i as k = i, 2i + 1 as i + 4),
// and reads V's rows in the same order. Rows padded by 4 floats: fragment loads hit 32 banks.
template <int D, int M, bool kMask, bool kFastSplit>
__global__ void __launch_bounds__(kWarps * 32) flash_attention_f32_kernel(FlashParams p) {
  constexpr int S = smem_row<float, D>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  FlashBlock<float, D, M, kMask> blk(p);
  const FlashTiles<float, D, M> tiles_in(smem_raw, blk);
  float* const sq = tiles_in.q;
  float* const sk = tiles_in.k;
  float* const sv = tiles_in.v;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, i = lane & 3;
  const int tiles = int((p.tk + kKeys - 1) / kKeys);

  float o[M][D / 8][4];
  zero(o);
  for (int t = 0; t < tiles; ++t) {
    next_kv_tile(blk, sk, sv, t, tiles);
    const int stage = t & 1;
    const float* kt = sk + stage * kKeys * S;
    float s[M][kKeys / 8][4];
    zero(s);
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk) {
      uint32_t a[2][M][4], b[2][kKeys / 8][2];  // [0]: big, [1]: small
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float* qa = sq + ((warp * M + m) * 16 + g) * S + kk * 8 + i;
        split_tf32<kFastSplit>(qa[0], a[0][m][0], a[1][m][0]);
        split_tf32<kFastSplit>(qa[8 * S], a[0][m][1], a[1][m][1]);
        split_tf32<kFastSplit>(qa[4], a[0][m][2], a[1][m][2]);
        split_tf32<kFastSplit>(qa[8 * S + 4], a[0][m][3], a[1][m][3]);
      }
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        const float* kb = kt + (n * 8 + g) * S + kk * 8 + i;
        split_tf32<kFastSplit>(kb[0], b[0][n][0], b[1][n][0]);
        split_tf32<kFastSplit>(kb[4], b[0][n][1], b[1][n][1]);
      }
      mma_3xtf32(s, a, b);
    }
    blk.softmax_tile(s, o, int64_t(t) * kKeys);
    const float* vt = sv + stage * kKeys * S;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      uint32_t a[2][M][4], b[2][D / 8][2];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        split_tf32<kFastSplit>(s[m][n][0], a[0][m][0], a[1][m][0]);
        split_tf32<kFastSplit>(s[m][n][2], a[0][m][1], a[1][m][1]);
        split_tf32<kFastSplit>(s[m][n][1], a[0][m][2], a[1][m][2]);
        split_tf32<kFastSplit>(s[m][n][3], a[0][m][3], a[1][m][3]);
      }
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const float* vb = vt + (n * 8 + 2 * i) * S + j * 8 + g;
        split_tf32<kFastSplit>(vb[0], b[0][j][0], b[1][j][0]);
        split_tf32<kFastSplit>(vb[S], b[0][j][1], b[1][j][1]);
      }
      mma_3xtf32(o, a, b);
    }
    __syncthreads();  // the next iteration's loads overwrite the other stage
  }
  blk.store(o);
}

bool flash_enabled() { return flags::enabled("INGOT_FLASH_ATTENTION"); }

template <class T, int D, int M, bool kMask>
void launch_flash(const FlashParams& p, int64_t batch) {
  constexpr int bytes = flash_smem_bytes<T, D, M>();
  const bool fast_split = std::is_same_v<T, float> && flags::enabled("INGOT_TF32_FAST_SPLIT");
  auto kernel = [fast_split] {
    if constexpr (std::is_same_v<T, float>) {
      return fast_split ? flash_attention_f32_kernel<D, M, kMask, true> : flash_attention_f32_kernel<D, M, kMask, false>;
    } else {
      return flash_attention_kernel<T, D, M, kMask>;
    }
  }();
  if constexpr (bytes > 48 * 1024) {
    static std::atomic<uint64_t> raised_for[2]{};  // per kernel variant
    cuda::opt_in_shared_memory(kernel, bytes, raised_for[fast_split]);
  }
  const dim3 grid(unsigned(batch), unsigned((p.tq + flash_block_rows<M>() - 1) / flash_block_rows<M>()));
  kernel<<<grid, kWarps * 32, bytes, cuda::stream()>>>(p);
  INGOT_CUDA_LAUNCH_CHECK();
}

// cuDNN's fused attention (cudnn_attention_graph.h) for 16-bit inputs without a mask whose leading
// dims fold in two, where an engine takes the problem; false otherwise. The graph (or that none
// runs it) is kept per node and problem.
struct CudnnAttentionState {
  std::map<std::string, std::shared_ptr<const cuda::AttentionGraph>> graphs;
};

bool try_cudnn(const sem::AttentionArgs& a, KernelContext& ctx, Tensor& y) {
  const DType dt = y.dtype();
  if ((dt != DType::Float16 && dt != DType::BFloat16) || a.has_mask || !cuda::AttentionGraph::enabled()) return false;
  const auto lead = sem::attention_lead2(a);
  if (!lead) return false;
  cuda::AttentionGraphArgs args{ctx.input(0).raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(),
                                y.raw_data(), a.scale};
  if (!aligned16(args.q) || !aligned16(args.k) || !aligned16(args.v) || !aligned16(args.y)) return false;
  cuda::AttentionGraphSpec s;
  s.dtype = dt;
  s.batch = lead->outer, s.heads = lead->inner;
  s.tq = a.tq, s.tk = a.tk, s.d = a.d, s.dv = a.dv;
  const int64_t rows[4] = {a.q_row, a.k_row, a.v_row, a.y_row};
  const int64_t* leads[4] = {lead->q, lead->k, lead->v, lead->y};
  int64_t* strides[4] = {s.q, s.k, s.v, s.y};
  const int64_t cols[4] = {a.d, a.d, a.dv, a.dv}, lengths[4] = {a.tq, a.tk, a.tk, a.tq};
  for (int i = 0; i < 4; ++i) {
    strides[i][0] = leads[i][0], strides[i][1] = leads[i][1], strides[i][2] = rows[i];
    // K and V shared across heads or batches (stride 0) stay on the flash kernel; a dim of 1 gets
    // its packed stride (cuDNN's engines take no zero strides).
    if ((s.batch > 1 && strides[i][0] == 0) || (s.heads > 1 && strides[i][1] == 0)) return false;
    if (s.heads == 1) strides[i][1] = lengths[i] * cols[i];
    if (s.batch == 1) strides[i][0] = s.heads * lengths[i] * cols[i];
  }
  const std::string key = fmt::format("{}|{}|b={}|h={}|tq={}|tk={}|d={}|dv={}|q={},{},{}|k={},{},{}|v={},{},{}|y={},{},{}",
                                      cuda::arch_name(), dtype_name(dt), s.batch, s.heads, s.tq, s.tk, s.d, s.dv,
                                      s.q[0], s.q[1], s.q[2], s.k[0], s.k[1], s.k[2], s.v[0], s.v[1], s.v[2], s.y[0],
                                      s.y[1], s.y[2]);
  auto& graphs = ctx.state<CudnnAttentionState>().graphs;
  auto it = graphs.find(key);
  if (it == graphs.end()) it = graphs.emplace(key, cuda::AttentionGraph::get(s, args, key)).first;
  if (!it->second) return false;
  it->second->run(args);
  return true;
}

// The flash path when it applies; false otherwise.
bool try_flash(const sem::AttentionArgs& a, const KernelContext& ctx, Tensor& y) {
  const DType dt = y.dtype();
  if (!flash_enabled() || (dt != DType::Float16 && dt != DType::BFloat16 && dt != DType::Float32) || a.d != a.dv ||
      (a.d != 32 && a.d != 64 && a.d != 128) || a.batch > std::numeric_limits<int32_t>::max() ||
      (a.tq + 15) / 16 > 65535)
    return false;
  const auto lead = sem::attention_lead2(a);
  if (!lead) return false;
  FlashParams p{};
  p.q = ctx.input(0).raw_data();
  p.k = ctx.input(1).raw_data();
  p.v = ctx.input(2).raw_data();
  p.mask = a.has_mask ? ctx.input(3).raw_data() : nullptr;
  p.y = y.raw_data();
  // 16-byte rows for cp.async (row strides are multiples of D, a multiple of 8 elements).
  if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.y)) return false;
  p.tq = a.tq, p.tk = a.tk, p.inner = lead->inner;
  for (int i = 0; i < 2; ++i) {
    p.q_stride[i] = lead->q[i], p.k_stride[i] = lead->k[i], p.v_stride[i] = lead->v[i], p.y_stride[i] = lead->y[i];
    p.mask_stride[i] = lead->mask[i];
  }
  p.q_row = a.q_row, p.k_row = a.k_row, p.v_row = a.v_row, p.y_row = a.y_row;
  p.mask_q = a.mask_q, p.mask_k = a.mask_k;
  p.scale_log2 = a.scale * kLog2e;
  auto go = [&]<class T>() {
    auto with_d = [&]<int D>() {
      constexpr int M = flash_m_tiles<D>();
      if constexpr (std::is_same_v<T, float> && M == 2) {
        // Float32 whose blocks would leave SMs idle (Whisper-tiny at batch 1: 6 heads x 12 blocks of
        // 128 query rows on a 132-SM H100): one m-tile per warp, twice the blocks.
        const int64_t blocks = a.batch * ((p.tq + flash_block_rows<M>() - 1) / flash_block_rows<M>());
        if (blocks < cuda::sm_count()) {
          if (a.has_mask) {
            launch_flash<T, D, 1, true>(p, a.batch);
          } else {
            launch_flash<T, D, 1, false>(p, a.batch);
          }
          return;
        }
      }
      if (a.has_mask) {
        launch_flash<T, D, M, true>(p, a.batch);
      } else {
        launch_flash<T, D, M, false>(p, a.batch);
      }
    };
    if (a.d == 32) with_d.template operator()<32>();
    if (a.d == 64) with_d.template operator()<64>();
    if (a.d == 128) with_d.template operator()<128>();
  };
  if (dt == DType::Float16) {
    go.template operator()<__half>();
  } else if (dt == DType::BFloat16) {
    go.template operator()<__nv_bfloat16>();
  } else {
    go.template operator()<float>();
  }
  return true;
}

// ---- materialized path ----

constexpr int64_t kChunkBytes = int64_t(256) << 20;

template <class T>
__global__ void broadcast_mask_kernel(T* __restrict__ s, const T* __restrict__ mask, int64_t n, int64_t first,
                                      cuda::Indexer index) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::grid_stride()) s[i] = mask[index.offset(first + i)];
}

// Batches [start, start + count) that one strided-batched product covers, with each operand's stride.
struct Run {
  int64_t start = 0, count = 1, sq = 0, sk = 0, sv = 0, sy = 0;
};

// The runs of batches [b0, b0 + nb): the whole range when every operand advances by one constant
// stride over it (contiguous or fully broadcast leading dims); else the batches that share an outer
// index of the two-level fold ([B, T, H, D] operands: H per run); else one batch per run.
std::vector<Run> runs(const sem::AttentionArgs& a, const std::optional<sem::AttentionLead2>& lead, int64_t b0,
                      int64_t nb) {
  Run whole;
  whole.start = b0, whole.count = nb;
  auto uniform = [&](const std::vector<int64_t>& strides, int64_t& step) {
    step = nb > 1 ? a.offset(strides, b0 + 1) - a.offset(strides, b0) : 0;
    for (int64_t b = b0 + 1; b < b0 + nb; ++b) {
      if (a.offset(strides, b) - a.offset(strides, b - 1) != step) return false;
    }
    return true;
  };
  if (uniform(a.q_lead, whole.sq) && uniform(a.k_lead, whole.sk) && uniform(a.v_lead, whole.sv) &&
      uniform(a.y_lead, whole.sy))
    return {whole};
  std::vector<Run> out;
  for (int64_t b = b0; b < b0 + nb;) {
    Run r;
    r.start = b;
    if (lead) {
      r.count = std::min(b0 + nb, (b / lead->inner + 1) * lead->inner) - b;
      r.sq = lead->q[1], r.sk = lead->k[1], r.sv = lead->v[1], r.sy = lead->y[1];
    }
    out.push_back(r);
    b += r.count;
  }
  return out;
}

// Batch b's rows (rows x cols) between an operand with two-level lead strides and row stride
// (`strided`) and a packed [batch, rows, cols] copy; `unpack` writes the strided side.
template <class T>
__global__ void pack_rows_kernel(T* __restrict__ packed, T* __restrict__ strided, int64_t n, int64_t rows,
                                 int64_t cols, int64_t inner, int64_t s_outer, int64_t s_inner, int64_t row_stride,
                                 bool unpack) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::grid_stride()) {
    const int64_t col = i % cols, r = (i / cols) % rows, b = i / (cols * rows);
    const int64_t at = (b / inner) * s_outer + (b % inner) * s_inner + r * row_stride + col;
    if (unpack) {
      strided[at] = packed[i];
    } else {
      packed[i] = strided[at];
    }
  }
}

void pack_rows(DType dt, void* packed, const void* strided, int64_t batch, int64_t rows, int64_t cols,
               const sem::AttentionLead2& lead, const int64_t (&lead_strides)[2], int64_t row_stride, bool unpack) {
  const int64_t n = batch * rows * cols;
  if (n == 0) return;
  cuda::dispatch_device<INGOT_CUDA_FLOAT_TYPES>(dt, [&]<class T>() {
    pack_rows_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<T*>(packed), static_cast<T*>(const_cast<void*>(strided)), n, rows, cols, lead.inner,
        lead_strides[0], lead_strides[1], row_stride, unpack);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

void materialized_impl(const sem::AttentionArgs& a, const KernelContext& ctx, const void* q_in, const void* k_in,
                       const void* v_in, void* y_out, Device device);

void materialized(const sem::AttentionArgs& a, const KernelContext& ctx, Tensor& y) {
  const void* q = ctx.input(0).raw_data();
  const void* k = ctx.input(1).raw_data();
  const void* v = ctx.input(2).raw_data();
  const auto lead = sem::attention_lead2(a);
  if (!lead || !(a.transposed[0] || a.transposed[1] || a.transposed[2] || a.transposed[3])) {
    materialized_impl(a, ctx, q, k, v, y.raw_data(), y.device());
    return;
  }
  // [B, T, H, D] operands: packed into [B, H, T, D] copies first (what the unfused graph's
  // Transposes did), so the products run as one strided batch instead of one per outer index
  // (Whisper-tiny fp32 at batch 32 on the H200: 45.6 ms that way, 39 ms unfused).
  const DType dt = y.dtype();
  sem::AttentionArgs p = a;
  Tensor copies[4];
  const void* ins[3] = {q, k, v};
  const int64_t rows[4] = {a.tq, a.tk, a.tk, a.tq}, cols[4] = {a.d, a.d, a.dv, a.dv};
  const int64_t* strides[4] = {lead->q, lead->k, lead->v, lead->y};
  const int64_t row_strides[4] = {a.q_row, a.k_row, a.v_row, a.y_row};
  std::vector<int64_t>* leads[4] = {&p.q_lead, &p.k_lead, &p.v_lead, &p.y_lead};
  int64_t* packed_rows[4] = {&p.q_row, &p.k_row, &p.v_row, &p.y_row};
  for (int i = 0; i < 4; ++i) {
    if (!a.transposed[i]) continue;
    copies[i] = Tensor::empty(dt, {a.batch, rows[i], cols[i]}, y.device());
    if (i < 3) {
      pack_rows(dt, copies[i].raw_data(), ins[i], a.batch, rows[i], cols[i], *lead, {strides[i][0], strides[i][1]},
                row_strides[i], false);
      ins[i] = copies[i].raw_data();
    }
    *leads[i] = sem::contiguous_lead(a.lead, rows[i] * cols[i]);
    *packed_rows[i] = cols[i];
    p.transposed[i] = false;
  }
  materialized_impl(p, ctx, ins[0], ins[1], ins[2], a.transposed[3] ? copies[3].raw_data() : y.raw_data(),
                    y.device());
  if (a.transposed[3]) {
    pack_rows(dt, copies[3].raw_data(), y.raw_data(), a.batch, a.tq, a.dv, *lead, {lead->y[0], lead->y[1]}, a.y_row,
              true);
  }
}

void materialized_impl(const sem::AttentionArgs& a, const KernelContext& ctx, const void* q_in, const void* k_in,
                       const void* v_in, void* y_out, Device device) {
  const auto lead = sem::attention_lead2(a);
  const DType dt = ctx.input(0).dtype();
  const size_t elem = dtype_size(dt);
  const int64_t matrix = a.tq * a.tk;
  const int64_t chunk = std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(1, matrix * int64_t(elem)), 1, a.batch);
  Tensor scores = Tensor::empty(dt, {chunk, a.tq, a.tk}, device);
  const char* q = static_cast<const char*>(q_in);
  const char* k = static_cast<const char*>(k_in);
  const char* v = static_cast<const char*>(v_in);
  char* out = static_cast<char*>(y_out);
  char* s = static_cast<char*>(scores.raw_data());
  Shape all_scores = a.lead;
  all_scores.push_back(a.tq);
  all_scores.push_back(a.tk);
  const cuda::Indexer mask_index = a.has_mask ? cuda::make_indexer(ctx.input(3).shape(), all_scores) : cuda::Indexer{};
  for (int64_t b0 = 0; b0 < a.batch; b0 += chunk) {
    const int64_t nb = std::min(chunk, a.batch - b0);
    if (a.has_mask) {
      // The mask of batches [b0, b0 + nb), which gemm's beta = 1 then adds to the product.
      const int64_t n = nb * matrix;
      cuda::dispatch_device<INGOT_CUDA_FLOAT_TYPES>(dt, [&]<class T>() {
        broadcast_mask_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
            reinterpret_cast<T*>(s), cuda::ptr<const T>(ctx.input(3)), n, b0 * matrix, mask_index);
        INGOT_CUDA_LAUNCH_CHECK();
      });
    }
    for (const Run& r : runs(a, lead, b0, nb)) {
      cuda::GemmArgs g;
      g.dtype = dt;
      g.trans_b = true;
      g.m = a.tq, g.n = a.tk, g.k = a.d;
      g.a = q + a.offset(a.q_lead, r.start) * int64_t(elem), g.lda = a.q_row, g.stride_a = r.sq;
      g.b = k + a.offset(a.k_lead, r.start) * int64_t(elem), g.ldb = a.k_row, g.stride_b = r.sk;
      g.c = s + (r.start - b0) * matrix * int64_t(elem), g.ldc = a.tk, g.stride_c = matrix;
      g.batch = r.count;
      g.alpha = a.scale;
      g.beta = a.has_mask ? 1.0f : 0.0f;
      cuda::gemm(g);
    }
    cuda::softmax_rows(dt, s, s, nb * a.tq, a.tk);
    for (const Run& r : runs(a, lead, b0, nb)) {
      cuda::GemmArgs g;
      g.dtype = dt;
      g.m = a.tq, g.n = a.dv, g.k = a.tk;
      g.a = s + (r.start - b0) * matrix * int64_t(elem), g.lda = a.tk, g.stride_a = matrix;
      g.b = v + a.offset(a.v_lead, r.start) * int64_t(elem), g.ldb = a.v_row, g.stride_b = r.sv;
      g.c = out + a.offset(a.y_lead, r.start) * int64_t(elem), g.ldc = a.y_row, g.stride_c = r.sy;
      g.batch = r.count;
      cuda::gemm(g);
    }
  }
}

void attention_kernel(KernelContext& ctx) {
  const sem::AttentionArgs a = sem::attention_args(ctx);
  Tensor& y = ctx.allocate(0, ctx.input(0).dtype(), a.out_shape);
  if (y.numel() == 0) return;
  if (a.tk == 0) {  // an empty softmax: the product with no keys is zero, as MatMul's
    INGOT_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda::stream()));
    return;
  }
  if (!try_cudnn(a, ctx, y) && !try_flash(a, ctx, y)) materialized(a, ctx, y);
}

}  // namespace

INGOT_CUDA_KERNEL(Attention, attention_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot
