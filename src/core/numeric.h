// Numeric conversions kernels share.
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

}  // namespace ingot
