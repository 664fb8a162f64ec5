// Det on the CPU: LU factorization with partial pivoting, in double, one matrix per task.
#include <cmath>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

// Determinant of the n x n row-major matrix in `a` (overwritten by its LU factors).
double lu_determinant(double* a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    const double p = a[pivot * n + col];
    if (p == 0) return 0;  // singular (NaN pivots fall through and propagate)
    if (pivot != col) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[pivot * n + c], a[col * n + c]);
      det = -det;
    }
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / p;
      for (int64_t c = col + 1; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
    }
  }
  return det;
}

void det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  INGOT_CHECK(x.rank() >= 2 && x.dim(-1) == x.dim(-2), "input 0 (X): expected [..., M, M], got {}",
              shape_str(x.shape()));
  const int64_t n = x.dim(-1);
  const Shape out_shape(x.shape().begin(), x.shape().end() - 2);
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  const int64_t batch = y.numel();
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallel_for(batch, std::max<int64_t>(1, (1 << 12) / std::max<int64_t>(1, n * n * n)), [&](int64_t b0, int64_t b1) {
      std::vector<double> a(static_cast<size_t>(n * n));
      for (int64_t b = b0; b < b1; ++b) {
        for (int64_t i = 0; i < n * n; ++i) a[size_t(i)] = double(in[b * n * n + i]);
        out[b] = T(lu_determinant(a.data(), n));  // an empty 0 x 0 matrix has determinant 1
      }
    });
  });
}

INGOT_CPU_KERNEL(Det, det).versions(11);

}  // namespace
}  // namespace ingot
