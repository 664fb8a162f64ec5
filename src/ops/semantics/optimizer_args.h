// The arguments of Ingot's fused optimizer steps (ai.ingot.SGDStep and AdamStep, defined in
// ops/defs/training.cpp), read and checked once for every backend's kernels.
#pragma once
#include <cstddef>
#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

struct OptimizerArgs {
  // Input 0 (the op's hyperparameters, in its order) and input 1 (the step count) when they are on
  // the host (the CPU kernels); on a device (CUDA, so that a captured step replays new values) they
  // stay there, `hyper` is empty and the kernel reads them itself.
  bool host_values = false;
  std::vector<double> hyper;
  double step = 0;
  size_t group = 0;  // inputs per parameter: the parameter, its gradient, then its states
  size_t count = 0;  // parameters updated
  bool in_place = false;
  // Input j (0: the parameter, 1: the gradient, 2...: states) of parameter i, and the output the
  // new value of its input j (j >= 1 skips the gradient: output k of parameter i is input k + 1, k > 0).
  size_t input(size_t i, size_t j) const { return 2 + i * group + j; }
  size_t output(size_t i, size_t j) const { return i * (group - 1) + (j == 0 ? 0 : j - 1); }
};

// `hyperparameters` values from input 0 and the step from input 1 (float tensors; read when on the
// host, else only their shapes checked), then `group` tensors per parameter with the parameter's shape and dtype; an input listed in
// `optional` (a position in the group) may be empty, and its output is then empty too.
OptimizerArgs optimizer_args(const KernelContext& ctx, size_t hyperparameters, size_t group, size_t optional = 0);

// UnscaleGrads' inv_scale (input 0, read on the host), after checking that the node has found_inf
// and one output per gradient.
double unscale_args(const KernelContext& ctx);

}  // namespace ingot::sem
