// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on the CPU.
//
// The layout and formula: ops/semantics/loss_args.h.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/loss_args.h"

namespace ingot {
namespace {

// Applies the loss formula to log-probabilities `logp` laid out [N, C, D] (as double) and writes
// output 0. T is the scores' dtype.
template <class T>
void nll_from_log_prob(KernelContext& ctx, const sem::LossArgs& l, const double* logp) {
  const Tensor& target = ctx.input(1);
  const std::vector<int64_t> labels = target.to_int64_vector();
  std::vector<double> class_weight(size_t(l.c), 1.0);
  if (ctx.has_input(2)) {
    const T* w = ctx.input(2).data<T>();
    for (int64_t k = 0; k < l.c; ++k) class_weight[size_t(k)] = double(w[k]);
  }
  const std::optional<int64_t>& ignore = l.ignore_index;

  const int64_t count = l.n * l.d;
  std::vector<double> loss(static_cast<size_t>(count));
  double loss_sum = 0, weight_sum = 0;
  for (int64_t n = 0; n < l.n; ++n) {
    for (int64_t d = 0; d < l.d; ++d) {
      const int64_t i = n * l.d + d;
      const int64_t label = labels[size_t(i)];
      if (ignore && label == *ignore) {
        loss[size_t(i)] = 0;
        continue;
      }
      INGOT_CHECK(label >= 0 && label < l.c, "input 1 (target): class index {} at position {} is outside [0, {})",
                  label, i, l.c);
      const double w = class_weight[size_t(label)];
      loss[size_t(i)] = -w * logp[(n * l.c + label) * l.d + d];
      loss_sum += loss[size_t(i)];
      weight_sum += w;
    }
  }
  const std::string& reduction = l.reduction;
  if (reduction == "none") {
    T* out = ctx.allocate(0, ctx.input(0).dtype(), target.shape()).template data<T>();
    for (int64_t i = 0; i < count; ++i) out[i] = T(loss[size_t(i)]);
  } else {
    // mean over no counted element is 0/0 = NaN, as in ONNX's reference
    const double value = reduction == "sum" ? loss_sum : loss_sum / weight_sum;
    *ctx.allocate(0, ctx.input(0).dtype(), {}).template data<T>() = T(value);
  }
}

void nll_loss(KernelContext& ctx) {
  const sem::LossArgs l = sem::loss_args(ctx, "input");
  const Tensor& x = ctx.input(0);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* in = x.data<T>();
    std::vector<double> logp(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) logp[size_t(i)] = double(in[i]);
    nll_from_log_prob<T>(ctx, l, logp.data());
  });
}

// Log-softmax over axis 1 of [N, C, D], vectorized over the contiguous D.
void softmax_cross_entropy_loss(KernelContext& ctx) {
  const sem::LossArgs l = sem::loss_args(ctx, "scores");
  const Tensor& x = ctx.input(0);
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* in = x.data<T>();
    std::vector<double> logp(static_cast<size_t>(x.numel()));
    parallel_for(l.n, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, l.c * l.d)), [&](int64_t nb, int64_t ne) {
      std::vector<double> row_max(static_cast<size_t>(l.d)), row_sum(size_t(l.d));
      for (int64_t n = nb; n < ne; ++n) {
        const T* xs = in + n * l.c * l.d;
        double* lp = logp.data() + n * l.c * l.d;
        for (int64_t d = 0; d < l.d; ++d) row_max[size_t(d)] = -INFINITY;
        for (int64_t k = 0; k < l.c; ++k)
          for (int64_t d = 0; d < l.d; ++d) row_max[size_t(d)] = std::max(row_max[size_t(d)], double(xs[k * l.d + d]));
        for (int64_t d = 0; d < l.d; ++d) row_sum[size_t(d)] = 0;
        for (int64_t k = 0; k < l.c; ++k)
          for (int64_t d = 0; d < l.d; ++d) {
            const double shifted = double(xs[k * l.d + d]) - row_max[size_t(d)];
            lp[k * l.d + d] = shifted;
            row_sum[size_t(d)] += std::exp(shifted);
          }
        for (int64_t d = 0; d < l.d; ++d) row_sum[size_t(d)] = std::log(row_sum[size_t(d)]);
        for (int64_t k = 0; k < l.c; ++k)
          for (int64_t d = 0; d < l.d; ++d) lp[k * l.d + d] -= row_sum[size_t(d)];
      }
    });
    if (ctx.num_outputs() > 1) {
      T* out = ctx.allocate(1, x.dtype(), x.shape()).template data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = T(logp[size_t(i)]);
    }
    nll_from_log_prob<T>(ctx, l, logp.data());
  });
}

INGOT_CPU_KERNEL(NegativeLogLikelihoodLoss, nll_loss).versions(12);
INGOT_CPU_KERNEL(SoftmaxCrossEntropyLoss, softmax_cross_entropy_loss).versions(12);

}  // namespace
}  // namespace ingot
