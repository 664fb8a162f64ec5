// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on the CPU.
//
// Both see the scores as [N, C, D] (D = product of the trailing dims) and the target as [N, D].
// With gathered weights w = weight[target] (1 without weights, 0 where target == ignore_index):
//   loss[n, d] = -w * logp[n, target[n, d], d]
//   reduction none: loss; sum: sum(loss); mean: sum(loss) / sum(w)   (ONNX's reference).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

struct LossLayout {
  int64_t n = 0, c = 0, d = 1;
};

LossLayout check_loss_inputs(const KernelContext& ctx, const char* scores_name) {
  const Tensor& x = ctx.input(0);
  const Tensor& t = ctx.input(1);
  INGOT_CHECK(x.rank() >= 2, "input 0 ({}): expected rank >= 2 ([N, C, d1...]), got {}", scores_name,
              shape_str(x.shape()));
  INGOT_CHECK(t.dtype() == DType::Int64 || t.dtype() == DType::Int32, "input 1 (target): expected int32/int64, got {}",
              dtype_name(t.dtype()));
  LossLayout l;
  l.n = x.shape()[0];
  l.c = x.shape()[1];
  Shape expected_target{l.n};
  for (int64_t k = 2; k < x.rank(); ++k) {
    l.d *= x.shape()[size_t(k)];
    expected_target.push_back(x.shape()[size_t(k)]);
  }
  INGOT_CHECK(t.shape() == expected_target, "input 1 (target): expected shape {} for {} {}, got {}",
              shape_str(expected_target), scores_name, shape_str(x.shape()), shape_str(t.shape()));
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    INGOT_CHECK(w.shape() == Shape{l.c}, "input 2 (weight): expected shape [{}], got {}", l.c, shape_str(w.shape()));
    INGOT_CHECK(w.dtype() == x.dtype(), "input 2 (weight): expected {} like input 0, got {}", dtype_name(x.dtype()),
                dtype_name(w.dtype()));
  }
  const std::string& reduction = ctx.attr_string("reduction");
  INGOT_CHECK(reduction == "none" || reduction == "sum" || reduction == "mean",
              "attribute reduction: expected none, sum or mean, got '{}'", reduction);
  return l;
}

// Applies the loss formula to log-probabilities `logp` laid out [N, C, D] (as double) and writes
// output 0. T is the scores' dtype.
template <class T>
void nll_from_log_prob(KernelContext& ctx, const LossLayout& l, const double* logp) {
  const Tensor& target = ctx.input(1);
  const std::vector<int64_t> labels = target.to_int64_vector();
  std::vector<double> class_weight(size_t(l.c), 1.0);
  if (ctx.has_input(2)) {
    const T* w = ctx.input(2).data<T>();
    for (int64_t k = 0; k < l.c; ++k) class_weight[size_t(k)] = double(w[k]);
  }
  std::optional<int64_t> ignore;
  if (ctx.has_attr("ignore_index")) ignore = ctx.attr_int("ignore_index");

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
  const std::string& reduction = ctx.attr_string("reduction");
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
  const LossLayout l = check_loss_inputs(ctx, "input");
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
  const LossLayout l = check_loss_inputs(ctx, "scores");
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
