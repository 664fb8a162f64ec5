// Division by a divisor fixed for a whole launch as a multiply-high, an add and a shift
// (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994, fig. 4.1;
// CUTLASS's FastDivmod is the same idea). An index decomposition in a kernel's inner loop (output
// pixel -> image, row, column; K -> channel, tap) costs ~4 instructions per division instead of the
// ~20 of a 32-bit `/` or the ~70 of a 64-bit one. Exact for 0 <= n < 2^31 and 1 <= d < 2^31.
#pragma once
#include <cstdint>

#include "ops/semantics/host_device.h"

namespace ingot::sem {

struct FastDivmod {
  uint32_t d = 1;      // the divisor
  uint32_t mul = 1;    // floor(2^32 (2^shift - d) / d) + 1: with the added n, floor(2^(32+shift) / d) + 1
  uint32_t shift = 0;  // ceil(log2 d)

  FastDivmod() = default;
  explicit FastDivmod(int64_t divisor) : d(uint32_t(divisor < 1 ? 1 : divisor)) {
    while ((uint64_t(1) << shift) < d) ++shift;
    mul = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }

  INGOT_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, mul);
#else
    const uint32_t hi = uint32_t((uint64_t(n) * mul) >> 32);
#endif
    return (hi + n) >> shift;  // no overflow: hi <= n < 2^31
  }
  // n / d and n % d.
  INGOT_HD void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
};

}  // namespace ingot::sem
