// Softmax of one contiguous row, shared by the Softmax/LogSoftmax kernels and Attention. Written
// to vectorize: the maximum as a select (NaN is ignored, as by a `v > best` loop), exp through
// cpu::exp_of (fast_expf for float: glibc's scalar expf made PP-OCR rec's 265 k-element class
// softmax take 1.1 ms), the sum over eight partial sums.
#pragma once
#include <cstdint>
#include <limits>

#include "backends/cpu/kernels/elementwise.h"

namespace ingot::cpu {

template <class T>
T row_max(const T* p, int64_t n) {
  T best = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) best = p[i] > best ? p[i] : best;
  return best;
}

template <class T>
T row_sum(const T* p, int64_t n) {
  T part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) part[k] += p[i + k];
  }
  T total = 0;
  for (; i < n; ++i) total += p[i];
  for (int k = 0; k < 8; ++k) total += part[k];
  return total;
}

// dst = exp(src - shift) (dst may be src); returns the sum of dst.
template <class T>
T exp_shifted(const T* src, T* dst, int64_t n, T shift) {
  for (int64_t i = 0; i < n; ++i) dst[i] = exp_of<T>(src[i] - shift);
  return row_sum(dst, n);
}

// dst = softmax(src) along the row (dst may be src).
template <class T>
void softmax_row(const T* src, T* dst, int64_t n) {
  const T inv = T(1) / exp_shifted(src, dst, n, row_max(src, n));
  for (int64_t i = 0; i < n; ++i) dst[i] *= inv;
}

}  // namespace ingot::cpu
