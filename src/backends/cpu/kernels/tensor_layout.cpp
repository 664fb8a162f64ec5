// Layout ops: Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth,
// Trilu, ReverseSequence. All move elements by size (any dtype, strings included) through
// copy_strided; results that are a contiguous block of the input are returned as views.
#include <algorithm>
#include <numeric>

#include "backends/cpu/kernels/tensor_copy.h"
#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot::cpu {
namespace {

// True when a block with these element strides is one dense run (size-1 axes don't matter).
bool is_dense(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 1) continue;
    if (strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

// The block of `x` at element offset `base` with `shape`/`strides`: a view when it is dense,
// else a copy.
Tensor take_block(const Tensor& x, int64_t base, const Shape& shape, const Strides& strides) {
  int64_t n = shape_numel(shape);
  if (n == 0) return Tensor::empty(x.dtype(), shape);
  if (is_dense(shape, strides)) return x.reshape({x.numel()}).slice_rows(base, base + n).reshape(shape);
  Tensor y = Tensor::empty(x.dtype(), shape);
  copy_strided(x.dtype(), y.raw_data(), contiguous_strides(shape), elem_ptr(x.raw_data(), x.dtype(), base), strides,
               shape);
  return y;
}

void transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  sem::TransposePlan plan = sem::transpose_plan(ctx, x);
  if (plan.is_view) return ctx.set_output(0, x.reshape(plan.shape));
  Tensor& y = ctx.allocate(0, x.dtype(), plan.shape);
  transpose_into(x.dtype(), y.raw_data(), x.raw_data(), x.shape(), plan.perm);
}
INGOT_CPU_KERNEL(Transpose, transpose).versions(1);

void concat(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  if (first.rank() == 0) fail("input 0: scalars cannot be concatenated");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), first.rank(), "axis");
  Shape out_shape = first.shape();
  out_shape[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    bool compatible = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int64_t k = 0; compatible && k < t.rank(); ++k) {
      compatible = k == axis || t.shape()[size_t(k)] == first.shape()[size_t(k)];
    }
    if (!compatible) {
      fail("input {}: {} cannot be concatenated with input 0 ({}) along axis {}", i, t.describe(), first.describe(),
           axis);
    }
    out_shape[size_t(axis)] += t.shape()[size_t(axis)];
  }
  if (ctx.num_inputs() == 1) return ctx.set_output(0, first);
  Tensor& y = ctx.allocate(0, first.dtype(), out_shape);
  Strides out_strides = contiguous_strides(out_shape);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    copy_strided(t.dtype(), elem_ptr(y.raw_data(), t.dtype(), offset * out_strides[size_t(axis)]), out_strides,
                 t.raw_data(), contiguous_strides(t.shape()), t.shape());
    offset += t.shape()[size_t(axis)];
  }
}
INGOT_CPU_KERNEL(Concat, concat).versions(4);

void split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<sem::SliceView> views = sem::split_views(ctx, x);
  for (size_t i = 0; i < views.size(); ++i) ctx.set_output(i, take_block(x, views[i].offset, views[i].shape, views[i].strides));
}
INGOT_CPU_KERNEL(Split, split).versions(2);

void slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  sem::SliceView v = sem::slice_view(ctx, x);
  ctx.set_output(0, take_block(x, v.offset, v.shape, v.strides));
}
INGOT_CPU_KERNEL(Slice, slice).versions(1);

void expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape target = read_ints(ctx.input(1), "input 1 (shape)");
  Shape out_shape = broadcast_shapes({x.shape(), target});
  if (out_shape == x.shape()) return ctx.set_output(0, x);
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  copy_strided(x.dtype(), y.raw_data(), contiguous_strides(out_shape), x.raw_data(),
               broadcast_strides(x.shape(), out_shape), out_shape);
}
INGOT_CPU_KERNEL(Expand, expand).versions(8);

void tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> repeats = read_ints(ctx.input(1), "input 1 (repeats)");
  size_t r = size_t(x.rank());
  if (repeats.size() != r) fail("input 1 (repeats): {} entries for an input of rank {}", repeats.size(), r);
  Shape out_shape(r);
  for (size_t k = 0; k < r; ++k) {
    if (repeats[k] < 0) fail("input 1 (repeats): negative repeat {}", repeats[k]);
    out_shape[k] = x.shape()[k] * repeats[k];
  }
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  // Seen as a rank-2r copy: axis pair (repeat k, dim k); the repeat axis reads with stride 0.
  Strides out_strides = contiguous_strides(out_shape), in_strides = contiguous_strides(x.shape());
  Shape shape2;
  Strides dst2, src2;
  for (size_t k = 0; k < r; ++k) {
    shape2.insert(shape2.end(), {repeats[k], x.shape()[k]});
    dst2.insert(dst2.end(), {x.shape()[k] * out_strides[k], out_strides[k]});
    src2.insert(src2.end(), {0, in_strides[k]});
  }
  copy_strided(x.dtype(), y.raw_data(), dst2, x.raw_data(), src2, shape2);
}
INGOT_CPU_KERNEL(Tile, tile).versions(6);

// Index into an interior of length n for border position `rel` (relative to the interior start).
int64_t border_source(const std::string& mode, int64_t rel, int64_t n) {
  if (mode == "edge") return std::clamp<int64_t>(rel, 0, n - 1);
  if (mode == "wrap") return ((rel % n) + n) % n;
  if (n == 1) return 0;  // reflect
  int64_t period = 2 * (n - 1);
  int64_t m = ((rel % period) + period) % period;
  return m < n ? m : period - m;
}

void pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t r = size_t(x.rank());
  const sem::PadPlan plan = sem::pad_plan(ctx, x);
  const std::string& mode = plan.mode;
  const Shape& out_shape = plan.shape;
  const Shape& inner = plan.inner;
  const std::vector<int64_t>&src_begin = plan.src_begin, &dst_begin = plan.dst_begin;
  Tensor value;
  if (ctx.opset() >= 11 && ctx.has_input(2)) {
    value = ctx.input(2);
  } else if (x.dtype() == DType::String) {
    value = Tensor::scalar<std::string>("");
  } else if (ctx.opset() < 11) {
    value = Tensor::scalar<float>(ctx.attr_float("value")).cast(x.dtype());
  } else {
    value = Tensor::zeros(x.dtype(), {});
  }
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  if (y.numel() == 0) return;
  DType dt = x.dtype();
  Strides out_strides = contiguous_strides(out_shape), in_strides = contiguous_strides(x.shape());
  auto offset = [](const std::vector<int64_t>& index, const Strides& strides) {
    int64_t o = 0;
    for (size_t k = 0; k < index.size(); ++k) o += index[k] * strides[k];
    return o;
  };
  copy_strided(dt, elem_ptr(y.raw_data(), dt, offset(dst_begin, out_strides)), out_strides,
               elem_ptr(x.raw_data(), dt, offset(src_begin, in_strides)), in_strides, inner);

  if (mode == "constant") {
    // The complement of the interior box as disjoint boxes: for axis d, its two borders, with
    // axes before d restricted to the interior and axes after d at full range.
    const Strides broadcast(r, 0);
    for (size_t d = 0; d < r; ++d) {
      std::vector<int64_t> begin(r, 0);
      Shape box = out_shape;
      for (size_t k = 0; k < d; ++k) {
        begin[k] = dst_begin[k];
        box[k] = inner[k];
      }
      for (auto [from, to] : {std::pair{int64_t(0), dst_begin[d]}, std::pair{dst_begin[d] + inner[d], out_shape[d]}}) {
        begin[d] = from;
        box[d] = to - from;
        if (shape_numel(box) == 0) continue;
        copy_strided(dt, elem_ptr(y.raw_data(), dt, offset(begin, out_strides)), out_strides, value.raw_data(),
                     broadcast, box);
      }
    }
    return;
  }
  // reflect/edge/wrap: borders copy from the output's interior, axis by axis, so that corners see
  // the borders already filled along earlier axes.
  for (size_t d = 0; d < r; ++d) {
    if (out_shape[d] == inner[d]) continue;
    if (inner[d] == 0) fail("pads: mode '{}' cannot pad axis {} of size 0", mode, d);
    std::vector<int64_t> begin(r, 0);
    Shape box = out_shape;
    for (size_t k = d + 1; k < r; ++k) {
      begin[k] = dst_begin[k];
      box[k] = inner[k];
    }
    box[d] = 1;
    for (int64_t j = 0; j < out_shape[d]; ++j) {
      int64_t rel = j - dst_begin[d];
      if (rel >= 0 && rel < inner[d]) continue;
      std::vector<int64_t> from = begin;
      from[d] = dst_begin[d] + border_source(mode, rel, inner[d]);
      begin[d] = j;
      copy_strided(dt, elem_ptr(y.raw_data(), dt, offset(begin, out_strides)), out_strides,
                   elem_ptr(y.raw_data(), dt, offset(from, out_strides)), out_strides, box);
    }
  }
}
INGOT_CPU_KERNEL(Pad, pad).versions(2);

void check_nchw(const Tensor& x, int64_t blocksize) {
  if (x.rank() != 4) fail("input 0: expected rank 4 (NCHW), got {}", shape_str(x.shape()));
  if (blocksize <= 0) fail("attribute 'blocksize': must be positive, got {}", blocksize);
}

void depth_to_space(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t b = ctx.attr_int("blocksize");
  check_nchw(x, b);
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  if (c % (b * b) != 0) fail("input 0: channels {} are not divisible by blocksize^2 = {}", c, b * b);
  int64_t oc = c / (b * b);
  const std::string& mode = ctx.attr_string("mode");
  Shape blocks;
  std::vector<int64_t> perm;
  if (mode == "DCR") {
    blocks = {n, b, b, oc, h, w};
    perm = {0, 3, 4, 1, 5, 2};
  } else if (mode == "CRD") {
    blocks = {n, oc, b, b, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    fail("attribute 'mode': expected DCR or CRD, got '{}'", mode);
  }
  Tensor& y = ctx.allocate(0, x.dtype(), {n, oc, h * b, w * b});
  transpose_into(x.dtype(), y.raw_data(), x.raw_data(), blocks, perm);
}
INGOT_CPU_KERNEL(DepthToSpace, depth_to_space).versions(1);

void space_to_depth(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t b = ctx.attr_int("blocksize");
  check_nchw(x, b);
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  if (h % b != 0 || w % b != 0) fail("input 0: spatial size {}x{} is not divisible by blocksize {}", h, w, b);
  Tensor& y = ctx.allocate(0, x.dtype(), {n, c * b * b, h / b, w / b});
  transpose_into(x.dtype(), y.raw_data(), x.raw_data(), {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4});
}
INGOT_CPU_KERNEL(SpaceToDepth, space_to_depth).versions(1);

void trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0: expected rank >= 2, got {}", shape_str(x.shape()));
  int64_t k = ctx.has_input(1) ? read_scalar_int(ctx.input(1), "input 1 (k)") : 0;
  bool upper = ctx.attr_int("upper") != 0;
  int64_t rows = x.shape()[size_t(x.rank() - 2)], cols = x.shape()[size_t(x.rank() - 1)];
  int64_t all_rows = rows == 0 || cols == 0 ? 0 : x.numel() / cols;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    parallel_for(all_rows, std::max<int64_t>(1, (1 << 14) / cols), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        int64_t i = row % rows;
        // Kept columns: [i + k, cols) for upper, [0, i + k] for lower.
        int64_t keep_begin = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
        int64_t keep_end = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
        const T* src = in + row * cols;
        T* dst = out + row * cols;
        std::fill(dst, dst + keep_begin, T{});
        std::copy(src + keep_begin, src + keep_end, dst + keep_begin);
        std::fill(dst + keep_end, dst + cols, T{});
      }
    });
  });
}
INGOT_CPU_KERNEL(Trilu, trilu).versions(14);

void reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0: expected rank >= 2, got {}", shape_str(x.shape()));
  int64_t batch_axis = ctx.attr_int("batch_axis"), time_axis = ctx.attr_int("time_axis");
  if (batch_axis < 0 || batch_axis > 1 || time_axis < 0 || time_axis > 1 || batch_axis == time_axis) {
    fail("attributes batch_axis ({}) and time_axis ({}) must be 0 and 1 in some order", batch_axis, time_axis);
  }
  std::vector<int64_t> lens = read_ints(ctx.input(1), "input 1 (sequence_lens)");
  int64_t batch = x.shape()[size_t(batch_axis)], steps = x.shape()[size_t(time_axis)];
  if (int64_t(lens.size()) != batch) fail("input 1 (sequence_lens): {} entries for batch size {}", lens.size(), batch);
  for (int64_t len : lens) {
    if (len < 0 || len > steps) fail("input 1 (sequence_lens): length {} is outside [0, {}]", len, steps);
  }
  Strides strides = contiguous_strides(x.shape());
  int64_t block = strides[1], batch_stride = strides[size_t(batch_axis)], time_stride = strides[size_t(time_axis)];
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  DType dt = x.dtype();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < steps; ++t) {
      int64_t from = t < lens[size_t(b)] ? lens[size_t(b)] - 1 - t : t;
      copy_strided(dt, elem_ptr(y.raw_data(), dt, b * batch_stride + t * time_stride), {1},
                   elem_ptr(x.raw_data(), dt, b * batch_stride + from * time_stride), {1}, {block});
    }
  }
}
INGOT_CPU_KERNEL(ReverseSequence, reverse_sequence).versions(10);

}  // namespace
}  // namespace ingot::cpu
