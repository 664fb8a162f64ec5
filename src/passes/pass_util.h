// Small queries over a graph shared by the passes: static shapes and dtypes of values, who reads a
// value (subgraph reads included), and building new node lists.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/op_def.h"

namespace ingot::passes {

inline bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }
inline bool is_op(const Node& n, const char* op) { return n.op_type == op && is_default_domain(n.domain); }

inline bool has_subgraph(const Node& n) {
  for (const auto& [key, attr] : n.attrs) {
    if (attr.kind == AttrKind::Graph || attr.kind == AttrKind::Graphs) return true;
  }
  return false;
}

// Every name read inside a graph and its nested graphs (node inputs and graph outputs), which may
// name values of enclosing graphs.
inline void collect_graph_reads(const Graph& g, std::set<std::string>& names) {
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs) names.insert(in);
    for (const auto& [key, attr] : n.attrs) {
      if (attr.kind == AttrKind::Graph && attr.g) collect_graph_reads(*attr.g, names);
      if (attr.kind == AttrKind::Graphs) {
        for (const auto& sub : attr.graphs) collect_graph_reads(*sub, names);
      }
    }
  }
  for (const ValueInfo& out : g.outputs) names.insert(out.name);
}

// Names a node's subgraphs read (conservatively: every name read anywhere inside them).
inline std::set<std::string> subgraph_reads(const Node& n) {
  std::set<std::string> names;
  for (const auto& [key, attr] : n.attrs) {
    if (attr.kind == AttrKind::Graph && attr.g) collect_graph_reads(*attr.g, names);
    if (attr.kind == AttrKind::Graphs) {
      for (const auto& sub : attr.graphs) collect_graph_reads(*sub, names);
    }
  }
  return names;
}

inline bool is_graph_input(const Graph& g, const std::string& name) {
  for (const ValueInfo& in : g.inputs) {
    if (in.name == name) return true;
  }
  return false;
}

inline bool is_graph_output(const Graph& g, const std::string& name) {
  for (const ValueInfo& out : g.outputs) {
    if (out.name == name) return true;
  }
  return false;
}

// An initializer that no feed can override (not also listed as a graph input).
inline const Tensor* constant_initializer(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  if (it == g.initializers.end() || is_graph_input(g, name)) return nullptr;
  return &it->second;
}

// The type of a value: initializer, graph input/output or recorded intermediate; nullptr when unknown.
inline std::optional<ValueType> value_type(const Graph& g, const std::string& name) {
  if (auto it = g.initializers.find(name); it != g.initializers.end()) {
    ValueType t;
    t.dtype = it->second.dtype();
    std::vector<Dim> dims;
    for (int64_t d : it->second.shape()) dims.push_back(Dim{d, {}});
    t.shape = dims;
    return t;
  }
  if (const ValueInfo* info = g.find_value_info(name)) return info->type;
  return std::nullopt;
}

inline DType value_dtype(const Graph& g, const std::string& name) {
  auto t = value_type(g, name);
  return t && t->kind == ValueKind::Tensor ? t->dtype : DType::Undefined;
}

// Static shape of a value; nullopt when the rank or any dim is unknown.
inline std::optional<std::vector<int64_t>> static_shape(const Graph& g, const std::string& name) {
  auto t = value_type(g, name);
  if (!t || t->kind != ValueKind::Tensor || !t->shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : *t->shape) {
    if (!d.is_static()) return std::nullopt;
    dims.push_back(d.value);
  }
  return dims;
}

// Whether two values provably have one shape: known ranks, each dim the same number or the same
// named symbol.
inline bool same_shape(const Graph& g, const std::string& a, const std::string& b) {
  auto ta = value_type(g, a), tb = value_type(g, b);
  if (!ta || !tb || ta->kind != ValueKind::Tensor || tb->kind != ValueKind::Tensor || !ta->shape || !tb->shape ||
      ta->shape->size() != tb->shape->size())
    return false;
  for (size_t i = 0; i < ta->shape->size(); ++i) {
    const Dim& da = (*ta->shape)[i];
    const Dim& db = (*tb->shape)[i];
    if (da.is_static() ? da.value != db.value : (da.symbol.empty() || da.symbol != db.symbol)) return false;
  }
  return true;
}

// Readers of every value of the main graph: node indices, with SIZE_MAX for a read from inside a
// subgraph (such a value is never rewritten away) and for graph outputs.
struct Readers {
  std::map<std::string, std::vector<size_t>> of;

  explicit Readers(const Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& in : g.nodes[i].inputs) {
        if (!in.empty()) of[in].push_back(i);
      }
      if (has_subgraph(g.nodes[i])) {
        for (const auto& name : subgraph_reads(g.nodes[i])) of[name].push_back(SIZE_MAX);
      }
    }
    for (const ValueInfo& out : g.outputs) of[out.name].push_back(SIZE_MAX);
  }
  // The one node reading `value` (exactly once, not from a subgraph, not a graph output).
  std::optional<size_t> single(const std::string& value) const {
    auto it = of.find(value);
    if (it == of.end() || it->second.size() != 1 || it->second[0] == SIZE_MAX) return std::nullopt;
    return it->second[0];
  }
  bool unread(const std::string& value) const { return !of.count(value); }
};

// The node writing each value of the main graph.
inline std::map<std::string, size_t> producers(const Graph& g) {
  std::map<std::string, size_t> of;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].outputs) {
      if (!o.empty()) of[o] = i;
    }
  }
  return of;
}

// The value of a one-element float initializer (a constant operand of a pattern), or nullopt.
inline std::optional<double> scalar_constant(const Graph& g, const std::string& name) {
  const Tensor* t = constant_initializer(g, name);
  if (!t || t->numel() != 1 || !is_floating(t->dtype()) || t->device() != Device::cpu()) return std::nullopt;
  return t->item_double();
}

// Rebuilds g.nodes: drops the removed nodes and puts each replacement where the node of its index
// was (a fused node sits where the last node it absorbed was, after everything it reads); a list
// of replacements goes there in its order (a merged product and the Split after it).
inline void replace_nodes(Graph& g, const std::vector<bool>& removed, std::map<size_t, std::vector<Node>>& replacements) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (auto it = replacements.find(i); it != replacements.end()) {
      for (Node& n : it->second) nodes.push_back(std::move(n));
    } else if (!removed[i]) {
      nodes.push_back(std::move(g.nodes[i]));
    }
  }
  g.nodes = std::move(nodes);
}
inline void replace_nodes(Graph& g, const std::vector<bool>& removed, std::map<size_t, Node>& replacements) {
  std::map<size_t, std::vector<Node>> lists;
  for (auto& [i, n] : replacements) lists[i].push_back(std::move(n));
  replace_nodes(g, removed, lists);
}

// Drops the removed nodes, keeping the order of the others.
inline void remove_nodes(Graph& g, const std::vector<bool>& removed) {
  std::map<size_t, Node> none;
  replace_nodes(g, removed, none);
}

// A node's float/int attribute, or `dflt` when the node does not set it (the catalogue's default,
// which a pass must restate: passes read nodes, not the catalogue).
inline float attr_float(const Node& n, const char* name, float dflt) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? dflt : it->second.f;
}
inline int64_t attr_int(const Node& n, const char* name, int64_t dflt) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? dflt : it->second.i;
}

// The one reader of `value` when it is a not-yet-removed `op` node with one output (a pattern's next
// step), else nullopt.
inline std::optional<size_t> only_reader(const Graph& g, const Readers& readers, const std::vector<bool>& removed,
                                         const std::string& value, const char* op) {
  auto r = readers.single(value);
  if (!r || removed[*r] || !is_op(g.nodes[*r], op) || g.nodes[*r].outputs.size() != 1) return std::nullopt;
  return r;
}

// The operand of binary node n that is not `value`, when n reads `value` exactly once.
inline std::optional<std::string> other_operand(const Node& n, const std::string& value) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == value && n.inputs[1] != value) return n.inputs[1];
  if (n.inputs[1] == value && n.inputs[0] != value) return n.inputs[0];
  return std::nullopt;
}

// A name not yet used by any value or initializer of the model's main graph.
inline std::string fresh_name(const Graph& g, const std::string& base) {
  std::set<std::string> used;
  for (const auto& [name, t] : g.initializers) used.insert(name);
  for (const Node& n : g.nodes) {
    for (const auto& o : n.outputs) used.insert(o);
  }
  for (const ValueInfo& v : g.inputs) used.insert(v.name);
  std::string name = base;
  for (int i = 1; used.count(name) || g.value_info.count(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

}  // namespace ingot::passes
