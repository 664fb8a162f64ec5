#include "autograd/graph_emitter.h"

#include <ingot/ops.h>

#include <algorithm>

#include "core/strings.h"

namespace ingot {

GraphEmitter::GraphEmitter(const Model& model, const Graph& graph, std::string prefix, std::vector<Node>& out)
    : graph_(graph), prefix_(std::move(prefix)), out_(out), onnx_opset_(int(model.opset(""))) {
  for (const auto& [name, t] : graph.initializers) known_.emplace(name, t);
  for (const Node& n : graph.nodes) {
    if (n.op_type == "Constant" && n.outputs.size() == 1) {
      if (auto it = n.attrs.find("value"); it != n.attrs.end() && it->second.kind == AttrKind::Tensor)
        known_.emplace(n.outputs[0], it->second.t);
    }
  }
}

std::string GraphEmitter::fresh() { return fmt::format("{}grad_{}", prefix_, counter_++); }

GradValue GraphEmitter::value_of(const std::string& name) {
  if (auto it = known_.find(name); it != known_.end()) return {it->second, name};
  const ValueInfo* vi = graph_.find_value_info(name);
  if (!vi || vi->type.kind != ValueKind::Tensor || vi->type.dtype == DType::Undefined || !vi->type.shape)
    fail("the gradient needs the static type of '{}', which the model does not give", name);
  Shape shape;
  for (const Dim& d : *vi->type.shape) {
    if (d.value < 0) fail("the gradient needs static shapes; '{}' has a symbolic dim", name);
    shape.push_back(d.value);
  }
  return {Tensor::zeros(vi->type.dtype, shape), name};
}

std::string GraphEmitter::add_node(const std::string& op, std::vector<std::string> inputs,
                                   std::vector<std::string> outputs, Attributes attrs) {
  Node n;
  n.name = fmt::format("{}{}_{}", prefix_, op, counter_++);
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attrs = std::move(attrs);
  out_.push_back(std::move(n));
  return out_.back().outputs.empty() ? "" : out_.back().outputs[0];
}

std::vector<GradValue> GraphEmitter::emit(const OpDef& def, const std::vector<GradValue>& inputs,
                                          const Attributes& attrs, int num_outputs) {
  std::vector<Tensor> shadows;
  std::vector<std::string> names;
  for (const GradValue& v : inputs) {
    shadows.push_back(v.tensor);
    names.push_back(v.name);
  }
  const bool onnx = def.domain.empty() || def.domain == "ai.onnx";
  std::vector<Tensor> out = ops::call(def.name, shadows, attrs, num_outputs, def.domain, onnx ? onnx_opset_ : 1);
  // A shape, or computed from known values only (axes, a reshaped shape): known as well.
  const bool known = def.name == "Shape" || def.name == "Size" ||
                     std::all_of(inputs.begin(), inputs.end(), [&](const GradValue& v) { return !v.defined() || known_.count(v.name); });
  std::vector<std::string> outputs;
  std::vector<GradValue> result;
  for (Tensor& t : out) {
    outputs.push_back(fresh());
    if (known) known_.emplace(outputs.back(), t);
    result.push_back({std::move(t), outputs.back()});
  }
  add_node(def.name, std::move(names), std::move(outputs), attrs);
  out_.back().domain = def.domain;
  return result;
}

GradValue GraphEmitter::constant(const Tensor& t) {
  std::string name = fresh();
  add_node("Constant", {}, {name}, {{"value", t}});
  known_.emplace(name, t);
  return {t, name};
}

std::optional<Tensor> GraphEmitter::value(const GradValue& v) const {
  if (auto it = known_.find(v.name); it != known_.end()) return it->second;
  return std::nullopt;
}

}  // namespace ingot
