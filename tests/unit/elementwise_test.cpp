// Elementwise ops: edge cases the ONNX node suite does not cover (broadcasting corners, integer
// division and modulo semantics, NaN propagation, zero-size tensors, the vectorized exp/tanh/
// sigmoid across their whole range, bad inputs). Expected values are worked out by hand in the
// comments, or compared against the C library in double precision.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace ingot {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor iota_f(Shape shape, float start = 0) {
  std::vector<float> v(size_t(shape_numel(shape)));
  std::iota(v.begin(), v.end(), start);
  return Tensor::from_vector(v, std::move(shape));
}

Tensor call1(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) {
  return ops::call(op, inputs, attrs, 1).at(0);
}

TEST(Broadcast, RowPlusColumn) {
  // [3,1] + [1,4] -> [3,4]: out[i][j] = 10 * i + j.
  const Tensor col = Tensor::from_vector<float>({0, 10, 20}, {3, 1});
  const Tensor row = Tensor::from_vector<float>({0, 1, 2, 3}, {1, 4});
  const Tensor y = ops::add(col, row);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  const auto v = y.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(v[size_t(i * 4 + j)], float(10 * i + j));
}

TEST(Broadcast, ScalarOnEitherSideAndRankZero) {
  const Tensor x = iota_f({2, 3});                // 0..5
  const Tensor s = Tensor::scalar<float>(10.0f);  // rank 0
  EXPECT_EQ(ops::sub(x, s).to_vector<float>(), (std::vector<float>{-10, -9, -8, -7, -6, -5}));
  EXPECT_EQ(ops::sub(s, x).to_vector<float>(), (std::vector<float>{10, 9, 8, 7, 6, 5}));
  const Tensor both = ops::mul(s, Tensor::scalar<float>(3.0f));
  EXPECT_EQ(both.shape(), Shape{});
  EXPECT_EQ(both.to_vector<float>(), std::vector<float>{30});
}

TEST(Broadcast, MiddleAxisAndRankPadding) {
  // [2,3,4] * [3,1]: the second operand is padded to [1,3,1]; out = x * (row index + 1).
  const Tensor x = iota_f({2, 3, 4});
  const Tensor m = Tensor::from_vector<float>({1, 2, 3}, {3, 1});
  const auto v = ops::mul(x, m).to_vector<float>();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[size_t(i)], float(i) * float((i / 4) % 3 + 1)) << i;
}

TEST(Broadcast, LargeTensorsUseEveryPath) {
  // Big enough to be split across threads: same shape, scalar, and row broadcasting.
  const int64_t rows = 300, cols = 257;
  const Tensor x = iota_f({rows, cols});
  const Tensor bias = iota_f({cols}, 1000);
  const auto same = ops::add(x, x).to_vector<float>();
  const auto scalar = ops::add(x, Tensor::scalar<float>(0.5f)).to_vector<float>();
  const auto row = ops::add(x, bias).to_vector<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(same[size_t(i)], 2.0f * float(i));
    ASSERT_EQ(scalar[size_t(i)], float(i) + 0.5f);
    ASSERT_EQ(row[size_t(i)], float(i) + 1000.0f + float(i % cols));
  }
}

TEST(Broadcast, IncompatibleShapesFail) { EXPECT_THROW(ops::add(iota_f({2, 3}), iota_f({4})), Error); }

TEST(Broadcast, ZeroSizeDims) {
  // [0,3] + [1,3] -> [0,3]; [2,1] + [1,0] -> [2,0].
  EXPECT_EQ(ops::add(iota_f({0, 3}), iota_f({1, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(ops::mul(iota_f({2, 1}), iota_f({1, 0})).shape(), (Shape{2, 0}));
  EXPECT_EQ(ops::relu(iota_f({0})).shape(), (Shape{0}));
  EXPECT_EQ(call1("Where", {Tensor::zeros(DType::Bool, {0}), iota_f({1}), iota_f({1})}).shape(), (Shape{0}));
  EXPECT_EQ(call1("Max", {iota_f({0, 2}), iota_f({2})}).shape(), (Shape{0, 2}));
  EXPECT_EQ(call1("Cast", {iota_f({0, 2})}, {{"to", int64_t(DType::Int64)}}).shape(), (Shape{0, 2}));
}

TEST(Binary, DtypeMismatchNamesBothDtypes) {
  try {
    ops::add(iota_f({2}), Tensor::from_vector<int64_t>({1, 2}, {2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("int64"), std::string::npos) << message;
    EXPECT_NE(message.find("float32"), std::string::npos) << message;
  }
}

TEST(Binary, IntegerDivisionTruncatesTowardZero) {
  const Tensor a = Tensor::from_vector<int32_t>({7, -7, 7, -7, std::numeric_limits<int32_t>::min()}, {5});
  const Tensor b = Tensor::from_vector<int32_t>({2, 2, -2, -2, -1}, {5});
  // INT_MIN / -1 wraps to INT_MIN instead of trapping.
  EXPECT_EQ(ops::div(a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{3, -3, -3, 3, std::numeric_limits<int32_t>::min()}));
}

TEST(Binary, IntegerDivisionByZeroFails) {
  const Tensor a = Tensor::from_vector<int64_t>({1, 2}, {2});
  const Tensor b = Tensor::from_vector<int64_t>({1, 0}, {2});
  EXPECT_THROW(ops::div(a, b), Error);
  EXPECT_THROW(call1("Mod", {a, b}), Error);
}

TEST(Binary, ModSignFollowsDivisorOrDividend) {
  const Tensor a = Tensor::from_vector<int32_t>({7, -7, 7, -7, 6}, {5});
  const Tensor b = Tensor::from_vector<int32_t>({3, 3, -3, -3, 3}, {5});
  // Python %: 7%3=1, -7%3=2, 7%-3=-2, -7%-3=-1, 6%3=0.
  EXPECT_EQ(call1("Mod", {a, b}).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, -2, -1, 0}));
  // C fmod: the sign of the dividend.
  EXPECT_EQ(call1("Mod", {a, b}, {{"fmod", 1}}).to_vector<int32_t>(), (std::vector<int32_t>{1, -1, 1, -1, 0}));
  // Floats with fmod = 0 follow numpy.mod: -7.5 mod 2 = 0.5, 7.5 mod -2 = -0.5.
  const Tensor fa = Tensor::from_vector<float>({-7.5f, 7.5f}, {2});
  const Tensor fb = Tensor::from_vector<float>({2.0f, -2.0f}, {2});
  EXPECT_EQ(call1("Mod", {fa, fb}).to_vector<float>(), (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(call1("Mod", {fa, fb}, {{"fmod", 1}}).to_vector<float>(), (std::vector<float>{-1.5f, 1.5f}));
}

TEST(Binary, PowIntegerAndMixedDtypes) {
  const Tensor base = Tensor::from_vector<int64_t>({2, -3, 5, 2}, {4});
  const Tensor exponent = Tensor::from_vector<int64_t>({10, 3, 0, -1}, {4});
  // 2^10 = 1024, (-3)^3 = -27, 5^0 = 1, 2^-1 truncates to 0.
  EXPECT_EQ(call1("Pow", {base, exponent}).to_vector<int64_t>(), (std::vector<int64_t>{1024, -27, 1, 0}));
  // float base, int exponent: 1.5^2 = 2.25; int base, float exponent: trunc(9^0.5) = 3.
  EXPECT_EQ(call1("Pow", {Tensor::scalar<float>(1.5f), Tensor::scalar<int32_t>(2)}).to_vector<float>(),
            std::vector<float>{2.25f});
  EXPECT_EQ(call1("Pow", {Tensor::scalar<int32_t>(9), Tensor::scalar<float>(0.5f)}).to_vector<int32_t>(),
            std::vector<int32_t>{3});
}

TEST(Binary, BitShiftPastWidthGivesZero) {
  const Tensor x = Tensor::from_vector<uint8_t>({1, 128, 255}, {3});
  const Tensor n = Tensor::from_vector<uint8_t>({7, 8, 1}, {3});
  EXPECT_EQ(call1("BitShift", {x, n}, {{"direction", "LEFT"}}).to_vector<uint8_t>(),
            (std::vector<uint8_t>{128, 0, 254}));
  EXPECT_EQ(call1("BitShift", {x, n}, {{"direction", "RIGHT"}}).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 127}));
  EXPECT_THROW(call1("BitShift", {x, n}, {{"direction", "UP"}}), Error);
}

TEST(Binary, ComparisonsGiveBool) {
  const Tensor a = Tensor::from_vector<float>({1, 2, kNaN}, {3});
  const Tensor b = Tensor::scalar<float>(2.0f);
  const Tensor eq = call1("Equal", {a, b});
  EXPECT_EQ(eq.dtype(), DType::Bool);
  EXPECT_EQ(eq.to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(call1("LessOrEqual", {a, b}).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  const Tensor s = Tensor::from_vector<std::string>({"a", "b"}, {2});
  EXPECT_EQ(call1("Equal", {s, Tensor::scalar<std::string>("b")}).to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(Variadic, MaxMinPropagateNaNInEitherPosition) {
  const Tensor a = Tensor::from_vector<float>({kNaN, 1, 5}, {3});
  const Tensor b = Tensor::from_vector<float>({1, kNaN, 2}, {3});
  for (const char* op : {"Max", "Min"}) {
    for (const auto& [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      const auto v = call1(op, {x, y}).to_vector<float>();
      EXPECT_TRUE(std::isnan(v[0])) << op;
      EXPECT_TRUE(std::isnan(v[1])) << op;
      EXPECT_EQ(v[2], std::string(op) == "Max" ? 5.0f : 2.0f);
    }
  }
}

TEST(Variadic, ThreeInputsBroadcastToTheFinalShape) {
  // Sum of [2,1], [3] and a scalar -> [2,3]: out[i][j] = 10 * i + j + 100.
  const Tensor a = Tensor::from_vector<float>({0, 10}, {2, 1});
  const Tensor b = Tensor::from_vector<float>({0, 1, 2}, {3});
  const Tensor c = Tensor::scalar<float>(100.0f);
  const Tensor sum = call1("Sum", {a, b, c});
  EXPECT_EQ(sum.shape(), (Shape{2, 3}));
  EXPECT_EQ(sum.to_vector<float>(), (std::vector<float>{100, 101, 102, 110, 111, 112}));
  // Mean of the same: each element / 3.
  const auto mean = call1("Mean", {a, b, c}).to_vector<float>();
  EXPECT_FLOAT_EQ(mean[4], 111.0f / 3.0f);
  // One input is a copy of it.
  EXPECT_EQ(call1("Max", {b}).to_vector<float>(), (std::vector<float>{0, 1, 2}));
  // Integer Max.
  EXPECT_EQ(call1("Max", {Tensor::from_vector<int8_t>({-5, 7}, {2}), Tensor::scalar<int8_t>(0)}).to_vector<int8_t>(),
            (std::vector<int8_t>{0, 7}));
}

TEST(Where, ThreeWayBroadcast) {
  // cond [2,1], X [1,3], Y scalar -> [2,3].
  const Tensor cond = Tensor::from_vector<bool>({true, false}, {2, 1});
  const Tensor x = Tensor::from_vector<int64_t>({1, 2, 3}, {1, 3});
  const Tensor y = Tensor::scalar<int64_t>(-1);
  const Tensor out = call1("Where", {cond, x, y});
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  EXPECT_THROW(call1("Where", {Tensor::from_vector<float>({1}, {1}), x, y}), Error);
}

TEST(PRelu, SlopePerChannel) {
  // X [1,2,2], slope [2,1]: channel 0 slope 0.5, channel 1 slope 2.
  const Tensor x = Tensor::from_vector<float>({-2, 3, -4, 5}, {1, 2, 2});
  const Tensor slope = Tensor::from_vector<float>({0.5f, 2.0f}, {2, 1});
  EXPECT_EQ(call1("PRelu", {x, slope}).to_vector<float>(), (std::vector<float>{-1, 3, -8, 5}));
  // A slope that would enlarge X is an error.
  EXPECT_THROW(call1("PRelu", {iota_f({2}), iota_f({3, 1})}), Error);
}

TEST(Unary, IntegerAbsNegWrapAndRoundHalfToEven) {
  const Tensor x = Tensor::from_vector<int8_t>({-128, -3, 0, 5}, {4});
  EXPECT_EQ(call1("Abs", {x}).to_vector<int8_t>(), (std::vector<int8_t>{-128, 3, 0, 5}));
  EXPECT_EQ(call1("Neg", {x}).to_vector<int8_t>(), (std::vector<int8_t>{-128, 3, 0, -5}));
  const Tensor r = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f}, {6});
  EXPECT_EQ(call1("Round", {r}).to_vector<float>(), (std::vector<float>{0, 2, 2, -0.0f, -2, 2}));
  const auto sign = call1("Sign", {Tensor::from_vector<float>({-2, 0, 3, kNaN}, {4})}).to_vector<float>();
  EXPECT_EQ(sign[0], -1);
  EXPECT_EQ(sign[1], 0);
  EXPECT_EQ(sign[2], 1);
  EXPECT_TRUE(std::isnan(sign[3]));
}

TEST(Unary, FastExpSigmoidTanhMatchLibmEverywhere) {
  // Sweep [-120, 120] including the overflow/underflow ends; relative error vs double libm.
  std::vector<float> xs;
  for (float v = -120.0f; v <= 120.0f; v += 0.01f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-6f, -1e-6f, 0.249f, 0.251f, kInf, -kInf}) xs.push_back(v);
  const int64_t n = int64_t(xs.size());
  const Tensor x = Tensor::from_vector(xs, {n});
  const auto e = ops::exp(x).to_vector<float>();
  const auto s = ops::sigmoid(x).to_vector<float>();
  const auto t = ops::tanh(x).to_vector<float>();
  auto close = [](float got, double want) {
    if (std::isinf(want) || want > std::numeric_limits<float>::max()) return std::isinf(got) && got > 0;
    if (std::abs(want) < 1e-37) return std::abs(got - want) < 1e-37;  // denormal range: absolute
    return std::abs(got - want) <= 4e-7 * std::abs(want);
  };
  for (int64_t i = 0; i < n; ++i) {
    const double v = xs[size_t(i)];
    ASSERT_TRUE(close(e[size_t(i)], std::exp(v))) << "exp(" << v << ") = " << e[size_t(i)];
    ASSERT_TRUE(close(s[size_t(i)], 1.0 / (1.0 + std::exp(-v)))) << "sigmoid(" << v << ") = " << s[size_t(i)];
    ASSERT_TRUE(close(t[size_t(i)], std::tanh(v))) << "tanh(" << v << ") = " << t[size_t(i)];
  }
  const Tensor nan = Tensor::scalar<float>(kNaN);
  EXPECT_TRUE(std::isnan(ops::exp(nan).to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(ops::sigmoid(nan).to_vector<float>()[0]));
  EXPECT_TRUE(std::isnan(ops::tanh(nan).to_vector<float>()[0]));
}

TEST(Activation, ClipBoundsAndNaN) {
  const Tensor x = Tensor::from_vector<float>({-5, 0.5f, 5, kNaN}, {4});
  const auto y = call1("Clip", {x, Tensor::scalar<float>(-1), Tensor::scalar<float>(1)}).to_vector<float>();
  EXPECT_EQ(y[0], -1);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], 1);
  EXPECT_TRUE(std::isnan(y[3]));
  // Only a max (min omitted); integers; min > max gives max everywhere.
  EXPECT_EQ(call1("Clip", {x, Tensor(), Tensor::scalar<float>(0)}).to_vector<float>()[0], -5);
  const Tensor xi = Tensor::from_vector<int32_t>({-7, 3, 9}, {3});
  EXPECT_EQ(call1("Clip", {xi, Tensor::scalar<int32_t>(0), Tensor::scalar<int32_t>(5)}).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(call1("Clip", {xi, Tensor::scalar<int32_t>(5), Tensor::scalar<int32_t>(0)}).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0, 0}));
  EXPECT_THROW(call1("Clip", {x, Tensor::scalar<int32_t>(0)}), Error);  // bound dtype mismatch
}

TEST(Activation, HardSigmoidHardSwishRelu) {
  const Tensor x = Tensor::from_vector<float>({-4, -1, 0, 1, 4}, {5});
  // HardSigmoid(0.2x + 0.5) clipped to [0,1]: 0, 0.3, 0.5, 0.7, 1.
  const auto hs = call1("HardSigmoid", {x}).to_vector<float>();
  const std::vector<float> want_hs = {0, 0.3f, 0.5f, 0.7f, 1};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(hs[i], want_hs[i], 1e-6);
  // HardSwish: x * clip(x/6 + 0.5): 0, -1/3, 0, 2/3, 4.
  const auto hw = call1("HardSwish", {x}).to_vector<float>();
  const std::vector<float> want_hw = {0, -1.0f / 3, 0, 2.0f / 3, 4};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(hw[i], want_hw[i], 1e-6);
  EXPECT_EQ(ops::relu(x).to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 4}));
}

TEST(Activation, SoftplusMishStayFiniteForLargeInputs) {
  const Tensor x = Tensor::from_vector<float>({1, -1, 0, 30, 100, -100}, {6});
  // softplus(100) = 100 (a naive log(1 + e^x) overflows), softplus(-100) = e^-100 ~ 3.7e-44.
  const auto sp = call1("Softplus", {x}).to_vector<float>();
  EXPECT_NEAR(sp[4], 100.0f, 1e-5);
  EXPECT_NEAR(sp[5], 0.0f, 1e-40);
  // mish(x) = x * tanh(log1p(e^x)); numpy in float64: 0.86509839, -0.30340146, 0, 30.
  const auto mish = call1("Mish", {x}).to_vector<float>();
  const std::vector<float> want = {0.86509839f, -0.30340146f, 0, 30, 100, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(mish[i], want[i], 1e-6) << i;
}

TEST(Binary, BitwiseOps) {
  // 12 = 0b1100, 10 = 0b1010.
  const Tensor a = Tensor::from_vector<int8_t>({12, -1}, {2});
  const Tensor b = Tensor::from_vector<int8_t>({10, 5}, {2});
  EXPECT_EQ(call1("BitwiseAnd", {a, b}).to_vector<int8_t>(), (std::vector<int8_t>{8, 5}));
  EXPECT_EQ(call1("BitwiseOr", {a, b}).to_vector<int8_t>(), (std::vector<int8_t>{14, -1}));
  EXPECT_EQ(call1("BitwiseXor", {a, b}).to_vector<int8_t>(), (std::vector<int8_t>{6, -6}));
  EXPECT_EQ(call1("BitwiseNot", {a}).to_vector<int8_t>(), (std::vector<int8_t>{-13, 0}));
  EXPECT_THROW(call1("BitwiseAnd", {iota_f({2}), iota_f({2})}), Error);  // floats have no bits to and
}

TEST(Cast, FloatIntegerBoolStringAndHalf) {
  const Tensor x = Tensor::from_vector<float>({-1.7f, 0.0f, 2.5f, 300.0f, kNaN}, {5});
  // Truncation toward zero; 300 saturates to int8's 127; NaN becomes 0.
  EXPECT_EQ(call1("Cast", {x}, {{"to", int64_t(DType::Int8)}}).to_vector<int8_t>(),
            (std::vector<int8_t>{-1, 0, 2, 127, 0}));
  EXPECT_EQ(call1("Cast", {x}, {{"to", int64_t(DType::Bool)}}).to_vector<bool>(),
            (std::vector<bool>{true, false, true, true, true}));
  const Tensor strings =
      call1("Cast", {Tensor::from_vector<float>({0.25f, -3}, {2})}, {{"to", int64_t(DType::String)}});
  EXPECT_EQ(strings.to_vector<std::string>(), (std::vector<std::string>{"0.25", "-3"}));
  const Tensor parsed =
      call1("Cast", {Tensor::from_vector<std::string>({"1.5", "-INF", "7"}, {3})}, {{"to", int64_t(DType::Float64)}});
  EXPECT_EQ(parsed.to_vector<double>(), (std::vector<double>{1.5, -std::numeric_limits<double>::infinity(), 7}));
  EXPECT_THROW(call1("Cast", {Tensor::from_vector<std::string>({"abc"}, {1})}, {{"to", int64_t(DType::Float32)}}),
               Error);
  // float16 round trip of exactly representable values; 65520 overflows half to inf.
  const Tensor h =
      call1("Cast", {Tensor::from_vector<float>({1.5f, -0.125f, 65520.0f}, {3})}, {{"to", int64_t(DType::Float16)}});
  const auto back = call1("Cast", {h}, {{"to", int64_t(DType::Float32)}}).to_vector<float>();
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -0.125f);
  EXPECT_TRUE(std::isinf(back[2]));
  // CastLike takes the dtype of its second input.
  EXPECT_EQ(call1("CastLike", {x, Tensor::scalar<int64_t>(0)}).dtype(), DType::Int64);
  EXPECT_THROW(call1("Cast", {x}, {{"to", 17}}), Error);  // float8 is not supported
}

TEST(Elementwise, HalfComputesInFloat) {
  const Tensor a = call1("Cast", {Tensor::from_vector<float>({1, 2, 3}, {3})}, {{"to", int64_t(DType::Float16)}});
  const Tensor sum = ops::add(a, a);
  EXPECT_EQ(sum.dtype(), DType::Float16);
  EXPECT_EQ(call1("Cast", {sum}, {{"to", int64_t(DType::Float32)}}).to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

}  // namespace
}  // namespace ingot
