// Fuses Conv(X, W[, B]) -> [Add(conv_out, R) or Add(R, conv_out)] -> [Relu] into one FusedConv node
// (domain "ai.ingot"; inputs X, W, B or "", R; Conv's attributes plus activation = "Relu" or ""), so
// the CPU kernel applies the residual sum and the activation while the output is still in cache
// (oneDNN post-ops) instead of two more passes over memory. Main graph only.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

constexpr const char* kDomain = "ai.ingot";

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Static shape of a value (graph input, intermediate or initializer); empty optional when unknown.
std::optional<std::vector<int64_t>> static_shape(const Graph& g, const std::string& name) {
  if (auto it = g.initializers.find(name); it != g.initializers.end()) {
    const Shape& s = it->second.shape();
    return std::vector<int64_t>(s.begin(), s.end());
  }
  const ValueInfo* info = g.find_value_info(name);
  if (!info || !info->type.shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : *info->type.shape) {
    if (!d.is_static()) return std::nullopt;
    dims.push_back(d.value);
  }
  return dims;
}

struct Uses {
  std::map<std::string, std::vector<size_t>> readers;  // value -> indices of nodes reading it
  std::set<std::string> graph_outputs;
  // Only fuse values read exactly once, by that node, and not a graph output. Names read from
  // subgraphs count as extra readers (through a conservative scan of nested graphs).
  bool single_reader(const std::string& value, size_t node) const {
    if (graph_outputs.count(value)) return false;
    auto it = readers.find(value);
    return it != readers.end() && it->second.size() == 1 && it->second[0] == node;
  }
};

void collect_subgraph_reads(const Graph& g, std::set<std::string>& names) {
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs) names.insert(in);
    for (const auto& [key, attr] : n.attrs) {
      if (attr.kind == AttrKind::Graph && attr.g) collect_subgraph_reads(*attr.g, names);
      if (attr.kind == AttrKind::Graphs) {
        for (const auto& sub : attr.graphs) collect_subgraph_reads(*sub, names);
      }
    }
  }
  for (const ValueInfo& out : g.outputs) names.insert(out.name);  // may name an outer value
}

Uses find_uses(const Graph& g) {
  Uses uses;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      if (!in.empty()) uses.readers[in].push_back(i);
    }
  }
  // A read from inside a subgraph makes the value ineligible: record it as a reader that no node matches.
  std::set<std::string> nested;
  for (const Node& n : g.nodes) {
    for (const auto& [key, attr] : n.attrs) {
      if (attr.kind == AttrKind::Graph && attr.g) collect_subgraph_reads(*attr.g, nested);
      if (attr.kind == AttrKind::Graphs) {
        for (const auto& sub : attr.graphs) collect_subgraph_reads(*sub, nested);
      }
    }
  }
  for (const auto& name : nested) uses.readers[name].push_back(SIZE_MAX);
  for (const ValueInfo& out : g.outputs) uses.graph_outputs.insert(out.name);
  return uses;
}

bool is_op(const Node& n, const char* op) { return n.op_type == op && is_default_domain(n.domain); }

}  // namespace

bool fuse_conv_add_relu(Model& model) {
  Graph& g = *model.graph;
  const Uses uses = find_uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;  // conv index -> fused node (placed where the last fused node was)
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const Node& conv = g.nodes[ci];
    if (!is_op(conv, "Conv") || conv.outputs.size() != 1 || conv.inputs.size() < 2) continue;
    std::string out = conv.outputs[0];
    auto single_consumer = [&](const std::string& value) -> std::optional<size_t> {
      auto it = uses.readers.find(value);
      if (it == uses.readers.end() || it->second.size() != 1 || it->second[0] == SIZE_MAX) return std::nullopt;
      const size_t reader = it->second[0];
      if (!uses.single_reader(value, reader) || removed[reader]) return std::nullopt;
      return reader;
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
    if (auto r = single_consumer(out); r && is_op(g.nodes[*r], "Relu") && g.nodes[*r].outputs.size() == 1) {
      activation = "Relu";
      absorbed.push_back(*r);
      last = *r;
      out = g.nodes[*r].outputs[0];
    }
    if (absorbed.empty()) continue;
    Node fused;
    fused.name = conv.name.empty() ? out : conv.name;
    fused.op_type = "FusedConv";
    fused.domain = kDomain;
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
  model.opsets[kDomain] = 1;
  return true;
}

}  // namespace ingot
