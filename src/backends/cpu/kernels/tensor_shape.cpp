// Shape-only ops (zero-copy views: Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
// Dropout), shape queries, constants and generators (Shape, Size, Constant, ConstantOfShape, Range,
// EyeLike).
#include <algorithm>
#include <cmath>
#include <random>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/kernels/tensor_copy.h"
#include "core/dispatch.h"
#include "core/numeric.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/dropout_args.h"
#include "ops/semantics/philox.h"

namespace ingot::cpu {
namespace {

void reshape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> requested;
  if (ctx.opset() < 5) {
    if (!ctx.has_attr("shape")) fail("attribute 'shape' is required before opset 5");
    requested = ctx.attr_ints("shape");
  } else {
    requested = read_ints(ctx.input(1), "input 1 (shape)");
  }
  bool allow_zero = ctx.opset() >= 14 && ctx.attr_int("allowzero") != 0;
  Shape out(requested.size());
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t v = requested[i];
    if (v == -1) {
      if (inferred >= 0) fail("input 1 (shape): more than one -1 in {}", shape_str(requested));
      inferred = int64_t(i);
      continue;
    }
    if (v < -1) fail("input 1 (shape): invalid dimension {} in {}", v, shape_str(requested));
    if (v == 0 && !allow_zero) {
      if (int64_t(i) >= x.rank()) {
        fail("input 1 (shape): 0 at position {} copies an input dim, but the input {} has rank {}", i,
             shape_str(x.shape()), x.rank());
      }
      v = x.shape()[i];
    }
    out[i] = v;
    known *= v;
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      fail("cannot reshape input of shape {} ({} elements) to {}: the -1 dimension cannot be inferred",
           shape_str(x.shape()), x.numel(), shape_str(requested));
    }
    out[size_t(inferred)] = x.numel() / known;
  }
  if (shape_numel(out) != x.numel()) {
    fail("cannot reshape input of shape {} ({} elements) to {} ({} elements, requested {})", shape_str(x.shape()),
         x.numel(), shape_str(out), shape_numel(out), shape_str(requested));
  }
  ctx.set_output(0, x.reshape(std::move(out)));
}
INGOT_CPU_KERNEL(Reshape, reshape).versions(1).any_device();

void flatten(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t r = x.rank(), axis = ctx.attr_int("axis");
  if (axis < -r || axis > r) fail("attribute 'axis': {} is out of range for rank {}", axis, r);
  if (axis < 0) axis += r;
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= x.shape()[size_t(k)];
  int64_t inner = 1;
  for (int64_t k = axis; k < r; ++k) inner *= x.shape()[size_t(k)];
  ctx.set_output(0, x.reshape({outer, inner}));
}
INGOT_CPU_KERNEL(Flatten, flatten).versions(1).any_device();

// Axes of Squeeze/Unsqueeze: attribute before opset 13, optional input from it.
std::vector<int64_t> axes_argument(KernelContext& ctx) {
  if (ctx.opset() < 13) return ctx.has_attr("axes") ? ctx.attr_ints("axes") : std::vector<int64_t>{};
  return ctx.has_input(1) ? read_ints(ctx.input(1), "input 1 (axes)") : std::vector<int64_t>{};
}

void squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = axes_argument(ctx);
  std::vector<bool> drop(size_t(x.rank()), false);
  if (axes.empty()) {
    for (int64_t k = 0; k < x.rank(); ++k) drop[size_t(k)] = x.shape()[size_t(k)] == 1;
  }
  for (int64_t a : axes) {
    int64_t k = normalize_axis(a, x.rank(), "axes");
    if (x.shape()[size_t(k)] != 1) {
      fail("axes: axis {} of input {} has size {}, not 1", a, shape_str(x.shape()), x.shape()[size_t(k)]);
    }
    drop[size_t(k)] = true;
  }
  Shape out;
  for (int64_t k = 0; k < x.rank(); ++k) {
    if (!drop[size_t(k)]) out.push_back(x.shape()[size_t(k)]);
  }
  ctx.set_output(0, x.reshape(std::move(out)));
}
INGOT_CPU_KERNEL(Squeeze, squeeze).versions(1).any_device();

void unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = axes_argument(ctx);
  if (axes.empty()) fail("axes: at least one axis is required");
  int64_t out_rank = x.rank() + int64_t(axes.size());
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : axes) {
    int64_t k = normalize_axis(a, out_rank, "axes");
    if (inserted[size_t(k)]) fail("axes: axis {} appears twice in {}", a, shape_str(axes));
    inserted[size_t(k)] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t k = 0; k < out_rank; ++k) out.push_back(inserted[size_t(k)] ? 1 : x.shape()[next++]);
  ctx.set_output(0, x.reshape(std::move(out)));
}
INGOT_CPU_KERNEL(Unsqueeze, unsqueeze).versions(1).any_device();

void identity(KernelContext& ctx) { ctx.set_output_value(0, ctx.input_value(0)); }
INGOT_CPU_KERNEL(Identity, identity).versions(1).any_device();

void shape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t r = x.rank();
  int64_t start = ctx.attr_int("start"), end = ctx.has_attr("end") ? ctx.attr_int("end") : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  int64_t n = std::max<int64_t>(0, end - start);
  Tensor& y = ctx.allocate(0, DType::Int64, {n});
  std::copy_n(x.shape().begin() + start, n, y.data<int64_t>());
}
INGOT_CPU_KERNEL(Shape, shape).versions(1).any_device();

void size(KernelContext& ctx) { ctx.allocate(0, DType::Int64, {}).data<int64_t>()[0] = ctx.input(0).numel(); }
INGOT_CPU_KERNEL(Size, size).versions(1).any_device();

void constant_of_shape(KernelContext& ctx) {
  Shape out = read_ints(ctx.input(0), "input 0 (shape)");
  for (int64_t d : out) {
    if (d < 0) fail("input 0 (shape): negative dimension in {}", shape_str(out));
  }
  Tensor value = ctx.has_attr("value") ? ctx.attr_tensor("value") : Tensor::scalar<float>(0.0f);
  if (value.numel() != 1) fail("attribute 'value': expected one element, got {}", value.describe());
  Tensor& y = ctx.allocate(0, value.dtype(), out);
  fill_elements(value.dtype(), y.raw_data(), value.raw_data(), y.numel());
}
INGOT_CPU_KERNEL(ConstantOfShape, constant_of_shape).versions(9);

void constant(KernelContext& ctx) {
  // Constants are immutable, so the attribute's tensor is shared rather than copied.
  if (ctx.has_attr("value")) return ctx.set_output(0, ctx.attr_tensor("value"));
  if (ctx.has_attr("value_float")) return ctx.set_output(0, Tensor::scalar<float>(ctx.attr_float("value_float")));
  if (ctx.has_attr("value_int")) return ctx.set_output(0, Tensor::scalar<int64_t>(ctx.attr_int("value_int")));
  if (ctx.has_attr("value_string")) {
    return ctx.set_output(0, Tensor::scalar<std::string>(ctx.attr_string("value_string")));
  }
  if (ctx.has_attr("value_floats")) {
    const auto& v = ctx.attr_floats("value_floats");
    return ctx.set_output(0, Tensor::from_vector<float>(v, {int64_t(v.size())}));
  }
  if (ctx.has_attr("value_ints")) {
    const auto& v = ctx.attr_ints("value_ints");
    return ctx.set_output(0, Tensor::from_vector<int64_t>(v, {int64_t(v.size())}));
  }
  if (ctx.has_attr("value_strings")) {
    const auto& v = ctx.attr_strings("value_strings");
    return ctx.set_output(0, Tensor::from_vector<std::string>(v, {int64_t(v.size())}));
  }
  if (ctx.has_attr("sparse_value")) fail("attribute 'sparse_value': sparse constants are not supported");
  fail("no value attribute is set (value, value_float(s), value_int(s) or value_string(s))");
}
INGOT_CPU_KERNEL(Constant, constant).versions(1);

void range(KernelContext& ctx) {
  const Tensor& start_t = ctx.input(0);
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || t.dtype() != start_t.dtype()) {
      fail("input {}: expected a scalar of {}, got {}", i, dtype_name(start_t.dtype()), t.describe());
    }
  }
  dispatch<DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64>(start_t.dtype(), [&]<class T>() {
    T start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
    if (delta == T(0)) fail("input 2 (delta): must not be zero");
    const double steps = std::ceil((double(limit) - double(start)) / double(delta));
    if (!std::isfinite(steps) && steps > 0) fail("start {}, limit {} and delta {} make an endless range", start, limit, delta);
    // (NaN: no element; more than 64 bits count: refused by the allocation)
    const int64_t n = std::isnan(steps) ? 0 : std::max<int64_t>(0, from_float<int64_t>(steps));
    T* out = ctx.allocate(0, start_t.dtype(), {n}).template data<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = T(start + T(i) * delta);
  });
}
INGOT_CPU_KERNEL(Range, range).versions(11);

void eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) fail("input 0: expected rank 2, got {}", shape_str(x.shape()));
  DType dtype = ctx.has_attr("dtype") ? DType(ctx.attr_int("dtype")) : x.dtype();
  int64_t rows = x.shape()[0], cols = x.shape()[1], k = ctx.attr_int("k");
  Tensor& y = ctx.allocate(0, dtype, x.shape());
  dispatch_numeric_bool(dtype, [&]<class T>() {
    T* out = y.data<T>();
    std::fill_n(out, rows * cols, T(0.0f));
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k;
      if (j >= 0 && j < cols) out[i * cols + j] = T(1.0f);
    }
  });
}
INGOT_CPU_KERNEL(EyeLike, eye_like).versions(9);

void dropout(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  float ratio = ctx.attr_float("ratio");
  bool training = false;  // before opset 12 Dropout is only ever run for inference here
  if (ctx.opset() >= 12) {
    ratio = ctx.has_input(1) ? float(ctx.input(1).item_double()) : 0.5f;
    training = ctx.has_input(2) && ctx.input(2).item_int() != 0;
  }
  bool want_mask = ctx.num_outputs() > 1;
  DType mask_dtype = ctx.opset() >= 10 ? DType::Bool : x.dtype();
  if (!training || ratio == 0.0f) {
    ctx.set_output(0, x);
    if (want_mask) {
      Tensor& mask = ctx.allocate(1, mask_dtype, x.shape());
      dispatch_numeric_bool(mask_dtype, [&]<class T>() { std::fill_n(mask.data<T>(), mask.numel(), T(1.0f)); });
    }
    return;
  }
  if (!(ratio > 0.0f && ratio < 1.0f)) fail("input 1 (ratio): must be in [0, 1), got {}", ratio);
  // Same stream as the ONNX reference (numpy: seed(s); uniform(0, 1, shape) >= ratio), so a seeded
  // training-mode Dropout reproduces it: MT19937 seeded like np.random.seed, 53-bit doubles from
  // pairs of 32-bit draws as numpy's random_sample does.
  std::mt19937 rng(ctx.has_attr("seed") ? uint32_t(ctx.attr_int("seed")) : std::random_device{}());
  std::vector<bool> kept(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < kept.size(); ++i) {
    double hi = double(rng() >> 5), lo = double(rng() >> 6);
    kept[i] = (hi * 67108864.0 + lo) / 9007199254740992.0 >= double(ratio);
  }
  float scale = 1.0f / (1.0f - ratio);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = kept[size_t(i)] ? T(float(in[i]) * scale) : T(0.0f);
  });
  if (want_mask) {
    bool* mask = ctx.allocate(1, DType::Bool, x.shape()).data<bool>();
    for (size_t i = 0; i < kept.size(); ++i) mask[i] = kept[i];
  }
}
INGOT_CPU_KERNEL(Dropout, dropout).versions(1);

// ai.ingot.Dropout: the Philox mask (ops/semantics/philox.h), the CUDA kernel's bit for bit.
void ingot_dropout(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float ratio = ctx.attr_float("ratio");
  INGOT_CHECK(ratio >= 0.0f && ratio < 1.0f, "attribute ratio: must be in [0, 1), got {}", ratio);
  const sem::DropoutKey key = sem::dropout_key(ctx);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  bool* mask = ctx.allocate(1, DType::Bool, x.shape()).data<bool>();
  const float scale = 1.0f / (1.0f - ratio);
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const bool keep = sem::dropout_keeps(key.seed, key.stream, uint64_t(i), ratio);
        mask[i] = keep;
        out[i] = keep ? T(A(in[i]) * A(scale)) : T(0.0f);
      }
    });
  });
}
INGOT_CPU_KERNEL(Dropout, ingot_dropout).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace
}  // namespace ingot::cpu
