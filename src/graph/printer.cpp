#include <string>

#include "core/strings.h"
#include "graph/graph.h"

namespace ingot {
namespace {

void print_into(const Graph& g, int indent, std::string& out) {
  std::string pad(size_t(indent) * 2, ' ');
  auto values = [](const std::vector<ValueInfo>& vs) {
    return join(vs, ", ", [](const ValueInfo& v) { return "%" + v.name + ": " + v.type.str(); });
  };
  auto names = [](const std::vector<std::string>& vs) {
    return join(vs, ", ", [](const std::string& v) { return v.empty() ? std::string("_") : "%" + v; });
  };
  out += pad + "graph " + (g.name.empty() ? "<anonymous>" : g.name) + "(" + values(g.inputs) + ") {\n";
  for (const auto& [name, t] : g.initializers) out += pad + "  %" + name + " = initializer " + t.describe() + "\n";
  for (const Node& n : g.nodes) {
    std::string outs = names(n.outputs), ins = names(n.inputs);
    std::string attrs = join(n.attrs, ", ", [](const auto& kv) { return kv.first + "=" + kv.second.str(); });
    std::vector<const Graph*> subgraphs;
    for (const auto& [k, a] : n.attrs) {
      if (a.g) subgraphs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subgraphs.push_back(sg.get());
    }
    std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    out += pad + "  " + outs + " = " + op + "(" + ins + ")" + (attrs.empty() ? "" : " {" + attrs + "}");
    out += n.name.empty() ? "\n" : "  # " + n.name + "\n";
    for (const Graph* sg : subgraphs) print_into(*sg, indent + 2, out);
  }
  out += pad + "  return " + values(g.outputs) + "\n" + pad + "}\n";
}

}  // namespace

std::string print_graph(const Graph& graph) {
  std::string out;
  print_into(graph, 0, out);
  return out;
}

}  // namespace ingot
