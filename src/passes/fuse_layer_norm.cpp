// Recognizes layer normalization written out in elementary ops (as exporters of opsets below 17
// emit it; PP-OCRv4 rec has five):
//   m = ReduceMean(x, axes=[-1]); d = Sub(x, m); v = ReduceMean(Pow(d, 2), axes=[-1]);
//   n = Div(d, Sqrt(Add(v, eps))); y = Add(Mul(n, scale), bias)          (the bias Add optional)
// and replaces it with one LayerNormalization(x, scale, bias, axis=-1, epsilon=eps): ONNX's op at
// opset >= 17, else ai.ingot.LayerNormalization (the same op and kernels, for older models). The
// kernel reads x once for both statistics instead of eight passes over it. Requires every
// intermediate to be read only inside the pattern (d by exactly the Pow and the Div), keepdims on
// both means, a scalar exponent 2 and epsilon, and 1-D scale/bias initializers.
#include <optional>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;


// ReduceMean over the last axis only, keeping it (axes from the attribute, opsets < 18).
bool mean_of_last_axis(const Node& n) {
  if (!is_op(n, "ReduceMean") || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  auto keep = n.attrs.find("keepdims");
  if (keep != n.attrs.end() && keep->second.i == 0) return false;
  auto axes = n.attrs.find("axes");
  return axes != n.attrs.end() && axes->second.ints == std::vector<int64_t>{-1};
}

bool vector_initializer(const Graph& g, const std::string& name) {
  const Tensor* t = constant_initializer(g, name);
  return t && t->rank() == 1 && is_floating(t->dtype());
}

}  // namespace

bool fuse_layer_norm(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;
  auto only_reader = [&](const std::string& value, const char* op) {
    return passes::only_reader(g, readers, removed, value, op);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mean = g.nodes[i];
    if (removed[i] || !mean_of_last_axis(mean)) continue;
    const std::string& x = mean.inputs[0];
    auto sub = only_reader(mean.outputs[0], "Sub");
    if (!sub || g.nodes[*sub].inputs != std::vector<std::string>{x, mean.outputs[0]}) continue;
    const std::string& d = g.nodes[*sub].outputs[0];
    auto d_readers = readers.of.find(d);
    if (d_readers == readers.of.end() || d_readers->second.size() != 2) continue;
    std::optional<size_t> pow, div;
    for (size_t r : d_readers->second) {
      if (r == SIZE_MAX || removed[r]) continue;
      if (is_op(g.nodes[r], "Pow") && g.nodes[r].inputs.size() == 2 && g.nodes[r].inputs[0] == d) pow = r;
      if (is_op(g.nodes[r], "Div") && g.nodes[r].inputs.size() == 2 && g.nodes[r].inputs[0] == d) div = r;
    }
    if (!pow || !div || scalar_constant(g, g.nodes[*pow].inputs[1]) != 2.0) continue;
    auto var = readers.single(g.nodes[*pow].outputs[0]);
    if (!var || removed[*var] || !mean_of_last_axis(g.nodes[*var])) continue;
    auto add_eps = only_reader(g.nodes[*var].outputs[0], "Add");
    if (!add_eps) continue;
    auto eps_name = other_operand(g.nodes[*add_eps], g.nodes[*var].outputs[0]);
    std::optional<double> eps = eps_name ? scalar_constant(g, *eps_name) : std::nullopt;
    if (!eps || *eps < 0) continue;
    auto sqrt = only_reader(g.nodes[*add_eps].outputs[0], "Sqrt");
    if (!sqrt || g.nodes[*div].inputs[1] != g.nodes[*sqrt].outputs[0] ||
        readers.single(g.nodes[*sqrt].outputs[0]) != div) {
      continue;
    }
    auto mul = only_reader(g.nodes[*div].outputs[0], "Mul");
    if (!mul) continue;
    auto scale = other_operand(g.nodes[*mul], g.nodes[*div].outputs[0]);
    if (!scale || !vector_initializer(g, *scale)) continue;
    std::vector<size_t> absorbed{i, *sub, *pow, *var, *add_eps, *sqrt, *div, *mul};
    std::string bias, out = g.nodes[*mul].outputs[0];
    if (auto add = only_reader(out, "Add")) {
      auto b = other_operand(g.nodes[*add], out);
      if (b && vector_initializer(g, *b)) {
        bias = *b;
        absorbed.push_back(*add);
        out = g.nodes[*add].outputs[0];
      }
    }
    const bool onnx_op = model.opset("") >= 17;
    Node ln;
    ln.name = mean.name.empty() ? out : mean.name;
    ln.op_type = "LayerNormalization";
    ln.domain = onnx_op ? "" : kIngotDomain;
    ln.inputs = {x, *scale, bias};
    if (bias.empty()) ln.inputs.pop_back();
    ln.outputs = {out};
    ln.attrs["axis"] = Attribute(int64_t(-1));
    ln.attrs["epsilon"] = Attribute(float(*eps));
    size_t last = 0;
    for (size_t a : absorbed) {
      removed[a] = true;
      last = std::max(last, a);
    }
    replacements.emplace(last, std::move(ln));
    if (!onnx_op) model.opsets[kIngotDomain] = 1;
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  return true;
}

}  // namespace ingot
