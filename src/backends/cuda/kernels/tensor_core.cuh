// sm_80+ building blocks of Ingot's tensor-core kernels (Ingot builds for sm_90): asynchronous copies
// into shared memory, ldmatrix fragment loads and the mma.sync products. The fragment layouts are
// PTX's (ISA, "Matrix fragments for mma.m16n8k16 / m16n8k32"): in an m16n8 product a lane holds
// rows lane / 4 and lane / 4 + 8 of A and C, and column lane / 4 of B.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace ingot::cuda {

// 16 bytes global -> shared without a register round trip; `valid` false zero-fills (nothing read).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices (lanes 8i..8i+7 address matrix i's rows): an A fragment (16 x 16 of 16-bit
// elements, or 16 x 32 bytes) or the B fragments of two n-tiles from a row-major [n][k] tile;
// transposed, B fragments from a row-major [k][n] tile.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// c += a (16x16, row-major fragment) * b (16x8, column-major fragment), float32 accumulators.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// c += a (16 x 32 int8, row-major fragment) * b (32 x 8 int8, column-major fragment), int32
// accumulators (exact: no saturation).
__device__ __forceinline__ void mma16832_s8(int32_t (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Float32 on the TF32 tensor cores, three products per product (3xTF32): the float32 flash
// attention (attention.cu).
//
// x = big + small, big = tf32(x), small = tf32(x - big): 22 of float32's 24 significand bits. A
// product a b is big_a big_b + big_a small_b + small_a big_b (small_a small_b is below float32's
// rounding), accumulated in float32: about float32's accuracy (what CUTLASS's
// OpMultiplyAddFastF32, and so PyTorch's float32 memory-efficient attention, computes) at tensor
// core rates.

// big: x rounded to TF32 (cvt.rna); small: x - big, exact in float32, passed as it is (the tensor
// core reads a TF32 operand's upper 19 bits, so small is truncated to TF32: 2^-22 of x at most).
// kFast (INGOT_TF32_FAST_SPLIT, an A/B switch): big is x's bits plus half a TF32 ulp, left for the
// tensor core to truncate (the same rounding: to nearest, ties away) by one integer add instead of
// the conversion instruction; small is x minus big's upper 19 bits.
template <bool kFast = false>
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
  if constexpr (kFast) {
    big = __float_as_uint(x) + 0x1000u;
    small = __float_as_uint(x - __uint_as_float(big & 0xffffe000u));
  } else {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
    small = __float_as_uint(x - __uint_as_float(big));
  }
}

// c += a (16x8, row-major fragment) * b (8x8, column-major fragment), TF32 inputs.
__device__ __forceinline__ void mma1688_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Split A fragments of M m-tiles times split B fragments of N n-tiles into c[m][n]: the three terms
// term by term (small ones first), so that the M x N products between two that accumulate into the
// same c hide the tensor core's latency.
template <int M, int N>
__device__ __forceinline__ void mma_3xtf32(float (&c)[M][N][4], const uint32_t (&a)[2][M][4],
                                           const uint32_t (&b)[2][N][2]) {
  constexpr int kA[3] = {1, 0, 0}, kB[3] = {0, 1, 0};  // (small, big), (big, small), (big, big)
#pragma unroll
  for (int term = 0; term < 3; ++term) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int m = 0; m < M; ++m) mma1688_tf32(c[m][n], a[kA[term]][m], b[kB[term]][n][0], b[kB[term]][n][1]);
    }
  }
}

}  // namespace ingot::cuda
