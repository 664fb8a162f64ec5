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

}  // namespace ingot
