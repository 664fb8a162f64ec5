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
// reads neighbouring addresses either way.
#pragma once
#include <cstdint>

namespace ingot::cuda {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kTileThreads = 256;

template <class ALoad, class BLoad, class Store>
__global__ void __launch_bounds__(kTileThreads)
    tiled_product_kernel(int64_t m, int64_t n, int64_t k, ALoad a, BLoad b, Store store) {
  __shared__ float as[kTileK][kTileM + 1];
  __shared__ float bs[kTileK][kTileN + 1];
  const int tid = int(threadIdx.x), tx = tid % 16, ty = tid / 16;
  const int64_t z = blockIdx.z, m0 = int64_t(blockIdx.y) * kTileM, n0 = int64_t(blockIdx.x) * kTileN;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    for (int e = tid; e < kTileM * kTileK; e += kTileThreads) {
      const int kk = ALoad::k_inner ? e % kTileK : e / kTileM, mm = ALoad::k_inner ? e / kTileK : e % kTileM;
      const int64_t gm = m0 + mm, gk = k0 + kk;
      as[kk][mm] = gm < m && gk < k ? a(z, gm, gk) : 0.0f;
    }
    for (int e = tid; e < kTileN * kTileK; e += kTileThreads) {
      const int kk = BLoad::k_inner ? e % kTileK : e / kTileN, nn = BLoad::k_inner ? e / kTileK : e % kTileN;
      const int64_t gn = n0 + nn, gk = k0 + kk;
      bs[kk][nn] = gn < n && gk < k ? b(z, gk, gn) : 0.0f;
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
      if (gn < n) store(z, gm, gn, acc[i][j]);
    }
  }
}

// Whether tiled_product_kernel's grid fits CUDA's limits for these sizes.
inline bool tiled_product_fits(int64_t m, int64_t n, int64_t batch) {
  return (m + kTileM - 1) / kTileM <= 65535 && (n + kTileN - 1) / kTileN <= (int64_t(1) << 31) - 1 && batch <= 65535;
}

// Launches it on `stream` (the caller checked tiled_product_fits).
template <class ALoad, class BLoad, class Store>
void launch_tiled_product(int64_t m, int64_t n, int64_t k, int64_t batch, ALoad a, BLoad b, Store store,
                          cudaStream_t stream) {
  const dim3 grid(unsigned((n + kTileN - 1) / kTileN), unsigned((m + kTileM - 1) / kTileM), unsigned(batch));
  tiled_product_kernel<<<grid, kTileThreads, 0, stream>>>(m, n, k, a, b, store);
}

}  // namespace ingot::cuda
