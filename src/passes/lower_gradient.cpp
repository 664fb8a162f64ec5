// Lowers ai.onnx.preview.training.Gradient into ordinary nodes: reverse-mode differentiation of
// the nodes of the same graph that lie between the xs and y, through each op's gradient rule (the
// op's OpDef::vjp, beside its definition; autograd/graph_emitter.h appends what the rules call).
// This is a lowering (it runs whatever SessionOptions::optimize says): no kernel implements
// Gradient itself.
#include <algorithm>
#include <map>
#include <set>

#include "autograd/graph_emitter.h"
#include "passes/pass.h"

namespace ingot {
namespace {

class Lowering {
 public:
  Lowering(Model& model, Graph& g, const Node& grad, size_t index)
      : model_(model), g_(g), grad_(grad), index_(index), emitter_(model, g, grad.name + "/", nodes_) {}

  std::vector<Node> run() {
    const auto& xs = grad_.attrs.at("xs").strings;
    const std::string& y = grad_.attrs.at("y").s;
    if (xs.size() != grad_.outputs.size()) {
      fail("attribute xs names {} values but the node has {} outputs", xs.size(), grad_.outputs.size());
    }
    std::set<std::string> stop;  // zs: treated as constants
    if (auto it = grad_.attrs.find("zs"); it != grad_.attrs.end()) stop.insert(it->second.strings.begin(), it->second.strings.end());
    // The forward nodes: producers of y's ancestors, before the Gradient node, that depend on an x.
    depends_.insert(xs.begin(), xs.end());
    std::vector<const Node*> forward;
    for (size_t i = 0; i < index_; ++i) {
      const Node& n = g_.nodes[i];
      bool uses = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& v) { return depends_.count(v) && !stop.count(v); });
      if (!uses) continue;
      const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
      if (def && !def->no_gradient.empty()) continue;  // its results are constants (RandomNormalLike)
      forward.push_back(&n);
      depends_.insert(n.outputs.begin(), n.outputs.end());
    }
    for (const std::string& z : stop) depends_.erase(z);
    if (!depends_.count(y)) fail("attribute y: '{}' does not depend on any of xs through the nodes before this one", y);
    grads_[y].push_back(filled_like(y, 1.0));
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) backward(**it);
    for (size_t i = 0; i < xs.size(); ++i) {
      std::string g = total(xs[i]);
      if (g.empty()) g = filled_like(xs[i], 0.0);
      emitter_.add_node("Identity", {g}, {grad_.outputs[i]});
    }
    return std::move(nodes_);
  }

 private:
  // A tensor of value's shape and (float) dtype, every element `fill`.
  std::string filled_like(const std::string& value, double fill) {
    GradValue v = emitter_.value_of(value);
    if (!differentiable_dtype(v.tensor.dtype()))
      fail("cannot differentiate '{}' of dtype {}", value, dtype_name(v.tensor.dtype()));
    Tensor one = Tensor::from_vector<double>({fill}, {1}).cast(v.tensor.dtype());
    std::string shape = emitter_.add_node("Shape", {value}, {emitter_.fresh()});
    return emitter_.add_node("ConstantOfShape", {shape}, {emitter_.fresh()}, {{"value", one}});
  }
  // The summed gradient of a value ("" when nothing reached it).
  std::string total(const std::string& value) {
    auto it = grads_.find(value);
    if (it == grads_.end()) return "";
    if (it->second.size() > 1) it->second = {emitter_.add_node("Sum", it->second, {emitter_.fresh()})};
    return it->second[0];
  }

  void backward(const Node& n) {
    std::vector<GradValue> cotangents;
    bool any = false;
    for (const std::string& out : n.outputs) {
      std::string g = out.empty() ? "" : total(out);
      any |= !g.empty();
      cotangents.push_back(g.empty() ? GradValue{} : GradValue{emitter_.value_of(out).tensor, g});
    }
    if (!any) return;  // does not reach y
    const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
    if (!def || !def->vjp) fail("Gradient: no gradient rule for {}{}", n.domain.empty() ? "" : n.domain + ".", n.op_type);
    std::vector<GradValue> inputs, outputs;
    std::vector<bool> wanted;
    for (const std::string& in : n.inputs) {
      inputs.push_back(in.empty() ? GradValue{} : emitter_.value_of(in));
      wanted.push_back(!in.empty() && depends_.count(in) && differentiable_dtype(inputs.back().tensor.dtype()));
    }
    for (const std::string& out : n.outputs) outputs.push_back(out.empty() ? GradValue{} : emitter_.value_of(out));
    GradBuilder b(emitter_, *def, n.attrs, int(model_.opset(n.domain)), std::move(inputs), std::move(outputs),
                  std::move(cotangents), wanted);
    try {
      def->vjp(b);
    } catch (Error& e) {
      e.add_context(n.label());
      throw;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (wanted[i] && b.grads()[i].defined()) grads_[n.inputs[i]].push_back(b.grads()[i].name);
    }
  }

  Model& model_;
  Graph& g_;
  const Node& grad_;
  size_t index_;
  std::vector<Node> nodes_;
  GraphEmitter emitter_;
  std::set<std::string> depends_;
  std::map<std::string, std::vector<std::string>> grads_;
};

}  // namespace

bool lower_gradient(Model& model) {
  Graph& g = *model.graph;
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].op_type != "Gradient" || g.nodes[i].domain != "ai.onnx.preview.training") continue;
    Node grad = g.nodes[i];
    std::vector<Node> lowered;
    try {
      lowered = Lowering(model, g, grad, i).run();
    } catch (Error& e) {
      e.add_context(grad.label());
      throw;
    }
    for (const Node& n : lowered) {
      if (!n.domain.empty()) model.opsets.try_emplace(n.domain, 1);
    }
    g.nodes.erase(g.nodes.begin() + int64_t(i));
    g.nodes.insert(g.nodes.begin() + int64_t(i), lowered.begin(), lowered.end());
    i += lowered.size() - 1;
    changed = true;
  }
  return changed;
}

}  // namespace ingot
