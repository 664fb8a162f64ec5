// Row-major GEMM for the CPU kernels (MatMul, Gemm, FusedMatMul, Attention): floating types go to
// OpenBLAS (which threads by itself), integer types to a plain loop over the thread pool.
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
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(m), int(n),
                int(k), float(alpha), a, int(lda), b, int(ldb), float(beta), c, int(ldc));
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(m), int(n),
                int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
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
