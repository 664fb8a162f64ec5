// Graph passes (XLA-style): each pass has a name and rewrites a model in place, reporting whether it
// changed anything. The order in which they run is listed in one place, pipeline.cpp.
#pragma once
#include <string_view>

#include "graph/graph.h"

namespace ingot {

struct Pass {
  std::string_view name;
  bool (*run)(Model& model);  // true when the model changed
};

// Conv [-> Add(residual)] [-> Relu] into one FusedConv node (domain "ai.ingot").
bool fuse_conv_add_relu(Model& model);

// Runs every pass of the pipeline once, in order; true when any changed the model.
bool run_pipeline(Model& model);

// Reduced precision (not in the pipeline; Session::load runs it when SessionOptions::precision is
// FP16 or BF16): float32 computation moves to `dtype` (float16 or bfloat16) like autocast, with
// Softmax, reductions, normalizations, Exp/Log/Pow/Erf and RNNs kept in float32 and the graph's
// inputs and outputs still float32. See to_half_precision.cpp for the rules.
bool to_half_precision(Model& model, DType dtype);

// Lowerings: rewrites every model needs before it can run, whatever the optimization setting
// (ops that no kernel implements directly). Run by Session::load and `ingot test-onnx`.
// ai.onnx.preview.training.Gradient -> reverse-mode differentiation with ordinary nodes.
bool lower_gradient(Model& model);
bool run_lowering(Model& model);

}  // namespace ingot
