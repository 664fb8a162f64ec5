// Dead-code elimination in the main graph: a node none of whose outputs is read (by a later node, a
// subgraph of a live node, or as a graph output) goes, then initializers nothing reads. ONNX ops have
// no side effects, so nothing else keeps a node alive. Initializers that are also graph inputs stay:
// they are part of the model's interface.
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {

using namespace passes;

bool dead_code(Model& model) {
  Graph& g = *model.graph;
  std::set<std::string> live;
  for (const ValueInfo& out : g.outputs) live.insert(out.name);
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (const auto& o : n.outputs) keep[i] = keep[i] || (!o.empty() && live.count(o));
    if (!keep[i]) continue;
    for (const auto& in : n.inputs) live.insert(in);
    if (has_subgraph(n)) live.merge(subgraph_reads(n));
  }
  bool changed = false;
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (keep[i]) {
      nodes.push_back(std::move(g.nodes[i]));
    } else {
      changed = true;
    }
  }
  g.nodes = std::move(nodes);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (!live.count(it->first) && !is_graph_input(g, it->first)) {
      it = g.initializers.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  return changed;
}

}  // namespace ingot
