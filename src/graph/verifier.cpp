#include <set>

#include "graph/graph.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

struct Scope {
  const Scope* parent = nullptr;
  std::set<std::string> names;
  bool defined(const std::string& n) const { return names.count(n) || (parent && parent->defined(n)); }
};

void verify_graph(const Model& model, const Graph& g, const Scope* parent) {
  Scope scope{parent, {}};
  auto define = [&](const std::string& name, const std::string& by) {
    if (name.empty()) return;
    if (!scope.names.insert(name).second)
      fail("graph '{}': value '{}' is defined twice (again by {})", g.name, name, by);
  };
  for (const auto& [name, t] : g.initializers) scope.names.insert(name);
  for (const auto& in : g.inputs) {
    if (!scope.names.insert(in.name).second && !g.initializers.count(in.name)) {
      fail("graph '{}': input '{}' is declared twice", g.name, in.name);
    }
  }
  const OpCatalogue& catalogue = OpCatalogue::instance();
  for (const Node& n : g.nodes) {
    try {
      const OpDef* def = catalogue.find(n.domain, n.op_type);
      if (!def) {
        fail("unsupported op {}{} (not in Ingot's op catalogue)", n.domain.empty() ? "" : n.domain + ".", n.op_type);
      }
      int64_t opset = model.opset(n.domain);
      if (opset && (opset < def->since_version || opset > def->until_version)) {
        fail("op {} at opset {} is not supported (Ingot implements opsets {} to {})", n.op_type, opset,
             def->since_version,
             def->until_version == INT_MAX ? std::string("latest") : std::to_string(def->until_version));
      }
      int ni = int(n.inputs.size()), no = int(n.outputs.size());
      if (ni < def->min_inputs || (def->max_inputs >= 0 && ni > def->max_inputs)) {
        fail("has {} inputs, {} takes {} to {}", ni, n.op_type, def->min_inputs,
             def->max_inputs < 0 ? std::string("any") : std::to_string(def->max_inputs));
      }
      if (no < def->min_outputs || (def->max_outputs >= 0 && no > def->max_outputs)) {
        fail("has {} outputs, {} gives {} to {}", no, n.op_type, def->min_outputs,
             def->max_outputs < 0 ? std::string("any") : std::to_string(def->max_outputs));
      }
      for (const AttrDef& a : def->attrs) {
        auto it = n.attrs.find(a.name);
        if (it == n.attrs.end()) {
          if (a.required) fail("required attribute '{}' is missing", a.name);
          continue;
        }
        bool int_as_float = a.kind == AttrKind::Float && it->second.kind == AttrKind::Int;
        if (it->second.kind != a.kind && !int_as_float) {
          fail("attribute '{}' should be {}, is {}", a.name, attr_kind_name(a.kind), attr_kind_name(it->second.kind));
        }
      }
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!n.inputs[i].empty() && !scope.defined(n.inputs[i])) {
          fail("input {} ('{}') is not defined before this node", i, n.inputs[i]);
        }
      }
      for (const auto& [k, a] : n.attrs) {
        if (a.g) verify_graph(model, *a.g, &scope);
        for (const auto& sg : a.graphs) verify_graph(model, *sg, &scope);
      }
    } catch (Error& e) {
      e.add_context(n.label());
      throw;
    }
    for (const auto& o : n.outputs) define(o, n.label());
  }
  for (const auto& out : g.outputs) {
    if (!scope.defined(out.name)) fail("graph '{}': output '{}' is never computed", g.name, out.name);
  }
}

}  // namespace

void verify(const Model& model) {
  if (!model.graph) fail("model has no graph");
  try {
    verify_graph(model, *model.graph, nullptr);
  } catch (Error& e) {
    e.add_context("model '" + model.name + "'");
    throw;
  }
}

}  // namespace ingot
