#include "onnx/onnx_normalize.h"

#include <ingot/error.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ingot {
namespace {

// Every value name a node reads: its inputs, and whatever its subgraphs read (from any depth) that
// they do not compute themselves: the outer-scope values they capture.
void names_read(const onnx::NodeProto& node, std::unordered_set<std::string>& out);

void names_read_by_graph(const onnx::GraphProto& g, std::unordered_set<std::string>& out) {
  std::unordered_set<std::string> defined, read;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& i : g.initializer()) defined.insert(i.name());
  for (const auto& n : g.node()) {
    names_read(n, read);
    for (const auto& o : n.output()) defined.insert(o);
  }
  for (const auto& o : g.output()) read.insert(o.name());
  for (const auto& name : read)
    if (!defined.count(name)) out.insert(name);
}

void names_read(const onnx::NodeProto& node, std::unordered_set<std::string>& out) {
  for (const auto& i : node.input())
    if (!i.empty()) out.insert(i);
  for (const auto& a : node.attribute()) {
    if (a.has_g()) names_read_by_graph(a.g(), out);
    for (const auto& g : a.graphs()) names_read_by_graph(g, out);
  }
}

void sort_graph(onnx::GraphProto& g) {
  for (auto& n : *g.mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) sort_graph(*a.mutable_g());
      for (auto& sg : *a.mutable_graphs()) sort_graph(sg);
    }
  }
  const int count = g.node_size();
  std::unordered_map<std::string, int> producer;  // the first node computing each value
  for (int i = 0; i < count; ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer.emplace(o, i);
  std::vector<std::vector<int>> users(static_cast<size_t>(count));
  std::vector<int> waiting(size_t(count), 0);
  bool sorted = true;
  for (int i = 0; i < count; ++i) {
    std::unordered_set<std::string> read;
    names_read(g.node(i), read);
    std::unordered_set<int> deps;
    for (const auto& name : read) {
      auto it = producer.find(name);
      if (it != producer.end() && it->second != i) deps.insert(it->second);  // others: inputs, outer scope
    }
    for (int d : deps) {
      users[size_t(d)].push_back(i);
      sorted = sorted && d < i;
    }
    waiting[size_t(i)] = int(deps.size());
  }
  if (sorted) return;
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;  // lowest index first: stable
  for (int i = 0; i < count; ++i)
    if (waiting[size_t(i)] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[size_t(i)])
      if (--waiting[size_t(u)] == 0) ready.push(u);
  }
  if (int(order.size()) != count) {
    // The nodes left wait on a cycle; those only downstream of it (no user left) are pruned away.
    std::vector<bool> left(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) left[size_t(i)] = waiting[size_t(i)] > 0;
    for (bool pruned = true; pruned;) {
      pruned = false;
      for (int i = 0; i < count; ++i) {
        if (!left[size_t(i)]) continue;
        const auto& u = users[size_t(i)];
        if (std::none_of(u.begin(), u.end(), [&](int j) { return left[size_t(j)]; })) left[size_t(i)] = false, pruned = true;
      }
    }
    std::string names;
    int listed = 0;
    for (int i = 0; i < count && listed < 5; ++i) {
      if (!left[size_t(i)]) continue;
      const auto& n = g.node(i);
      names += (listed++ ? ", '" : "'") + (n.name().empty() ? n.op_type() + " #" + std::to_string(i) : n.name()) + "'";
    }
    fail("graph '{}': nodes {} depend on each other in a cycle", g.name(), names);
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Reserve(count);
  for (int i : order) *nodes.Add() = std::move(*g.mutable_node(i));
  g.mutable_node()->Swap(&nodes);
}

bool nodes_check(const onnx::GraphProto& g, const std::unordered_map<std::string, int>& opsets) {
  for (const auto& n : g.node()) {
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    auto version = opsets.find(domain);
    if (version != opsets.end()) {
      if (const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), version->second, domain)) {
        try {
          schema->Verify(n);
        } catch (const std::exception&) {
          return false;
        }
      }
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g() && !nodes_check(a.g(), opsets)) return false;
      for (const auto& sg : a.graphs())
        if (!nodes_check(sg, opsets)) return false;
    }
  }
  return true;
}

bool resolves(const onnx::GraphProto& g, std::vector<const std::unordered_set<std::string>*>& scopes) {
  std::unordered_set<std::string> defined;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& i : g.initializer()) defined.insert(i.name());
  scopes.push_back(&defined);
  auto known = [&](const std::string& name) {
    return std::any_of(scopes.begin(), scopes.end(), [&](const auto* s) { return s->count(name) > 0; });
  };
  bool ok = true;
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) ok = ok && (i.empty() || known(i));
    for (const auto& a : n.attribute()) {
      if (a.has_g()) ok = ok && resolves(a.g(), scopes);
      for (const auto& sg : a.graphs()) ok = ok && resolves(sg, scopes);
    }
    if (!ok) break;
    for (const auto& o : n.output()) defined.insert(o);
  }
  for (const auto& o : g.output()) ok = ok && known(o.name());
  scopes.pop_back();
  return ok;
}

}  // namespace

void sort_nodes_topologically(onnx::ModelProto& proto) {
  if (proto.has_graph()) sort_graph(*proto.mutable_graph());
}

bool checked_for_shape_inference(const onnx::ModelProto& proto) {
  if (!proto.has_graph()) return false;
  std::vector<const std::unordered_set<std::string>*> scopes;
  if (!resolves(proto.graph(), scopes)) return false;
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : proto.opset_import()) {
    int& v = opsets[o.domain() == "ai.onnx" ? "" : o.domain()];
    v = std::max(v, int(o.version()));
  }
  return nodes_check(proto.graph(), opsets);
}

}  // namespace ingot
