// Folds an inference BatchNormalization into the Conv or Gemm before it. With s = scale / sqrt(var +
// eps) and t = bias - mean * s per channel o (a Conv's output channel, a Gemm's output column):
//   Conv: W'[o, ...] = W[o, ...] * s[o] and B'[o] = B[o] * s[o] + t[o];
//   Gemm: the column o of op(B) times s[o] (a row of B when transB, else a column) and
//         C'[o] = beta * C[o] * s[o] + t[o], beta' = 1 (alpha stays);
// so the producer writes the normalized output itself. Requires float32 initializers for the
// weights, the bias (if any; a Gemm's C of shape [N] or [1, N]) and the four BN parameters, a
// producer output read only by the BN, and a spatial BN in inference mode with one output. The folded
// weights are new initializers (the originals may be shared; passes/affine_fold.h does the
// rewrite); dead_code drops the old ones.
#include <cmath>
#include <optional>

#include "passes/pass.h"
#include "passes/affine_fold.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

// The BN's per-channel s and t for `channels` channels, or nullopt when it cannot be folded.
std::optional<Affine> bn_affine(const Model& model, const Graph& g, const Node& bn, int64_t channels) {
  bool extra_outputs = false;
  for (size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs |= !bn.outputs[k].empty();
  if (extra_outputs || attr_int(bn, "training_mode", 0) != 0 || attr_int(bn, "spatial", 1) != 1) return std::nullopt;
  if (model.opset(bn.domain) < 7 && attr_int(bn, "is_test", 0) == 0) return std::nullopt;
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
    const Tensor* w = constant_initializer(g, node.inputs[1]);
    std::optional<int64_t> channels = w ? output_channels(node, *w) : std::nullopt;
    std::optional<Affine> a = channels ? bn_affine(model, g, bn, *channels) : std::nullopt;
    if (!a || !fold_affine(g, node, *a, bn.outputs[0])) continue;
    removed[*bi] = true;
    changed = true;
  }
  if (!changed) return false;
  remove_nodes(g, removed);
  return true;
}

}  // namespace ingot
