// The bulk float <-> float16/bfloat16 conversions (F16C, bit shifts) agree with the scalar ones
// bit for bit, over every 16-bit pattern and over float32 values around every rounding boundary.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half_convert.h"

namespace ingot {
namespace {

TEST(HalfConvert, EveryHalfPatternToFloat) {
  std::vector<Half> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = Half::from_bits(uint16_t(i));
  std::vector<float> f(h.size());
  to_float(h.data(), f.data(), int64_t(h.size()));
  for (uint32_t i = 0; i < 65536; ++i) {
    float want = float(h[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f[i])) << i;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(want)) << i;
    }
  }
}

TEST(HalfConvert, FloatToHalfAndBFloat16RoundLikeTheScalarConversions) {
  std::vector<float> f;
  // Every half/bfloat16 value, the midpoints between neighbours (ties to even), and random values
  // including denormals, overflow to infinity, infinities and NaN.
  for (uint32_t i = 0; i < 65536; ++i) {
    float v = float(Half::from_bits(uint16_t(i)));
    float next = float(Half::from_bits(uint16_t(i + 1)));
    f.push_back(v);
    if (std::isfinite(v) && std::isfinite(next)) f.push_back(v + (next - v) / 2);
    f.push_back(std::bit_cast<float>(i << 16));
    f.push_back(std::bit_cast<float>((i << 16) | 0x8000u));  // a bfloat16 tie
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) f.push_back(std::bit_cast<float>(uint32_t(rng())));
  f.push_back(70000.0f);
  f.push_back(-1e30f);
  std::vector<Half> h(f.size());
  std::vector<BFloat16> b(f.size());
  from_float(f.data(), h.data(), int64_t(f.size()));
  from_float(f.data(), b.data(), int64_t(f.size()));
  for (size_t i = 0; i < f.size(); ++i) {
    if (std::isnan(f[i])) {
      EXPECT_TRUE(std::isnan(float(h[i]))) << f[i];
      EXPECT_TRUE(std::isnan(float(b[i]))) << f[i];
      continue;
    }
    ASSERT_EQ(h[i].bits, Half(f[i]).bits) << "float16 of " << f[i];
    ASSERT_EQ(b[i].bits, BFloat16(f[i]).bits) << "bfloat16 of " << f[i];
  }
}

}  // namespace
}  // namespace ingot
