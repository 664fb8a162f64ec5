// Folding a per-channel affine map y = s[o] * x + t[o] into the Conv or Gemm that computes x, by
// rewriting its weights and bias (new initializers; the originals may be shared). Used by the
// BatchNormalization folding and the constant scale/shift folding passes.
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

// The output channels of a Conv or Gemm with constant weights `w`; nullopt for any other node.
std::optional<int64_t> output_channels(const Node& node, const Tensor& w);

// Rewrites `node` (a Conv or Gemm whose weights and bias are float32 initializers) to compute the
// affine map of its output under the name `new_output`; false, changing nothing, when its weights,
// bias or the affine's size do not allow it.
bool fold_affine(Graph& g, Node& node, const Affine& affine, const std::string& new_output);

}  // namespace ingot::passes
