#include "compiler/compile.h"

#include <fmt/format.h>

#include "core/flags.h"
#include "ops/kernel.h"
#include "passes/pass.h"

namespace ingot {

std::vector<CompileStep> compile_steps(const CompileOptions& options) {
  std::vector<CompileStep> steps;
  auto add = [&](std::string_view stage, const Pass& pass) {
    steps.push_back({stage, pass.name, [&pass](Model& m) { return run_pass(pass, m); }});
  };
  // Lowerings: rewrites every model needs, whatever the optimization setting.
  for (const Pass& pass : lowering_passes()) add("lower", pass);
  if (options.optimize) {
    for (const Pass& pass : pipeline_passes()) {
      if (pass_disabled(pass.name) || (pass.cuda_only && options.target != DeviceType::CUDA)) continue;
      add("optimize", pass);
    }
  }
  // Reduced precision after the fusions (their patterns are written for float32 graphs).
  const DType compute = options.compute;
  const bool half = compute == DType::Float16 || compute == DType::BFloat16;
  if (half && !pass_disabled("to-half-precision")) {
    steps.push_back({"precision", "to-half-precision", [compute](Model& m) { return to_half_precision(m, compute); }});
  }
  // Channels last: on a CUDA target every 1-D and 2-D convolution of a 16-bit model (cuDNN's tensor-core
  // layout; float32 ones too with INGOT_CHANNELS_LAST=1, an experiment: cuDNN's float32 kernels are
  // channels first); on either target the int8 convolutions (fuse-qdq's QuantizedConv: oneDNN's and
  // cuDNN's int8 kernels compute channels last).
  if (options.optimize && !pass_disabled("channels-last")) {
    const bool all = options.target == DeviceType::CUDA && (half || flags::enabled("INGOT_CHANNELS_LAST"));
    const ChannelsLastScope scope = all ? ChannelsLastScope::AllConvolutions : ChannelsLastScope::Int8Convolutions;
    // Pools follow where the target has a kernel for ai.ingot.MaxPool (NHWC), at the dtypes it takes
    // (INGOT_CUDA_NHWC_POOL=0 keeps CUDA's NCHW pools with transposes around them, for A/B runs).
    std::vector<DType> pool_dtypes;
    const KernelDef* k = KernelRegistry::instance().find(kIngotDomain, "MaxPool", options.target, 1);
    if (k && (options.target != DeviceType::CUDA || flags::enabled("INGOT_CUDA_NHWC_POOL"))) pool_dtypes = k->dtypes;
    steps.push_back({"layout", "channels-last",
                     [scope, pool_dtypes](Model& m) { return to_channels_last(m, scope, pool_dtypes); }});
  }
  // The quantized means and products after the layout step, which leaves a channels-last
  // GlobalAveragePool as a ReduceMean and moves the DQ/Q pairs with their values.
  if (options.optimize && !pass_disabled("fuse-qdq-pointwise")) {
    steps.push_back({"layout", "fuse-qdq-pointwise", [](Model& m) { return fuse_qdq_pointwise(m); }});
  }
  return steps;
}

bool compile(Model& model, const CompileOptions& options, const CompileObserver& observer) {
  return run_steps(model, compile_steps(options), observer);
}

bool run_steps(Model& model, const std::vector<CompileStep>& steps, const CompileObserver& observer) {
  bool changed = false;
  for (const CompileStep& step : steps) {
    const bool step_changed = step.run(model);
    if (step_changed) {
      try {
        verify(model);
      } catch (Error& e) {
        e.add_context(fmt::format("the graph after pass '{}'", step.name));
        throw;
      }
    }
    changed |= step_changed;
    if (observer && !observer(step, step_changed, model)) break;
  }
  return changed;
}

}  // namespace ingot
