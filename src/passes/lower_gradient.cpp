// Lowers ai.onnx.preview.training.Gradient into ordinary nodes: reverse-mode differentiation of
// the nodes of the same graph that lie between the xs and y, one gradient rule per op. This is a
// lowering (it runs whatever SessionOptions::optimize says): no kernel implements Gradient itself.
#include <algorithm>
#include <map>
#include <set>

#include "passes/pass.h"

namespace ingot {
namespace {

class Lowering {
 public:
  Lowering(Graph& g, const Node& grad, size_t index, int64_t opset) : g_(g), grad_(grad), index_(index), opset_(opset) {}

  std::vector<Node> run() {
    const auto& xs = grad_.attrs.at("xs").strings;
    const std::string& y = grad_.attrs.at("y").s;
    if (xs.size() != grad_.outputs.size()) {
      fail("attribute xs names {} values but the node has {} outputs", xs.size(), grad_.outputs.size());
    }
    std::set<std::string> stop;  // zs: treated as constants
    if (auto it = grad_.attrs.find("zs"); it != grad_.attrs.end()) stop.insert(it->second.strings.begin(), it->second.strings.end());
    // The forward nodes: producers of y's ancestors, before the Gradient node, that depend on an x.
    std::set<std::string> depends(xs.begin(), xs.end());
    std::vector<const Node*> forward;
    for (size_t i = 0; i < index_; ++i) {
      const Node& n = g_.nodes[i];
      bool uses = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& v) { return depends.count(v) && !stop.count(v); });
      if (!uses) continue;
      forward.push_back(&n);
      depends.insert(n.outputs.begin(), n.outputs.end());
    }
    if (!depends.count(y)) fail("attribute y: '{}' does not depend on any of xs through the nodes before this one", y);
    add_grad(y, filled_like(y, 1.0));
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) backward(**it);
    for (size_t i = 0; i < xs.size(); ++i) {
      std::string g = total(xs[i]);
      if (g.empty()) g = filled_like(xs[i], 0.0);
      nodes_.push_back(node("Identity", {g}, {grad_.outputs[i]}));
    }
    return std::move(nodes_);
  }

 private:
  Node node(std::string op, std::vector<std::string> in, std::vector<std::string> out, Attributes attrs = {}) {
    Node n;
    n.name = grad_.name + "/" + op + "_" + std::to_string(counter_);
    n.op_type = std::move(op);
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attrs = std::move(attrs);
    return n;
  }
  std::string emit(const std::string& op, std::vector<std::string> in, Attributes attrs = {}) {
    std::string out = grad_.name + "/grad_" + std::to_string(counter_++);
    nodes_.push_back(node(op, std::move(in), {out}, std::move(attrs)));
    return out;
  }
  void add_grad(const std::string& value, const std::string& grad) { grads_[value].push_back(grad); }
  // A tensor of value's shape and (float) dtype, every element `fill`.
  std::string filled_like(const std::string& value, double fill) {
    DType dt = DType::Float32;
    if (auto init = g_.initializers.find(value); init != g_.initializers.end()) {
      dt = init->second.dtype();
    } else if (const ValueInfo* vi = g_.find_value_info(value); vi && vi->type.dtype != DType::Undefined) {
      dt = vi->type.dtype;
    }
    if (!is_floating(dt)) fail("cannot differentiate '{}' of dtype {}", value, dtype_name(dt));
    Tensor v = Tensor::from_vector<double>({fill}, {1}).cast(dt);
    return emit("ConstantOfShape", {emit("Shape", {value})}, {{"value", v}});
  }
  // The summed gradient of a value ("" when nothing reached it).
  std::string total(const std::string& value) {
    auto it = grads_.find(value);
    if (it == grads_.end()) return "";
    if (it->second.size() > 1) it->second = {emit("Sum", it->second)};
    return it->second[0];
  }
  // The gradient of a broadcast operand: summed over the axes it was broadcast along.
  std::string unbroadcast(const std::string& grad, const std::string& operand, const std::string& result) {
    auto rank_of = [&](const std::string& v) -> const std::vector<Dim>* {
      const ValueInfo* vi = g_.find_value_info(v);
      if (auto init = g_.initializers.find(v); init != g_.initializers.end()) {
        static thread_local std::vector<Dim> dims;
        dims.clear();
        for (int64_t d : init->second.shape()) dims.push_back(Dim{d, ""});
        return &dims;
      }
      return vi && vi->type.shape ? &*vi->type.shape : nullptr;
    };
    const std::vector<Dim>* a = rank_of(operand);
    std::vector<Dim> a_dims = a ? *a : std::vector<Dim>{};
    const std::vector<Dim>* r = rank_of(result);
    if (!a || !r) fail("cannot differentiate a broadcast to '{}' whose shapes are unknown", result);
    if (a_dims == *r) return grad;
    std::vector<int64_t> axes;
    const size_t pad = r->size() - a_dims.size();
    for (size_t d = 0; d < r->size(); ++d) {
      bool broadcast = d < pad || (a_dims[d - pad].value == 1 && (*r)[d].value != 1);
      if (!broadcast && !(a_dims[d - pad] == (*r)[d])) fail("cannot differentiate a broadcast to '{}' with symbolic dims", result);
      if (broadcast) axes.push_back(int64_t(d));
    }
    // ReduceSum takes its axes as an input from opset 13, as an attribute before.
    std::string summed =
        opset_ >= 13 ? emit("ReduceSum", {grad, emit("Constant", {}, {{"value", Tensor::from_vector<int64_t>(axes, {int64_t(axes.size())})}})},
                            {{"keepdims", int64_t(1)}})
                     : emit("ReduceSum", {grad}, {{"axes", axes}, {"keepdims", int64_t(1)}});
    return emit("Reshape", {summed, emit("Shape", {operand})});
  }

  void backward(const Node& n) {
    if (n.outputs.size() != 1) fail("Gradient: no gradient rule for {} (it has {} outputs)", n.op_type, n.outputs.size());
    std::string dy = total(n.outputs[0]);
    if (dy.empty()) return;  // does not reach y
    const std::string& y = n.outputs[0];
    auto in = [&](size_t i) { return n.inputs.at(i); };
    const std::string& op = n.op_type;
    if (!n.domain.empty()) fail("Gradient: no gradient rule for {}.{}", n.domain, op);
    if (op == "Add") {
      add_grad(in(0), unbroadcast(dy, in(0), y));
      add_grad(in(1), unbroadcast(dy, in(1), y));
    } else if (op == "Sub") {
      add_grad(in(0), unbroadcast(dy, in(0), y));
      add_grad(in(1), unbroadcast(emit("Neg", {dy}), in(1), y));
    } else if (op == "Mul") {
      add_grad(in(0), unbroadcast(emit("Mul", {dy, in(1)}), in(0), y));
      add_grad(in(1), unbroadcast(emit("Mul", {dy, in(0)}), in(1), y));
    } else if (op == "Div") {  // y = a / b: da = dy / b, db = -dy * y / b
      add_grad(in(0), unbroadcast(emit("Div", {dy, in(1)}), in(0), y));
      add_grad(in(1), unbroadcast(emit("Neg", {emit("Div", {emit("Mul", {dy, y}), in(1)})}), in(1), y));
    } else if (op == "Neg") {
      add_grad(in(0), emit("Neg", {dy}));
    } else if (op == "Identity") {
      add_grad(in(0), dy);
    } else if (op == "Relu") {  // dy where x > 0
      std::string zero = emit("Sub", {in(0), in(0)});
      add_grad(in(0), emit("Where", {emit("Greater", {in(0), zero}), dy, zero}));
    } else if (op == "Sigmoid") {  // dy * y * (1 - y)
      add_grad(in(0), emit("Mul", {dy, emit("Mul", {y, emit("Sub", {filled_like(y, 1.0), y})})}));
    } else if (op == "Tanh") {  // dy * (1 - y^2)
      add_grad(in(0), emit("Mul", {dy, emit("Sub", {filled_like(y, 1.0), emit("Mul", {y, y})})}));
    } else if (op == "Exp") {
      add_grad(in(0), emit("Mul", {dy, y}));
    } else if (op == "MatMul") {  // 2-D: da = dy b^T, db = a^T dy
      add_grad(in(0), emit("MatMul", {dy, emit("Transpose", {in(1)})}));
      add_grad(in(1), emit("MatMul", {emit("Transpose", {in(0)}), dy}));
    } else {
      fail("Gradient: no gradient rule for {} (differentiable here: Add, Sub, Mul, Div, Neg, Identity, Relu, "
           "Sigmoid, Tanh, Exp, MatMul)", op);
    }
  }

  Graph& g_;
  const Node& grad_;
  size_t index_;
  int64_t opset_;
  std::vector<Node> nodes_;
  std::map<std::string, std::vector<std::string>> grads_;
  int counter_ = 0;
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
      lowered = Lowering(g, grad, i, model.opset("")).run();
    } catch (Error& e) {
      e.add_context(grad.label());
      throw;
    }
    g.nodes.erase(g.nodes.begin() + int64_t(i));
    g.nodes.insert(g.nodes.begin() + int64_t(i), lowered.begin(), lowered.end());
    i += lowered.size() - 1;
    changed = true;
  }
  return changed;
}

}  // namespace ingot
