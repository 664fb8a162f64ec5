// The one compile pipeline: everything that happens to an imported model before it runs, in one
// ordered list of steps (lowerings, the optimization passes, precision, layout). Session::load,
// `ingot convert`, `ingot test-onnx` and `ingot inspect` all call compile(); none lists steps of its
// own. After every step that changed the model the verifier runs (XLA's invariant checker), so a
// pass that breaks the graph is named at once, not at run time or by a later pass.
#pragma once
#include <ingot/dtype.h>
#include <ingot/tensor.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace ingot {

struct CompileOptions {
  bool optimize = true;                // the optimization passes and the layout step
  DType compute = DType::Float32;      // Float16/BFloat16: the precision step (autocast-like)
  DeviceType target = DeviceType::CPU;  // CUDA: channels-last for 16-bit models
};

// One step of the pipeline: its stage ("lower", "optimize", "precision", "layout") and pass name.
struct CompileStep {
  std::string_view stage;
  std::string_view name;
  std::function<bool(Model&)> run;  // true when the model changed
};

// The steps compile() runs for these options, in order, without those INGOT_DISABLE_PASSES names
// (lowerings cannot be disabled: without them the model cannot run).
std::vector<CompileStep> compile_steps(const CompileOptions& options);

// Called after every step with whether it changed the model (already verified when it did); return
// false to stop the pipeline after that step (`ingot inspect --dump-after`).
using CompileObserver = std::function<bool(const CompileStep& step, bool changed, const Model& model)>;

// Runs compile_steps(options) on the model in place. A step that leaves an invalid graph throws,
// naming the step. Returns whether any step changed the model.
bool compile(Model& model, const CompileOptions& options, const CompileObserver& observer = {});

// compile()'s runner over any list of steps (tests run steps of their own through it).
bool run_steps(Model& model, const std::vector<CompileStep>& steps, const CompileObserver& observer = {});

}  // namespace ingot
