// Reductions (ReduceX, ArgMax/ArgMin), losses, Einsum and Det.
#include <algorithm>

#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// ---- Loss gradients. NegativeLogLikelihoodLoss picks -input[n, t, d...] * weight[t] (0 where
// t == ignore_index); SoftmaxCrossEntropyLoss is that of LogSoftmax(scores) over axis 1.
using G = GradBuilder;
using V = GradValue;

// d loss / d input of NegativeLogLikelihoodLoss for the cotangent `dloss`: -onehot(target) scaled by
// each element's weight (and by the weight total under reduction = mean).
V nll_input_grad(G& b, const V& input, const V& target, const V& weight, const V& dloss) {
  const Shape shape = b.static_shape(input);
  const int64_t classes = shape.at(1);
  Shape class_shape(shape.size(), 1);
  class_shape[1] = classes;
  std::vector<int64_t> iota;
  for (int64_t c = 0; c < classes; ++c) iota.push_back(c);
  V class_ids = b.emitter().constant(Tensor::from_vector<int64_t>(iota, class_shape));
  V t = b.cast_like(target, b.int64s({0}));  // int32 targets compare as int64
  V valid = b.scalar(1.0, input);
  V safe = t;
  if (b.has_attr("ignore_index")) {
    V ignored = b.call1("Equal", {t, b.int64s({b.attr_int("ignore_index")})});
    valid = b.cast_like(b.call1("Not", {ignored}), input);
    safe = b.call1("Where", {ignored, b.int64s({0}), t});
  }
  V coeff = b.mul(valid, b.expand_like(b.scalar(1.0, input), safe));  // per element of the target's shape
  if (weight.defined()) coeff = b.mul(coeff, b.call1("Gather", {weight, safe}, {{"axis", int64_t(0)}}));
  const std::string reduction = b.attr("reduction", AttrKind::String).s;
  V g = b.mul(dloss, coeff);
  if (reduction == "mean") {
    std::vector<int64_t> all;
    for (int64_t a = 0; a < b.rank(coeff); ++a) all.push_back(a);
    g = b.div(g, b.reduce_sum(coeff, all, false));
  }
  V hot = b.cast_like(b.call1("Equal", {b.unsqueeze(safe, {1}), class_ids}), input);
  return b.neg(b.mul(b.unsqueeze(g, {1}), hot));
}

void nll_loss_vjp(G& b) {
  if (b.wants(2)) b.unsupported("with respect to its weights");
  if (b.wants(0)) b.grad(0, nll_input_grad(b, b.x(0), b.x(1), b.x(2), b.dy()));
}

void softmax_cross_entropy_vjp(G& b) {
  if (b.wants(2)) b.unsupported("with respect to its weights");
  if (!b.wants(0)) return;
  V log_prob = b.y(1).defined() ? b.y(1) : b.call1("LogSoftmax", {b.x(0)}, {{"axis", int64_t(1)}});
  V g;  // d loss / d log_prob
  if (b.dy(0).defined()) g = nll_input_grad(b, log_prob, b.x(1), b.x(2), b.dy(0));
  if (b.dy(1).defined()) g = g.defined() ? b.add(g, b.dy(1)) : b.dy(1);
  V total = b.reduce_sum(g, {1}, true);
  b.grad(0, b.sub(g, b.mul(b.call1("Exp", {log_prob}), total)));
}

}  // namespace

namespace {

// ---- Gradient rules (ops/gradient.h).
using G = GradBuilder;
using V = GradValue;

// A reduction's axes (normalized, ascending; every axis when empty) and whether it is the identity
// (empty axes with noop_with_empty_axes).
struct Reduced {
  std::vector<int64_t> axes;
  bool identity = false;
};
Reduced reduced_axes(G& b) {
  const int axes_input_since = b.def().name == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes = b.reduction_axes(b.opset() >= axes_input_since);
  const int64_t rank = b.rank(b.x(0));
  Reduced r;
  if (axes.empty()) {
    r.identity = b.opset() >= axes_input_since && b.attr_int("noop_with_empty_axes") != 0;
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  r.axes = std::move(axes);
  return r;
}
// A reduced value (dy, y) broadcast back over the input's shape.
V expand_back(G& b, const Reduced& r, const V& v) {
  V kept = b.attr_int("keepdims") ? v : b.unsqueeze(v, r.axes);
  return b.expand_like(kept, b.x(0));
}
// Reductions whose gradient is dy (broadcast back) times a factor of x and y.
template <class Factor>
void reduction_vjp(G& b, Factor factor) {
  if (!b.wants(0)) return;
  Reduced r = reduced_axes(b);
  if (r.identity) return b.grad(0, b.dy());
  b.grad(0, b.mul(expand_back(b, r, b.dy()), factor(r)));
}
void reduce_sum_vjp(G& b) {
  if (!b.wants(0)) return;
  Reduced r = reduced_axes(b);
  b.grad(0, r.identity ? b.dy() : expand_back(b, r, b.dy()));
}
void reduce_mean_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced& r) {
    Shape s = b.static_shape(b.x(0));
    int64_t count = 1;
    for (int64_t a : r.axes) count *= s[size_t(a)];
    return b.scalar(1.0 / double(count), b.x(0));
  });
}
// Max/Min: shared evenly among the elements equal to the result.
void reduce_extremum_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced& r) {
    V hit = b.equal_mask(b.x(0), expand_back(b, r, b.y()), b.x(0));
    V count = b.expand_like(b.reduce_sum(hit, r.axes, true), b.x(0));
    return b.div(hit, count);
  });
}
void reduce_prod_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced& r) { return b.div(expand_back(b, r, b.y()), b.x(0)); });
}
void reduce_l1_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced&) { return b.call1("Sign", {b.x(0)}); });
}
void reduce_l2_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced& r) { return b.div(b.x(0), expand_back(b, r, b.y())); });
}
void reduce_log_sum_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced& r) {
    return b.call1("Reciprocal", {b.call1("Exp", {expand_back(b, r, b.y())})});
  });
}
void reduce_log_sum_exp_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced& r) { return b.call1("Exp", {b.sub(b.x(0), expand_back(b, r, b.y()))}); });
}
void reduce_sum_square_vjp(G& b) {
  reduction_vjp(b, [&](const Reduced&) { return b.mul(b.x(0), b.scalar(2.0, b.x(0))); });
}

}  // namespace


// ReduceX: `axes` is an attribute before opset 13 (ReduceSum) / 18 (the others) and an optional
// second input from then on; noop_with_empty_axes arrived together with the axes input.
#define INGOT_REDUCE_OP(name, axes_input_since, text)                                              \
  INGOT_OP(name)                                                                                   \
      .versions(1)                                                                                 \
      .inputs(1, 2)                                                                                \
      .optional_attr("axes", AttrKind::Ints)                                                       \
      .attr("keepdims", 1)                                                                         \
      .attr("noop_with_empty_axes", 0)                                                             \
      .summary(text " over `axes` (all axes when empty; attribute before opset " #axes_input_since \
                    ", input from it).")

INGOT_REDUCE_OP(ReduceSum, 13, "Sum")
    .vjp(reduce_sum_vjp);
INGOT_REDUCE_OP(ReduceMean, 18, "Arithmetic mean")
    .vjp(reduce_mean_vjp);
INGOT_REDUCE_OP(ReduceMax, 18, "Maximum (NaN propagates)")
    .vjp(reduce_extremum_vjp);
INGOT_REDUCE_OP(ReduceMin, 18, "Minimum (NaN propagates)")
    .vjp(reduce_extremum_vjp);
INGOT_REDUCE_OP(ReduceProd, 18, "Product")
    .vjp(reduce_prod_vjp);
INGOT_REDUCE_OP(ReduceL1, 18, "Sum of absolute values")
    .vjp(reduce_l1_vjp);
INGOT_REDUCE_OP(ReduceL2, 18, "Euclidean norm")
    .vjp(reduce_l2_vjp);
INGOT_REDUCE_OP(ReduceLogSum, 18, "Log of the sum")
    .vjp(reduce_log_sum_vjp);
INGOT_REDUCE_OP(ReduceLogSumExp, 18, "Log of the sum of exponentials")
    .vjp(reduce_log_sum_exp_vjp);
INGOT_REDUCE_OP(ReduceSumSquare, 18, "Sum of squares")
    .vjp(reduce_sum_square_vjp);
#undef INGOT_REDUCE_OP

INGOT_OP(ArgMax)
    .versions(1)
    .inputs(1)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .attr("select_last_index", 0)
    .summary("Index (int64) of the largest element along `axis`; the first NaN counts as largest.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(ArgMin)
    .versions(1)
    .inputs(1)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .attr("select_last_index", 0)
    .summary("Index (int64) of the smallest element along `axis`; the first NaN counts as smallest.")
    .tag(OpTag::AutocastFollow);

INGOT_OP(NegativeLogLikelihoodLoss)
    .versions(12)
    .inputs(2, 3)
    .optional_attr("ignore_index", AttrKind::Int)
    .attr("reduction", "mean")
    .summary("-input[n, target[n, d...], d...] * weight[target], reduced by none/sum/mean (weighted).")
    .vjp(nll_loss_vjp);
INGOT_OP(SoftmaxCrossEntropyLoss)
    .versions(12)
    .inputs(2, 3)
    .outputs(1, 2)
    .optional_attr("ignore_index", AttrKind::Int)
    .attr("reduction", "mean")
    .summary("NegativeLogLikelihoodLoss of LogSoftmax(scores, axis 1); optional second output log_prob.")
    .vjp(softmax_cross_entropy_vjp);

INGOT_OP(Einsum)
    .versions(12)
    .inputs(1, -1)
    .required_attr("equation", AttrKind::String)
    .summary("Einstein summation (explicit/implicit output, diagonals, broadcasting '...').");

INGOT_OP(Det).versions(11).inputs(1).summary("Determinant of square matrices [..., M, M] -> [...].");

}  // namespace ingot
