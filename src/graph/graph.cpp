#include "graph/graph.h"

#include "core/strings.h"

namespace ingot {

std::string Dim::str() const {
  if (is_static()) return std::to_string(value);
  return symbol.empty() ? "?" : symbol;
}

std::string ValueType::str() const {
  std::string s(dtype_name(dtype));
  if (shape) {
    s += "[" + join(*shape, ",", [](const Dim& d) { return d.str(); }) + "]";
  }
  if (kind == ValueKind::Sequence) return "seq(" + s + ")";
  if (kind == ValueKind::Optional) return "optional(" + s + ")";
  return s;
}

std::string Node::label() const {
  std::string op = domain.empty() ? op_type : domain + "." + op_type;
  return fmt::format("node '{}' ({})", name, op);
}

const ValueInfo* Graph::find_value_info(const std::string& value) const {
  for (const auto& v : inputs) {
    if (v.name == value) return &v;
  }
  for (const auto& v : outputs) {
    if (v.name == value) return &v;
  }
  auto it = value_info.find(value);
  return it == value_info.end() ? nullptr : &it->second;
}

void Graph::for_each_graph(const std::function<void(const Graph&, int)>& fn, int depth) const {
  fn(*this, depth);
  for (const Node& n : nodes) {
    for (const auto& [name, a] : n.attrs) {
      if (a.g) a.g->for_each_graph(fn, depth + 1);
      for (const auto& g : a.graphs) g->for_each_graph(fn, depth + 1);
    }
  }
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for_each_graph([&](const Graph& g, int) {
    for (const auto& [name, t] : g.initializers) n += t.numel();
  });
  return n;
}

int64_t Model::opset(const std::string& domain) const {
  auto it = opsets.find(domain == "ai.onnx" ? "" : domain);
  return it == opsets.end() ? 0 : it->second;
}

}  // namespace ingot
