// Folds an inference BatchNormalization into the Conv or Gemm before it. With s = scale / sqrt(var +
// eps) and t = bias - mean * s per channel o (a Conv's output channel, a Gemm's output column):
//   Conv: W'[o, ...] = W[o, ...] * s[o] and B'[o] = B[o] * s[o] + t[o];
//   Gemm: the column o of op(B) times s[o] (a row of B when transB, else a column) and
//         C'[o] = beta * C[o] * s[o] + t[o], beta' = 1 (alpha stays);
// so the producer writes the normalized output itself. Requires float32 initializers for the
// weights, the bias (if any; a Gemm's C of shape [N] or [1, N]) and the four BN parameters, a
// producer output read only by the BN, and a spatial BN in inference mode with one output. The folded
// weights are new initializers (the originals may be shared); dead_code drops the old ones.
#include <cmath>
#include <optional>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

bool float32_vector(const Tensor* t, int64_t n) {
  return t && t->dtype() == DType::Float32 && t->device() == Device::cpu() && t->numel() == n &&
         (t->rank() == 1 || (t->rank() == 2 && t->dim(0) == 1));
}

// The BN's per-channel s and t for `channels` channels, or nullopt when it cannot be folded.
struct Affine {
  std::vector<double> s, t;
};
std::optional<Affine> bn_affine(const Model& model, const Graph& g, const Node& bn, int64_t channels) {
  bool extra_outputs = false;
  for (size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs |= !bn.outputs[k].empty();
  auto attr_int = [&](const char* name, int64_t dflt) {
    auto it = bn.attrs.find(name);
    return it == bn.attrs.end() ? dflt : it->second.i;
  };
  if (extra_outputs || attr_int("training_mode", 0) != 0 || attr_int("spatial", 1) != 1) return std::nullopt;
  if (model.opset(bn.domain) < 7 && attr_int("is_test", 0) == 0) return std::nullopt;
  const Tensor* scale = constant_initializer(g, bn.inputs[1]);
  const Tensor* shift = constant_initializer(g, bn.inputs[2]);
  const Tensor* mean = constant_initializer(g, bn.inputs[3]);
  const Tensor* var = constant_initializer(g, bn.inputs[4]);
  if (!float32_vector(scale, channels) || !float32_vector(shift, channels) || !float32_vector(mean, channels) ||
      !float32_vector(var, channels)) {
    return std::nullopt;
  }
  auto eps_it = bn.attrs.find("epsilon");
  const double eps = eps_it == bn.attrs.end() ? 1e-5 : double(eps_it->second.f);
  Affine a;
  for (int64_t o = 0; o < channels; ++o) {
    const double s = double(scale->data<float>()[o]) / std::sqrt(double(var->data<float>()[o]) + eps);
    a.s.push_back(s);
    a.t.push_back(double(shift->data<float>()[o]) - double(mean->data<float>()[o]) * s);
  }
  return a;
}

float attr_float(const Node& n, const char* name, float dflt) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? dflt : it->second.f;
}

int64_t attr_int(const Node& n, const char* name, int64_t dflt) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? dflt : it->second.i;
}

// Folds `bn` into `node` (a Conv or a Gemm); false when the shapes or types do not allow it.
bool fold_into(const Model& model, Graph& g, Node& node, const Node& bn) {
  const bool gemm = is_op(node, "Gemm");
  const Tensor* w = constant_initializer(g, node.inputs[1]);
  if (!w || w->dtype() != DType::Float32 || w->device() != Device::cpu() || w->rank() < (gemm ? 2 : 3)) return false;
  if (gemm && w->rank() != 2) return false;
  const bool trans_b = gemm && attr_int(node, "transB", 0) != 0;
  const int64_t channels = gemm ? w->dim(trans_b ? 0 : 1) : w->dim(0);
  const bool has_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
  const Tensor* b = has_bias ? constant_initializer(g, node.inputs[2]) : nullptr;
  if (has_bias && !float32_vector(b, channels)) return false;
  std::optional<Affine> a = bn_affine(model, g, bn, channels);
  if (!a) return false;

  Tensor w2 = w->clone(), b2 = Tensor::empty(DType::Float32, {channels});
  float* wp = w2.data<float>();
  float* bp = b2.data<float>();
  if (gemm && !trans_b) {  // B is [K, N]: scale column o
    const int64_t k_dim = w->dim(0);
    for (int64_t k = 0; k < k_dim; ++k)
      for (int64_t o = 0; o < channels; ++o) wp[k * channels + o] = float(double(wp[k * channels + o]) * a->s[size_t(o)]);
  } else {  // Conv weights [O, ...] or Gemm's transposed B [N, K]: scale row o
    const int64_t per_out = w->numel() / std::max<int64_t>(channels, 1);
    for (int64_t o = 0; o < channels; ++o)
      for (int64_t k = 0; k < per_out; ++k) wp[o * per_out + k] = float(double(wp[o * per_out + k]) * a->s[size_t(o)]);
  }
  const double beta = gemm ? double(attr_float(node, "beta", 1.0f)) : 1.0;
  for (int64_t o = 0; o < channels; ++o) {
    const double b0 = b ? beta * double(b->data<float>()[o]) : 0.0;
    bp[o] = float(b0 * a->s[size_t(o)] + a->t[size_t(o)]);
  }
  const std::string w_name = fresh_name(g, node.inputs[1] + "_bn");
  g.initializers[w_name] = w2;
  const std::string b_name = fresh_name(g, (b ? node.inputs[2] : node.inputs[1]) + "_bn_bias");
  g.initializers[b_name] = b2;
  node.inputs.resize(3);
  node.inputs[1] = w_name;
  node.inputs[2] = b_name;
  if (gemm) {
    Attribute one;
    one.kind = AttrKind::Float;
    one.f = 1.0f;
    node.attrs["beta"] = one;
  }
  node.outputs[0] = bn.outputs[0];
  return true;
}

}  // namespace

bool fold_batchnorm(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    Node& node = g.nodes[ci];
    if ((!is_op(node, "Conv") && !is_op(node, "Gemm")) || node.inputs.size() < 2 || node.outputs.size() != 1) continue;
    auto bi = readers.single(node.outputs[0]);
    if (!bi || removed[*bi]) continue;
    const Node& bn = g.nodes[*bi];
    if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.inputs[0] != node.outputs[0]) continue;
    if (!fold_into(model, g, node, bn)) continue;
    removed[*bi] = true;
    changed = true;
  }
  if (!changed) return false;
  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!removed[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
  return true;
}

}  // namespace ingot
