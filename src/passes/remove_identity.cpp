// Removes nodes that pass their input through unchanged: Identity, inference Dropout (mask unused),
// Cast to the input's own dtype, Reshape to the input's own static shape. Readers of the output read
// the input instead. When the output is a graph output its name must survive: the producer of the
// input is renamed to write it directly, when that input has no other reader and is not itself a
// graph input, initializer or graph output; otherwise the node stays. Main graph only; a value read
// from inside a subgraph is left alone (a subgraph may shadow names).
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

bool dropout_is_identity(const Model& model, const Graph& g, const Node& n, const Readers& readers) {
  if (n.outputs.size() > 1 && !n.outputs[1].empty() && !readers.unread(n.outputs[1])) return false;
  const int64_t opset = model.opset(n.domain);
  if (opset < 7) {  // is_test = 0 asked for training behaviour then
    auto it = n.attrs.find("is_test");
    return it != n.attrs.end() && it->second.i != 0;
  }
  if (opset < 12 || n.inputs.size() < 3 || n.inputs[2].empty()) return true;
  const Tensor* training = constant_initializer(g, n.inputs[2]);
  return training && training->numel() == 1 && training->item_int() == 0;
}

bool is_pass_through(const Model& model, const Graph& g, const Node& n, const Readers& readers) {
  if (n.inputs.empty() || n.inputs[0].empty() || n.outputs.empty() || n.outputs[0].empty()) return false;
  if (is_op(n, "Identity"))
    return n.inputs.size() == 1 && value_type(g, n.inputs[0]).value_or(ValueType{}).kind == ValueKind::Tensor;
  if (is_op(n, "Dropout")) return dropout_is_identity(model, g, n, readers);
  if (is_op(n, "Cast")) {
    auto to = n.attrs.find("to");
    const DType in = value_dtype(g, n.inputs[0]);
    return to != n.attrs.end() && in != DType::Undefined && DType(to->second.i) == in;
  }
  if (is_op(n, "Reshape") && n.inputs.size() == 2) {
    auto in = static_shape(g, n.inputs[0]);
    if (!in) return false;
    if (auto out = static_shape(g, n.outputs[0]); out && *out == *in) return true;
    // No recorded output type: the requested shape spelled out literally (-1 and 0 aside) matches.
    const Tensor* shape = constant_initializer(g, n.inputs[1]);
    if (!shape || shape->dtype() != DType::Int64 || shape->numel() != int64_t(in->size())) return false;
    std::vector<int64_t> requested = shape->to_int64_vector();
    for (size_t i = 0; i < requested.size(); ++i) {
      if (requested[i] != (*in)[i] || requested[i] <= 0) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

bool remove_identity(Model& model) {
  Graph& g = *model.graph;
  bool changed = false;
  // One removal at a time keeps the reader table simple and exact; chains shrink by repeated sweeps.
  for (bool again = true; again;) {
    again = false;
    const Readers readers(g);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (!is_pass_through(model, g, n, readers)) continue;
      const std::string x = n.inputs[0], y = n.outputs[0];
      const auto& y_readers = readers.of.count(y) ? readers.of.at(y) : std::vector<size_t>{};
      bool y_in_subgraph = false, y_is_output = is_graph_output(g, y);
      for (size_t r : y_readers) y_in_subgraph |= r == SIZE_MAX;
      if (y_in_subgraph && !y_is_output) continue;
      if (y_is_output) {
        // Rename x's producer to write y, if x is an ordinary intermediate read only here.
        if (is_graph_output(g, x) || is_graph_input(g, x) || g.initializers.count(x) || readers.single(x) != i)
          continue;
        // y read by nested graphs as well as being an output: still fine after the rename (same name).
        Node* producer = nullptr;
        for (size_t p = 0; p < i && !producer; ++p) {
          for (auto& o : g.nodes[p].outputs) {
            if (o == x) producer = &g.nodes[p];
          }
        }
        if (!producer) continue;
        for (auto& o : producer->outputs) {
          if (o == x) o = y;
        }
      } else {
        for (size_t r : y_readers) {
          for (auto& in : g.nodes[r].inputs) {
            if (in == y) in = x;
          }
        }
      }
      g.nodes.erase(g.nodes.begin() + std::ptrdiff_t(i));
      changed = again = true;
      break;
    }
  }
  return changed;
}

}  // namespace ingot
