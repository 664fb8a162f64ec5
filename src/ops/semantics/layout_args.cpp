#include "ops/semantics/layout_args.h"

#include <algorithm>
#include <numeric>

namespace ingot::sem {

std::vector<int64_t> read_ints(const Tensor& t, std::string_view what) {
  if (!is_integral(t.dtype())) fail("{}: expected an integer tensor, got {}", what, t.describe());
  if (t.dtype() == DType::Int64 && t.device().type == DeviceType::CPU) {
    const int64_t* p = t.data<int64_t>();
    return {p, p + t.numel()};
  }
  return t.to_int64_vector();
}

int64_t read_scalar_int(const Tensor& t, std::string_view what) {
  if (t.numel() != 1) fail("{}: expected one element, got {}", what, t.describe());
  return read_ints(t, what)[0];
}

namespace {
std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}
}  // namespace

SliceView slice_view(const KernelContext& ctx, const Tensor& x) {
  const int64_t r = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    if (ctx.has_attr("axes")) axes = ctx.attr_ints("axes");
  } else {
    starts = read_ints(ctx.input(1), "input 1 (starts)");
    ends = read_ints(ctx.input(2), "input 2 (ends)");
    if (ctx.has_input(3)) axes = read_ints(ctx.input(3), "input 3 (axes)");
    if (ctx.has_input(4)) steps = read_ints(ctx.input(4), "input 4 (steps)");
  }
  const size_t n = starts.size();
  if (axes.empty()) {
    axes.resize(n);
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n) {
    fail("starts, ends, axes and steps must have the same length, got {}, {}, {}, {}", n, ends.size(), axes.size(),
         steps.size());
  }
  if (r == 0 && n > 0) fail("cannot slice {}: it is a scalar", x.describe());
  const std::vector<int64_t> in_strides = row_major_strides(x.shape());
  SliceView v{x.shape(), 0, in_strides};
  std::vector<bool> seen(size_t(r), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = normalize_axis(axes[i], r, "axes");
    if (seen[size_t(axis)]) fail("axes: axis {} appears twice", axes[i]);
    seen[size_t(axis)] = true;
    int64_t dim = x.shape()[size_t(axis)], step = steps[i];
    if (step == 0) fail("steps: step for axis {} is 0", axes[i]);
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t len = 0;
    if (dim > 0 && step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      len = start > end ? (start - end - step - 1) / -step : 0;
    }
    v.shape[size_t(axis)] = len;
    if (len > 0) v.offset += start * in_strides[size_t(axis)];
    v.strides[size_t(axis)] = in_strides[size_t(axis)] * step;
  }
  return v;
}

TransposePlan transpose_plan(const KernelContext& ctx, const Tensor& x) {
  const int64_t r = x.rank();
  TransposePlan plan;
  plan.perm.resize(size_t(r));
  if (ctx.has_attr("perm")) {
    plan.perm = ctx.attr_ints("perm");
    if (int64_t(plan.perm.size()) != r) {
      fail("attribute 'perm': {} has {} entries for an input of rank {}", shape_str(plan.perm), plan.perm.size(), r);
    }
    std::vector<bool> seen(size_t(r), false);
    for (int64_t& p : plan.perm) {
      p = normalize_axis(p, r, "perm");
      if (seen[size_t(p)]) fail("attribute 'perm': {} is not a permutation", shape_str(ctx.attr_ints("perm")));
      seen[size_t(p)] = true;
    }
  } else {
    for (int64_t k = 0; k < r; ++k) plan.perm[size_t(k)] = r - 1 - k;
  }
  plan.shape.resize(size_t(r));
  for (int64_t k = 0; k < r; ++k) plan.shape[size_t(k)] = x.shape()[size_t(plan.perm[size_t(k)])];
  int64_t last = -1;
  plan.is_view = true;
  for (int64_t p : plan.perm) {
    if (x.shape()[size_t(p)] == 1) continue;
    plan.is_view = plan.is_view && p > last;
    last = p;
  }
  return plan;
}

PadPlan pad_plan(const KernelContext& ctx, const Tensor& x) {
  const size_t r = size_t(x.rank());
  PadPlan p;
  p.mode = ctx.attr_string("mode");
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge" && p.mode != "wrap") {
    fail("attribute 'mode': unknown mode '{}' (constant, reflect, edge or wrap)", p.mode);
  }
  if (ctx.opset() < 11) {
    p.pads = ctx.attr_ints("pads");
  } else {
    std::vector<int64_t> given = read_ints(ctx.input(1), "input 1 (pads)");
    if (ctx.has_input(2)) {
      const Tensor& value = ctx.input(2);
      if (value.dtype() != x.dtype() || value.numel() != 1) {
        fail("input 2 (constant_value): expected one {} element, got {}", dtype_name(x.dtype()), value.describe());
      }
    }
    if (ctx.has_input(3)) {
      std::vector<int64_t> axes = read_ints(ctx.input(3), "input 3 (axes)");
      if (given.size() != 2 * axes.size()) {
        fail("input 1 (pads): {} values for {} axes (expected twice as many)", given.size(), axes.size());
      }
      p.pads.assign(2 * r, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        size_t k = size_t(normalize_axis(axes[i], int64_t(r), "axes"));
        p.pads[k] = given[i];
        p.pads[k + r] = given[i + axes.size()];
      }
    } else {
      p.pads = std::move(given);
    }
  }
  if (p.pads.size() != 2 * r) fail("pads: {} values for an input of rank {} (expected {})", p.pads.size(), r, 2 * r);
  p.shape.resize(r);
  p.inner.resize(r);
  p.src_begin.resize(r);
  p.dst_begin.resize(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t d = x.shape()[k], before = p.pads[k], after = p.pads[k + r];
    p.shape[k] = d + before + after;
    if (p.shape[k] < 0) fail("pads: axis {} of size {} padded by ({}, {}) is negative", k, d, before, after);
    p.src_begin[k] = std::max<int64_t>(0, -before);
    p.dst_begin[k] = std::max<int64_t>(0, before);
    p.inner[k] = std::max<int64_t>(0, d - p.src_begin[k] - std::max<int64_t>(0, -after));
  }
  return p;
}

std::vector<SliceView> split_views(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() == 0) fail("input 0: a scalar cannot be split");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  int64_t dim = x.shape()[size_t(axis)];
  int64_t parts = int64_t(ctx.num_outputs());
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13 && ctx.has_input(1)) {
    sizes = read_ints(ctx.input(1), "input 1 (split)");
  } else if (ctx.opset() < 13 && ctx.has_attr("split")) {
    sizes = ctx.attr_ints("split");
  } else if (ctx.opset() >= 18 && ctx.has_attr("num_outputs")) {
    int64_t n = ctx.attr_int("num_outputs");
    if (n != parts) fail("attribute 'num_outputs' is {} but the node has {} outputs", n, parts);
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  } else {
    if (dim % parts != 0) fail("axis {} of size {} cannot be split into {} equal parts", axis, dim, parts);
    sizes.assign(size_t(parts), dim / parts);
  }
  if (int64_t(sizes.size()) != parts) {
    fail("split: {} sizes {} for {} outputs", sizes.size(), shape_str(sizes), parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split: negative size in {}", shape_str(sizes));
    total += s;
  }
  if (total != dim) fail("split: sizes {} sum to {}, but axis {} has size {}", shape_str(sizes), total, axis, dim);
  const std::vector<int64_t> strides = row_major_strides(x.shape());
  std::vector<SliceView> views;
  int64_t begin = 0;
  for (int64_t i = 0; i < parts; ++i) {
    SliceView v{x.shape(), begin * strides[size_t(axis)], strides};
    v.shape[size_t(axis)] = sizes[size_t(i)];
    views.push_back(std::move(v));
    begin += sizes[size_t(i)];
  }
  return views;
}

}  // namespace ingot::sem
