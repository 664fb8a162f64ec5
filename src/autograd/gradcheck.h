// Checks every gradient rule against finite differences (`ingot gradcheck`, tests/unit/autograd_test.cpp).
//
// For each op with a rule (OpDef::vjp) and each of its sample cases (shapes with broadcasting and odd
// sizes, the attribute families the op has; autograd/gradcheck.cpp), on the CPU in float64:
// the rule's vector-Jacobian product for a random cotangent u against central differences of
// <u, f(x)> (step 1e-6), element by element of every float input. With second_order, the same for
// the function x -> <w, vjp(x, u)> (the rule differentiated through its own ops). On an accelerator:
// the float32 gradient there against the CPU's float64 one.
#pragma once
#include <ingot/tensor.h>

#include <string>
#include <vector>

#include "ops/op_def.h"

namespace ingot {

struct GradcheckResult {
  std::string op;
  std::string device;
  bool passed = false;
  bool skipped = false;   // checked by another test (message says which and why)
  int cases = 0;
  double max_error = 0;   // the largest |analytic - numeric| / (atol + rtol |numeric|); <= 1 passes
  std::string message;    // the first failure, or why the op could not be checked
};

struct GradcheckOptions {
  Device device = Device::cpu();
  bool second_order = false;  // also check the rule's own gradient (gradgradcheck)
};

// Ops whose gradients gradcheck can check: those with a rule, by name (domain-qualified for Ingot's).
std::vector<const OpDef*> differentiable_ops();
// Ops with a float output and no rule (not differentiable yet), with the reason.
std::vector<std::pair<const OpDef*, std::string>> non_differentiable_ops();
GradcheckResult gradcheck(const OpDef& def, const GradcheckOptions& options = {});
// The ops gradgradcheck covers by default (elementwise, MatMul, Conv, Softmax, the norms).
bool second_order_checked(const OpDef& def);

}  // namespace ingot
