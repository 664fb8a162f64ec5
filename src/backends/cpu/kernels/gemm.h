// Row-major GEMM for the CPU kernels (MatMul, Gemm, FusedMatMul, Attention, Einsum, the RNNs):
// floating types go to OpenBLAS, integer types to a plain loop over the thread pool. OpenBLAS runs
// single-threaded (core/thread_pool.cpp: its pthread pool would be a second team spinning against
// OpenMP's); a product large enough to share is split here across the pool, by rows of C, or by
// columns when C has too few rows, one single-threaded BLAS call per slice.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"

namespace ingot::cpu {

// C[m,n] = alpha * op(A) * op(B) + beta * C with row-major operands and leading dimensions.
template <class T>
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, double beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum; BLAS would reject the zero leading dimensions
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? T(0) : T(T(beta) * c[i * ldc + j]);
    return;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    auto blas = [&](int64_t rows, int64_t cols, const T* a0, const T* b0, T* c0) {
      const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, ta, tb, int(rows), int(cols), int(k), float(alpha), a0, int(lda), b0, int(ldb),
                    float(beta), c0, int(ldc));
      } else {
        cblas_dgemm(CblasRowMajor, ta, tb, int(rows), int(cols), int(k), alpha, a0, int(lda), b0, int(ldb), beta, c0,
                    int(ldc));
      }
    };
    // At least ~256 K multiply-adds per slice (OpenBLAS's own threshold for threading is of that
    // order), slices of at least 16 rows or 64 columns.
    constexpr double kMinWork = double(1 << 18);
    constexpr int64_t kMinRows = 16, kMinCols = 64;
    const int64_t slices = std::min<int64_t>(cpu_pool().threads(), int64_t(double(m) * double(n) * double(k) / kMinWork));
    if (slices > 1 && m >= slices * kMinRows) {  // rows of C: A's rows (columns when transposed)
      parallel_for(m, (m + slices - 1) / slices, [&](int64_t begin, int64_t end) {
        blas(end - begin, n, a + (trans_a ? begin : begin * lda), b, c + begin * ldc);
      });
    } else if (slices > 1 && n >= slices * kMinCols) {  // columns of C: B's columns (rows when transposed)
      parallel_for(n, (n + slices - 1) / slices, [&](int64_t begin, int64_t end) {
        blas(m, end - begin, a, b + (trans_b ? begin * ldb : begin), c + begin);
      });
    } else {
      blas(m, n, a, b, c);
    }
  } else {
    // Integers: exact arithmetic in T (wrapping like numpy); alpha/beta are 1/0 or small integers.
    parallel_for(m, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, n * k)), [&](int64_t begin, int64_t end) {
      std::vector<T> row(static_cast<size_t>(n));
      for (int64_t i = begin; i < end; ++i) {
        std::fill(row.begin(), row.end(), T(0));
        for (int64_t p = 0; p < k; ++p) {
          const T av = trans_a ? a[p * lda + i] : a[i * lda + p];
          if (trans_b) {
            for (int64_t j = 0; j < n; ++j) row[size_t(j)] += av * b[j * ldb + p];
          } else {
            const T* brow = b + p * ldb;
            for (int64_t j = 0; j < n; ++j) row[size_t(j)] += av * brow[j];
          }
        }
        T* crow = c + i * ldc;
        for (int64_t j = 0; j < n; ++j) {
          crow[j] = T(T(alpha) * row[size_t(j)] + (beta == 0 ? T(0) : T(beta) * crow[j]));
        }
      }
    });
  }
}

}  // namespace ingot::cpu
