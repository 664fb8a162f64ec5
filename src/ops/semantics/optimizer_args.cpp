#include "ops/semantics/optimizer_args.h"

#include <ingot/error.h>

namespace ingot::sem {

OptimizerArgs optimizer_args(const KernelContext& ctx, size_t hyperparameters, size_t group, size_t optional) {
  OptimizerArgs a;
  a.group = group;
  INGOT_CHECK(ctx.num_inputs() >= 2 + group && (ctx.num_inputs() - 2) % group == 0,
              "inputs: expected hyperparameters, step and groups of {} tensors (param, grad, states), got {} inputs", group,
              ctx.num_inputs());
  a.count = (ctx.num_inputs() - 2) / group;
  INGOT_CHECK(ctx.num_outputs() == a.count * (group - 1), "outputs: expected {} ({} parameters x {}), got {}",
              a.count * (group - 1), a.count, group - 1, ctx.num_outputs());
  const Tensor& h = ctx.input(0);
  INGOT_CHECK(h.rank() == 1 && h.numel() == int64_t(hyperparameters) && is_floating(h.dtype()),
              "input 0 (hyperparameters): expected {} float values, got {}", hyperparameters, h.describe());
  const Tensor& s = ctx.input(1);
  INGOT_CHECK(s.numel() == 1 && is_floating(s.dtype()), "input 1 (step): expected a one-element float tensor, got {}",
              s.describe());
  INGOT_CHECK(h.device() == s.device(), "inputs 0 and 1 (hyperparameters, step): on {} and {}", h.device().str(),
              s.device().str());
  a.host_values = h.device().type == DeviceType::CPU;
  if (a.host_values) {
    for (int64_t k = 0; k < h.numel(); ++k) a.hyper.push_back(h.item_double(k));
    a.step = s.item_double();
    INGOT_CHECK(a.step >= 1, "input 1 (step): the step count starts at 1, got {}", a.step);
  }
  a.in_place = ctx.attr_int("in_place") != 0;
  for (size_t i = 0; i < a.count; ++i) {
    const Tensor& p = ctx.input(a.input(i, 0));
    INGOT_CHECK(is_floating(p.dtype()), "input {} (parameter {}): expected a float tensor, got {}", a.input(i, 0), i,
                p.describe());
    for (size_t j = 1; j < group; ++j) {
      if (j == optional && !ctx.has_input(a.input(i, j))) continue;
      const Tensor& t = ctx.input(a.input(i, j));
      INGOT_CHECK(t.shape() == p.shape() && t.dtype() == p.dtype(), "input {} ({} of parameter {}): expected {} like the parameter, got {}",
                  a.input(i, j), j == 1 ? "gradient" : "state", i, p.describe(), t.describe());
      INGOT_CHECK(t.device() == p.device(), "input {}: on {}, the parameter on {}", a.input(i, j), t.device().str(),
                  p.device().str());
    }
  }
  return a;
}

double unscale_args(const KernelContext& ctx) {
  const Tensor& inv = ctx.input(0);
  INGOT_CHECK(inv.numel() == 1 && is_floating(inv.dtype()), "input 0 (inv_scale): expected a one-element float tensor, got {}",
              inv.describe());
  INGOT_CHECK(ctx.num_outputs() == ctx.num_inputs(), "outputs: expected found_inf and one per gradient ({}), got {}",
              ctx.num_inputs(), ctx.num_outputs());
  return inv.item_double();
}

}  // namespace ingot::sem
