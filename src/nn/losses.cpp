// Losses (nn::functional, include/ingot/nn.h), as torch.nn.functional's, from catalogue ops:
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss where ONNX has the loss, PyTorch's own
// formula for label smoothing and for the binary cross-entropy.
#include <ingot/nn.h>
#include <ingot/ops.h>

#include "nn/constants.h"

namespace ingot::nn::functional {
namespace {

Tensor call1(const std::string& op, const std::vector<Tensor>& in, const Attributes& attrs = {}) {
  return ops::call(op, in, attrs, 1).at(0);
}
Tensor scalar(double v, const Tensor& like) { return scalar_like(v, like); }
Tensor sum_all(const Tensor& t) { return call1("ReduceSum", {t}, {{"keepdims", int64_t(0)}}); }
Tensor mean_all(const Tensor& t) { return call1("ReduceMean", {t}, {{"keepdims", int64_t(0)}}); }

void check_reduction(const std::string& reduction) {
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    fail("reduction '{}': expected mean, sum or none", reduction);
}
Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "none") return loss;
  return reduction == "sum" ? sum_all(loss) : mean_all(loss);
}
Tensor int64_target(const Tensor& target) {
  if (target.dtype() == DType::Int64) return target;
  if (target.dtype() != DType::Int32) fail("target: expected class indices (int64 or int32), got {}", target.describe());
  return call1("Cast", {target}, {{"to", int64_t(DType::Int64)}});
}
void check_classes(const Tensor& input, const Tensor& target, const char* what) {
  if (input.rank() < 2) fail("{}: input must be [N, C, ...], got {}", what, input.describe());
  Shape want = input.shape();
  want.erase(want.begin() + 1);
  if (target.shape() != want)
    fail("{}: target {} does not match input {} (expected shape {})", what, target.describe(), input.describe(), shape_str(want));
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  check_reduction(o.reduction);
  check_classes(input, target, "nll_loss");
  std::vector<Tensor> in{input, int64_target(target)};
  if (o.weight) in.push_back(*o.weight);
  return call1("NegativeLogLikelihoodLoss", in, {{"reduction", o.reduction}, {"ignore_index", o.ignore_index}});
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  check_reduction(o.reduction);
  check_classes(input, target, "cross_entropy");
  if (!(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0))
    fail("cross_entropy: label_smoothing must be in [0, 1], got {}", o.label_smoothing);
  const Tensor t = int64_target(target);
  if (o.label_smoothing == 0.0) {
    std::vector<Tensor> in{input, t};
    if (o.weight) in.push_back(*o.weight);
    return call1("SoftmaxCrossEntropyLoss", in, {{"reduction", o.reduction}, {"ignore_index", o.ignore_index}});
  }
  // PyTorch (aten cross_entropy_loss_label_smoothing): (1 - e) nll + e / C * smooth, with smooth the
  // negated sum of (weighted) log-probabilities over classes, zero where the target is ignored, and
  // a mean normalized as nll's (by the summed target weights, or the count of targets kept).
  const double e = o.label_smoothing;
  const int64_t classes = input.dim(1);
  Tensor logp = call1("LogSoftmax", {input}, {{"axis", int64_t(1)}});
  CrossEntropyOptions nll_o = o;
  Tensor nll = nll_loss(logp, t, nll_o);
  Tensor weighted = logp;
  if (o.weight) {
    Shape ws(size_t(input.rank()), 1);
    ws[1] = classes;
    weighted = ops::mul(logp, ops::reshape(*o.weight, ws));
  }
  Tensor smooth = ops::sub(scalar(0.0, logp), call1("ReduceSum", {weighted, Tensor::from_vector<int64_t>({1}, {1})}, {{"keepdims", int64_t(0)}}));
  Tensor ignored = call1("Equal", {t, Tensor::scalar<int64_t>(o.ignore_index).to(t.device())});
  smooth = call1("Where", {ignored, scalar(0.0, smooth), smooth});
  Tensor smooth_reduced;
  if (o.reduction == "none") {
    smooth_reduced = smooth;
  } else if (o.reduction == "sum") {
    smooth_reduced = sum_all(smooth);
  } else {
    Tensor kept = call1("Cast", {call1("Not", {ignored})}, {{"to", int64_t(input.dtype())}});
    Tensor denominator;
    if (o.weight) {
      Tensor safe = call1("Where", {ignored, Tensor::scalar<int64_t>(0).to(t.device()), t});
      denominator = sum_all(ops::mul(call1("Gather", {*o.weight, safe}, {{"axis", int64_t(0)}}), kept));
    } else {
      denominator = sum_all(kept);
    }
    smooth_reduced = ops::div(sum_all(smooth), denominator);
  }
  return ops::add(ops::mul(nll, scalar(1.0 - e, nll)), ops::mul(smooth_reduced, scalar(e / double(classes), nll)));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction);
  if (input.shape() != target.shape())
    fail("mse_loss: input {} and target {} differ in shape", input.describe(), target.describe());
  Tensor d = ops::sub(input, target);
  return reduce(ops::mul(d, d), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y, const std::optional<Tensor>& pos_weight,
                                        const std::string& reduction) {
  check_reduction(reduction);
  if (x.shape() != y.shape())
    fail("binary_cross_entropy_with_logits: input {} and target {} differ in shape", x.describe(), y.describe());
  // (1 - y) x + w (log(1 + exp(-|x|)) + max(-x, 0)), w = 1 + (pos_weight - 1) y: PyTorch's stable form.
  Tensor log_sigmoid_neg = ops::add(call1("Softplus", {call1("Neg", {call1("Abs", {x})})}), ops::relu(call1("Neg", {x})));
  Tensor w = pos_weight ? ops::add(ops::mul(ops::sub(*pos_weight, scalar(1.0, x)), y), scalar(1.0, x)) : Tensor();
  Tensor loss = ops::add(ops::mul(ops::sub(scalar(1.0, x), y), x), w.defined() ? ops::mul(w, log_sigmoid_neg) : log_sigmoid_neg);
  return reduce(loss, reduction);
}

}  // namespace ingot::nn::functional
