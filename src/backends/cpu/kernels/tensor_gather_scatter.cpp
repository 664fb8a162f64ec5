// Indexing ops: Gather, GatherElements, GatherND, ScatterElements (and its deprecated alias
// Scatter), ScatterND, OneHot, NonZero, Compress. Pure data movement dispatches on element size;
// only scatter reductions and value tests dispatch on the real dtype.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cpu/kernels/tensor_copy.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot::cpu {
namespace {

// Reads int32/int64 indices, maps negative ones from the end of an axis of size `dim`, and rejects
// anything outside [-dim, dim). `axis` only serves the error message.
std::vector<int64_t> read_indices(const Tensor& t, int64_t dim, int64_t axis, std::string_view what) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  dispatch<DType::Int32, DType::Int64>(t.dtype(), [&]<class I>() {
    const I* p = t.data<I>();
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t index = int64_t(p[i]);
      if (index < -dim || index >= dim) {
        fail("{}: index {} is out of range for axis {} of size {}", what, index, axis, dim);
      }
      v[i] = index < 0 ? index + dim : index;
    }
  });
  return v;
}

void check_index_dtype(const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64) {
    fail("{}: expected int32 or int64 indices, got {}", what, t.describe());
  }
}

void gather(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  check_index_dtype(idx, "input 1 (indices)");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  int64_t dim = x.shape()[size_t(axis)];
  std::vector<int64_t> indices = read_indices(idx, dim, axis, "input 1 (indices)");
  Shape out_shape(x.shape().begin(), x.shape().begin() + axis);
  out_shape.insert(out_shape.end(), idx.shape().begin(), idx.shape().end());
  out_shape.insert(out_shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  int64_t outer = shape_numel(x.shape(), 0, size_t(axis)), inner = shape_numel(x.shape(), size_t(axis) + 1, x.shape().size());
  int64_t m = int64_t(indices.size());
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  if (y.numel() == 0) return;
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    parallel_for(outer * m, std::max<int64_t>(1, (1 << 14) / inner), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        int64_t o = row / m, i = row % m;
        std::copy_n(in + (o * dim + indices[size_t(i)]) * inner, inner, out + row * inner);
      }
    });
  });
}
INGOT_CPU_KERNEL(Gather, gather).versions(1);

// Calls f(i, offset) for every position i (row-major) of `shape`, where offset is the position's
// element offset into data with strides `data_strides`, leaving out the `axis` term.
template <class F>
void for_each_position(const Shape& shape, const Strides& data_strides, size_t axis, F&& f) {
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  size_t r = shape.size();
  std::vector<int64_t> index(r, 0);
  int64_t offset = 0;
  for (int64_t linear = 0; linear < n; ++linear) {
    f(linear, offset);
    for (size_t k = r; k-- > 0;) {
      ++index[k];
      if (k != axis) offset += data_strides[k];
      if (index[k] < shape[k]) break;
      if (k != axis) offset -= data_strides[k] * shape[k];
      index[k] = 0;
    }
  }
}

// Checks that `indices` has the data's rank and fits inside it on every axis but `axis`.
void check_element_indices(const Tensor& data, const Tensor& idx, int64_t axis, std::string_view what) {
  check_index_dtype(idx, what);
  bool fits = idx.rank() == data.rank();
  for (int64_t k = 0; fits && k < idx.rank(); ++k)
    fits = k == axis || idx.shape()[size_t(k)] <= data.shape()[size_t(k)];
  if (!fits) fail("{}: shape {} does not fit data of shape {}", what, shape_str(idx.shape()), shape_str(data.shape()));
}

void gather_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  check_element_indices(x, idx, axis, "input 1 (indices)");
  int64_t dim = x.shape()[size_t(axis)];
  std::vector<int64_t> indices = read_indices(idx, dim, axis, "input 1 (indices)");
  Strides strides = contiguous_strides(x.shape());
  int64_t axis_stride = strides[size_t(axis)];
  Tensor& y = ctx.allocate(0, x.dtype(), idx.shape());
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    for_each_position(idx.shape(), strides, size_t(axis),
                      [&](int64_t i, int64_t offset) { out[i] = in[offset + indices[size_t(i)] * axis_stride]; });
  });
}
INGOT_CPU_KERNEL(GatherElements, gather_elements).versions(11);

enum class Reduction { None, Add, Mul, Max, Min };

Reduction parse_reduction(KernelContext& ctx) {
  if (!ctx.def().find_attr("reduction")) return Reduction::None;  // Scatter has no reduction
  const std::string& r = ctx.attr_string("reduction");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  fail("attribute 'reduction': unknown value '{}' (none, add, mul, max or min)", r);
}

template <class T>
void combine(T& dst, const T& v, Reduction r) {
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>) {
    dst = v;  // only reached with Reduction::None
  } else {
    switch (r) {
      case Reduction::None: dst = v; break;
      case Reduction::Add: dst = T(dst + v); break;
      case Reduction::Mul: dst = T(dst * v); break;
      case Reduction::Max: dst = v > dst ? v : dst; break;
      case Reduction::Min: dst = v < dst ? v : dst; break;
    }
  }
}

// Runs body<T>() with the real dtype when combining values, else by element size (any dtype).
template <class F>
void dispatch_scatter(DType dtype, Reduction r, F&& body) {
  if (r == Reduction::None) {
    dispatch_by_size(dtype, body);
  } else {
    dispatch_numeric(dtype, body);
  }
}

Tensor& copy_of_data(KernelContext& ctx, const Tensor& data) {
  Tensor& y = ctx.allocate(0, data.dtype(), data.shape());
  if (data.numel() > 0) copy_strided(data.dtype(), y.raw_data(), {1}, data.raw_data(), {1}, {data.numel()});
  return y;
}

void scatter_elements(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  check_element_indices(x, idx, axis, "input 1 (indices)");
  if (updates.shape() != idx.shape() || updates.dtype() != x.dtype()) {
    fail("input 2 (updates): expected {}{}, got {}", dtype_name(x.dtype()), shape_str(idx.shape()), updates.describe());
  }
  Reduction reduction = parse_reduction(ctx);
  int64_t dim = x.shape()[size_t(axis)];
  std::vector<int64_t> indices = read_indices(idx, dim, axis, "input 1 (indices)");
  Strides strides = contiguous_strides(x.shape());
  int64_t axis_stride = strides[size_t(axis)];
  Tensor& y = copy_of_data(ctx, x);
  dispatch_scatter(x.dtype(), reduction, [&]<class T>() {
    const T* upd = static_cast<const T*>(updates.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    for_each_position(idx.shape(), strides, size_t(axis), [&](int64_t i, int64_t offset) {
      combine(out[offset + indices[size_t(i)] * axis_stride], upd[i], reduction);
    });
  });
}
INGOT_CPU_KERNEL(ScatterElements, scatter_elements).versions(11);
INGOT_CPU_KERNEL(Scatter, scatter_elements).versions(9, 10);

// Element offsets of the slices that the last axis of `idx` addresses in data (after `batch_dims`
// leading axes, whose batch offset is added); one per index tuple, in order.
std::vector<int64_t> nd_offsets(const Tensor& data, const Tensor& idx, int64_t batch_dims, std::string_view what) {
  check_index_dtype(idx, what);
  int64_t q = idx.rank(), r = data.rank();
  if (q < 1 || batch_dims >= q) fail("{}: rank {} is too small for batch_dims {}", what, q, batch_dims);
  int64_t k = idx.shape().back();
  if (batch_dims + k > r) {
    fail("{}: tuples of {} indices (after {} batch axes) exceed data rank {}", what, k, batch_dims, r);
  }
  for (int64_t b = 0; b < batch_dims; ++b) {
    if (idx.shape()[size_t(b)] != data.shape()[size_t(b)]) {
      fail("{}: batch axis {} has size {}, data has {}", what, b, idx.shape()[size_t(b)], data.shape()[size_t(b)]);
    }
  }
  std::vector<int64_t> raw = read_ints(idx, what);
  Strides strides = contiguous_strides(data.shape());
  int64_t tuples = shape_numel(idx.shape(), 0, size_t(q - 1));
  int64_t per_batch = shape_numel(idx.shape(), size_t(batch_dims), size_t(q - 1));
  int64_t batch_size = shape_numel(data.shape(), size_t(batch_dims), size_t(r));
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = (t / per_batch) * batch_size;
    for (int64_t j = 0; j < k; ++j) {
      size_t axis = size_t(batch_dims + j);
      int64_t dim = data.shape()[axis], index = raw[size_t(t * k + j)];
      if (index < -dim || index >= dim)
        fail("{}: index {} is out of range for axis {} of size {}", what, index, axis, dim);
      offset += (index < 0 ? index + dim : index) * strides[axis];
    }
    offsets[size_t(t)] = offset;
  }
  return offsets;
}

void gather_nd(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  int64_t batch_dims = ctx.attr_int("batch_dims");
  if (batch_dims < 0) fail("attribute 'batch_dims': must be >= 0, got {}", batch_dims);
  std::vector<int64_t> offsets = nd_offsets(x, idx, batch_dims, "input 1 (indices)");
  size_t slice_begin = size_t(batch_dims + idx.shape().back());
  Shape out_shape(idx.shape().begin(), idx.shape().end() - 1);
  out_shape.insert(out_shape.end(), x.shape().begin() + int64_t(slice_begin), x.shape().end());
  int64_t slice = shape_numel(x.shape(), slice_begin, x.shape().size());
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  if (y.numel() == 0) return;
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    for (size_t t = 0; t < offsets.size(); ++t) std::copy_n(in + offsets[t], slice, out + int64_t(t) * slice);
  });
}
INGOT_CPU_KERNEL(GatherND, gather_nd).versions(11);

void scatter_nd(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  std::vector<int64_t> offsets = nd_offsets(x, idx, 0, "input 1 (indices)");
  size_t slice_begin = size_t(idx.shape().back());
  Shape expected(idx.shape().begin(), idx.shape().end() - 1);
  expected.insert(expected.end(), x.shape().begin() + int64_t(slice_begin), x.shape().end());
  if (updates.shape() != expected || updates.dtype() != x.dtype()) {
    fail("input 2 (updates): expected {}{}, got {}", dtype_name(x.dtype()), shape_str(expected), updates.describe());
  }
  Reduction reduction = parse_reduction(ctx);
  int64_t slice = shape_numel(x.shape(), slice_begin, x.shape().size());
  Tensor& y = copy_of_data(ctx, x);
  dispatch_scatter(x.dtype(), reduction, [&]<class T>() {
    const T* upd = static_cast<const T*>(updates.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    for (size_t t = 0; t < offsets.size(); ++t) {
      for (int64_t i = 0; i < slice; ++i) combine(out[offsets[t] + i], upd[int64_t(t) * slice + i], reduction);
    }
  });
}
INGOT_CPU_KERNEL(ScatterND, scatter_nd).versions(11);

void one_hot(KernelContext& ctx) {
  const Tensor& idx = ctx.input(0);
  const Tensor& depth_t = ctx.input(1);
  const Tensor& values = ctx.input(2);
  if (depth_t.numel() != 1) fail("input 1 (depth): expected one element, got {}", depth_t.describe());
  if (values.numel() != 2) fail("input 2 (values): expected [off, on], got {}", values.describe());
  int64_t depth = int64_t(depth_t.item_double());
  if (depth <= 0) fail("input 1 (depth): must be positive, got {}", depth);
  int64_t axis = normalize_axis(ctx.attr_int("axis"), idx.rank() + 1, "axis");
  Shape out_shape = idx.shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  int64_t outer = shape_numel(idx.shape(), 0, size_t(axis)), inner = shape_numel(idx.shape(), size_t(axis), idx.shape().size());
  std::vector<int64_t> positions(static_cast<size_t>(idx.numel()));
  dispatch_numeric(idx.dtype(), [&]<class I>() {
    const I* p = idx.data<I>();
    for (size_t i = 0; i < positions.size(); ++i) {
      int64_t v = int64_t(double(p[i]));
      positions[i] = v < 0 ? v + depth : v;  // still out of range: an all-off row
    }
  });
  DType dt = values.dtype();
  Tensor& y = ctx.allocate(0, dt, out_shape);
  fill_elements(dt, y.raw_data(), values.raw_data(), y.numel());
  const void* on = elem_ptr(values.raw_data(), dt, 1);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t j = positions[size_t(o * inner + i)];
      if (j >= 0 && j < depth) fill_elements(dt, elem_ptr(y.raw_data(), dt, (o * depth + j) * inner + i), on, 1);
    }
  }
}
INGOT_CPU_KERNEL(OneHot, one_hot).versions(9);

void non_zero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  dispatch_all(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      // A string counts as non-zero when non-empty (as numpy.nonzero, the ONNX reference).
      bool nonzero;
      if constexpr (std::is_same_v<T, std::string>)
        nonzero = !p[i].empty();
      else
        nonzero = p[i] != T(0.0f);
      if (nonzero) hits.push_back(i);
    }
  });
  int64_t r = x.rank(), n = int64_t(hits.size());
  int64_t* out = ctx.allocate(0, DType::Int64, {r, n}).data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t linear = hits[size_t(j)];
    for (int64_t k = r; k-- > 0;) {
      int64_t d = x.shape()[size_t(k)];
      out[k * n + j] = linear % d;
      linear /= d;
    }
  }
}
INGOT_CPU_KERNEL(NonZero, non_zero).versions(9);

void compress(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::Bool || cond.rank() != 1)
    fail("input 1 (condition): expected 1-D bool, got {}", cond.describe());
  Tensor data = ctx.has_attr("axis") ? x : x.reshape({x.numel()});
  int64_t axis = ctx.has_attr("axis") ? normalize_axis(ctx.attr_int("axis"), x.rank(), "axis") : 0;
  int64_t dim = data.shape()[size_t(axis)];
  const bool* c = cond.data<bool>();
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!c[i]) continue;
    if (i >= dim) fail("input 1 (condition): selects position {} beyond axis {} of size {}", i, axis, dim);
    kept.push_back(i);
  }
  Shape out_shape = data.shape();
  out_shape[size_t(axis)] = int64_t(kept.size());
  int64_t outer = shape_numel(data.shape(), 0, size_t(axis));
  int64_t inner = shape_numel(data.shape(), size_t(axis) + 1, data.shape().size());
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  if (y.numel() == 0) return;
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const T* in = static_cast<const T*>(data.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j : kept) out = std::copy_n(in + (o * dim + j) * inner, inner, out);
    }
  });
}
INGOT_CPU_KERNEL(Compress, compress).versions(9);

}  // namespace
}  // namespace ingot::cpu
