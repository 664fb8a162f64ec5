// Folding a per-channel affine map y = s[o] * x + t[o] into the Conv, ConvTranspose or Gemm that
// computes x, by rewriting its weights and bias (new initializers; the originals may be shared).
// Used by the BatchNormalization folding and the constant scale/shift folding passes.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ingot::passes {

struct Affine {
  std::vector<double> s, t;  // per output channel (a Conv's output channel, a Gemm's output column)
};

// A float32 host tensor of n elements, shaped [n] or [1, n] (a bias or a per-channel parameter).
bool float32_vector(const Tensor* t, int64_t n);

// The output channels of a Conv, ConvTranspose or Gemm with constant weights `w`; nullopt for any
// other node.
std::optional<int64_t> output_channels(const Node& node, const Tensor& w);

// A producer fold_affine can rewrite: a Conv, ConvTranspose or Gemm with one output.
bool affine_foldable(const Node& node);

// An inference BatchNormalization as the affine map of its `channels` channels (s = scale /
// sqrt(var + eps), t = bias - mean * s), or nullopt when it cannot be folded (training mode, extra
// outputs, parameters that are not float32 constants of that size).
std::optional<Affine> batchnorm_affine(const Model& model, const Graph& g, const Node& bn, int64_t channels);

// Rewrites `node` (a Conv, ConvTranspose or Gemm whose weights and bias are float32 initializers) to compute the
// affine map of its output under the name `new_output`; false, changing nothing, when its weights,
// bias or the affine's size do not allow it.
bool fold_affine(Graph& g, Node& node, const Affine& affine, const std::string& new_output);

}  // namespace ingot::passes
