// Neural-network kernels against independent float64 reference loops written here (conv,
// transposed conv, matmul), plus error and edge cases the ONNX node suite does not cover.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace ingot {
namespace {

using Ints = std::vector<int64_t>;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  return Tensor::from_vector<float>(random_values(size_t(shape_numel(shape)), seed), shape);
}

struct Conv2d {
  int64_t n, c, h, w, m, kh, kw, group;
  int64_t stride_h, stride_w, dil_h, dil_w, pad_t, pad_l, pad_b, pad_r;
};

// Direct definition of ONNX Conv (2-D), accumulated in double.
std::vector<double> conv_ref(const Conv2d& p, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, int64_t& oh, int64_t& ow) {
  oh = (p.h + p.pad_t + p.pad_b - (p.kh - 1) * p.dil_h - 1) / p.stride_h + 1;
  ow = (p.w + p.pad_l + p.pad_r - (p.kw - 1) * p.dil_w - 1) / p.stride_w + 1;
  const int64_t icg = p.c / p.group, ocg = p.m / p.group;
  std::vector<double> y(size_t(p.n * p.m * oh * ow));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0.0 : b[size_t(m)];
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t a = 0; a < p.kh; ++a)
              for (int64_t e = 0; e < p.kw; ++e) {
                int64_t ih = i * p.stride_h - p.pad_t + a * p.dil_h, iw = j * p.stride_w - p.pad_l + e * p.dil_w;
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                int64_t c = (m / ocg) * icg + ic;
                acc += double(x[size_t(((n * p.c + c) * p.h + ih) * p.w + iw)]) *
                       double(w[size_t(((m * icg + ic) * p.kh + a) * p.kw + e)]);
              }
          y[size_t(((n * p.m + m) * oh + i) * ow + j)] = acc;
        }
  return y;
}

Attributes conv_attrs(const Conv2d& p) {
  return {{"group", p.group},
          {"strides", Ints{p.stride_h, p.stride_w}},
          {"dilations", Ints{p.dil_h, p.dil_w}},
          {"pads", Ints{p.pad_t, p.pad_l, p.pad_b, p.pad_r}}};
}

void expect_conv_matches(const Conv2d& p, DType dtype, double tolerance) {
  SCOPED_TRACE(testing::Message() << "group " << p.group << " kernel " << p.kh << "x" << p.kw << " stride "
                                  << p.stride_h << " dilation " << p.dil_h << " dtype " << dtype_name(dtype));
  std::vector<float> x = random_values(size_t(p.n * p.c * p.h * p.w), 1);
  std::vector<float> w = random_values(size_t(p.m * (p.c / p.group) * p.kh * p.kw), 2);
  std::vector<float> b = random_values(size_t(p.m), 3);
  int64_t oh = 0, ow = 0;
  std::vector<double> expected = conv_ref(p, x, w, b, oh, ow);
  Tensor xt = Tensor::from_vector(x, {p.n, p.c, p.h, p.w}).cast(dtype);
  Tensor wt = Tensor::from_vector(w, {p.m, p.c / p.group, p.kh, p.kw}).cast(dtype);
  Tensor bt = Tensor::from_vector(b, {p.m}).cast(dtype);
  Tensor y = ops::call("Conv", {xt, wt, bt}, conv_attrs(p))[0];
  ASSERT_EQ(y.shape(), (Shape{p.n, p.m, oh, ow}));
  std::vector<double> got = y.cast(DType::Float64).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], tolerance) << "at " << i;
}

TEST(NnOps, ConvMatchesReferenceFloat32AndFloat64) {
  const std::vector<Conv2d> cases = {
      {2, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // plain 3x3, same padding
      {1, 16, 12, 10, 16, 5, 5, 16, 2, 2, 1, 1, 2, 2, 2, 2},  // depthwise 5x5, stride 2
      {1, 16, 8, 8, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1},    // depthwise 3x3
      {2, 6, 10, 9, 4, 3, 2, 2, 1, 2, 2, 1, 0, 1, 2, 0},      // groups 2, dilation, asymmetric pads
      {1, 24, 7, 7, 40, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     // pointwise 1x1
      {1, 3, 17, 15, 8, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1},     // 3-channel stem, stride 2
      {3, 24, 1, 1, 40, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     // 1x1 of one pixel (squeeze-excite): a GEMM
      {1, 16, 2, 80, 16, 5, 5, 16, 1, 1, 1, 1, 2, 2, 2, 2},   // depthwise 5x5 on a 2-row image (rows skipped)
      {2, 8, 3, 40, 8, 3, 3, 8, 2, 1, 1, 1, 1, 1, 1, 1},      // depthwise 3x3, 3 rows, row stride 2
  };
  for (const Conv2d& p : cases) {
    expect_conv_matches(p, DType::Float32, 1e-4);
    expect_conv_matches(p, DType::Float64, 1e-10);
  }
}

// FusedConv of one pixel (the GEMM path): bias, residual and activation against double arithmetic.
TEST(NnOps, FusedConvOfOnePixelAppliesItsEpilogue) {
  const int64_t n = 2, c = 16, m = 8;
  Tensor x = random_tensor({n, c, 1, 1}, 31), w = random_tensor({m, c, 1, 1}, 32);
  Tensor b = random_tensor({m}, 33), r = random_tensor({n, m, 1, 1}, 34);
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>(), rv = r.to_vector<float>();
  for (const char* act : {"Relu", "HardSwish"}) {
    SCOPED_TRACE(act);
    Tensor y = ops::call("FusedConv", {x, w, b, r}, {{"activation", act}}, 1, "ai.ingot")[0];
    ASSERT_EQ(y.shape(), (Shape{n, m, 1, 1}));
    auto yv = y.to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double v = bv[size_t(j)] + rv[size_t(i * m + j)];
        for (int64_t k = 0; k < c; ++k) v += double(xv[size_t(i * c + k)]) * wv[size_t(j * c + k)];
        v = std::string(act) == "Relu" ? std::max(v, 0.0) : v * std::clamp(v / 6 + 0.5, 0.0, 1.0);
        ASSERT_NEAR(yv[size_t(i * m + j)], v, 1e-5) << i << "," << j;
      }
  }
}

TEST(NnOps, ConvHalfPrecisionIsCloseToReference) {
  expect_conv_matches({1, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::Float16, 0.05);
}

TEST(NnOps, ConvPlanFollowsInputShapeAndWeights) {
  // The per-node cache is keyed on the input shape and the weight tensor; both changing must
  // give fresh, correct results (eager calls share nothing, so run the same weights twice).
  Conv2d p{1, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_conv_matches(p, DType::Float32, 1e-4);
  p.h = 9;
  p.w = 5;
  expect_conv_matches(p, DType::Float32, 1e-4);
}

TEST(NnOps, ConvAutoPadSameUpperAndOneDim) {
  Tensor x = random_tensor({1, 2, 7}, 4);
  Tensor w = random_tensor({3, 2, 4}, 5);
  Tensor y = ops::call("Conv", {x, w}, {{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2}}})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4}));  // ceil(7 / 2)
  // total pad = (4-1)*2 + 4 - 7 = 3: one at the start, two at the end. Check output 0 by hand.
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>();
  double acc = 0;
  for (int c = 0; c < 2; ++c)
    for (int k = 1; k < 4; ++k) acc += double(xv[size_t(c * 7 + k - 1)]) * wv[size_t(c * 4 + k)];
  EXPECT_NEAR(y.to_vector<float>()[0], acc, 1e-5);
}

struct ConvT2d {
  int64_t n, c, h, w, group, m, k, stride, pad, out_pad;
  bool bias;
};

// ConvTranspose against a scatter loop in double: every input pixel adds its weighted kernel
// window into the output.
void expect_conv_transpose_matches(const ConvT2d& p) {
  SCOPED_TRACE(testing::Message() << "c " << p.c << " m " << p.m << " group " << p.group << " kernel " << p.k
                                  << " stride " << p.stride << " pad " << p.pad << " output_padding " << p.out_pad);
  Tensor x = random_tensor({p.n, p.c, p.h, p.w}, 6);
  Tensor wt = random_tensor({p.c, p.m / p.group, p.k, p.k}, 7);
  Tensor b = random_tensor({p.m}, 8);
  Attributes attrs{{"group", p.group},
                   {"strides", Ints{p.stride, p.stride}},
                   {"pads", Ints{p.pad, p.pad, p.pad, p.pad}},
                   {"output_padding", Ints{p.out_pad, p.out_pad}}};
  Tensor y = ops::call("ConvTranspose", p.bias ? std::vector<Tensor>{x, wt, b} : std::vector<Tensor>{x, wt}, attrs)[0];
  const int64_t oh = p.stride * (p.h - 1) + p.k + p.out_pad - 2 * p.pad;
  const int64_t ow = p.stride * (p.w - 1) + p.k + p.out_pad - 2 * p.pad;
  ASSERT_EQ(y.shape(), (Shape{p.n, p.m, oh, ow}));
  auto xv = x.to_vector<float>(), wv = wt.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<double> ref(size_t(p.n * p.m * oh * ow));
  const int64_t icg = p.c / p.group, ocg = p.m / p.group;
  for (int64_t n = 0; n < p.n; ++n) {
    double* r = ref.data() + n * p.m * oh * ow;
    for (int64_t oc = 0; oc < p.m; ++oc)
      for (int64_t i = 0; i < oh * ow; ++i) r[oc * oh * ow + i] = p.bias ? bv[size_t(oc)] : 0.0;
    for (int64_t ic = 0; ic < p.c; ++ic)
      for (int64_t o = 0; o < ocg; ++o)
        for (int64_t i = 0; i < p.h; ++i)
          for (int64_t j = 0; j < p.w; ++j)
            for (int64_t a = 0; a < p.k; ++a)
              for (int64_t e = 0; e < p.k; ++e) {
                int64_t yi = i * p.stride + a - p.pad, yj = j * p.stride + e - p.pad;
                if (yi < 0 || yi >= oh || yj < 0 || yj >= ow) continue;
                int64_t oc = (ic / icg) * ocg + o;
                r[(oc * oh + yi) * ow + yj] += double(xv[size_t(((n * p.c + ic) * p.h + i) * p.w + j)]) *
                                               wv[size_t(((ic * ocg + o) * p.k + a) * p.k + e)];
              }
  }
  auto got = y.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4) << "at " << i;
}

TEST(NnOps, ConvTransposeMatchesScatterReference) {
  // Groups, overlapping windows, pads and output padding (oneDNN's deconvolution).
  expect_conv_transpose_matches({1, 4, 3, 4, 2, 6, 3, 2, 1, 1, true});
  // Windows that do not overlap (stride == kernel, one group: the block-upsample path, one matrix
  // product per image): PP-OCR det's 2x2 stride 2 with one output channel, two images, 3x3 stride 3.
  expect_conv_transpose_matches({2, 5, 3, 4, 1, 3, 2, 2, 0, 0, true});
  expect_conv_transpose_matches({1, 24, 6, 7, 1, 1, 2, 2, 0, 0, false});
  expect_conv_transpose_matches({2, 3, 4, 2, 1, 4, 3, 3, 0, 0, true});
  // Enough output rows (8 channels x 128) for the interleave to split across the pool's threads.
  expect_conv_transpose_matches({1, 4, 64, 8, 1, 8, 2, 2, 0, 0, true});
}

TEST(NnOps, ConvRejectsBadWeightRank) {
  Tensor x = random_tensor({1, 3, 8, 8}, 9);
  Tensor w = random_tensor({3, 3}, 10);
  try {
    ops::call("Conv", {x, w});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 (W): expected rank 4"), std::string::npos) << e.what();
  }
}

TEST(NnOps, ConvRejectsChannelMismatch) {
  Tensor x = random_tensor({1, 3, 8, 8}, 11);
  Tensor w = random_tensor({4, 2, 3, 3}, 12);
  EXPECT_THROW(ops::call("Conv", {x, w}), Error);
}

// numpy.matmul semantics, computed directly.
std::vector<double> matmul_ref(const std::vector<float>& a, const std::vector<float>& b, int64_t batch_a,
                               int64_t batch_b, int64_t m, int64_t k, int64_t n) {
  const int64_t batch = std::max(batch_a, batch_b);
  std::vector<double> y(size_t(batch * m * n), 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += double(a[size_t(((batch_a == 1 ? 0 : t) * m + i) * k + p)]) *
                 b[size_t(((batch_b == 1 ? 0 : t) * k + p) * n + j)];
        }
        y[size_t((t * m + i) * n + j)] = acc;
      }
  return y;
}

TEST(NnOps, MatMulBroadcastsBatchAxes) {
  // A [2,1,3,4] x B [3,4,5]: batch axes broadcast to [2,3]; A repeats over 3, B over 2.
  Tensor a = random_tensor({2, 1, 3, 4}, 13);
  Tensor b = random_tensor({3, 4, 5}, 14);
  Tensor y = ops::matmul(a, b);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3, 5}));
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), got = y.to_vector<float>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t c = 0; c < 5; ++c) {
          double acc = 0;
          for (int64_t p = 0; p < 4; ++p)
            acc += double(av[size_t((i * 3 + r) * 4 + p)]) * bv[size_t((j * 4 + p) * 5 + c)];
          ASSERT_NEAR(got[size_t(((i * 3 + j) * 3 + r) * 5 + c)], acc, 1e-5);
        }
}

TEST(NnOps, MatMulSharedWeightsAndOneDimOperands) {
  Tensor a = random_tensor({2, 3, 4}, 15);
  Tensor b = random_tensor({4, 6}, 16);
  Tensor y = ops::matmul(a, b);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 6}));
  auto ref = matmul_ref(a.to_vector<float>(), b.to_vector<float>(), 1, 1, 6, 4, 6);
  auto got = y.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5);

  Tensor v = random_tensor({4}, 17);
  EXPECT_EQ(ops::matmul(v, b).shape(), (Shape{6}));     // [4] x [4,6]
  EXPECT_EQ(ops::matmul(a, v).shape(), (Shape{2, 3}));  // [2,3,4] x [4]
  Tensor dot = ops::matmul(v, v);
  EXPECT_EQ(dot.shape(), Shape{});
  auto vv = v.to_vector<float>();
  double expected = 0;
  for (float f : vv) expected += double(f) * f;
  EXPECT_NEAR(dot.to_vector<float>()[0], expected, 1e-5);

  Tensor ai = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor bi = Tensor::from_vector<int32_t>({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(ops::matmul(ai, bi).to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 10, 11}));
}

TEST(NnOps, MatMulRejectsMismatchedInnerDimension) {
  EXPECT_THROW(ops::matmul(random_tensor({2, 3}, 18), random_tensor({4, 2}, 19)), Error);
}

TEST(NnOps, GemmTransposesAndBroadcastsC) {
  // Y = 0.5 * A^T * B + 2 * C with A [3,2] (so A^T is [2,3]), B [3,2], C [2] broadcast over rows.
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor b = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor c = Tensor::from_vector<float>({10, 20}, {2});
  Tensor y = ops::call("Gemm", {a, b, c}, {{"transA", 1}, {"alpha", 0.5f}, {"beta", 2.0f}})[0];
  // A^T = [[1,3,5],[2,4,6]]; A^T B = [[6,8],[8,10]].
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{23, 44, 24, 45}));
}

TEST(NnOps, ResizeNearestUpsamplesNchw) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor scales = Tensor::from_vector<float>({1, 1, 2, 2}, {4});
  Tensor y = ops::call("Resize", {x, Tensor(), scales}, {{"mode", "nearest"}})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

// Nearest Resize of a channels-last image (scales on H and W, channels kept: the rows of a whole
// repeated H position and of a repeated W position are copies, the channels a contiguous copy),
// with integer and fractional scales, and uint8 (int8 packages resize 8-bit values), against
// ONNX's rule written out (half_pixel coordinates, round_prefer_floor).
TEST(NnOps, ResizeNearestChannelsLastMatchesTheRule) {
  const int64_t n = 2, h = 5, w = 7, c = 3;
  Tensor x = random_tensor({n, h, w, c}, 33);
  for (auto [sh, sw] : {std::pair<float, float>{2, 2}, {8, 8}, {2.5f, 1.5f}, {1, 3}}) {
    SCOPED_TRACE(testing::Message() << sh << " x " << sw);
    Tensor scales = Tensor::from_vector<float>({1, sh, sw, 1}, {4});
    for (DType dt : {DType::Float32, DType::UInt8}) {
      const Tensor in = dt == DType::Float32 ? x : ops::call("Cast", {ops::call("Mul", {x, Tensor::scalar(100.0f)})[0]},
                                                               {{"to", int64_t(DType::UInt8)}})[0];
      Tensor y = ops::call("Resize", {in, Tensor(), scales}, {{"mode", "nearest"}})[0];
      const int64_t oh = int64_t(std::floor(h * sh)), ow = int64_t(std::floor(w * sw));
      ASSERT_EQ(y.shape(), (Shape{n, oh, ow, c}));
      const Tensor yf = y.cast(DType::Float32), xf = in.cast(DType::Float32);
      auto yv = yf.to_vector<float>(), xv = xf.to_vector<float>();
      auto source = [](int64_t o, float scale, int64_t len) {  // half_pixel, round_prefer_floor
        const double s = (double(o) + 0.5) / scale - 0.5;
        const double r = s - std::floor(s) == 0.5 ? std::floor(s) : std::round(s);
        return std::clamp<int64_t>(int64_t(r), 0, len - 1);
      };
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j)
            for (int64_t k = 0; k < c; ++k)
              ASSERT_EQ(yv[size_t(((b * oh + i) * ow + j) * c + k)],
                        xv[size_t(((b * h + source(i, sh, h)) * w + source(j, sw, w)) * c + k)])
                  << b << "," << i << "," << j << "," << k;
    }
  }
}

// AveragePool over non-overlapping windows (float32's tiled path) against a mean in double, for
// kernels 3x2 (PP-OCR rec's), 2x2 and 1x4, with input rows and columns left over past the last window.
TEST(NnOps, AveragePoolTiledMatchesMeanOfEachWindow) {
  for (auto [kh, kw] : {std::pair<int64_t, int64_t>{3, 2}, {2, 2}, {1, 4}}) {
    SCOPED_TRACE(testing::Message() << kh << "x" << kw);
    const int64_t n = 2, c = 3, h = 7, w = 9, oh = h / kh, ow = w / kw;
    Tensor x = random_tensor({n, c, h, w}, 21);
    Tensor y = ops::call("AveragePool", {x}, {{"kernel_shape", Ints{kh, kw}}, {"strides", Ints{kh, kw}}})[0];
    ASSERT_EQ(y.shape(), (Shape{n, c, oh, ow}));
    auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = 0;
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t b = 0; b < kw; ++b) sum += xv[size_t((p * h + i * kh + a) * w + j * kw + b)];
          ASSERT_NEAR(yv[size_t((p * oh + i) * ow + j)], sum / double(kh * kw), 1e-6);
        }
  }
}

TEST(NnOps, MaxPoolIndicesAndEmptyBatch) {
  Tensor x = Tensor::from_vector<float>({1, 5, 2, 3, 9, 4, 0, 1, 7}, {1, 1, 3, 3});
  auto out = ops::call("MaxPool", {x}, {{"kernel_shape", Ints{2, 2}}}, 2);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{9, 9, 9, 9}));
  EXPECT_EQ(out[1].to_vector<int64_t>(), (std::vector<int64_t>{4, 4, 4, 4}));

  Tensor empty = Tensor::empty(DType::Float32, {0, 2, 4, 4});
  EXPECT_EQ(ops::call("MaxPool", {empty}, {{"kernel_shape", Ints{2, 2}}})[0].shape(), (Shape{0, 2, 3, 3}));
  Tensor w = random_tensor({3, 2, 3, 3}, 20);
  EXPECT_EQ(ops::call("Conv", {empty, w})[0].shape(), (Shape{0, 3, 2, 2}));
}

TEST(NnOps, SoftmaxRowsSumToOne) {
  Tensor x = random_tensor({3, 4, 5}, 21);
  Tensor y = ops::call("Softmax", {x}, {{"axis", 1}})[0];
  auto v = y.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double s = 0;
      for (int64_t a = 0; a < 4; ++a) s += v[size_t((i * 4 + a) * 5 + j)];
      EXPECT_NEAR(s, 1.0, 1e-6);
    }
}

}  // namespace
}  // namespace ingot
