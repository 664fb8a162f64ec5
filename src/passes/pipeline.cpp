// The optimization pipeline: every pass, in the order it runs.
#include "passes/pass.h"

namespace ingot {

namespace {
constexpr Pass kPipeline[] = {
    {"fuse-conv-add-relu", fuse_conv_add_relu},
};
}  // namespace

bool run_pipeline(Model& model) {
  bool changed = false;
  for (const Pass& pass : kPipeline) changed |= pass.run(model);
  return changed;
}

}  // namespace ingot
