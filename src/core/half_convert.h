// Bulk conversions between float and the 16-bit float types, vectorized: F16C instructions for
// float16 (8 values per instruction), integer shifts for bfloat16. Rounding is to nearest even and
// NaN stays NaN, as in Half/BFloat16's scalar constructors; the kernels use these to compute on
// 16-bit tensors in float32 chunks instead of converting element by element.
#pragma once
#include <ingot/dtype.h>

#include <cstdint>

namespace ingot {

void to_float(const Half* src, float* dst, int64_t n);
void to_float(const BFloat16* src, float* dst, int64_t n);
void from_float(const float* src, Half* dst, int64_t n);
void from_float(const float* src, BFloat16* dst, int64_t n);

}  // namespace ingot
