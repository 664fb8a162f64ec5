// The optimization pipeline: every pass, in the order it runs.
#include "passes/pass.h"

namespace ingot {

namespace {
constexpr Pass kPipeline[] = {
    {"fuse-conv-add-relu", fuse_conv_add_relu},
};
constexpr Pass kLowering[] = {
    {"lower-gradient", lower_gradient},
};
}  // namespace

bool run_lowering(Model& model) {
  bool changed = false;
  for (const Pass& pass : kLowering) changed |= pass.run(model);
  return changed;
}

bool run_pipeline(Model& model) {
  bool changed = false;
  for (const Pass& pass : kPipeline) changed |= pass.run(model);
  return changed;
}

}  // namespace ingot
