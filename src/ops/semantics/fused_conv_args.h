// The arguments of ai.ingot FusedConv beyond Conv's own (ops/defs/fused.cpp), resolved once for
// every backend: the activation applied last ("", "Relu", "HardSwish") and the residual R.
#pragma once
#include <string>

#include "ops/kernel.h"
#include "ops/semantics/conv_geometry.h"

namespace ingot::sem {

enum class FusedActivation { None, Relu, HardSwish };

struct FusedConvArgs {
  FusedActivation act = FusedActivation::None;
  const Tensor* residual = nullptr;  // same shape and dtype as the output, or null
};

inline FusedConvArgs fused_conv_args(const KernelContext& ctx, const ConvGeometry& g) {
  FusedConvArgs a;
  const std::string& act = ctx.attr_string("activation");
  if (act == "Relu") {
    a.act = FusedActivation::Relu;
  } else if (act == "HardSwish") {
    a.act = FusedActivation::HardSwish;
  } else if (!act.empty()) {
    fail("attribute 'activation': expected '', 'Relu' or 'HardSwish', got '{}'", act);
  }
  if (ctx.has_input(3)) {
    a.residual = &ctx.input(3);
    const Tensor& x = ctx.input(0);
    if (a.residual->shape() != conv_output_shape(g)) {
      fail("input 3 (R): expected the output's shape {}, got {}", shape_str(conv_output_shape(g)),
           shape_str(a.residual->shape()));
    }
    if (a.residual->dtype() != x.dtype()) {
      fail("input 3 (R): expected {} like X, got {}", dtype_name(x.dtype()), dtype_name(a.residual->dtype()));
    }
  }
  return a;
}

// A channels-last FusedConv computed as the channels-first one on transposed copies (eager calls on
// the context's device) and written into `y` (the output, allocated): the CPU's way to run the
// layout, and the GPU's for geometries its channels-last path does not take.
void fused_conv_by_transposes(const KernelContext& ctx, Tensor& y);

}  // namespace ingot::sem
