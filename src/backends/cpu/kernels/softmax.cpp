// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1) and the op works on whole rows; from 13 on it works along the single axis `axis`
// (default -1). Both reduce to an [outer, dim, inner] view: rows are contiguous when inner == 1,
// otherwise the loops run across `inner` so they still vectorize.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/kernels/softmax_row.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/reduce_axes.h"

namespace ingot {
namespace {

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

using sem::AxisView;

AxisView axis_view(const KernelContext& ctx, const Tensor& x) { return sem::softmax_axis_view(ctx, x); }

// The common case: each row of `dim` elements is contiguous.
template <class T>
void softmax_contiguous(SoftmaxKind kind, int64_t rows, int64_t dim, const T* x, T* y) {
  using A = sem::acc_t<T>;
  parallel_for(rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, dim)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* src = x + r * dim;
      T* dst = y + r * dim;
      if (kind == SoftmaxKind::Hardmax) {
        A best = -std::numeric_limits<A>::infinity();
        int64_t arg = 0;
        for (int64_t d = 0; d < dim; ++d) {
          if (A(src[d]) > best) {
            best = A(src[d]);
            arg = d;
          }
        }
        for (int64_t d = 0; d < dim; ++d) dst[d] = T(d == arg ? 1.0f : 0.0f);
        continue;
      }
      if (kind == SoftmaxKind::Softmax) {
        cpu::softmax_row(src, dst, dim);
      } else {
        // exp(x - max) goes through dst, which then receives x - (max + log(sum)).
        const A best = cpu::row_max(src, dim);
        const A shift = best + std::log(cpu::exp_shifted(src, dst, dim, best));
        for (int64_t d = 0; d < dim; ++d) dst[d] = T(A(src[d]) - shift);
      }
    }
  });
}

template <class T>
void softmax_rows(SoftmaxKind kind, const AxisView& v, const T* x, T* y) {
  using A = sem::acc_t<T>;
  const int64_t dim = v.dim, inner = v.inner;
  if (inner == 1) return softmax_contiguous<T>(kind, v.outer, dim, x, y);
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, dim * inner));
  parallel_for(v.outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<A> best(static_cast<size_t>(inner)), sum(static_cast<size_t>(inner));
    std::vector<int64_t> arg(static_cast<size_t>(inner));
    for (int64_t o = begin; o < end; ++o) {
      const T* src = x + o * dim * inner;
      T* dst = y + o * dim * inner;
      std::fill(best.begin(), best.end(), -std::numeric_limits<A>::infinity());
      std::fill(arg.begin(), arg.end(), 0);
      for (int64_t d = 0; d < dim; ++d) {
        const T* row = src + d * inner;
        for (int64_t j = 0; j < inner; ++j) {
          if (A(row[j]) > best[size_t(j)]) {
            best[size_t(j)] = A(row[j]);
            arg[size_t(j)] = d;
          }
        }
      }
      if (kind == SoftmaxKind::Hardmax) {
        for (int64_t d = 0; d < dim; ++d)
          for (int64_t j = 0; j < inner; ++j) dst[d * inner + j] = T(arg[size_t(j)] == d ? 1.0f : 0.0f);
        continue;
      }
      std::fill(sum.begin(), sum.end(), A(0));
      for (int64_t d = 0; d < dim; ++d) {
        const T* row = src + d * inner;
        T* out = dst + d * inner;
        for (int64_t j = 0; j < inner; ++j) {
          const A e = cpu::exp_of<A>(A(row[j]) - best[size_t(j)]);
          sum[size_t(j)] += e;
          if (kind == SoftmaxKind::Softmax) out[j] = T(e);
        }
      }
      if (kind == SoftmaxKind::Softmax) {
        for (int64_t j = 0; j < inner; ++j) sum[size_t(j)] = A(1) / sum[size_t(j)];
        for (int64_t d = 0; d < dim; ++d) {
          T* out = dst + d * inner;
          for (int64_t j = 0; j < inner; ++j) out[j] = T(A(out[j]) * sum[size_t(j)]);
        }
      } else {
        for (int64_t j = 0; j < inner; ++j) sum[size_t(j)] = best[size_t(j)] + std::log(sum[size_t(j)]);
        for (int64_t d = 0; d < dim; ++d) {
          const T* row = src + d * inner;
          T* out = dst + d * inner;
          for (int64_t j = 0; j < inner; ++j) out[j] = T(A(row[j]) - sum[size_t(j)]);
        }
      }
    }
  });
}

// Softmax keeps exp(x - max) in float32 output storage between passes; for half types that
// would round twice, so they compute in a float32 copy.
void softmax_family(KernelContext& ctx, SoftmaxKind kind) {
  const Tensor& x = ctx.input(0);
  const AxisView v = axis_view(ctx, x);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16) {
    Tensor x32 = x.cast(DType::Float32);
    Tensor y32 = Tensor::empty(DType::Float32, x.shape());
    softmax_rows<float>(kind, v, x32.data<float>(), y32.data<float>());
    copy_tensor(y32.cast(x.dtype()), y);
    return;
  }
  dispatch<DType::Float32, DType::Float64>(x.dtype(),
                                           [&]<class T>() { softmax_rows<T>(kind, v, x.data<T>(), y.data<T>()); });
}

// ai.ingot.SoftmaxGrad: dX = Y (dY - sum(dY Y)) over each [outer, dim, inner] column, the sum in the
// accumulator type (double for float64, else float).
void softmax_grad(KernelContext& ctx) {
  const Tensor &dy = ctx.input(0), &y = ctx.input(1);
  const AxisView v = sem::softmax_grad_view(ctx);
  Tensor& dx = ctx.allocate(0, y.dtype(), y.shape());
  if (y.numel() == 0) return;
  dispatch_float(y.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    const T *g = dy.data<T>(), *p = y.data<T>();
    T* out = dx.data<T>();
    const int64_t dim = v.dim, inner = v.inner;
    parallel_for(v.outer * inner, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, dim)), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t base = (c / inner) * dim * inner + c % inner;
        A s = 0;
        for (int64_t d = 0; d < dim; ++d) s += A(g[base + d * inner]) * A(p[base + d * inner]);
        for (int64_t d = 0; d < dim; ++d) {
          const int64_t i = base + d * inner;
          out[i] = T(A(p[i]) * (A(g[i]) - s));
        }
      }
    });
  });
}

void softmax(KernelContext& ctx) { softmax_family(ctx, SoftmaxKind::Softmax); }
void log_softmax(KernelContext& ctx) { softmax_family(ctx, SoftmaxKind::LogSoftmax); }
void hardmax(KernelContext& ctx) { softmax_family(ctx, SoftmaxKind::Hardmax); }

}  // namespace

INGOT_CPU_KERNEL(Softmax, softmax).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(LogSoftmax, log_softmax).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Hardmax, hardmax).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(SoftmaxGrad, softmax_grad).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
