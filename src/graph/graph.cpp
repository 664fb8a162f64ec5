#include "graph/graph.h"

#include <algorithm>
#include <functional>

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

void fix_input_shapes(Model& model, const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  Graph& g = *model.graph;
  std::map<std::string, int64_t> symbols;
  for (const auto& [name, dims] : shapes) {
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(), [&n = name](const ValueInfo& vi) { return vi.name == n; });
    if (it == g.inputs.end()) {
      std::string names = join(g.inputs, ", ", [](const ValueInfo& vi) { return vi.name; });
      fail("--input-shape {}: the model has no input named '{}' (inputs: {})", name, name, names);
    }
    std::string given = shape_str(dims);
    if (it->type.shape && it->type.shape->size() != dims.size())
      fail("--input-shape {}={}: input '{}' has rank {} ({})", name, given, name, it->type.shape->size(),
           it->type.str());
    if (!it->type.shape) it->type.shape.emplace(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      Dim& dim = (*it->type.shape)[d];
      if (dims[d] < 0) fail("--input-shape {}={}: negative dimension", name, given);
      if (dim.is_static() && dim.value != dims[d])
        fail("--input-shape {}={}: dimension {} of input '{}' is fixed at {}", name, given, d, name, dim.value);
      if (!dim.is_static() && !dim.symbol.empty()) {
        auto [s, inserted] = symbols.emplace(dim.symbol, dims[d]);
        if (!inserted && s->second != dims[d])
          fail("--input-shape {}={}: '{}' is already set to {}", name, given, dim.symbol, s->second);
      }
      dim = Dim{dims[d], ""};
    }
  }
  if (symbols.empty()) return;
  auto fix = [&](ValueInfo& vi) {
    if (!vi.type.shape) return;
    for (Dim& d : *vi.type.shape)
      if (auto s = symbols.find(d.symbol); !d.is_static() && s != symbols.end()) d = Dim{s->second, ""};
  };
  std::function<void(Graph&)> walk = [&](Graph& graph) {
    for (auto& vi : graph.inputs) fix(vi);
    for (auto& vi : graph.outputs) fix(vi);
    for (auto& [name, vi] : graph.value_info) fix(vi);
    for (Node& n : graph.nodes)
      for (auto& [name, a] : n.attrs) {
        if (a.g) walk(*a.g);
        for (auto& sub : a.graphs) walk(*sub);
      }
  };
  walk(g);
}


}  // namespace ingot
