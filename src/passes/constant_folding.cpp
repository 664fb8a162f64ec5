// Constant folding: a node whose inputs are all constants (initializers of its graph that no feed
// overrides, or outputs of nodes folded before it) runs once now, on the CPU kernels with the model's
// opset, and its outputs become initializers of that graph. Shape of a value whose shape is fully
// static folds too. Subgraphs (If branches, Loop/Scan bodies) fold the same way, each with its own
// initializers (a body's Constant nodes and the shape arithmetic on them: Silero VAD's branches are
// mostly that); a value of an enclosing graph is never treated as constant inside a subgraph.
// Left alone: nondeterministic ops (Random*, Bernoulli, Multinomial, Dropout), nodes with subgraphs,
// sequence/optional ops, nodes producing a graph output, and results over kMaxFoldedBytes (folding an
// Expand or a ConstantOfShape must not turn a small model into a huge one).
#include <ingot/ops.h>

#include <algorithm>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

constexpr int64_t kMaxFoldedBytes = int64_t(64) << 20;

bool foldable_op(const Node& n) {
  if (!is_default_domain(n.domain) || has_subgraph(n)) return false;
  const std::string& op = n.op_type;
  if (op.starts_with("Random") || op == "Bernoulli" || op == "Multinomial" || op == "Dropout") return false;
  if (op.starts_with("Sequence") || op.starts_with("Optional") || op == "SplitToSequence" ||
      op == "ConcatFromSequence") {
    return false;
  }
  return true;
}

// Shape(x)[start:end] as int64 when x's shape is fully static.
std::optional<Tensor> fold_shape(const Graph& g, const Node& n) {
  auto dims = static_shape(g, n.inputs[0]);
  if (!dims) return std::nullopt;
  const int64_t rank = int64_t(dims->size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t(0), rank); };
  int64_t start = 0, end = rank;
  if (auto it = n.attrs.find("start"); it != n.attrs.end()) start = clamp(it->second.i);
  if (auto it = n.attrs.find("end"); it != n.attrs.end()) end = clamp(it->second.i);
  std::vector<int64_t> out;
  for (int64_t i = start; i < end; ++i) out.push_back((*dims)[size_t(i)]);
  return Tensor::from_vector<int64_t>(out, {int64_t(out.size())});
}

bool fold_graph(Model& model, Graph& g) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  bool changed = false;
  for (Node& n : g.nodes) {
    bool produces_output = false;
    for (const auto& o : n.outputs) produces_output |= !o.empty() && is_graph_output(g, o);
    std::optional<std::vector<Tensor>> results;
    if (!produces_output && foldable_op(n)) {
      if (n.op_type == "Shape" && n.inputs.size() == 1 && n.outputs.size() == 1) {
        if (auto t = fold_shape(g, n)) results = std::vector<Tensor>{*t};
      }
      bool all_constant = !results;
      std::vector<Tensor> inputs;
      for (const auto& in : n.inputs) {
        if (!all_constant) break;
        if (in.empty()) {
          inputs.emplace_back();
        } else if (const Tensor* t = constant_initializer(g, in)) {
          inputs.push_back(*t);
        } else {
          all_constant = false;
        }
      }
      // Skip results a static shape already says are too large.
      for (const auto& o : n.outputs) {
        if (!all_constant || o.empty()) continue;
        auto dims = static_shape(g, o);
        DType dt = value_dtype(g, o);
        if (dims && dt != DType::Undefined && dt != DType::String &&
            shape_numel(Shape(dims->begin(), dims->end())) * int64_t(dtype_size(dt)) > kMaxFoldedBytes) {
          all_constant = false;
        }
      }
      if (all_constant) {
        try {
          results = ops::call(n.op_type, inputs, n.attrs, int(n.outputs.size()), "", int(model.opset(n.domain)));
        } catch (const std::exception&) {
          results.reset();  // left for the executor, which reports a real error with its context
        }
      }
    }
    bool fold = results && results->size() == n.outputs.size();
    int64_t bytes = 0;
    for (size_t i = 0; fold && i < results->size(); ++i) {
      const Tensor& t = (*results)[i];
      if (n.outputs[i].empty()) continue;
      if (!t.defined() || t.device() != Device::cpu())
        fold = false;
      else
        bytes += int64_t(t.nbytes());
    }
    if (!fold || bytes > kMaxFoldedBytes) {
      kept.push_back(std::move(n));
      continue;
    }
    for (size_t i = 0; i < results->size(); ++i) {
      if (n.outputs[i].empty()) continue;
      // A view (Reshape of a weight) may share its input's storage: nothing writes into initializers.
      g.initializers[n.outputs[i]] = (*results)[i];
    }
    changed = true;
  }
  g.nodes = std::move(kept);  // every node was moved into `kept` or folded
  for (Node& n : g.nodes) {
    for (auto& [name, attr] : n.attrs) {
      if (attr.kind == AttrKind::Graph && attr.g) changed |= fold_graph(model, *attr.g);
      if (attr.kind == AttrKind::Graphs) {
        for (auto& sub : attr.graphs) changed |= fold_graph(model, *sub);
      }
    }
  }
  return changed;
}

}  // namespace

bool constant_folding(Model& model) { return fold_graph(model, *model.graph); }

}  // namespace ingot
