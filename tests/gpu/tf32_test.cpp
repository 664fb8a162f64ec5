// TF32 is opt-in: float32 products are exact float32 by default and within TF32's error when allowed.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/split_tf32.h"
#include "core/math_mode.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using Ints = std::vector<int64_t>;

double max_relative_error(const Tensor& expected, const Tensor& actual) {
  std::vector<double> a = as_doubles(expected), b = as_doubles(actual);
  double scale = 0, err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(a[i]));
    err = std::max(err, std::abs(a[i] - b[i]));
  }
  return err / scale;
}

TEST(CudaTf32, OffByDefaultAndBoundedWhenAllowed) {
  INGOT_REQUIRE_GPU();
  Tensor a = random_tensor(DType::Float32, {512, 512}, 1), b = random_tensor(DType::Float32, {512, 512}, 2);
  Tensor expected = ops::matmul(a, b);
  const Device gpu{DeviceType::CUDA, 0};
  ASSERT_FALSE(allow_tf32());
  double exact = max_relative_error(expected, ops::matmul(a.to(gpu), b.to(gpu)));
  EXPECT_LT(exact, 1e-5);
  set_allow_tf32(true);
  double tf32 = max_relative_error(expected, ops::matmul(a.to(gpu), b.to(gpu)));
  set_allow_tf32(false);
  EXPECT_LT(tf32, 5e-3);
  std::printf("max relative error: exact float32 %.2e, TF32 %.2e\n", exact, tf32);
}

// Exact float32 products as 3xTF32 through cuBLASLt (INGOT_GEMM_3XTF32, gemm.cu) against a float64
// reference: every output within 1e-5 of the sum of its terms' magnitudes (exact float32
// accumulation's order of error; TF32 alone is ~1e-3), B plain and transposed, bias, Gelu, alpha and
// beta with a separate C_in, A split in two row chunks (rows sampled around the chunks' edge), and
// Inf and NaN in A and B giving the exact product's Inf and NaN.
TEST(CudaTf32, SplitProductsMatchFloat64) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv on("INGOT_GEMM_3XTF32", "1");
  ASSERT_FALSE(allow_tf32());
  struct Case {
    int64_t m, n, k;
    bool trans_b, bias;
    cuda::Epilogue act;
    float alpha, beta;
    int64_t row_step;  // rows checked: every row_step-th, the 16 around row 43690 and the last 16
  };
  const std::vector<Case> cases{
      {4100, 512, 512, false, true, cuda::Epilogue::None, 1.0f, 0.0f, 1},
      {2050, 1030, 512, true, true, cuda::Epilogue::None, 1.0f, 0.0f, 1},
      {2050, 1030, 512, true, true, cuda::Epilogue::Gelu, 1.0f, 0.0f, 3},
      {45000, 64, 520, false, false, cuda::Epilogue::None, 0.5f, 1.0f, 101},  // 256 MB of A' = 43690 rows
  };
  const Device gpu{DeviceType::CUDA, 0};
  const int64_t before = cuda::split_tf32_products();
  uint32_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("m={} n={} k={} trans_b={} bias={} act={} alpha={} beta={}", c.m, c.n, c.k, c.trans_b,
                             c.bias, int(c.act), c.alpha, c.beta));
    Tensor a = random_tensor(DType::Float32, {c.m, c.k}, seed++);
    Tensor b = random_tensor(DType::Float32, c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n}, seed++);
    const bool specials = c.act == cuda::Epilogue::None;  // (an activation's Inf and NaN are the library's)
    if (specials) {
      const float inf = std::numeric_limits<float>::infinity();
      a.data<float>()[0] = inf;                                       // row 0: +-Inf by B's signs
      a.data<float>()[c.k + 1] = std::nanf("");                        // row 1: NaN
      b.data<float>()[c.trans_b ? 2 * c.k + 3 : 3 * c.n + 2] = -inf;  // column 2: Inf (NaN in row 0)
    }
    const Tensor bias = random_tensor(DType::Float32, {c.n}, seed++);
    const Tensor c_in = random_tensor(DType::Float32, {c.m, c.n}, seed++);
    const Tensor ga = a.to(gpu), gb = b.to(gpu), gbias = bias.to(gpu), gc_in = c_in.to(gpu);
    Tensor gc = Tensor::empty(DType::Float32, {c.m, c.n}, gpu);
    cuda::GemmArgs g;
    g.trans_b = c.trans_b;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.a = ga.raw_data(), g.lda = c.k;
    g.b = gb.raw_data(), g.ldb = c.trans_b ? c.k : c.n;
    g.c = gc.raw_data(), g.ldc = c.n;
    g.c_in = c.beta != 0.0f ? gc_in.raw_data() : nullptr;
    g.alpha = c.alpha, g.beta = c.beta;
    g.bias = c.bias ? gbias.raw_data() : nullptr;
    g.epilogue = c.act;
    cuda::gemm(g);
    const std::vector<double> got = as_doubles(gc.to(Device::cpu())), va = as_doubles(a), vb = as_doubles(b),
                              vbias = as_doubles(bias), vc = as_doubles(c_in);
    double worst = 0;
    int64_t special = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      if (i % c.row_step != 0 && std::abs(i - 43690) > 8 && i < c.m - 16) continue;
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double x = va[size_t(i * c.k + kk)];
          const double y = vb[size_t(c.trans_b ? j * c.k + kk : kk * c.n + j)];
          sum += x * y;
          mag += std::abs(x * y);
        }
        double v = c.alpha * sum, scale = std::abs(c.alpha) * mag;
        const size_t at = size_t(i * c.n + j);
        if (c.beta != 0.0f) v += c.beta * vc[at], scale += std::abs(c.beta * vc[at]);
        if (c.bias) v += vbias[size_t(j)], scale += std::abs(vbias[size_t(j)]);
        if (c.act == cuda::Epilogue::Gelu) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        if (!std::isfinite(v)) {
          ++special;
          if (std::isnan(v)) {
            EXPECT_TRUE(std::isnan(got[at])) << "row " << i << " column " << j;
          } else {
            EXPECT_EQ(got[at], v) << "row " << i << " column " << j;
          }
          continue;
        }
        worst = std::max(worst, std::abs(got[at] - v) / std::max(scale, 1e-30));
      }
    }
    if (specials) EXPECT_GT(special, c.n) << "the Inf row, the NaN row and the Inf column were checked";
    EXPECT_LT(worst, 1e-5);
    std::printf("3xTF32 m=%lld n=%lld k=%lld: worst error / sum of |terms| %.2e\n", (long long)c.m, (long long)c.n,
                (long long)c.k, worst);
  }
  EXPECT_EQ(cuda::split_tf32_products() - before, int64_t(cases.size())) << "every case ran as 3xTF32";
}

// Exact float32 convolutions as 3xTF32 on cuDNN's TF32 engines (INGOT_CONV_3XTF32, conv.cu): a 3x3
// Conv with bias (channels first) and a channels-last FusedConv with a residual and Relu, each of
// at least 2^30 multiply-adds, against the CPU's float32 kernels at float32's tolerances.
TEST(CudaTf32, SplitConvolutionsMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv on("INGOT_CONV_3XTF32", "1");
  ASSERT_FALSE(allow_tf32());
  const int64_t before = cuda::split_tf32_convs();
  const Tensor x = random_tensor(DType::Float32, {10, 64, 56, 56}, 61), w = random_tensor(DType::Float32, {64, 64, 3, 3}, 62);
  const Tensor b = random_tensor(DType::Float32, {64}, 63);
  expect_cuda_matches_cpu("Conv", {x, w, b}, {{"pads", Ints{1, 1, 1, 1}}});
  const Tensor xl = random_tensor(DType::Float32, {13, 28, 28, 128}, 64), wl = random_tensor(DType::Float32, {96, 3, 3, 128}, 65);
  const Tensor bl = random_tensor(DType::Float32, {96}, 66), rl = random_tensor(DType::Float32, {13, 28, 28, 96}, 67);
  expect_cuda_matches_cpu("FusedConv", {xl, wl, bl, rl},
                          {{"pads", Ints{1, 1, 1, 1}}, {"activation", "Relu"}, {"layout", "NHWC"}}, 1, -1, -1, "ai.ingot");
  EXPECT_EQ(cuda::split_tf32_convs() - before, 2) << "both ran as 3xTF32 (a TF32 engine took each graph)";
}

}  // namespace
}  // namespace ingot::gpu_test
