// Quantization and detection kernels against float64 references and hand-computed values, plus
// the error cases the ONNX node suite does not cover.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ingot {
namespace {

// Round half to even in double, independent of the kernel's float path.
double round_half_even(double v) {
  double f = std::floor(v);
  double diff = v - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1;
}

TEST(QuantizeLinear, PerAxisRoundTripMatchesFloat64Reference) {
  const Shape shape{2, 3, 4};
  const std::vector<float> scales{0.5f, 0.1f, 0.02f};
  const std::vector<int8_t> zps{-3, 0, 5};
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> x(24);
  for (float& v : x) v = dist(gen);
  Tensor xt = Tensor::from_vector(x, shape);
  Tensor st = Tensor::from_vector(scales, {3});
  Tensor zt = Tensor::from_vector(zps, {3});
  Attributes attrs{{"axis", Attribute(int64_t(1))}};
  Tensor q = ops::call("QuantizeLinear", {xt, st, zt}, attrs)[0];
  ASSERT_EQ(q.dtype(), DType::Int8);
  ASSERT_EQ(q.shape(), shape);
  Tensor d = ops::call("DequantizeLinear", {q, st, zt}, attrs)[0];
  ASSERT_EQ(d.dtype(), DType::Float32);
  const int8_t* qp = q.data<int8_t>();
  const float* dp = d.data<float>();
  for (int64_t i = 0; i < 24; ++i) {
    const size_t c = size_t((i / 4) % 3);
    const double s = scales[c], zp = zps[c];
    const double expected_q = std::clamp(round_half_even(double(x[size_t(i)]) / s) + zp, -128.0, 127.0);
    EXPECT_EQ(qp[i], int8_t(expected_q)) << "element " << i;
    EXPECT_NEAR(dp[i], (expected_q - zp) * s, 1e-6) << "element " << i;
    // Unsaturated values come back within half a quantization step.
    if (expected_q > -128 && expected_q < 127) {
      EXPECT_LE(std::abs(dp[i] - x[size_t(i)]), s / 2 + 1e-6);
    }
  }
}

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 300.0f, -300.0f}, {8});
  Tensor scale = Tensor::scalar<float>(1.0f);
  Tensor q8 = ops::call("QuantizeLinear", {x, scale, Tensor::scalar<int8_t>(0)})[0];
  EXPECT_EQ(q8.to_vector<int8_t>(), (std::vector<int8_t>{0, 2, 2, 0, -2, -2, 127, -128}));
  // Without a zero point the output is uint8 with zero point 0: negatives clamp to 0.
  Tensor qu = ops::call("QuantizeLinear", {x, scale})[0];
  EXPECT_EQ(qu.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 2, 2, 0, 0, 0, 255, 0}));
  // A zero point shifts after rounding: 2.5 -> 2, + 128 = 130.
  Tensor qz = ops::call("QuantizeLinear", {x, scale, Tensor::scalar<uint8_t>(128)})[0];
  EXPECT_EQ(qz.to_vector<uint8_t>(), (std::vector<uint8_t>{128, 130, 130, 128, 126, 126, 255, 0}));
}

TEST(QuantizeLinear, BadAxisOrScaleLengthIsAnError) {
  Tensor x = Tensor::zeros(DType::Float32, {2, 3});
  Tensor scale = Tensor::from_vector<float>({1.0f, 2.0f, 3.0f}, {3});
  Tensor zp = Tensor::from_vector<uint8_t>({0, 0, 0}, {3});
  EXPECT_THROW(ops::call("QuantizeLinear", {x, scale, zp}, {{"axis", Attribute(int64_t(2))}}), Error);
  EXPECT_THROW(ops::call("DequantizeLinear", {Tensor::zeros(DType::UInt8, {2, 3}), scale, zp},
                         {{"axis", Attribute(int64_t(-3))}}),
               Error);
  // Axis 0 has 2 channels, the scale has 3.
  EXPECT_THROW(ops::call("QuantizeLinear", {x, scale, zp}, {{"axis", Attribute(int64_t(0))}}), Error);
  // Zero point shape differs from the scale's.
  EXPECT_THROW(ops::call("QuantizeLinear", {x, scale, Tensor::from_vector<uint8_t>({0, 0}, {2})}), Error);
}

TEST(DynamicQuantizeLinear, MatchesOnnxExample) {
  // Range [-3, 2] -> scale 5/255, zero point 153. Expected values from numpy in float32:
  // np.rint(x / np.float32(5 / 255)) + 153 (0.5 / scale is exactly 25.5 there, which rounds to 26).
  Tensor x = Tensor::from_vector<float>({0.0f, 2.0f, -3.0f, -2.5f, 1.34f, 0.5f}, {6});
  std::vector<Tensor> out = ops::call("DynamicQuantizeLinear", {x});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].to_vector<uint8_t>(), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_NEAR(out[1].item_double(), 5.0 / 255.0, 1e-7);
  EXPECT_EQ(out[2].item_int(), 153);
  // An all-zero input must not divide by zero.
  std::vector<Tensor> zeros = ops::call("DynamicQuantizeLinear", {Tensor::zeros(DType::Float32, {3})});
  EXPECT_EQ(zeros[0].to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(zeros[2].item_int(), 0);
}

TEST(MatMulInteger, PerRowZeroPointOfA) {
  // (A - [1, 2] per row) = [[0, 1], [1, 2]]; times B = [[1, 2], [3, 4]] -> [[3, 4], [7, 10]].
  Tensor a = Tensor::from_vector<uint8_t>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<uint8_t>({1, 2, 3, 4}, {2, 2});
  Tensor azp = Tensor::from_vector<uint8_t>({1, 2}, {2});
  Tensor y = ops::call("MatMulInteger", {a, b, azp})[0];
  ASSERT_EQ(y.dtype(), DType::Int32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{3, 4, 7, 10}));
  EXPECT_THROW(ops::call("MatMulInteger", {a, Tensor::from_vector<uint8_t>({1, 2, 3}, {3, 1})}), Error);
}

TEST(ConvInteger, PerChannelWeightZeroPoint) {
  // x - 1 = [[0,1,2],[3,4,5],[6,7,8]]; w - [1, 3] gives an all-ones 2x2 kernel for channel 0 and
  // all zeros for channel 1, so channel 0 holds the 2x2 window sums.
  Tensor x = Tensor::from_vector<uint8_t>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = Tensor::from_vector<uint8_t>({2, 2, 2, 2, 3, 3, 3, 3}, {2, 1, 2, 2});
  Tensor y = ops::call("ConvInteger", {x, w, Tensor::scalar<uint8_t>(1), Tensor::from_vector<uint8_t>({1, 3}, {2})})[0];
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{8, 12, 20, 24, 0, 0, 0, 0}));
}

TEST(NonMaxSuppression, RejectsMismatchedScores) {
  Tensor boxes = Tensor::zeros(DType::Float32, {1, 2, 4});
  Tensor scores = Tensor::zeros(DType::Float32, {1, 1, 3});
  EXPECT_THROW(ops::call("NonMaxSuppression", {boxes, scores}), Error);
}

TEST(RoiAlign, RejectsOutOfRangeBatchIndex) {
  Tensor x = Tensor::zeros(DType::Float32, {1, 1, 4, 4});
  Tensor rois = Tensor::from_vector<float>({0, 0, 2, 2}, {1, 4});
  Tensor idx = Tensor::from_vector<int64_t>({1}, {1});
  EXPECT_THROW(ops::call("RoiAlign", {x, rois, idx}), Error);
}

}  // namespace
}  // namespace ingot
