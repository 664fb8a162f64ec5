// Recognizes softmax written out in elementary ops (as some exporters and hand-built graphs emit it):
//   stable:    m = ReduceMax(x, axis a); e = Exp(Sub(x, m)); y = Div(e, ReduceSum(e, axis a))
//   plain:     e = Exp(x);                                    y = Div(e, ReduceSum(e, axis a))
// and replaces it with one Softmax(x, axis=a): one kernel that reads x once per row instead of five
// passes over it, and (running before fuse-attention) a softmax that the attention fusion then
// sees. The stable form is Softmax's own computation; the plain form computes the same function
// where it is finite (for logits above ~88 in float32 its Exp overflows to inf / inf = NaN, where
// Softmax gives the right probabilities). Requires both reductions over the same single axis with
// keepdims (axes from the attribute or a constant input), every intermediate read only inside the
// pattern (e by exactly the ReduceSum and the Div), and, for models below opset 13 (whose Softmax
// flattens everything from its axis on), the last axis.
#include <optional>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

// The one axis a ReduceMax/ReduceSum node `n` reduces, keeping it (axes from the attribute or the
// constant second input), normalized to be non-negative where the input's rank is known.
std::optional<int64_t> single_kept_axis(const Graph& g, const Node& n, const char* op) {
  if (!is_op(n, op) || n.inputs.empty() || n.outputs.size() != 1 || attr_int(n, "keepdims", 1) == 0) {
    return std::nullopt;
  }
  std::vector<int64_t> axes;
  if (auto it = n.attrs.find("axes"); it != n.attrs.end()) {
    axes = it->second.ints;
  } else if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const Tensor* t = constant_initializer(g, n.inputs[1]);
    if (!t || t->dtype() != DType::Int64 || t->device() != Device::cpu()) return std::nullopt;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  if (axes.size() != 1) return std::nullopt;  // none: every axis (noop_with_empty_axes aside)
  int64_t axis = axes[0];
  auto type = value_type(g, n.inputs[0]);
  if (axis < 0 && type && type->shape) axis += int64_t(type->shape->size());
  return axis;
}

}  // namespace

bool fuse_softmax(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  const std::map<std::string, size_t> producer = producers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& exp = g.nodes[i];
    if (removed[i] || !is_op(exp, "Exp") || exp.inputs.size() != 1 || exp.outputs.size() != 1) continue;
    const std::string& e = exp.outputs[0];
    // e: read by exactly a ReduceSum and the Div that divides e by the sum.
    auto e_readers = readers.of.find(e);
    if (e_readers == readers.of.end() || e_readers->second.size() != 2) continue;
    std::optional<size_t> sum, div;
    for (size_t r : e_readers->second) {
      if (r == SIZE_MAX || removed[r]) continue;
      if (is_op(g.nodes[r], "ReduceSum") && g.nodes[r].inputs[0] == e) sum = r;
      if (is_op(g.nodes[r], "Div") && g.nodes[r].inputs.size() == 2 && g.nodes[r].inputs[0] == e) div = r;
    }
    if (!sum || !div || g.nodes[*div].outputs.size() != 1 || g.nodes[*div].inputs[1] != g.nodes[*sum].outputs[0] ||
        readers.single(g.nodes[*sum].outputs[0]) != div) {
      continue;
    }
    const std::optional<int64_t> axis = single_kept_axis(g, g.nodes[*sum], "ReduceSum");
    if (!axis) continue;
    std::vector<size_t> absorbed{i, *sum, *div};
    std::string x = exp.inputs[0];
    // The stable form: x - ReduceMax(x) over the same axis, read only by the Exp.
    if (auto p = producer.find(x); p != producer.end() && !removed[p->second] && readers.single(x) == i) {
      const Node& sub = g.nodes[p->second];
      if (is_op(sub, "Sub") && sub.inputs.size() == 2 && sub.outputs.size() == 1) {
        auto m = producer.find(sub.inputs[1]);
        if (m != producer.end() && !removed[m->second] && readers.single(sub.inputs[1]) == p->second &&
            g.nodes[m->second].inputs[0] == sub.inputs[0] &&
            single_kept_axis(g, g.nodes[m->second], "ReduceMax") == axis) {
          absorbed.push_back(p->second);
          absorbed.push_back(m->second);
          x = sub.inputs[0];
        }
      }
    }
    if (value_type(g, x).has_value() && !is_floating(value_dtype(g, x))) continue;
    const auto x_type = value_type(g, x);
    const bool last_axis = *axis == -1 || (x_type && x_type->shape && *axis == int64_t(x_type->shape->size()) - 1);
    if (model.opset("") < 13 && !last_axis) continue;  // Softmax-1/11 would flatten from the axis on
    const std::string& out = g.nodes[*div].outputs[0];
    Node softmax;
    softmax.name = exp.name.empty() ? out : exp.name;
    softmax.op_type = "Softmax";
    softmax.inputs = {x};
    softmax.outputs = {out};
    softmax.attrs["axis"] = Attribute(last_axis ? int64_t(-1) : *axis);
    size_t last = 0;
    for (size_t a : absorbed) {
      removed[a] = true;
      last = std::max(last, a);
    }
    replacements.emplace(last, std::move(softmax));
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  return true;
}

}  // namespace ingot
