// Fuses Conv(X, W[, B]) -> [Add(conv_out, R) or Add(R, conv_out)] -> [Relu or HardSwish] into one
// FusedConv node (domain "ai.ingot"; inputs X, W, B or "", R; Conv's attributes plus activation =
// "Relu", "HardSwish" or ""), so the CPU kernel applies the residual sum and the activation while
// the output is still in cache (oneDNN post-ops) instead of two more passes over memory. Main graph
// only.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;


}  // namespace

bool fuse_conv_add_relu(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;  // conv index -> fused node (placed where the last fused node was)
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const Node& conv = g.nodes[ci];
    if (!is_op(conv, "Conv") || conv.outputs.size() != 1 || conv.inputs.size() < 2) continue;
    std::string out = conv.outputs[0];
    auto single_consumer = [&](const std::string& value) -> std::optional<size_t> {
      auto r = readers.single(value);
      if (!r || removed[*r]) return std::nullopt;
      return r;
    };
    std::string residual, activation;
    size_t last = ci;
    std::vector<size_t> absorbed;
    if (auto r = single_consumer(out); r && is_op(g.nodes[*r], "Add") && g.nodes[*r].inputs.size() == 2 &&
                                       g.nodes[*r].outputs.size() == 1) {
      const Node& add = g.nodes[*r];
      const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      auto conv_shape = static_shape(g, out), other_shape = static_shape(g, other);
      // Add(x, x) reads conv_out twice; the residual must have exactly conv_out's shape (no broadcast).
      if (add.inputs[0] != add.inputs[1] && conv_shape && other_shape && *conv_shape == *other_shape) {
        residual = other;
        absorbed.push_back(*r);
        last = *r;
        out = add.outputs[0];
      }
    }
    if (auto r = single_consumer(out); r && g.nodes[*r].outputs.size() == 1 &&
                                       (is_op(g.nodes[*r], "Relu") || g.nodes[*r].op_type == "HardSwish")) {
      // HardSwish: ONNX's (opset 14) or ai.ingot's (fuse_hard_swish, older models): the same op.
      const Node& act = g.nodes[*r];
      if (act.op_type == "Relu" || is_default_domain(act.domain) || act.domain == kIngotDomain) {
        activation = act.op_type;
        absorbed.push_back(*r);
        last = *r;
        out = act.outputs[0];
      }
    }
    if (absorbed.empty()) continue;
    Node fused;
    fused.name = conv.name.empty() ? out : conv.name;
    fused.op_type = "FusedConv";
    fused.domain = kIngotDomain;
    fused.inputs = {conv.inputs[0], conv.inputs[1], conv.inputs.size() > 2 ? conv.inputs[2] : "", residual};
    fused.outputs = {out};
    fused.attrs = conv.attrs;
    fused.attrs["activation"] = activation;
    // The fused node sits where the last absorbed node was: the residual may be computed after the Conv.
    removed[ci] = true;
    for (size_t a : absorbed) removed[a] = true;
    replacements.emplace(last, std::move(fused));
  }
  if (replacements.empty()) return false;
  passes::replace_nodes(g, removed, replacements);
  model.opsets[kIngotDomain] = 1;
  return true;
}

}  // namespace ingot
