#include "ops/semantics/loss_args.h"

namespace ingot::sem {

LossArgs loss_args(const KernelContext& ctx, const char* scores_name) {
  const Tensor& x = ctx.input(0);
  const Tensor& t = ctx.input(1);
  INGOT_CHECK(x.rank() >= 2, "input 0 ({}): expected rank >= 2 ([N, C, d1...]), got {}", scores_name,
              shape_str(x.shape()));
  INGOT_CHECK(t.dtype() == DType::Int64 || t.dtype() == DType::Int32, "input 1 (target): expected int32/int64, got {}",
              dtype_name(t.dtype()));
  LossArgs l;
  l.n = x.shape()[0];
  l.c = x.shape()[1];
  Shape expected_target{l.n};
  for (int64_t k = 2; k < x.rank(); ++k) {
    l.d *= x.shape()[size_t(k)];
    expected_target.push_back(x.shape()[size_t(k)]);
  }
  INGOT_CHECK(t.shape() == expected_target, "input 1 (target): expected shape {} for {} {}, got {}",
              shape_str(expected_target), scores_name, shape_str(x.shape()), shape_str(t.shape()));
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    INGOT_CHECK(w.shape() == Shape{l.c}, "input 2 (weight): expected shape [{}], got {}", l.c, shape_str(w.shape()));
    INGOT_CHECK(w.dtype() == x.dtype(), "input 2 (weight): expected {} like input 0, got {}", dtype_name(x.dtype()),
                dtype_name(w.dtype()));
  }
  l.reduction = ctx.attr_string("reduction");
  INGOT_CHECK(l.reduction == "none" || l.reduction == "sum" || l.reduction == "mean",
              "attribute reduction: expected none, sum or mean, got '{}'", l.reduction);
  if (ctx.has_attr("ignore_index")) l.ignore_index = ctx.attr_int("ignore_index");
  return l;
}

}  // namespace ingot::sem
