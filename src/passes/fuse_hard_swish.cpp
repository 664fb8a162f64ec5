// Recognizes hard-swish written out in elementary ops (MobileNetV3-style networks exported below
// opset 14; PP-OCRv4 rec has 60, det and cls more):
//   y = Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)        (operands of Add and Mul in either order;
//                                                     Mul by 1/6 instead of Div by 6; Clip's bounds
//                                                     as attributes, opset < 11, or as inputs)
// and replaces it with one HardSwish(x) = x * max(0, min(1, x / 6 + 1/2)): ONNX's op at opset >= 14,
// else ai.ingot.HardSwish (the same op and kernels). One pass over x instead of four. Requires the
// intermediates to be read only inside the pattern and the constants to be scalar initializers.
#include <cmath>
#include <optional>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;


bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) <= 1e-6 * std::abs(want); }

// Clip(a, 0, 6), bounds as attributes (opset < 11) or as scalar initializer inputs.
bool is_relu6(const Model& model, const Graph& g, const Node& clip) {
  if (!is_op(clip, "Clip") || clip.inputs.empty() || clip.outputs.size() != 1) return false;
  if (model.opset("") < 11) {
    auto lo = clip.attrs.find("min"), hi = clip.attrs.find("max");
    return lo != clip.attrs.end() && hi != clip.attrs.end() && lo->second.f == 0.0f && hi->second.f == 6.0f;
  }
  return clip.inputs.size() == 3 && near(scalar_constant(g, clip.inputs[2]), 6.0) &&
         scalar_constant(g, clip.inputs[1]) == 0.0;
}

}  // namespace

bool fuse_hard_swish(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;
  auto only_reader = [&](const std::string& value, const char* op) {
    return passes::only_reader(g, readers, removed, value, op);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& add = g.nodes[i];
    if (removed[i] || !is_op(add, "Add") || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    // x + 3, either order.
    const int k = near(scalar_constant(g, add.inputs[1]), 3.0) ? 1 : near(scalar_constant(g, add.inputs[0]), 3.0) ? 0 : -1;
    if (k < 0) continue;
    const std::string& x = add.inputs[1 - k];
    auto clip = only_reader(add.outputs[0], "Clip");
    if (!clip || !is_relu6(model, g, g.nodes[*clip])) continue;
    auto mul = only_reader(g.nodes[*clip].outputs[0], "Mul");
    if (!mul) continue;
    const Node& m = g.nodes[*mul];
    const std::string& c = g.nodes[*clip].outputs[0];
    if (m.inputs.size() != 2 || !((m.inputs[0] == x && m.inputs[1] == c) || (m.inputs[0] == c && m.inputs[1] == x)))
      continue;
    auto scale = readers.single(m.outputs[0]);
    if (!scale || removed[*scale] || g.nodes[*scale].inputs.size() != 2 || g.nodes[*scale].inputs[0] != m.outputs[0] ||
        g.nodes[*scale].outputs.size() != 1)
      continue;
    const Node& s = g.nodes[*scale];
    const bool div6 = is_op(s, "Div") && near(scalar_constant(g, s.inputs[1]), 6.0);
    const bool mul6 = is_op(s, "Mul") && near(scalar_constant(g, s.inputs[1]), 1.0 / 6.0);
    if (!div6 && !mul6) continue;
    const bool onnx_op = model.opset("") >= 14;
    Node hs;
    hs.name = s.name.empty() ? s.outputs[0] : s.name;
    hs.op_type = "HardSwish";
    hs.domain = onnx_op ? "" : kIngotDomain;
    hs.inputs = {x};
    hs.outputs = {s.outputs[0]};
    for (size_t a : {i, *clip, *mul}) removed[a] = true;
    removed[*scale] = true;
    replacements.emplace(*scale, std::move(hs));
    if (!onnx_op) model.opsets[kIngotDomain] = 1;
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  return true;
}

}  // namespace ingot
