// Numeric conversions and integer arithmetic kernels share.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

namespace ingot {

// A floating-point result stored as T: integer T saturates (-inf and values below T's range give its
// lowest, +inf and values above its highest, NaN gives 0), where a plain conversion would be
// undefined behaviour (found by fuzz/graph_fuzzer.cpp: Pow of integers, log-sums of empty slices).
template <class T, class A>
T from_float(A x) {
  if constexpr (std::is_integral_v<T> && std::is_floating_point_v<A>) {
    if (std::isnan(x)) return T(0);
    if (x <= A(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (x >= A(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return T(x);
}

// -x with two's-complement wrap-around for integers (no undefined behaviour for the most negative
// value); floats negate as written.
template <class C>
C wrapping_neg(C x) {
  if constexpr (std::is_integral_v<C>) return C(std::make_unsigned_t<C>(0) - std::make_unsigned_t<C>(x));
  else return -x;
}

// x + y, x - y and x * y with two's-complement wrap-around for integers, as numpy and onnxruntime
// compute them: signed overflow, and the int promotion of a 16-bit product (65531 * 65531), would be
// undefined behaviour. Floats compute as written.
template <class C>
using wrap_t = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
template <class C>
C wrapping_add(C x, C y) {
  if constexpr (std::is_integral_v<C>) return C(wrap_t<C>(x) + wrap_t<C>(y));
  else return x + y;
}
template <class C>
C wrapping_sub(C x, C y) {
  if constexpr (std::is_integral_v<C>) return C(wrap_t<C>(x) - wrap_t<C>(y));
  else return x - y;
}
template <class C>
C wrapping_mul(C x, C y) {
  if constexpr (std::is_integral_v<C>) return C(wrap_t<C>(x) * wrap_t<C>(y));
  else return x * y;
}

}  // namespace ingot
