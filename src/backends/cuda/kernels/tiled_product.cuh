// The cold tier's matrix product: C[z][m][n] = sum_k A(z, m, k) B(z, k, n) on CUDA cores, of
// Ingot's own. What a package's first run computes while cuDNN's plans and cuBLASLt's kernels are
// still being prepared in the background (INGOT_CUDA_COLD_KERNELS; the libraries' first plan or
// kernel of a fresh process costs milliseconds each, where this kernel is loaded with Ingot's own).
// Operands come through loaders and C goes out through a store functor, so one kernel serves matrix
// products (gemm.cu: strided, transposed, batched) and convolutions as implicit GEMMs (conv.cu:
// NCHW or NHWC gathers, the epilogue in the store). Float32 accumulation, 16-bit operands widened:
// exact float32, never TF32.
//
// A block of 256 threads computes a 64 x 64 tile of C (a thread 4 x 4 outputs, 16 rows and 16
// columns apart), stepping through K 16 at a time with both operands' slices in shared memory. A
// loader whose `k_inner` is true reads K contiguously (row-major A, transposed B, convolution
// weights): its slice is filled k-fastest across threads, others m- (or n-) fastest, so that a warp
// reads neighbouring addresses either way. A thread fills the same 4 rows (columns) of each slice
// at every step, so a loader splits its addressing in two: `line(z, i)` once per tile for row i of
// A (column i of B; e.g. a convolution's output pixel -> image and window origin), and
// `operator()(line, k)` per element.
//
// Few tiles and a long K (a convolution's late layers at batch 1: 8 tiles of 64 x 64 and K = 4608
// on 132 SMs) split K across blocks: each writes its partial tile to a float32 buffer and a second
// kernel sums the parts in a fixed order (deterministic) and applies the store.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_runtime.h"
#include "ingot/tensor.h"

namespace ingot::cuda {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kTileThreads = 256;

// Partial tiles of a split K: part s of batch entry z at slot z * splits + s.
struct PartialStore {
  float* out;
  int64_t m, n;
  __device__ void operator()(int64_t slot, int64_t i, int64_t j, float acc) const { out[(slot * m + i) * n + j] = acc; }
};

// Block (x, y, z): tile (n0, m0) of batch entry z / splits, K from (z % splits) * k_chunk.
template <class ALoad, class BLoad, class Store>
__global__ void __launch_bounds__(kTileThreads)
    tiled_product_kernel(int64_t m, int64_t n, int64_t k, int64_t k_chunk, int splits, ALoad a, BLoad b, Store store) {
  constexpr int kLoads = kTileM * kTileK / kTileThreads;  // elements of each slice a thread fills
  static_assert(kTileN == kTileM && kLoads * kTileThreads == kTileM * kTileK);
  __shared__ float as[kTileK][kTileM + 1];
  __shared__ float bs[kTileK][kTileN + 1];
  const int tid = int(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int64_t slot = blockIdx.z, z = slot / splits;
  const int64_t m0 = int64_t(blockIdx.y) * kTileM, n0 = int64_t(blockIdx.x) * kTileN;
  const int64_t k_begin = (slot % splits) * k_chunk, k_end = std::min(k, k_begin + k_chunk);
  // Where this thread's elements sit in the slices, and their rows' (columns') addressing.
  int ak[kLoads], am[kLoads], bk[kLoads], bn[kLoads];
  bool a_in[kLoads], b_in[kLoads];
  typename ALoad::Line a_line[kLoads];
  typename BLoad::Line b_line[kLoads];
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int e = tid + i * kTileThreads;
    ak[i] = ALoad::k_inner ? e % kTileK : e / kTileM;
    am[i] = ALoad::k_inner ? e / kTileK : e % kTileM;
    bk[i] = BLoad::k_inner ? e % kTileK : e / kTileN;
    bn[i] = BLoad::k_inner ? e / kTileK : e % kTileN;
    a_in[i] = m0 + am[i] < m;
    b_in[i] = n0 + bn[i] < n;
    a_line[i] = a.line(z, a_in[i] ? m0 + am[i] : m0);
    b_line[i] = b.line(z, b_in[i] ? n0 + bn[i] : n0);
  }
  float acc[4][4] = {};
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kTileK) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t ka = k0 + ak[i], kb = k0 + bk[i];
      as[ak[i]][am[i]] = a_in[i] && ka < k_end ? a(a_line[i], ka) : 0.0f;
      bs[bk[i]][bn[i]] = b_in[i] && kb < k_end ? b(b_line[i], kb) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty + 16 * i;
    if (gm >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gn = n0 + tx + 16 * j;
      if (gn < n) store(slot, gm, gn, acc[i][j]);  // slot == z unless K is split (PartialStore)
    }
  }
}

// C[z][i][j] = the sum of its parts, in order, through the store.
template <class Store>
__global__ void tiled_product_sum_kernel(const float* parts, int64_t m, int64_t n, int64_t batch, int splits,
                                         Store store) {
  const int64_t plane = m * n, total = batch * plane;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t z = e / plane, at = e % plane;
    const float* p = parts + z * splits * plane + at;
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += p[s * plane];
    store(z, at / n, at % n, sum);
  }
}

// Whether tiled_product_kernel's grid fits CUDA's limits for these sizes.
inline bool tiled_product_fits(int64_t m, int64_t n, int64_t batch) {
  return (m + kTileM - 1) / kTileM <= 65535 && (n + kTileN - 1) / kTileN <= (int64_t(1) << 31) - 1 && batch <= 65535;
}

// How many parts K is split into: enough blocks for two per SM, each part at least 16 slices of K,
// at most 32 parts and 64 MB of partial tiles.
inline int tiled_product_splits(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t sms) {
  const int64_t tiles = ((m + kTileM - 1) / kTileM) * ((n + kTileN - 1) / kTileN) * batch;
  int64_t splits = std::min<int64_t>({(2 * sms + tiles - 1) / tiles, k / (16 * kTileK), 32, 65535 / batch,
                                      (int64_t(64) << 20) / std::max<int64_t>(4 * m * n * batch, 1)});
  return int(std::max<int64_t>(splits, 1));
}

// Runs the product on the current device's stream (the caller checked tiled_product_fits).
template <class ALoad, class BLoad, class Store>
void launch_tiled_product(int64_t m, int64_t n, int64_t k, int64_t batch, ALoad a, BLoad b, Store store) {
  int device = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t sms = sm_count(device);
  int splits = tiled_product_splits(m, n, k, batch, sms);
  const int64_t k_chunk = ((k + splits - 1) / splits + kTileK - 1) / kTileK * kTileK;
  splits = int(std::max<int64_t>((k + k_chunk - 1) / k_chunk, 1));
  const dim3 grid(unsigned((n + kTileN - 1) / kTileN), unsigned((m + kTileM - 1) / kTileM), unsigned(batch * splits));
  if (splits == 1) {
    tiled_product_kernel<<<grid, kTileThreads, 0, stream()>>>(m, n, k, k_chunk, 1, a, b, store);
    INGOT_CUDA_LAUNCH_CHECK();
    return;
  }
  // Freed when this returns: the caching allocator hands it out again only to later work on this stream.
  Tensor parts = Tensor::empty(DType::Float32, {batch * splits * m * n}, Device{DeviceType::CUDA, device});
  float* p = static_cast<float*>(parts.raw_data());
  tiled_product_kernel<<<grid, kTileThreads, 0, stream()>>>(m, n, k, k_chunk, splits, a, b, PartialStore{p, m, n});
  INGOT_CUDA_LAUNCH_CHECK();
  const int64_t total = batch * m * n;
  const unsigned blocks = unsigned(std::min<int64_t>((total + 255) / 256, 4 * sms));
  tiled_product_sum_kernel<<<blocks, 256, 0, stream()>>>(p, m, n, batch, splits, store);
  INGOT_CUDA_LAUNCH_CHECK();
}

}  // namespace ingot::cuda
