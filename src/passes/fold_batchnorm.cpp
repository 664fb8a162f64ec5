// Folds an inference BatchNormalization into the Conv, ConvTranspose or Gemm before it. With s =
// scale / sqrt(var + eps) and t = bias - mean * s per channel o (a Conv's output channel, a Gemm's
// output column):
//   Conv: W'[o, ...] = W[o, ...] * s[o] and B'[o] = B[o] * s[o] + t[o] (ConvTranspose: W[., o, ...]);
//   Gemm: the column o of op(B) times s[o] (a row of B when transB, else a column) and
//         C'[o] = beta * C[o] * s[o] + t[o], beta' = 1 (alpha stays);
// so the producer writes the normalized output itself. Requires float32 initializers for the
// weights, the bias (if any; a Gemm's C of shape [N] or [1, N]) and the four BN parameters, a
// producer output read only by the BN, and a spatial BN in inference mode with one output. The folded
// weights are new initializers (the originals may be shared; passes/affine_fold.h does the
// rewrite); dead_code drops the old ones.
#include <optional>

#include "passes/pass.h"
#include "passes/affine_fold.h"
#include "passes/pass_util.h"

namespace ingot {
using namespace passes;

bool fold_batchnorm(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    Node& node = g.nodes[ci];
    if (!affine_foldable(node)) continue;
    auto bi = readers.single(node.outputs[0]);
    if (!bi || removed[*bi]) continue;
    const Node& bn = g.nodes[*bi];
    if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.inputs[0] != node.outputs[0]) continue;
    const Tensor* w = constant_initializer(g, node.inputs[1]);
    std::optional<int64_t> channels = w ? output_channels(node, *w) : std::nullopt;
    std::optional<Affine> a = channels ? batchnorm_affine(model, g, bn, *channels) : std::nullopt;
    if (!a || !fold_affine(g, node, *a, bn.outputs[0])) continue;
    removed[*bi] = true;
    changed = true;
  }
  if (!changed) return false;
  remove_nodes(g, removed);
  return true;
}

}  // namespace ingot
