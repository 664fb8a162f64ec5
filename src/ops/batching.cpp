#include "ops/batching.h"

#include <ingot/ops.h>

#include <algorithm>
#include <numeric>

namespace ingot {

BatchBuilder::BatchBuilder(const OpDef& def, const Attributes& attrs, int opset, std::vector<Tensor> inputs,
                           std::vector<bool> batched, int64_t batch, size_t num_outputs)
    : def_(def), attrs_(attrs), opset_(opset), inputs_(std::move(inputs)), batched_(std::move(batched)), batch_(batch),
      outputs_(num_outputs), outputs_batched_(num_outputs, false) {}

const Tensor& BatchBuilder::x(size_t i) const {
  static const Tensor none;
  return i < inputs_.size() ? inputs_[i] : none;
}

bool BatchBuilder::any_batched(size_t from) const {
  for (size_t i = from; i < inputs_.size(); ++i) {
    if (batched(i)) return true;
  }
  return false;
}

int64_t BatchBuilder::batched_axis(size_t i, int64_t axis) const {
  const int64_t rank = example_rank(i);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1)) fail("{}: axis {} is outside rank {}", def_.name, axis, rank);
  return batched(i) ? axis + 1 : axis;
}

Attributes BatchBuilder::attrs_with(const std::string& name, Attribute value) const {
  Attributes a = attrs_;
  a[name] = std::move(value);
  return a;
}

std::vector<Tensor> BatchBuilder::call(std::string_view op, const std::vector<Tensor>& inputs, const Attributes& attrs,
                                       int num_outputs) const {
  return ops::call(std::string(op), inputs, attrs, num_outputs);
}

std::vector<Tensor> BatchBuilder::run(const std::vector<Tensor>& inputs, const Attributes& attrs) const {
  return ops::call(def_.name, inputs, attrs, int(outputs_.size()), def_.domain, opset_);
}

Tensor BatchBuilder::int64s(const std::vector<int64_t>& values) {
  return Tensor::from_vector<int64_t>(values, {int64_t(values.size())});
}

Tensor BatchBuilder::reshape(const Tensor& t, const std::vector<int64_t>& shape) {
  return ops::call("Reshape", {t, int64s(shape)}, {}, 1).at(0);
}

Tensor BatchBuilder::unsqueeze(const Tensor& t, const std::vector<int64_t>& axes) {
  if (axes.empty()) return t;
  return ops::call("Unsqueeze", {t, int64s(axes)}, {}, 1).at(0);
}

Tensor BatchBuilder::squeeze(const Tensor& t, const std::vector<int64_t>& axes) {
  if (axes.empty()) return t;
  return ops::call("Squeeze", {t, int64s(axes)}, {}, 1).at(0);
}

Tensor BatchBuilder::materialized(size_t i) const {
  if (batched(i)) return x(i);
  Shape s = x(i).shape();
  s.insert(s.begin(), batch_);
  return ops::call("Expand", {unsqueeze(x(i), {0}), int64s(s)}, {}, 1).at(0);
}

Tensor BatchBuilder::aligned(size_t i, int64_t rank) const {
  return batched(i) ? line_up(x(i), example_rank(i), rank) : x(i);
}

Tensor BatchBuilder::line_up(const Tensor& t, int64_t example_rank, int64_t rank) {
  std::vector<int64_t> axes(size_t(std::max<int64_t>(0, rank - example_rank)));
  std::iota(axes.begin(), axes.end(), 1);
  return unsqueeze(t, axes);
}

Tensor BatchBuilder::fold(const Tensor& t) const {
  Shape s = t.shape();
  if (s.size() < 2) fail("{}: cannot fold the batch into a rank-{} input", def_.name, s.size() - 1);
  std::vector<int64_t> folded{s[0] * s[1]};
  folded.insert(folded.end(), s.begin() + 2, s.end());
  return reshape(t, folded);
}

Tensor BatchBuilder::unfold(const Tensor& t) const {
  Shape s = t.shape();
  std::vector<int64_t> unfolded{batch_, s.at(0) / batch_};
  unfolded.insert(unfolded.end(), s.begin() + 1, s.end());
  return reshape(t, unfolded);
}

void BatchBuilder::output(size_t k, Tensor t, bool batched) {
  outputs_.at(k) = std::move(t);
  outputs_batched_.at(k) = batched && outputs_[k].defined();
}

void BatchBuilder::outputs(std::vector<Tensor> ts, bool batched) {
  for (size_t k = 0; k < ts.size() && k < outputs_.size(); ++k) output(k, std::move(ts[k]), batched);
}

namespace batching {

bool elementwise(BatchBuilder& b) {
  int64_t rank = 0;
  for (size_t i = 0; i < b.num_inputs(); ++i) {
    if (b.has_input(i)) rank = std::max(rank, b.example_rank(i));
  }
  std::vector<Tensor> in;
  for (size_t i = 0; i < b.num_inputs(); ++i) in.push_back(b.has_input(i) ? b.aligned(i, rank) : Tensor());
  // Input 0 carries the batch, so that ops broadcasting only into it (PRelu) still see it there.
  if (!b.batched(0)) in[0] = BatchBuilder::line_up(b.materialized(0), b.example_rank(0), rank);
  b.outputs(b.run(in));
  return true;
}

bool first_input_only(BatchBuilder& b) {
  if (b.any_batched(1)) return false;
  std::vector<Tensor> in;
  for (size_t i = 0; i < b.num_inputs(); ++i) in.push_back(b.x(i));
  b.outputs(b.run(in));
  return true;
}

bool axis_attr(BatchBuilder& b) {
  if (b.any_batched(1)) return false;
  const int64_t axis = b.batched_axis(0, b.attr_int("axis"));
  std::vector<Tensor> in;
  for (size_t i = 0; i < b.num_inputs(); ++i) in.push_back(b.x(i));
  b.outputs(b.run(in, b.attrs_with("axis", axis)));
  return true;
}

bool fold_batch(BatchBuilder& b) {
  if (b.any_batched(1)) return false;
  std::vector<Tensor> in{b.fold(b.x(0))};
  for (size_t i = 1; i < b.num_inputs(); ++i) in.push_back(b.x(i));
  std::vector<Tensor> outs = b.run(in);
  for (size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].defined()) b.output(k, b.unfold(outs[k]), true);
  }
  return true;
}

}  // namespace batching

BatchRule batch_rule_of(const OpDef& def) {
  if (def.batch) return def.batch;
  if (def.has(OpTag::Elementwise)) return batching::elementwise;
  return nullptr;
}

}  // namespace ingot
