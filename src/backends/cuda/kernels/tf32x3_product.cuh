// Float32 matrix products on the TF32 tensor cores at float32's accuracy (3xTF32, tensor_core.cuh):
// C[z] = store(A[z] op(B[z])), A row-major [M, K], B row-major [K, N] or, transposed, [N, K].
// cuBLASLt's exact float32 products run on the FMA units (~48 TFLOP/s on an H100, the rate
// PyTorch's float32 products also get with TF32 off); three TF32 products per product on mma.sync
// m16n8k8 are what the float32 flash attention already runs (~58 TFLOP/s of float32 there).
//
// A block computes a BM x BN tile with WARPS_M x WARPS_N warps (a warp WM x WN: MT m16 tiles by NT
// n8 tiles), stepping through K 32 at a time with the operands' slices in shared memory, three
// stages of cp.async ahead. Rows of a K-contiguous slice (A; B transposed) are padded by 4 floats
// and rows of a [K][BN] slice by 8, so a warp's fragment loads (lane 4 g + t reads row g, column t
// of A; k = t, column g of B) hit 32 distinct banks. Each fragment element is split into its big
// and small TF32 parts once and used by every product of the warp's tile. The store functor gets
// each output (gemm.cu's ProductStore: alpha, beta C_in, bias, activation, rounded once).
//
// Needs K, the leading dimensions and batch strides multiples of 4 floats, A and B 16-byte
// aligned, and with B not transposed N a multiple of 4 (a 16-byte piece never straddles the edge of
// a row): tf32x3_product_fits.
#pragma once
#include <atomic>
#include <cstdint>

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/kernels/tensor_core.cuh"

namespace ingot::cuda {

constexpr int kX3BK = 32, kX3Stages = 3;

template <int BM, int BN, bool kTransB>
struct X3Smem {
  static constexpr int kALd = kX3BK + 4;                   // A slice: [BM][BK + 4]
  static constexpr int kBLd = kTransB ? kX3BK + 4 : BN + 8;  // B slice: [BN][BK + 4] or [BK][BN + 8]
  static constexpr int kA = BM * kALd, kB = kTransB ? BN * kBLd : kX3BK * kBLd;
  static constexpr size_t kBytes = size_t(kX3Stages) * (kA + kB) * sizeof(float);
};

template <int BM, int BN, int WARPS_M, int WARPS_N, bool kTransB, class Store>
__global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1)
    tf32x3_product_kernel(const float* __restrict__ a, const float* __restrict__ b, int m, int n, int k, int64_t lda,
                          int64_t ldb, int64_t stride_a, int64_t stride_b, Store store) {
  using S = X3Smem<BM, BN, kTransB>;
  constexpr int kThreads = WARPS_M * WARPS_N * 32, WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MT = WM / 16, NT = WN / 8;
  static_assert(WM % 16 == 0 && WN % 8 == 0, "warp tile");
  extern __shared__ __align__(16) float x3_smem[];
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N, g = lane / 4, t = lane % 4;
  const int m0 = int(blockIdx.x) * BM, n0 = int(blockIdx.y) * BN, z = int(blockIdx.z);
  a += z * stride_a;
  b += z * stride_b;

  auto load = [&](int stage, int kb) {
    float* as = x3_smem + stage * (S::kA + S::kB);
    float* bs = as + S::kA;
    const int k0 = kb * kX3BK;
    constexpr int kPieces = kX3BK / 4;  // 16-byte pieces along K
    for (int p = tid; p < BM * kPieces; p += kThreads) {
      const int row = p / kPieces, kk = (p % kPieces) * 4;
      const bool ok = m0 + row < m && k0 + kk < k;
      cp_async16(as + row * S::kALd + kk, ok ? a + int64_t(m0 + row) * lda + k0 + kk : a, ok);
    }
    if constexpr (kTransB) {
      for (int p = tid; p < BN * kPieces; p += kThreads) {
        const int row = p / kPieces, kk = (p % kPieces) * 4;
        const bool ok = n0 + row < n && k0 + kk < k;
        cp_async16(bs + row * S::kBLd + kk, ok ? b + int64_t(n0 + row) * ldb + k0 + kk : b, ok);
      }
    } else {
      constexpr int kRowPieces = BN / 4;
      for (int p = tid; p < kX3BK * kRowPieces; p += kThreads) {
        const int row = p / kRowPieces, col = (p % kRowPieces) * 4;
        const bool ok = k0 + row < k && n0 + col < n;
        cp_async16(bs + row * S::kBLd + col, ok ? b + int64_t(k0 + row) * ldb + n0 + col : b, ok);
      }
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  }
  const int kblocks = (k + kX3BK - 1) / kX3BK;
#pragma unroll
  for (int st = 0; st < kX3Stages - 1; ++st) {
    if (st < kblocks) load(st, st);
    cp_async_commit();  // empty groups keep the count that cp_async_wait relies on
  }
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<kX3Stages - 2>();  // slice kb has landed (this thread's copies)...
    __syncthreads();                 // ...everyone's, and everyone is done with slice kb - 1's buffer
    const int next = kb + kX3Stages - 1;
    if (next < kblocks) load(next % kX3Stages, next);
    cp_async_commit();
    const float* as = x3_smem + (kb % kX3Stages) * (S::kA + S::kB);
    const float* bs = as + S::kA;
#pragma unroll
    for (int ks = 0; ks < kX3BK; ks += 8) {
      uint32_t fa[2][MT][4], fb[2][NT][2];  // [0]: big, [1]: small
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const float* r = as + (warp_m * WM + i * 16 + g) * S::kALd + ks + t;
        split_tf32(r[0], fa[0][i][0], fa[1][i][0]);
        split_tf32(r[8 * S::kALd], fa[0][i][1], fa[1][i][1]);
        split_tf32(r[4], fa[0][i][2], fa[1][i][2]);
        split_tf32(r[8 * S::kALd + 4], fa[0][i][3], fa[1][i][3]);
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int col = warp_n * WN + j * 8 + g;
        if constexpr (kTransB) {
          const float* r = bs + col * S::kBLd + ks + t;
          split_tf32(r[0], fb[0][j][0], fb[1][j][0]);
          split_tf32(r[4], fb[0][j][1], fb[1][j][1]);
        } else {
          const float* r = bs + (ks + t) * S::kBLd + col;
          split_tf32(r[0], fb[0][j][0], fb[1][j][0]);
          split_tf32(r[4 * S::kBLd], fb[0][j][1], fb[1][j][1]);
        }
      }
      mma_3xtf32(acc, fa, fb);
    }
  }
  cp_async_wait<0>();

  // A lane holds rows g and g + 8 of each m16 tile, columns 2 t and 2 t + 1 of each n8 tile.
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = m0 + warp_m * WM + i * 16 + g + half * 8;
      if (row >= m) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int col = n0 + warp_n * WN + j * 8 + 2 * t;
        if (col < n) store(z, row, col, acc[i][j][2 * half]);
        if (col + 1 < n) store(z, row, col + 1, acc[i][j][2 * half + 1]);
      }
    }
  }
}

// Whether the kernel takes the product (see the top of the file).
inline bool tf32x3_product_fits(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                                int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b,
                                int64_t batch) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return !trans_a && k % 4 == 0 && lda % 4 == 0 && ldb % 4 == 0 && (batch == 1 || (stride_a % 4 == 0 && stride_b % 4 == 0)) &&
         (trans_b || n % 4 == 0) && aligned(a) && aligned(b) && m <= (int64_t(1) << 30) && n <= (int64_t(1) << 30) &&
         k <= (int64_t(1) << 30) && batch <= 65535;
}

// Launches the product on stream(): 128 x 128 tiles (8 warps of 64 x 32) where they give every SM
// a block, else 64 x 64 (4 warps of 32 x 32).
template <class Store>
void launch_tf32x3_product(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                           int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, int64_t batch,
                           const Store& store) {
  auto launch = [&]<int BM, int BN, int WARPS_M, int WARPS_N, bool kTransB>() {
    using S = X3Smem<BM, BN, kTransB>;
    auto* kernel = tf32x3_product_kernel<BM, BN, WARPS_M, WARPS_N, kTransB, Store>;
    static std::atomic<uint64_t> attributed{0};  // per instantiation and device: > 48 KB of shared memory
    int device = 0;
    INGOT_CUDA_CHECK(cudaGetDevice(&device));
    const uint64_t bit = uint64_t(1) << (device % 64);
    if (!(attributed.load(std::memory_order_acquire) & bit)) {
      INGOT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(S::kBytes)));
      attributed.fetch_or(bit, std::memory_order_acq_rel);
    }
    const dim3 grid{unsigned((m + BM - 1) / BM), unsigned((n + BN - 1) / BN), unsigned(batch)};
    kernel<<<grid, WARPS_M * WARPS_N * 32, S::kBytes, stream()>>>(a, b, int(m), int(n), int(k), lda, ldb, stride_a,
                                                                  stride_b, store);
    INGOT_CUDA_LAUNCH_CHECK();
  };
  const bool big = ((m + 127) / 128) * ((n + 127) / 128) * batch >= sm_count();
  if (big) {
    if (trans_b) launch.template operator()<128, 128, 2, 4, true>();
    else launch.template operator()<128, 128, 2, 4, false>();
  } else {
    if (trans_b) launch.template operator()<64, 64, 2, 2, true>();
    else launch.template operator()<64, 64, 2, 2, false>();
  }
}

}  // namespace ingot::cuda
