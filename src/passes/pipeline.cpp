// The optimization pipeline: every pass, in the order it runs.
#include <cstdlib>
#include <set>
#include <string>

#include "passes/pass.h"

namespace ingot {

namespace {
// Shape simplification first (static dims picked out of partially symbolic shapes become constants
// that constant folding then propagates), folding next (it exposes constant weights and shapes to the rest), then the no-op removal that
// lets patterns match across Identity/Dropout, BatchNormalization folding before the Conv fusion (so
// Conv -> BN -> Relu becomes one FusedConv), the pattern fusions that rewrite elementary ops into
// the ops they spell out (layer normalization, hard-swish, attention: before the MatMul fusion takes
// the score MatMul's scale), the kernel fusions (elementwise chains after the
// Conv/MatMul epilogues have taken their bias and activation), and dead code last
// to drop what the others orphaned.
constexpr Pass kPipeline[] = {
    {"simplify-shapes", simplify_shapes},
    {"constant-folding", constant_folding},
    {"remove-identity", remove_identity},
    {"fold-batchnorm", fold_batchnorm},
    {"fold-scale-shift", fold_scale_shift},
    {"fuse-layer-norm", fuse_layer_norm},
    {"fuse-hard-swish", fuse_hard_swish},
    {"fuse-attention", fuse_attention},
    {"fuse-conv-add-relu", fuse_conv_add_relu},
    {"fuse-matmul-bias-act", fuse_matmul_bias_act},
    {"fuse-elementwise", fuse_elementwise},
    {"dead-code", dead_code},
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

std::span<const Pass> pipeline_passes() { return kPipeline; }

// INGOT_DISABLE_PASSES=name,name: passes to skip (A/B measurements of one pass, bisecting a pass
// that breaks a model). Read once.
bool pass_disabled(std::string_view pass) {
  static const std::set<std::string> names = [] {
    std::set<std::string> out;
    const char* env = std::getenv("INGOT_DISABLE_PASSES");
    std::string list = env ? env : "";
    for (size_t start = 0; start < list.size();) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      if (comma > start) out.insert(list.substr(start, comma - start));
      start = comma + 1;
    }
    return out;
  }();
  return names.count(std::string(pass)) > 0;
}

bool run_pipeline(Model& model, const std::function<void(const Pass&, bool changed)>& after_each) {
  bool changed = false;
  for (const Pass& pass : kPipeline) {
    if (pass_disabled(pass.name)) continue;
    const bool pass_changed = pass.run(model);
    changed |= pass_changed;
    if (after_each) after_each(pass, pass_changed);
  }
  return changed;
}

}  // namespace ingot
