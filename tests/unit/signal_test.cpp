// Signal, string, random and training ops: checks against independent float64 references
// (naive DFT sums, window formulas) and edge cases the ONNX node suite does not cover.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <vector>

namespace ingot {
namespace {

using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;
using Strings = std::vector<std::string>;

// Naive float64 DFT of a complex sequence: X[k] = sum_j x[j] exp(-+2 pi i j k / n) (/ n if inverse).
std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x, bool inverse) {
  const size_t n = x.size();
  std::vector<std::complex<double>> y(n);
  for (size_t k = 0; k < n; ++k) {
    std::complex<double> sum = 0;
    for (size_t j = 0; j < n; ++j) {
      const double angle = (inverse ? 2 : -2) * std::numbers::pi * double(j * k) / double(n);
      sum += x[j] * std::complex<double>(std::cos(angle), std::sin(angle));
    }
    y[k] = inverse ? sum / double(n) : sum;
  }
  return y;
}

Tensor scalar_i64(int64_t v) { return Tensor::scalar<int64_t>(v); }

// Eager calls use the newest opset, where DFT's axis is the third input.
Tensor dft(const Tensor& x, int64_t axis, std::optional<int64_t> length, Attributes attrs = {}) {
  return ops::call("DFT", {x, length ? scalar_i64(*length) : Tensor(), scalar_i64(axis)}, attrs).at(0);
}

// A real signal of the given length along axis 1 of [2, n, 3, 1], compared line by line.
void check_real_dft(int64_t n) {
  const int64_t batch = 2, inner = 3;
  std::vector<float> values(size_t(batch * n * inner));
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(std::sin(0.37 * double(i)) + 0.1 * double(i % 7));
  const Tensor x = Tensor::from_vector(values, {batch, n, inner, 1});
  const Tensor y = dft(x, 1, std::nullopt);
  ASSERT_EQ(y.shape(), (Shape{batch, n, inner, 2}));
  const auto out = y.to_vector<float>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < inner; ++c) {
      std::vector<std::complex<double>> line(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) line[size_t(j)] = values[size_t((b * n + j) * inner + c)];
      const auto ref = naive_dft(line, false);
      for (int64_t k = 0; k < n; ++k) {
        const size_t at = size_t(((b * n + k) * inner + c) * 2);
        EXPECT_NEAR(out[at], ref[size_t(k)].real(), 1e-4 * double(n)) << "n=" << n << " k=" << k;
        EXPECT_NEAR(out[at + 1], ref[size_t(k)].imag(), 1e-4 * double(n)) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(Dft, RealInputMatchesNaiveFloat64) {
  for (int64_t n : {1, 2, 5, 7, 8, 12, 16, 64}) check_real_dft(n);  // power-of-two FFT and direct paths
}

TEST(Dft, ComplexInverseRoundTripsAndMatchesNaive) {
  const int64_t n = 6;
  std::vector<double> re = {1, -2, 0.5, 3, 0, 4}, im = {0, 1, -1, 2, 0.25, -3};
  std::vector<float> packed;
  std::vector<std::complex<double>> line;
  for (int64_t j = 0; j < n; ++j) {
    packed.push_back(float(re[size_t(j)]));
    packed.push_back(float(im[size_t(j)]));
    line.emplace_back(re[size_t(j)], im[size_t(j)]);
  }
  const Tensor x = Tensor::from_vector(packed, {1, n, 2});
  const auto inv = dft(x, 1, std::nullopt, {{"inverse", 1}}).to_vector<float>();
  const auto ref = naive_dft(line, true);
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_NEAR(inv[size_t(2 * k)], ref[size_t(k)].real(), 1e-5);
    EXPECT_NEAR(inv[size_t(2 * k + 1)], ref[size_t(k)].imag(), 1e-5);
  }
  const auto back = dft(dft(x, 1, std::nullopt), 1, std::nullopt, {{"inverse", 1}}).to_vector<float>();
  for (size_t i = 0; i < packed.size(); ++i) EXPECT_NEAR(back[i], packed[i], 1e-5);
}

TEST(Dft, LengthPadsOrTruncatesAndOnesidedKeepsHalf) {
  const std::vector<float> v = {1, 2, 3, 4, 5};
  const Tensor x = Tensor::from_vector(v, {1, 5, 1});
  // dft_length 8 zero-pads; onesided keeps 8 / 2 + 1 = 5 bins.
  const Tensor padded = dft(x, 1, 8, {{"onesided", 1}});
  ASSERT_EQ(padded.shape(), (Shape{1, 5, 2}));
  std::vector<std::complex<double>> line = {1, 2, 3, 4, 5, 0, 0, 0};
  auto ref = naive_dft(line, false);
  const auto out = padded.to_vector<float>();
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_NEAR(out[2 * k], ref[k].real(), 1e-5);
    EXPECT_NEAR(out[2 * k + 1], ref[k].imag(), 1e-5);
  }
  // dft_length 3 truncates to the first three samples: bin 0 = 1 + 2 + 3.
  const Tensor truncated = dft(x, 1, 3);
  ASSERT_EQ(truncated.shape(), (Shape{1, 3, 2}));
  EXPECT_NEAR(truncated.to_vector<float>()[0], 6.0, 1e-6);
}

TEST(Dft, BadInputsAreErrors) {
  const Tensor three = Tensor::zeros(DType::Float32, {1, 4, 3});
  EXPECT_THROW(dft(three, 1, std::nullopt), Error);  // last dim must be 1 or 2
  const Tensor x = Tensor::zeros(DType::Float32, {1, 4, 1});
  EXPECT_THROW(dft(x, 2, std::nullopt), Error);  // the complex axis is not a signal axis
  EXPECT_THROW(dft(x, 1, 0), Error);             // dft_length must be positive
}

TEST(Stft, FramesMatchNaiveDftOfWindowedSlices) {
  const int64_t length = 20, frame = 8, step = 4;
  std::vector<float> v(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) v[size_t(i)] = float(std::cos(0.3 * double(i)) * double(i % 5));
  std::vector<float> window(static_cast<size_t>(frame));
  for (int64_t i = 0; i < frame; ++i) window[size_t(i)] = float(0.5 + 0.05 * double(i));
  const Tensor y = ops::call("STFT", {Tensor::from_vector(v, {1, length, 1}), scalar_i64(step),
                                      Tensor::from_vector(window, {frame})})
                       .at(0);
  const int64_t frames = 1 + (length - frame) / step, bins = frame / 2 + 1;
  ASSERT_EQ(y.shape(), (Shape{1, frames, bins, 2}));
  const auto out = y.to_vector<float>();
  for (int64_t f = 0; f < frames; ++f) {
    std::vector<std::complex<double>> line;
    for (int64_t j = 0; j < frame; ++j) line.emplace_back(double(v[size_t(f * step + j)]) * window[size_t(j)]);
    const auto ref = naive_dft(line, false);
    for (int64_t k = 0; k < bins; ++k) {
      EXPECT_NEAR(out[size_t((f * bins + k) * 2)], ref[size_t(k)].real(), 1e-4);
      EXPECT_NEAR(out[size_t((f * bins + k) * 2 + 1)], ref[size_t(k)].imag(), 1e-4);
    }
  }
  // frame_length longer than the signal
  EXPECT_THROW(ops::call("STFT", {Tensor::from_vector(v, {1, length, 1}), scalar_i64(step), Tensor(), scalar_i64(64)}),
               Error);
}

// w[i] = a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N); N = size (periodic) or size - 1 (symmetric).
void check_window(const std::string& op, double a0, double a1, double a2) {
  for (int64_t periodic : {0, 1}) {
    const int64_t size = 9;
    const Tensor w = ops::call(op, {Tensor::scalar<int32_t>(int32_t(size))},
                               {{"periodic", periodic}, {"output_datatype", int64_t(DType::Float64)}})
                         .at(0);
    ASSERT_EQ(w.dtype(), DType::Float64);
    ASSERT_EQ(w.shape(), (Shape{size}));
    const auto out = w.to_vector<double>();
    const double n = periodic ? double(size) : double(size - 1);
    for (int64_t i = 0; i < size; ++i) {
      const double x = 2 * std::numbers::pi * double(i) / n;
      EXPECT_NEAR(out[size_t(i)], a0 - a1 * std::cos(x) + a2 * std::cos(2 * x), 1e-12) << op << " i=" << i;
    }
  }
}

TEST(Windows, MatchFormulas) {
  check_window("HannWindow", 0.5, 0.5, 0);
  check_window("HammingWindow", 25.0 / 46.0, 21.0 / 46.0, 0);
  check_window("BlackmanWindow", 0.42, 0.5, 0.08);
}

TEST(Windows, SymmetricSizeOneAndZero) {
  // A symmetric window of one point has no period: its point sits at angle 0 (Hann: 0.5 - 0.5 = 0).
  const Tensor one = ops::call("HannWindow", {Tensor::scalar<int64_t>(1)}, {{"periodic", int64_t(0)}}).at(0);
  ASSERT_EQ(one.shape(), (Shape{1}));
  EXPECT_EQ(one.to_vector<float>()[0], 0.0f);
  EXPECT_EQ(ops::call("HannWindow", {Tensor::scalar<int64_t>(0)}).at(0).shape(), (Shape{0}));
  EXPECT_THROW(ops::call("HannWindow", {Tensor::scalar<int64_t>(-1)}), Error);
  EXPECT_THROW(ops::call("HannWindow", {Tensor::scalar<int64_t>(4)}, {{"output_datatype", int64_t(8)}}), Error);
}

Tensor strings(const std::vector<std::string>& v, Shape shape) { return Tensor::from_vector(v, std::move(shape)); }

TEST(StringNormalizer, LowercaseAndCaseInsensitiveStopwords) {
  const Tensor x = strings({"Monday", "TUESDAY", "monday", "Straße"}, {4});
  const Tensor y =
      ops::call("StringNormalizer", {x}, {{"case_change_action", "LOWER"}, {"stopwords", Strings{"MONDAY"}}}).at(0);
  ASSERT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y.to_vector<std::string>(), (std::vector<std::string>{"tuesday", "straße"}));  // non-ASCII bytes kept
}

TEST(StringNormalizer, CaseSensitiveStopwordsAndEmptyResult) {
  const Tensor x = strings({"a", "A", "b"}, {1, 3});
  const Tensor y =
      ops::call("StringNormalizer", {x}, {{"is_case_sensitive", int64_t(1)}, {"stopwords", Strings{"a"}}}).at(0);
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_EQ(y.to_vector<std::string>(), (std::vector<std::string>{"A", "b"}));
  // Everything removed: one empty string.
  const Tensor empty = ops::call("StringNormalizer", {x}, {{"stopwords", Strings{"A", "b"}}}).at(0);
  EXPECT_EQ(empty.shape(), (Shape{1, 1}));
  EXPECT_EQ(empty.to_vector<std::string>()[0], "");
  EXPECT_THROW(ops::call("StringNormalizer", {strings({"a", "b"}, {2, 1})}), Error);  // [2, 1] is not [1, C]
  EXPECT_THROW(ops::call("StringNormalizer", {x}, {{"case_change_action", "TITLE"}}), Error);
}

TEST(TfIdfVectorizer, StringPoolWithWeights) {
  // Pool: unigrams "a", "b" -> columns 0, 1; bigram ("a", "b") -> column 2.
  const Tensor x = strings({"a", "b", "a", "b", "c"}, {5});
  const Attributes attrs = {{"mode", "TFIDF"},
                            {"min_gram_length", int64_t(1)},
                            {"max_gram_length", int64_t(2)},
                            {"max_skip_count", int64_t(0)},
                            {"ngram_counts", Ints{0, 2}},
                            {"ngram_indexes", Ints{0, 1, 2}},
                            {"pool_strings", Strings{"a", "b", "a", "b"}},
                            {"weights", Floats{1.0f, 0.5f, 2.0f}}};
  const Tensor y = ops::call("TfIdfVectorizer", {x}, attrs).at(0);
  ASSERT_EQ(y.shape(), (Shape{3}));
  // counts: a = 2, b = 2, (a, b) = 2; times the weights.
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2.0f, 1.0f, 4.0f}));
}

TEST(Random, SeededIsReproducibleAndInRange) {
  const Attributes attrs = {{"shape", Ints{4, 5}}, {"low", -2.0f}, {"high", 3.0f}, {"seed", 7.0f}};
  const auto a = ops::call("RandomUniform", {}, attrs).at(0).to_vector<float>();
  const auto b = ops::call("RandomUniform", {}, attrs).at(0).to_vector<float>();
  EXPECT_EQ(a, b);
  for (float v : a) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
  // Probabilities 0 and 1 are deterministic.
  const Tensor p = Tensor::from_vector<double>({0, 1, 1, 0}, {4});
  EXPECT_EQ(ops::call("Bernoulli", {p}).at(0).to_vector<double>(), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_THROW(ops::call("Bernoulli", {Tensor::from_vector<float>({1.5f}, {1})}), Error);
}

TEST(Training, MomentumUpdatesEveryTensor) {
  // Two tensors in one node; T = 1 so beta applies. Standard momentum:
  // v' = alpha v + beta (lambda x + g), x' = x - r v'.
  const double r = 0.1, alpha = 0.9, beta = 0.5, lambda = 0.01;
  const std::vector<float> x1 = {1, 2}, g1 = {0.5, -1}, v1 = {0.2, 0.3}, x2 = {-3}, g2 = {2}, v2 = {1};
  const auto out = ops::call(
      "Momentum",
      {Tensor::scalar<float>(float(r)), Tensor::scalar<int64_t>(1), Tensor::from_vector(x1, {2}),
       Tensor::from_vector(x2, {1}), Tensor::from_vector(g1, {2}), Tensor::from_vector(g2, {1}),
       Tensor::from_vector(v1, {2}), Tensor::from_vector(v2, {1})},
      {{"alpha", float(alpha)}, {"beta", float(beta)}, {"mode", "standard"}, {"norm_coefficient", float(lambda)}}, 4,
      "ai.onnx.preview.training");
  ASSERT_EQ(out.size(), 4u);
  auto expect = [&](float x, float g, float v, float x_new, float v_new) {
    const double vn = double(float(alpha)) * v + double(float(beta)) * (double(float(lambda)) * x + g);
    EXPECT_NEAR(v_new, vn, 1e-6);
    EXPECT_NEAR(x_new, x - double(float(r)) * vn, 1e-6);
  };
  for (size_t i = 0; i < 2; ++i)
    expect(x1[i], g1[i], v1[i], out[0].to_vector<float>()[i], out[2].to_vector<float>()[i]);
  expect(x2[0], g2[0], v2[0], out[1].to_vector<float>()[0], out[3].to_vector<float>()[0]);
}

}  // namespace
}  // namespace ingot
