// Folds a constant scale and shift applied to a Conv's, ConvTranspose's or Gemm's output into its
// weights and bias:
//   y = Add(Mul(conv, k), c)   (either operand order; the Add, or the Mul, may be absent; an
//                               inference BatchNormalization after them is taken too)
// with k and c float32 initializers that are scalars or per-channel (shape [C] for a Gemm; for a
// Conv one non-unit dim that lines up with the channel axis, e.g. [1, C, 1, 1] or [C, 1, 1]).
// PP-OCRv4 det and rec have dozens (MobileOne-style learnable scales after depthwise convolutions,
// exported as Mul and Add with [1]-shaped weights). Requires the intermediate values to have no
// other reader; the rewrite itself is passes/affine_fold.h's.
#include <optional>

#include "passes/affine_fold.h"
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

// The per-channel values of constant `name` broadcast against an output of rank `rank` whose
// channel axis is 1 with `channels` channels; nullopt when it is not a scalar or such a vector.
std::optional<std::vector<double>> channel_values(const Graph& g, const std::string& name, size_t rank,
                                                  int64_t channels) {
  const Tensor* t = constant_initializer(g, name);
  if (!t || t->dtype() != DType::Float32 || t->device() != Device::cpu() || size_t(t->rank()) > rank) return std::nullopt;
  const float* v = t->data<float>();
  if (t->numel() == 1) return std::vector<double>(size_t(channels), double(v[0]));
  if (t->numel() != channels) return std::nullopt;
  const int64_t axis = 1 - int64_t(rank - size_t(t->rank()));  // the channel axis within t's dims
  if (axis < 0 || t->dim(axis) != channels) return std::nullopt;
  return std::vector<double>(v, v + channels);
}

}  // namespace

bool fold_scale_shift(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& node = g.nodes[i];
    if (!affine_foldable(node)) continue;
    const Tensor* w = constant_initializer(g, node.inputs[1]);
    std::optional<int64_t> channels = w ? output_channels(node, *w) : std::nullopt;
    if (!channels) continue;
    const size_t rank = is_op(node, "Gemm") ? 2 : size_t(w->rank());
    Affine affine{std::vector<double>(size_t(*channels), 1.0), std::vector<double>(size_t(*channels), 0.0)};
    std::string out = node.outputs[0];
    std::vector<size_t> absorbed;
    auto step = [&](const char* op) {
      auto r = readers.single(out);
      if (!r || removed[*r] || !is_op(g.nodes[*r], op) || g.nodes[*r].outputs.size() != 1) return false;
      auto k = other_operand(g.nodes[*r], out);
      auto values = k ? channel_values(g, *k, rank, *channels) : std::nullopt;
      if (!values) return false;
      for (size_t o = 0; o < values->size(); ++o) {
        if (std::string(op) == "Mul") {
          affine.s[o] *= (*values)[o];
          affine.t[o] *= (*values)[o];
        } else {
          affine.t[o] += (*values)[o];
        }
      }
      absorbed.push_back(*r);
      out = g.nodes[*r].outputs[0];
      return true;
    };
    step("Mul");
    step("Add");
    // An inference BatchNormalization after them (a bias written as an Add, then BN: PP-OCR det's
    // upsampling ConvTransposes): s' = s_bn * s, t' = s_bn * t + t_bn.
    if (!absorbed.empty()) {
      auto r = readers.single(out);
      std::optional<Affine> bn = r && !removed[*r] && g.nodes[*r].inputs.size() == 5 && g.nodes[*r].inputs[0] == out
                                     ? batchnorm_affine(model, g, g.nodes[*r], *channels)
                                     : std::nullopt;
      if (bn) {
        for (size_t o = 0; o < affine.s.size(); ++o) {
          affine.s[o] *= bn->s[o];
          affine.t[o] = affine.t[o] * bn->s[o] + bn->t[o];
        }
        absorbed.push_back(*r);
        out = g.nodes[*r].outputs[0];
      }
    }
    if (absorbed.empty() || !fold_affine(g, node, affine, out)) continue;
    for (size_t a : absorbed) removed[a] = true;
    changed = true;
  }
  if (!changed) return false;
  remove_nodes(g, removed);
  return true;
}

}  // namespace ingot
