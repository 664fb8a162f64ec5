// Copying blocks of dense tensors along one axis: concatenating parts and taking a range. Shared
// by the control-flow kernels (Loop/Scan outputs and scan slices) and the sequence kernels
// (ConcatFromSequence, SplitToSequence). Elements move by size (strings by assignment), so no
// per-dtype arithmetic is instantiated.
#pragma once
#include <ingot/tensor.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "core/dispatch.h"

namespace ingot::cpu {

inline int64_t dims_product(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

// Copies `rows` blocks of `block` elements; block r goes from src[src_start + r*src_stride] to
// dst[dst_start + r*dst_stride] (offsets in elements).
inline void copy_blocks(const Tensor& dst, int64_t dst_start, int64_t dst_stride, const Tensor& src, int64_t src_start,
                        int64_t src_stride, int64_t rows, int64_t block) {
  if (rows == 0 || block == 0) return;
  dispatch_by_size(src.dtype(), [&]<class T>() {
    T* d = static_cast<T*>(dst.raw_data()) + dst_start;
    const T* s = static_cast<const T*>(src.raw_data()) + src_start;
    for (int64_t r = 0; r < rows; ++r) std::copy_n(s + r * src_stride, block, d + r * dst_stride);
  });
}

// Concatenates non-empty `parts` along `axis` (normalized). They must share dtype and rank and agree
// on every other dimension; `what` names the parts in errors ("sequence element").
inline Tensor concat_along_axis(const std::vector<Tensor>& parts, int64_t axis, std::string_view what) {
  const Tensor& first = parts.at(0);
  Shape out_shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    bool same_dims = p.rank() == first.rank();
    for (int64_t a = 0; same_dims && a < p.rank(); ++a) same_dims = a == axis || p.shape()[a] == first.shape()[a];
    if (p.dtype() != first.dtype() || !same_dims) {
      fail("{} {} is {}, incompatible with {} {} ({}) for concatenation along axis {}", what, i, p.describe(), what, 0,
           first.describe(), axis);
    }
    total += p.shape()[size_t(axis)];
  }
  out_shape[size_t(axis)] = total;
  Tensor out = Tensor::empty(first.dtype(), out_shape);
  int64_t outer = dims_product(out_shape, 0, size_t(axis));
  int64_t inner = dims_product(out_shape, size_t(axis) + 1, out_shape.size());
  int64_t offset = 0;
  for (const Tensor& p : parts) {
    int64_t block = p.shape()[size_t(axis)] * inner;
    copy_blocks(out, offset, total * inner, p, 0, block, outer, block);
    offset += block;
  }
  return out;
}

// Stacks same-shaped `parts` along a new axis `axis` (normalized against rank + 1).
inline Tensor stack_along_axis(const std::vector<Tensor>& parts, int64_t axis, std::string_view what) {
  std::vector<Tensor> expanded;
  expanded.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].shape() != parts[0].shape()) {
      fail("{} {} has shape {} but {} 0 has {}; stacked values must agree", what, i, shape_str(parts[i].shape()), what,
           shape_str(parts[0].shape()));
    }
    Shape s = parts[i].shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(parts[i].reshape(std::move(s)));
  }
  return concat_along_axis(expanded, axis, what);
}

// Elements [begin, end) of `t` along `axis` (normalized), keeping the axis. A view when nothing
// precedes the axis, a copy otherwise.
inline Tensor slice_along_axis(const Tensor& t, int64_t axis, int64_t begin, int64_t end) {
  const Shape& shape = t.shape();
  Shape out_shape = shape;
  out_shape[size_t(axis)] = end - begin;
  int64_t outer = dims_product(shape, 0, size_t(axis));
  int64_t inner = dims_product(shape, size_t(axis) + 1, shape.size());
  if (outer == 1) return t.reshape({shape[size_t(axis)], inner}).slice_rows(begin, end).reshape(out_shape);
  Tensor out = Tensor::empty(t.dtype(), out_shape);
  int64_t block = (end - begin) * inner;
  copy_blocks(out, 0, block, t, begin * inner, shape[size_t(axis)] * inner, outer, block);
  return out;
}

}  // namespace ingot::cpu
