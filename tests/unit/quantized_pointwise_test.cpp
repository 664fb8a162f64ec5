// The quantized pointwise ops (ai.ingot QuantizedReduceMean / QuantizedMul, what fuse-qdq-pointwise
// folds DQ -> ReduceMean | GlobalAveragePool | Mul -> Q into) against a float64 reference of the
// dequantize -> op -> quantize math written here: the sums and products are exact in int32, so an
// output may differ from the reference only by one step, and only where the exact value lies
// within float32 rounding of a half step.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/broadcast.h"
#include "test_util.h"

namespace ingot {
namespace {

constexpr const char* kIngot = "ai.ingot";

template <class T>
Tensor random_q(std::mt19937& gen, const Shape& shape) {
  std::uniform_int_distribution<int> dist(std::is_signed_v<T> ? -128 : 0, std::is_signed_v<T> ? 127 : 255);
  std::vector<T> v(size_t(shape_numel(shape)));
  for (T& x : v) x = T(dist(gen));
  return Tensor::from_vector(v, shape);
}
Tensor scalar_f(float v) { return Tensor::from_vector(std::vector<float>{v}, {}); }
template <class T>
Tensor scalar_q(int v) {
  return Tensor::from_vector(std::vector<T>{T(v)}, {});
}
double at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::UInt8 ? double(t.data<uint8_t>()[i]) : double(t.data<int8_t>()[i]);
}

// y against the quantization of the exact values `real` (already divided by the output scale).
void expect_requantized(const Tensor& y, const std::vector<double>& real, int y_zp, const std::string& what) {
  const double lo = y.dtype() == DType::UInt8 ? 0 : -128, hi = y.dtype() == DType::UInt8 ? 255 : 127;
  ASSERT_EQ(y.numel(), int64_t(real.size())) << what;
  int off_by_one = 0;
  for (size_t i = 0; i < real.size(); ++i) {
    const double want = std::clamp(std::nearbyint(real[i]) + y_zp, lo, hi);
    const double got = at(y, int64_t(i));
    if (got == want) continue;
    const double tie_distance = std::abs(std::abs(real[i] - std::floor(real[i])) - 0.5);
    ASSERT_LE(std::abs(got - want), 1.0) << what << " at " << i << ": " << got << " vs " << want;
    ASSERT_LT(tie_distance, 1e-4 * std::max(1.0, std::abs(real[i]))) << what << " at " << i << ": not a tie";
    ++off_by_one;
  }
  EXPECT_LE(off_by_one, int(real.size() / 100 + 1)) << what;
}

template <class T>
void check_mean(const Shape& shape, const std::vector<int64_t>& axes, bool keepdims, uint32_t seed) {
  std::mt19937 gen(seed);
  const Tensor x = random_q<T>(gen, shape);
  const float x_scale = 0.05f, y_scale = 0.013f;
  const int x_zp = std::is_signed_v<T> ? -3 : 121, y_zp = std::is_signed_v<T> ? 5 : 110;
  Attributes attrs{{"keepdims", Attribute(int64_t(keepdims))}};
  if (!axes.empty()) attrs["axes"] = Attribute(axes);
  const Tensor y = ops::call("QuantizedReduceMean", {x, scalar_f(x_scale), scalar_q<T>(x_zp), scalar_f(y_scale), scalar_q<T>(y_zp)},
                             attrs, 1, kIngot)[0];
  // The reference: each output element's mean of the dequantized inputs it covers.
  const size_t rank = shape.size();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[size_t(a < 0 ? a + int64_t(rank) : a)] = true;
  Shape kept = shape, out_shape;
  for (size_t d = 0; d < rank; ++d) {
    if (reduced[d]) kept[d] = 1;
    if (!reduced[d] || keepdims) out_shape.push_back(kept[d]);
  }
  EXPECT_EQ(y.shape(), out_shape);
  std::vector<double> sum(size_t(shape_numel(kept)), 0.0);
  const std::vector<int64_t> strides = broadcast_strides(kept, shape);
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) count *= reduced[d] ? shape[d] : 1;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d) o += idx[d] * strides[d];
    sum[size_t(o)] += (at(x, i) - x_zp) * double(x_scale);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  for (double& s : sum) s = s / double(count) / double(y_scale);
  expect_requantized(y, sum, y_zp, "mean over " + shape_str(shape));
}

// Channels-last and channels-first spatial means (a squeeze-excitation block's, in 16-, 8- and
// 1-channel vectors on CUDA), all axes, non-adjacent axes, without keepdims, both signs.
TEST(QuantizedReduceMean, MatchesFloat64Reference) {
  check_mean<uint8_t>({2, 7, 5, 32}, {1, 2}, true, 1);
  check_mean<int8_t>({2, 6, 6, 72}, {1, 2}, true, 2);
  check_mean<int8_t>({3, 4, 5, 3}, {1, 2}, false, 3);
  check_mean<uint8_t>({2, 3, 9, 11}, {2, 3}, true, 4);
  check_mean<int8_t>({2, 3, 9, 11}, {-1, -2}, true, 5);
  check_mean<uint8_t>({4, 5, 6}, {0, 2}, true, 6);
  check_mean<int8_t>({4, 5, 6}, {}, false, 7);
  check_mean<uint8_t>({1, 1, 300, 40}, {2}, true, 8);
}

template <class T>
void check_mul(const Shape& a_shape, const Shape& b_shape, uint32_t seed) {
  std::mt19937 gen(seed);
  const Tensor a = random_q<T>(gen, a_shape), b = random_q<T>(gen, b_shape);
  const float a_scale = 0.04f, b_scale = 0.0079f, c_scale = 0.021f;
  const int a_zp = std::is_signed_v<T> ? 2 : 128, b_zp = std::is_signed_v<T> ? 0 : 3, c_zp = std::is_signed_v<T> ? -7 : 99;
  const Tensor c = ops::call("QuantizedMul",
                             {a, scalar_f(a_scale), scalar_q<T>(a_zp), b, scalar_f(b_scale), scalar_q<T>(b_zp),
                              scalar_f(c_scale), scalar_q<T>(c_zp)},
                             {}, 1, kIngot)[0];
  const Shape out = broadcast_shapes({a_shape, b_shape});
  ASSERT_EQ(c.shape(), out);
  BroadcastIterator it(out, {a_shape, b_shape});
  std::vector<double> real;
  int64_t off[2];
  for (int64_t row = 0; row < it.outer(); ++row) {
    it.offsets(row, off);
    for (int64_t i = 0; i < it.inner(); ++i) {
      const double va = (at(a, off[0] + i * it.inner_stride(0)) - a_zp) * double(a_scale);
      const double vb = (at(b, off[1] + i * it.inner_stride(1)) - b_zp) * double(b_scale);
      real.push_back(va * vb / double(c_scale));
    }
  }
  expect_requantized(c, real, c_zp, "product " + shape_str(a_shape) + " x " + shape_str(b_shape));
}

// The squeeze-excitation gate [N, 1, 1, C] over [N, H, W, C] either way round, a per-channel row,
// a scalar, equal shapes and a two-way broadcast.
TEST(QuantizedMul, MatchesFloat64ReferenceWithBroadcasting) {
  check_mul<uint8_t>({2, 5, 3, 32}, {2, 1, 1, 32}, 1);
  check_mul<int8_t>({2, 1, 1, 24}, {2, 4, 4, 24}, 2);
  check_mul<int8_t>({3, 7, 16}, {16}, 3);
  check_mul<uint8_t>({5, 9}, {}, 4);
  check_mul<uint8_t>({4, 33}, {4, 33}, 5);
  check_mul<int8_t>({2, 1, 4, 1}, {1, 3, 1, 5}, 6);
}

TEST(QuantizedPointwise, BadInputsNameTheInput) {
  std::mt19937 gen(1);
  const Tensor a = random_q<uint8_t>(gen, {2, 3}), b = random_q<int8_t>(gen, {2, 3});
  auto mul = [&](const Tensor& x, const Tensor& y, float scale) {
    return testing::error_of([&] {
      ops::call("QuantizedMul",
                {x, scalar_f(0.1f), scalar_q<uint8_t>(0), y, scalar_f(scale), scalar_q<uint8_t>(0), scalar_f(0.1f),
                 scalar_q<uint8_t>(0)},
                {}, 1, kIngot);
    });
  };
  EXPECT_NE(mul(a, b, 0.1f).find("input 3 (B)"), std::string::npos);
  EXPECT_NE(mul(a, a, 0.0f).find("B_scale"), std::string::npos);
  EXPECT_NE(mul(a.cast(DType::Float32), a, 0.1f).find("input 0 (A)"), std::string::npos);
  EXPECT_NE(mul(a, random_q<uint8_t>(gen, {4}), 0.1f).find("broadcast"), std::string::npos);
  auto mean = [&](const Tensor& x, const Tensor& zp) {
    return testing::error_of([&] {
      ops::call("QuantizedReduceMean", {x, scalar_f(0.1f), zp, scalar_f(0.1f), zp}, {{"axes", Attribute(std::vector<int64_t>{1})}}, 1,
                kIngot);
    });
  };
  EXPECT_NE(mean(a, scalar_q<int8_t>(0)).find("X_zero_point"), std::string::npos);
  EXPECT_NE(mean(random_q<uint8_t>(gen, {2, 0}), scalar_q<uint8_t>(0)).find("empty"), std::string::npos);
}

}  // namespace
}  // namespace ingot
