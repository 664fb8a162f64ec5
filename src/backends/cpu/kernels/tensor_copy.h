// Data-movement building blocks shared by the tensor-op kernels (tensor_*.cpp). Everything here is
// dtype-erased: elements are moved by size (dispatch_by_size), so one implementation serves every
// dtype, strings included. Strides and offsets count elements, not bytes.
#pragma once
#include <ingot/tensor.h>

#include <cstdint>
#include <vector>

#include "ops/semantics/layout_args.h"

namespace ingot::cpu {

using Strides = std::vector<int64_t>;

// Row-major strides of a dense tensor of this shape.
Strides contiguous_strides(const Shape& shape);

// dst[sum(i_k * dst_strides[k])] = src[sum(i_k * src_strides[k])] for every index i of `shape`.
// Source strides may be zero (broadcast) or negative (reversed slices); destination ranges must not
// overlap the source. Adjacent axes are merged, contiguous runs are moved with memcpy, and when the
// source's unit-stride axis is not the destination's (a transpose) the copy walks 2-D tiles so both
// sides stay in cache. Runs on the CPU thread pool.
void copy_strided(DType dtype, void* dst, const Strides& dst_strides, const void* src, const Strides& src_strides,
                  const Shape& shape);

// Fills `count` elements at dst with the single element at `value` (same dtype).
void fill_elements(DType dtype, void* dst, const void* value, int64_t count);

// Writes the permutation of a dense `src` of shape `shape`; dst is dense with shape shape[perm].
void transpose_into(DType dtype, void* dst, const void* src, const Shape& shape, const std::vector<int64_t>& perm);

// Element pointer helpers (offsets in elements of `dtype`).
inline void* elem_ptr(void* base, DType dtype, int64_t offset) {
  return static_cast<char*>(base) + offset * int64_t(dtype_size(dtype));
}
inline const void* elem_ptr(const void* base, DType dtype, int64_t offset) {
  return static_cast<const char*>(base) + offset * int64_t(dtype_size(dtype));
}

// Integer host inputs as int64 values (src/ops/semantics/layout_args.h).
using sem::read_ints;
using sem::read_scalar_int;

}  // namespace ingot::cpu
