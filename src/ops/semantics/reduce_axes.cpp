#include "ops/semantics/reduce_axes.h"

#include <algorithm>

namespace ingot::sem {

ReduceAxes resolve_reduce_axes(const KernelContext& ctx, const Tensor& x) {
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor& a = ctx.input(1);
    INGOT_CHECK(a.dtype() == DType::Int64, "input 1 (axes): expected int64, got {}", dtype_name(a.dtype()));
    INGOT_CHECK(a.rank() <= 1, "input 1 (axes): expected rank 1, got {}", shape_str(a.shape()));
    axes = a.to_int64_vector();
  } else if (ctx.has_attr("axes")) {
    axes = ctx.attr_ints("axes");
  }
  return reduce_axes(x.shape(), axes, ctx.attr_int("keepdims") != 0, ctx.attr_int("noop_with_empty_axes") != 0);
}

ReduceAxes reduce_axes(const Shape& shape, const std::vector<int64_t>& axes, bool keepdims, bool noop_with_empty_axes) {
  const int64_t rank = int64_t(shape.size());
  ReduceAxes r;
  r.reduced.assign(size_t(rank), false);
  if (axes.empty()) {
    // Empty axes means "all axes" unless noop_with_empty_axes asks for the identity.
    if (noop_with_empty_axes) {
      r.identity = true;
      r.out_shape = shape;
      return r;
    }
    r.reduced.assign(size_t(rank), true);
  }
  for (int64_t a : axes) {
    int64_t n = normalize_axis(a, rank, "axes");
    INGOT_CHECK(!r.reduced[size_t(n)], "attribute axes: axis {} given twice", a);
    r.reduced[size_t(n)] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (!r.reduced[size_t(d)])
      r.out_shape.push_back(shape[size_t(d)]);
    else if (keepdims)
      r.out_shape.push_back(1);
  }
  return r;
}

ArgAxis resolve_arg_axis(const KernelContext& ctx, const Tensor& x) {
  ArgAxis a;
  const int64_t rank = std::max<int64_t>(x.rank(), 1);
  a.axis = normalize_axis(ctx.attr_int("axis"), rank, "attribute axis");
  const bool keepdims = ctx.attr_int("keepdims") != 0;
  a.last = ctx.attr_int("select_last_index") != 0;
  Shape shape = x.shape();
  if (shape.empty()) shape = {1};  // a scalar behaves as [1]
  a.n = shape[size_t(a.axis)];
  for (int64_t d = 0; d < rank; ++d) {
    if (d < a.axis) a.outer *= shape[size_t(d)];
    if (d > a.axis) a.inner *= shape[size_t(d)];
    if (d != a.axis)
      a.out_shape.push_back(shape[size_t(d)]);
    else if (keepdims)
      a.out_shape.push_back(1);
  }
  return a;
}

AxisView softmax_axis_view(const KernelContext& ctx, const Tensor& x) {
  const bool coerce_2d = ctx.opset() < 13;
  const int64_t default_axis = coerce_2d ? 1 : -1;
  return axis_view(x.shape(), ctx.has_attr("axis") ? ctx.attr_int("axis") : default_axis, coerce_2d);
}

AxisView softmax_grad_view(const KernelContext& ctx) {
  const Tensor &dy = ctx.input(0), &y = ctx.input(1);
  if (dy.shape() != y.shape() || dy.dtype() != y.dtype())
    fail("input 0 (dY): expected {} like Y, got {}", y.describe(), dy.describe());
  return axis_view(y.shape(), ctx.attr_int("axis"), ctx.attr_int("coerce_2d") != 0);
}

AxisView axis_view(const Shape& s, int64_t axis, bool coerce_2d) {
  const int64_t x_rank = int64_t(s.size()), rank = std::max<int64_t>(x_rank, 1);
  // Opset < 13 allows axis == rank (everything in `outer`), as numpy reshape would.
  if (coerce_2d && axis == rank) {
    return {shape_numel(s), 1, 1};
  }
  axis = normalize_axis(axis, rank);
  AxisView v;
  for (int64_t d = 0; d < x_rank; ++d) {
    if (d < axis) {
      v.outer *= s[size_t(d)];
    } else if (d == axis || coerce_2d) {
      v.dim *= s[size_t(d)];
    } else {
      v.inner *= s[size_t(d)];
    }
  }
  return v;
}

}  // namespace ingot::sem
