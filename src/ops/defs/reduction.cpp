// Reductions (ReduceX, ArgMax/ArgMin), losses, Einsum and Det.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "ops/batching.h"
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

// ReduceSum's axes became an input at opset 13, the other reductions' at 18 (the definitions'
// summaries, the gradient and the batching rule all read it here).
int axes_input_since_of(std::string_view op) { return op == "ReduceSum" ? 13 : 18; }

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
  const int axes_input_since = axes_input_since_of(b.def().name);
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


// Reductions under vmap: the example's axes (all of them when none are given) shifted past the batch.
bool reduce_batch(BatchBuilder& b) {
  if (b.any_batched(1)) return false;
  const bool axes_input = b.opset() >= axes_input_since_of(b.def().name);
  std::vector<int64_t> axes = axes_input ? (b.has_input(1) ? b.int64_values(1) : std::vector<int64_t>{})
                                         : (b.has_attr("axes") ? b.attr_ints("axes") : std::vector<int64_t>{});
  if (axes.empty()) {
    if (axes_input && b.attr_int("noop_with_empty_axes")) {
      b.output(0, b.x(0), true);
      return true;
    }
    for (int64_t a = 0; a < b.example_rank(0); ++a) axes.push_back(a);
    if (axes.empty()) {  // a scalar example reduces to itself
      b.output(0, b.x(0), true);
      return true;
    }
  }
  for (int64_t& a : axes) a = b.batched_axis(0, a);
  if (axes_input) {
    b.output(0, b.run({b.x(0), BatchBuilder::int64s(axes)})[0], true);
  } else {
    b.output(0, b.run({b.x(0)}, b.attrs_with("axes", axes))[0], true);
  }
  return true;
}

// ---- Einsum: the equation's terms, its gradient and its batching rule.

// An equation's input terms and output term (computed in implicit mode: '...' first, then the
// letters that appear once, in alphabetical order), spaces removed.
struct EinsumTerms {
  std::vector<std::string> inputs;
  std::string output;
  std::string equation() const {
    std::string e;
    for (size_t i = 0; i < inputs.size(); ++i) e += (i ? "," : "") + inputs[i];
    return e + "->" + output;
  }
  bool uses(char c) const {
    for (const std::string& t : inputs) {
      if (t.find(c) != std::string::npos) return true;
    }
    return output.find(c) != std::string::npos;
  }
};

EinsumTerms einsum_terms(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  EinsumTerms t;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    t.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    t.output = eq.substr(arrow + 2);
  } else {
    std::map<char, int> count;
    bool ellipsis = false;
    for (const std::string& term : t.inputs) {
      ellipsis |= term.find("...") != std::string::npos;
      for (char c : term) {
        if (c != '.') ++count[c];
      }
    }
    if (ellipsis) t.output = "...";
    for (auto [c, n] : count) {
      if (n == 1) t.output += c;
    }
  }
  return t;
}

// The gradient of operand i: dy contracted with the other operands into operand i's term. Letters
// only operand i has (summed away in the forward) come back by broadcasting, and '...' axes that
// were broadcast are summed down (sum_to).
void einsum_vjp(G& b) {
  const EinsumTerms t = einsum_terms(b.attr("equation", AttrKind::String).s);
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    if (!b.wants(i)) continue;
    const std::string& term = t.inputs[i];
    std::string letters;  // operand i's letters the others or the output have
    for (size_t k = 0; k < term.size(); ++k) {
      const char c = term[k];
      if (c == '.') continue;
      if (term.find(c) != k) b.unsupported("with a repeated subscript (a diagonal)");
    }
    if (term.find("...") != std::string::npos && term.rfind("...", 0) != 0) b.unsupported("with '...' not leading");
    std::vector<GradValue> ins{b.dy()};
    std::vector<std::string> terms{t.output};
    for (size_t j = 0; j < t.inputs.size(); ++j) {
      if (j == i) continue;
      ins.push_back(b.x(j));
      terms.push_back(t.inputs[j]);
    }
    std::string kept;
    std::vector<int64_t> missing;  // axes of operand i (after its '...') whose letter nobody else has
    const std::string body = term.rfind("...", 0) == 0 ? term.substr(3) : term;
    for (size_t k = 0; k < body.size(); ++k) {
      bool elsewhere = false;
      for (const std::string& other : terms) elsewhere |= other.find(body[k]) != std::string::npos;
      if (elsewhere) {
        kept += body[k];
      } else {
        missing.push_back(int64_t(k));
      }
    }
    const bool ellipsis = body.size() != term.size();
    std::string eq;
    for (size_t k = 0; k < terms.size(); ++k) eq += (k ? "," : "") + terms[k];
    eq += "->" + std::string(ellipsis ? "..." : "") + kept;
    GradValue g = b.call1("Einsum", ins, {{"equation", eq}});
    if (!missing.empty()) {
      const int64_t lead = b.rank(g) - int64_t(kept.size());  // the '...' axes
      for (int64_t& a : missing) a += lead;
      g = b.unsqueeze(g, missing);
    }
    const Shape xs = b.static_shape(b.x(i));
    const Shape gs = b.static_shape(g);
    if (!missing.empty()) {
      // Broadcast the restored axes to operand i's sizes (the rest of g's shape stays).
      std::vector<int64_t> target(gs.begin(), gs.end());
      const size_t off = gs.size() - body.size();
      for (size_t k = 0; k < body.size(); ++k) target[off + k] = xs[xs.size() - body.size() + k];
      g = b.call1("Expand", {g, b.int64s(target)});
    }
    b.grad(i, b.sum_to(g, b.x(i)));
  }
}

// A letter the equation does not use, for the vmap batch.
bool einsum_batch(BatchBuilder& b) {
  EinsumTerms t = einsum_terms(b.attr("equation", AttrKind::String).s);
  char batch = 0;
  for (char c : std::string("zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA")) {
    if (!t.uses(c)) {
      batch = c;
      break;
    }
  }
  if (!batch) return false;
  std::vector<Tensor> in;
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    if (b.batched(i)) t.inputs[i] = batch + t.inputs[i];
    in.push_back(b.x(i));
  }
  t.output = batch + t.output;
  b.output(0, b.run(in, b.attrs_with("equation", t.equation()))[0], true);
  return true;
}

// Det: d det(A) / dA is A's cofactor matrix, C_ij = (-1)^(i+j) det(A without row i and column j),
// which holds for singular A too. The n^2 minors come from two Gathers (rows, then columns, each
// index row leaving one out) and one batched Det.
void det_vjp(G& b) {
  if (!b.wants(0)) return;
  const Shape shape = b.static_shape(b.x(0));
  const int64_t rank = int64_t(shape.size()), n = shape.back();
  V dy = b.unsqueeze(b.dy(), {rank - 2, rank - 1});  // [..., 1, 1]
  if (n == 1) {
    b.grad(0, b.expand_like(dy, b.x(0)));
    return;
  }
  std::vector<int64_t> others;  // [n, n - 1]: row i lists every index but i
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      if (k != i) others.push_back(k);
    }
  }
  V index = b.reshape(b.int64s(others), b.int64s({n, n - 1}));
  V rows = b.call1("Gather", {b.x(0), index}, {{"axis", rank - 2}});  // [..., i, n-1, n]
  V minors = b.call1("Gather", {rows, index}, {{"axis", rank}});      // [..., i, n-1, j, n-1]
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < rank - 2; ++a) perm.push_back(a);
  for (int64_t a : {rank - 2, rank, rank - 1, rank + 1}) perm.push_back(a);
  V cofactor_dets = b.call1("Det", {b.transpose(minors, perm)});  // [..., i, j]
  Tensor signs = Tensor::empty(DType::Float64, {n, n});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) signs.span<double>()[size_t(i * n + j)] = (i + j) % 2 ? -1.0 : 1.0;
  }
  V cofactors = b.mul(cofactor_dets, b.emitter().constant(signs.cast(b.dtype(b.x(0)))));
  b.grad(0, b.mul(cofactors, dy));
}

}  // namespace


// ReduceX: `axes` is an attribute before axes_input_since_of(op) and an optional second input from
// then on; noop_with_empty_axes arrived together with the axes input.
#define INGOT_REDUCE_OP(name, text)                                                                \
  INGOT_OP(name)                                                                                   \
      .versions(1)                                                                                 \
      .inputs(1, 2)                                                                                \
      .optional_attr("axes", AttrKind::Ints)                                                       \
      .attr("keepdims", 1)                                                                         \
      .attr("noop_with_empty_axes", 0)                                                             \
      .summary(text " over `axes` (all axes when empty; attribute before opset " +                \
               std::to_string(axes_input_since_of(#name)) + ", input from it).")                 \
      .batch(reduce_batch)

INGOT_REDUCE_OP(ReduceSum, "Sum")
    .vjp(reduce_sum_vjp);
INGOT_REDUCE_OP(ReduceMean, "Arithmetic mean")
    .vjp(reduce_mean_vjp);
INGOT_REDUCE_OP(ReduceMax, "Maximum (NaN propagates)")
    .vjp(reduce_extremum_vjp);
INGOT_REDUCE_OP(ReduceMin, "Minimum (NaN propagates)")
    .vjp(reduce_extremum_vjp);
INGOT_REDUCE_OP(ReduceProd, "Product")
    .vjp(reduce_prod_vjp);
INGOT_REDUCE_OP(ReduceL1, "Sum of absolute values")
    .vjp(reduce_l1_vjp);
INGOT_REDUCE_OP(ReduceL2, "Euclidean norm")
    .vjp(reduce_l2_vjp);
INGOT_REDUCE_OP(ReduceLogSum, "Log of the sum")
    .vjp(reduce_log_sum_vjp);
INGOT_REDUCE_OP(ReduceLogSumExp, "Log of the sum of exponentials")
    .vjp(reduce_log_sum_exp_vjp);
INGOT_REDUCE_OP(ReduceSumSquare, "Sum of squares")
    .vjp(reduce_sum_square_vjp);
#undef INGOT_REDUCE_OP

INGOT_OP(ArgMax)
    .versions(1)
    .inputs(1)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .attr("select_last_index", 0)
    .summary("Index (int64) of the largest element along `axis`; the first NaN counts as largest.")
    .tag(OpTag::AutocastFollow)
    .batch(batching::axis_attr);
INGOT_OP(ArgMin)
    .versions(1)
    .inputs(1)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .attr("select_last_index", 0)
    .summary("Index (int64) of the smallest element along `axis`; the first NaN counts as smallest.")
    .tag(OpTag::AutocastFollow)
    .batch(batching::axis_attr);

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
    .summary("Einstein summation (explicit/implicit output, diagonals, broadcasting '...').")
    .vjp(einsum_vjp)
    .batch(einsum_batch);

INGOT_OP(Det).versions(11).inputs(1).summary("Determinant of square matrices [..., M, M] -> [...].").vjp(det_vjp);

}  // namespace ingot
