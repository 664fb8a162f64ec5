// Recognizes softmax and log-softmax written out in elementary ops (as some exporters, hand-built
// graphs and ONNX's own function bodies spell them):
//   Softmax:     u = x - ReduceMax(x, axis a) (or u = x); e = Exp(u); y = Div(e, ReduceSum(e, axis a))
//   LogSoftmax:  the same u and e;                         y = Sub(u, Log(ReduceSum(e, axis a)))
// and replaces each with one Softmax / LogSoftmax(x, axis=a): one kernel that reads x once per row
// instead of five or six passes over it, and (running before fuse-attention) a softmax that the
// attention fusion then sees. The stable form (with the maximum) is the op's own computation; the
// plain form computes the same function where it is finite (for logits above ~88 in float32 its
// Exp overflows, to inf / inf = NaN or -inf, where the op gives the right values). Requires both
// reductions over the same single axis with keepdims (axes from the attribute or a constant
// input), every intermediate read only inside the pattern, and, for models below opset 13 (whose
// Softmax/LogSoftmax flatten everything from the axis on), the last axis.
#include <algorithm>
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
    const std::string& u = exp.inputs[0];  // x, or x - ReduceMax(x)
    auto e_readers = readers.of.find(e);
    if (e_readers == readers.of.end()) continue;
    // Softmax: e read by exactly a ReduceSum and Div(e, sum). LogSoftmax: e read by the ReduceSum
    // alone, then Sub(u, Log(sum)).
    std::optional<size_t> sum, last, ln;  // ln: LogSoftmax's Log
    for (size_t r : e_readers->second) {
      if (r == SIZE_MAX || removed[r]) continue;
      if (is_op(g.nodes[r], "ReduceSum") && g.nodes[r].inputs[0] == e) sum = r;
    }
    if (!sum) continue;
    const std::string& s_out = g.nodes[*sum].outputs[0];
    if (e_readers->second.size() == 2) {
      for (size_t r : e_readers->second) {
        if (r != SIZE_MAX && !removed[r] && is_op(g.nodes[r], "Div") && g.nodes[r].inputs.size() == 2 &&
            g.nodes[r].inputs[0] == e && g.nodes[r].inputs[1] == s_out && g.nodes[r].outputs.size() == 1)
          last = r;
      }
      if (!last || readers.single(s_out) != last) continue;
    } else if (e_readers->second.size() == 1) {
      ln = passes::only_reader(g, readers, removed, s_out, "Log");
      last = ln ? passes::only_reader(g, readers, removed, g.nodes[*ln].outputs[0], "Sub") : std::nullopt;
      if (!last || g.nodes[*last].inputs != std::vector<std::string>{u, g.nodes[*ln].outputs[0]}) continue;
    } else {
      continue;
    }
    const std::optional<int64_t> axis = single_kept_axis(g, g.nodes[*sum], "ReduceSum");
    if (!axis) continue;
    const bool log = ln.has_value();
    std::vector<size_t> absorbed{i, *sum, *last};
    if (log) absorbed.push_back(*ln);
    std::string x = u;
    // The stable form: u = x - ReduceMax(x) over the same axis, read only inside the pattern (by the
    // Exp; for LogSoftmax also by the last Sub).
    auto u_readers = readers.of.find(u);
    const size_t u_reads = log ? 2 : 1;
    if (auto p = producer.find(u); p != producer.end() && !removed[p->second] && u_readers != readers.of.end() &&
                                   u_readers->second.size() == u_reads &&
                                   std::count(u_readers->second.begin(), u_readers->second.end(), SIZE_MAX) == 0) {
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
    const auto x_type = value_type(g, x);
    if (x_type && !is_floating(x_type->dtype)) continue;
    const bool last_axis = *axis == -1 || (x_type && x_type->shape && *axis == int64_t(x_type->shape->size()) - 1);
    if (model.opset("") < 13 && !last_axis) continue;  // (Log)Softmax-1/11 would flatten from the axis on
    const std::string& out = g.nodes[*last].outputs[0];
    Node fused;
    fused.name = exp.name.empty() ? out : exp.name;
    fused.op_type = log ? "LogSoftmax" : "Softmax";
    fused.inputs = {x};
    fused.outputs = {out};
    fused.attrs["axis"] = Attribute(last_axis ? int64_t(-1) : *axis);
    size_t at = 0;
    for (size_t a : absorbed) {
      removed[a] = true;
      at = std::max(at, a);
    }
    replacements.emplace(at, std::move(fused));
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  return true;
}

}  // namespace ingot
