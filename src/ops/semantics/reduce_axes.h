// Backend-neutral axis handling of the reductions: ReduceX axes (input 1 or attribute, keepdims,
// noop_with_empty_axes) with the output shape, ArgMax/ArgMin's [outer, axis, inner] view and output
// shape, and Softmax/LogSoftmax/Hardmax's [outer, dim, inner] view (opset < 13 coerces to 2-D).
// Used by the CPU and CUDA kernels.
#pragma once
#include <ingot/tensor.h>

#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

// Axis bookkeeping shared by ReduceX: which axes are reduced and the output shape.
struct ReduceAxes {
  std::vector<bool> reduced;  // per input axis
  Shape out_shape;
  bool identity = false;  // noop_with_empty_axes with empty axes: output = input
};
ReduceAxes resolve_reduce_axes(const KernelContext& ctx, const Tensor& x);
// The same from the axes themselves (empty: every axis, or the identity with noop_with_empty_axes).
ReduceAxes reduce_axes(const Shape& shape, const std::vector<int64_t>& axes, bool keepdims, bool noop_with_empty_axes);

// ArgMax/ArgMin over `axis` as [outer, n, inner] (a scalar behaves as [1]).
struct ArgAxis {
  int64_t axis = 0, n = 1, outer = 1, inner = 1;
  bool last = false;  // select_last_index
  Shape out_shape;
};
ArgAxis resolve_arg_axis(const KernelContext& ctx, const Tensor& x);

// Softmax, LogSoftmax and Hardmax as [outer, dim, inner].
struct AxisView {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisView softmax_axis_view(const KernelContext& ctx, const Tensor& x);
// The view of `axis` (negative from the end); coerce_2d: every axis from `axis` on in `dim` (and axis
// == rank allowed: everything in `outer`), as Softmax before opset 13.
AxisView axis_view(const Shape& shape, int64_t axis, bool coerce_2d);
// ai.ingot.SoftmaxGrad's view (its `axis` and `coerce_2d`), after checking that dY (input 0) is like Y.
AxisView softmax_grad_view(const KernelContext& ctx);

}  // namespace ingot::sem
