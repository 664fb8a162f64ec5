// Shape simplification with symbolic dims: Shape(x) (or an integer Cast of it) followed by a Gather or Slice that picks only
// dims of x that are static (x: [N, 120, 1, W] with N and W symbolic; Shape(x)[1:3] = [120, 1])
// becomes a constant, so the shape arithmetic that exporters emit around Reshape/Concat folds
// further (constant folding runs next) instead of running at every inference. Constant folding
// already handles Shape of a fully static value; this pass covers the partially known ones.
// Shape's own start/end (opset 15) and Slice's steps are honoured; indices must be constants.
#include <algorithm>
#include <optional>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

// The dims of x (Shape's input) as far as known: -1 for a symbolic one; nullopt when the rank is unknown.
std::optional<std::vector<int64_t>> known_dims(const Graph& g, const Node& shape) {
  if (shape.inputs.empty()) return std::nullopt;
  auto t = value_type(g, shape.inputs[0]);
  if (!t || t->kind != ValueKind::Tensor || !t->shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : *t->shape) dims.push_back(d.is_static() ? d.value : -1);
  const int64_t rank = int64_t(dims.size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t(0), rank); };
  int64_t start = 0, end = rank;
  if (auto it = shape.attrs.find("start"); it != shape.attrs.end()) start = clamp(it->second.i);
  if (auto it = shape.attrs.find("end"); it != shape.attrs.end()) end = clamp(it->second.i);
  return std::vector<int64_t>(dims.begin() + start, dims.begin() + std::max(start, end));
}

std::optional<std::vector<int64_t>> constant_ints(const Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : constant_initializer(g, name);
  if (!t || (t->dtype() != DType::Int64 && t->dtype() != DType::Int32) || t->rank() > 1) return std::nullopt;
  return t->to_int64_vector();
}

// The positions of `len` elements a 1-D Slice picks (opset < 10: attributes; later: inputs).
std::optional<std::vector<int64_t>> slice_positions(const Model& model, const Graph& g, const Node& n, int64_t len) {
  std::vector<int64_t> starts, ends, axes{0}, steps{1};
  if (model.opset("") < 10) {
    auto s = n.attrs.find("starts"), e = n.attrs.find("ends"), a = n.attrs.find("axes");
    if (s == n.attrs.end() || e == n.attrs.end()) return std::nullopt;
    starts = s->second.ints;
    ends = e->second.ints;
    if (a != n.attrs.end()) axes = a->second.ints;
  } else {
    auto s = n.inputs.size() > 1 ? constant_ints(g, n.inputs[1]) : std::nullopt;
    auto e = n.inputs.size() > 2 ? constant_ints(g, n.inputs[2]) : std::nullopt;
    if (!s || !e) return std::nullopt;
    starts = *s;
    ends = *e;
    if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
      auto a = constant_ints(g, n.inputs[3]);
      if (!a) return std::nullopt;
      axes = *a;
    }
    if (n.inputs.size() > 4 && !n.inputs[4].empty()) {
      auto st = constant_ints(g, n.inputs[4]);
      if (!st) return std::nullopt;
      steps = *st;
    }
  }
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1) return std::nullopt;
  if ((axes[0] != 0 && axes[0] != -1) || steps[0] == 0) return std::nullopt;
  const int64_t step = steps[0];
  auto norm = [&](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + len : v, lo, hi); };
  int64_t start = step > 0 ? norm(starts[0], 0, len) : norm(starts[0], -1, len - 1);
  int64_t end = step > 0 ? norm(ends[0], 0, len) : norm(ends[0], -1, len - 1);
  std::vector<int64_t> picked;
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step) picked.push_back(i);
  return picked;
}

}  // namespace

bool simplify_shapes(Model& model) {
  Graph& g = *model.graph;
  const auto producer = producers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const bool gather = is_op(n, "Gather"), slice = is_op(n, "Slice");
    if ((!gather && !slice) || n.inputs.empty() || n.outputs.size() != 1 || is_graph_output(g, n.outputs[0])) continue;
    // Shape(x), or Cast(Shape(x)) to another integer type (exporters insert one).
    auto p = producer.find(n.inputs[0]);
    if (p == producer.end()) continue;
    DType out_dtype = DType::Int64;
    if (is_op(g.nodes[p->second], "Cast")) {
      auto to = g.nodes[p->second].attrs.find("to");
      if (to == g.nodes[p->second].attrs.end()) continue;
      out_dtype = DType(to->second.i);
      if (out_dtype != DType::Int64 && out_dtype != DType::Int32) continue;
      p = producer.find(g.nodes[p->second].inputs[0]);
      if (p == producer.end()) continue;
    }
    if (!is_op(g.nodes[p->second], "Shape")) continue;
    auto dims = known_dims(g, g.nodes[p->second]);
    if (!dims) continue;
    const int64_t len = int64_t(dims->size());
    std::vector<int64_t> picked;
    bool scalar = false;
    if (gather) {
      auto axis = n.attrs.find("axis");
      if (axis != n.attrs.end() && axis->second.i != 0 && axis->second.i != -1) continue;
      const Tensor* idx = n.inputs.size() > 1 ? constant_initializer(g, n.inputs[1]) : nullptr;
      auto values = n.inputs.size() > 1 ? constant_ints(g, n.inputs[1]) : std::nullopt;
      if (!idx || !values) continue;
      scalar = idx->rank() == 0;
      bool in_range = true;
      for (int64_t v : *values) {
        if (v < -len || v >= len) in_range = false;  // an error at run time: leave it to the kernel
        picked.push_back(v < 0 ? v + len : v);
      }
      if (!in_range) continue;
    } else {
      auto positions = slice_positions(model, g, n, len);
      if (!positions) continue;
      picked = *positions;
    }
    std::vector<int64_t> values;
    for (int64_t k : picked) values.push_back((*dims)[size_t(k)]);
    if (std::any_of(values.begin(), values.end(), [](int64_t d) { return d < 0; })) continue;  // a symbolic dim
    Tensor t = Tensor::from_vector<int64_t>(values, {int64_t(values.size())});
    if (scalar) t = t.reshape({});
    if (out_dtype != DType::Int64) t = t.cast(out_dtype);
    g.initializers[n.outputs[0]] = t;
    g.value_info.erase(n.outputs[0]);
    removed[i] = true;
    changed = true;
  }
  if (!changed) return false;
  remove_nodes(g, removed);
  return true;
}

}  // namespace ingot
