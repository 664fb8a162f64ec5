#include "ops/gradient.h"

#include <algorithm>

#include "core/strings.h"

namespace ingot {

const GradValue& GradBuilder::x(size_t i) const {
  static const GradValue none;
  return i < inputs_.size() ? inputs_[i] : none;
}

const GradValue& GradBuilder::y(size_t i) const {
  static const GradValue none;
  return i < outputs_.size() ? outputs_[i] : none;
}

const GradValue& GradBuilder::dy(size_t i) const {
  static const GradValue none;
  return i < cotangents_.size() ? cotangents_[i] : none;
}

void GradBuilder::grad(size_t i, GradValue g) {
  if (wants(i)) grads_[i] = std::move(g);
}

void GradBuilder::unsupported(std::string_view what) const {
  fail("no gradient for {} {}", def_.name, what);
}

std::vector<GradValue> GradBuilder::call(std::string_view op, const std::vector<GradValue>& inputs,
                                         const Attributes& attrs, int num_outputs, std::string_view domain) {
  const OpDef* def = OpCatalogue::instance().find(domain, op);
  if (!def) fail("gradient of {}: op {} is not in the catalogue", def_.name, op);
  return emitter_.emit(*def, inputs, attrs, num_outputs);
}

GradValue GradBuilder::transpose_last_two(const GradValue& v) {
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < rank(v); ++a) perm.push_back(a);
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  return transpose(v, perm);
}

GradValue GradBuilder::scalar(double value, const GradValue& like) {
  return emitter_.constant(Tensor::scalar<double>(value).cast(dtype(like)));
}

GradValue GradBuilder::int64s(const std::vector<int64_t>& values) {
  return emitter_.constant(Tensor::from_vector<int64_t>(values, {int64_t(values.size())}));
}

Shape GradBuilder::static_shape(const GradValue& v) const {
  std::optional<Shape> s = shape(v);
  if (!s) fail("the gradient of {} needs static shapes (a value has a symbolic dim)", def_.name);
  return *s;
}

std::vector<int64_t> GradBuilder::int64_values(const GradValue& v, std::string_view what) const {
  std::optional<Tensor> t = emitter_.value(v);
  if (!t) fail("the gradient of {} needs its {} as a constant", def_.name, what);
  return t->to_int64_vector();
}

double GradBuilder::double_value(const GradValue& v, std::string_view what) const {
  std::optional<Tensor> t = emitter_.value(v);
  if (!t) fail("the gradient of {} needs its {} as a constant", def_.name, what);
  return t->item_double();
}

std::vector<int64_t> GradBuilder::reduction_axes(bool axes_input) const {
  if (axes_input) return has_input(1) ? int64_values(x(1), "axes") : std::vector<int64_t>{};
  return has_attr("axes") ? attr_ints("axes") : std::vector<int64_t>{};
}

std::vector<GradValue> GradBuilder::vjp_of(std::string_view op, const std::vector<GradValue>& inputs,
                                           const Attributes& attrs, const std::vector<GradValue>& outputs,
                                           const std::vector<GradValue>& cotangents, std::string_view domain) {
  const OpDef* def = OpCatalogue::instance().find(domain, op);
  if (!def || !def->vjp) fail("gradient of {}: {} has no gradient rule", def_.name, op);
  std::vector<bool> wanted;
  for (const GradValue& v : inputs) wanted.push_back(v.defined() && differentiable_dtype(dtype(v)));
  const bool onnx = domain.empty() || domain == "ai.onnx";
  GradBuilder inner(emitter_, *def, attrs, onnx ? emitter_.onnx_opset() : 1, inputs, outputs, cotangents, wanted);
  def->vjp(inner);
  return inner.grads();
}

GradValue GradBuilder::selection_grad() {
  const Shape shape = static_shape(x(0));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  // Element numbers from 1 (exact up to 2^53 elements): an output element the op fills instead of
  // copying (a constant pad, a sample outside the input) comes out 0 and takes no gradient.
  Tensor numbers = Tensor::empty(DType::Float64, shape);
  double k = 1;
  for (double& v : numbers.span<double>()) v = k++;
  std::vector<GradValue> in = inputs_;
  in[0] = emitter_.constant(numbers);
  for (size_t i = 1; i < in.size(); ++i) {  // operands of the data's dtype (a pad value) follow it to float64
    if (in[i].defined() && dtype(in[i]) == dtype(x(0))) in[i] = call1("Cast", {in[i]}, {{"to", int64_t(DType::Float64)}});
  }
  GradValue from = call(def_.name, in, attrs_, 1, def_.domain).at(0);
  GradValue index = call1("Cast", {reshape(from, int64s({-1}))}, {{"to", int64_t(DType::Int64)}});
  GradValue slots = call1("Concat", {unsqueeze(scalar(0.0, x(0)), {0}), reshape(x(0), int64s({n}))}, {{"axis", int64_t(0)}});
  GradValue g = call1("ScatterElements", {zeros_like(slots), index, reshape(dy(), int64s({-1}))},
                      {{"axis", int64_t(0)}, {"reduction", "add"}});
  g = call1("Slice", {g, int64s({1}), int64s({n + 1})});
  return reshape(g, int64s(std::vector<int64_t>(shape.begin(), shape.end())));
}

GradValue GradBuilder::sum_to(const GradValue& g, const GradValue& like) {
  const Shape gs = static_shape(g), ls = static_shape(like);
  if (gs == ls) return g;
  if (ls.size() > gs.size()) fail("gradient of {}: a gradient of shape {} cannot sum to shape {}", def_.name,
                                  shape_str(gs), shape_str(ls));
  const size_t lead = gs.size() - ls.size();
  std::vector<int64_t> axes;
  for (size_t a = 0; a < gs.size(); ++a) {
    if (a < lead || (ls[a - lead] == 1 && gs[a] != 1)) axes.push_back(int64_t(a));
  }
  GradValue r = axes.empty() ? g : reduce_sum(g, axes, true);
  return reshape(r, int64s(std::vector<int64_t>(ls.begin(), ls.end())));
}

GradValue GradBuilder::reduce_sum(const GradValue& v, const std::vector<int64_t>& axes, bool keepdims) {
  Attributes a{{"keepdims", int64_t(keepdims)}};
  if (emitter_.onnx_opset() >= 13) return call1("ReduceSum", {v, int64s(axes)}, a);
  a["axes"] = axes;
  return call1("ReduceSum", {v}, a);
}

GradValue GradBuilder::reduce_mean(const GradValue& v, const std::vector<int64_t>& axes, bool keepdims) {
  Attributes a{{"keepdims", int64_t(keepdims)}};
  if (emitter_.onnx_opset() >= 18) return call1("ReduceMean", {v, int64s(axes)}, a);
  a["axes"] = axes;
  return call1("ReduceMean", {v}, a);
}

GradValue GradBuilder::unsqueeze(const GradValue& v, const std::vector<int64_t>& axes) {
  if (axes.empty()) return v;
  if (emitter_.onnx_opset() >= 13) return call1("Unsqueeze", {v, int64s(axes)});
  return call1("Unsqueeze", {v}, {{"axes", axes}});
}

GradValue GradBuilder::squeeze(const GradValue& v, const std::vector<int64_t>& axes) {
  if (axes.empty()) return v;
  if (emitter_.onnx_opset() >= 13) return call1("Squeeze", {v, int64s(axes)});
  return call1("Squeeze", {v}, {{"axes", axes}});
}

GradValue GradBuilder::equal_mask(const GradValue& a, const GradValue& b, const GradValue& like) {
  return call1("Cast", {call1("Equal", {a, b})}, {{"to", int64_t(dtype(like))}});
}

}  // namespace ingot
