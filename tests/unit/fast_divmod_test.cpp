// sem::FastDivmod (the cold tier's index decompositions on the GPU, ops/semantics/fast_divmod.h)
// against the hardware's division, on its host form (the same arithmetic as on the device).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "ops/semantics/fast_divmod.h"

namespace ingot {
namespace {

void expect_exact(uint32_t d, uint32_t n) {
  const sem::FastDivmod f(d);
  uint32_t q = 0, r = 0;
  f.divmod(n, q, r);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(r, n % d) << n << " % " << d;
}

TEST(FastDivmod, MatchesDivisionOverItsRange) {
  // Small and power-of-two divisors, convolution sizes, and the range's ends.
  const uint32_t divisors[] = {1, 2, 3, 5, 7, 9, 49, 56, 64, 112, 224, 1000, 4608, 65535, 65536, (1u << 30) + 1,
                               0x7fffffffu};
  std::mt19937 rng(3);
  for (uint32_t d : divisors) {
    for (uint32_t n = 0; n < 5000; ++n) expect_exact(d, n);
    for (uint32_t n = 0; n < 5000; ++n) expect_exact(d, 0x7fffffffu - n);
    for (uint32_t k = 1; k < 64 && uint64_t(k) * d < 0x80000000u; ++k) {  // around multiples of d
      expect_exact(d, k * d - 1);
      expect_exact(d, k * d);
    }
    for (int i = 0; i < 100000; ++i) expect_exact(d, rng() & 0x7fffffffu);
  }
  for (int t = 0; t < 20000; ++t) {  // random divisors
    const uint32_t d = (t % 2 ? rng() % 5000 : rng() & 0x7fffffffu) + 1;
    for (int i = 0; i < 50; ++i) expect_exact(std::min(d, 0x7fffffffu), rng() & 0x7fffffffu);
  }
}

TEST(FastDivmod, ADivisorBelowOneDividesByOne) {
  const sem::FastDivmod f(0);
  EXPECT_EQ(f.div(12345), 12345u);
}

}  // namespace
}  // namespace ingot
