// TF32 is opt-in: float32 products are exact float32 by default and within TF32's error when allowed.
#include <fmt/format.h>

#include "backends/cuda/gemm.h"
#include "core/math_mode.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

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

// Ingot's 3xTF32 kernel (INGOT_GEMM_3XTF32, tf32x3_product.cuh) against a float64 reference: every
// output within 1e-5 of the sum of its terms' magnitudes (exact float32 accumulation's order of
// error; TF32 alone is ~1e-3), on both tile sizes, B plain and transposed, batches, edges of M, N and
// K that are not multiples of a tile, bias, Relu, Gelu, alpha and beta with a separate C_in.
TEST(CudaTf32x3, ProductsMatchFloat64) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv on("INGOT_GEMM_3XTF32", "1");
  ASSERT_FALSE(allow_tf32());
  struct Case {
    int64_t m, n, k, batch;
    bool trans_b, bias;
    cuda::Epilogue act;
    float alpha, beta;
  };
  const std::vector<Case> cases{
      {1500, 384, 384, 1, false, true, cuda::Epilogue::None, 1.0f, 0.0f},      // Whisper b1's projections
      {300, 1536, 384, 2, true, true, cuda::Epilogue::Relu, 1.0f, 0.0f},       // batched, B transposed
      {4099, 1024, 64, 1, false, false, cuda::Epilogue::None, 0.5f, 1.0f},     // 128 x 128 tiles, beta C_in
      {777, 515, 100, 1, true, true, cuda::Epilogue::Gelu, 1.0f, 0.0f},        // every edge ragged
      {2100, 1100, 64, 1, true, false, cuda::Epilogue::None, 1.0f, 0.0f},      // 128 x 128 tiles, transposed
  };
  const Device gpu{DeviceType::CUDA, 0};
  const int64_t before = cuda::tf32x3_products();
  uint32_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("m={} n={} k={} batch={} trans_b={} bias={} act={} alpha={} beta={}", c.m, c.n, c.k,
                             c.batch, c.trans_b, c.bias, int(c.act), c.alpha, c.beta));
    const Tensor a = random_tensor(DType::Float32, {c.batch, c.m, c.k}, seed++);
    const Tensor b = random_tensor(DType::Float32, c.trans_b ? Shape{c.batch, c.n, c.k} : Shape{c.batch, c.k, c.n}, seed++);
    const Tensor bias = random_tensor(DType::Float32, {c.n}, seed++);
    const Tensor c_in = random_tensor(DType::Float32, {c.batch, c.m, c.n}, seed++);
    const Tensor ga = a.to(gpu), gb = b.to(gpu), gbias = bias.to(gpu), gc_in = c_in.to(gpu);
    Tensor gc = Tensor::empty(DType::Float32, {c.batch, c.m, c.n}, gpu);
    cuda::GemmArgs g;
    g.trans_b = c.trans_b;
    g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
    g.a = ga.raw_data(), g.lda = c.k, g.stride_a = c.m * c.k;
    g.b = gb.raw_data(), g.ldb = c.trans_b ? c.k : c.n, g.stride_b = c.k * c.n;
    g.c = gc.raw_data(), g.ldc = c.n, g.stride_c = c.m * c.n;
    g.c_in = c.beta != 0.0f ? gc_in.raw_data() : nullptr;
    g.alpha = c.alpha, g.beta = c.beta;
    g.bias = c.bias ? gbias.raw_data() : nullptr;
    g.epilogue = c.act;
    cuda::gemm(g);
    const std::vector<double> got = as_doubles(gc.to(Device::cpu())), va = as_doubles(a), vb = as_doubles(b),
                              vbias = as_doubles(bias), vc = as_doubles(c_in);
    double worst = 0;
    for (int64_t z = 0; z < c.batch; ++z) {
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = 0, mag = 0;
          for (int64_t kk = 0; kk < c.k; ++kk) {
            const double x = va[size_t((z * c.m + i) * c.k + kk)];
            const double y = vb[size_t(c.trans_b ? (z * c.n + j) * c.k + kk : (z * c.k + kk) * c.n + j)];
            sum += x * y;
            mag += std::abs(x * y);
          }
          double v = c.alpha * sum, scale = std::abs(c.alpha) * mag;
          const size_t at = size_t((z * c.m + i) * c.n + j);
          if (c.beta != 0.0f) v += c.beta * vc[at], scale += std::abs(c.beta * vc[at]);
          if (c.bias) v += vbias[size_t(j)], scale += std::abs(vbias[size_t(j)]);
          if (c.act == cuda::Epilogue::Relu) v = std::max(v, 0.0);
          if (c.act == cuda::Epilogue::Gelu) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          worst = std::max(worst, std::abs(got[at] - v) / std::max(scale, 1e-30));
        }
      }
    }
    EXPECT_LT(worst, 1e-5);
    std::printf("3xTF32 m=%lld n=%lld k=%lld: worst error / sum of |terms| %.2e\n", (long long)c.m, (long long)c.n,
                (long long)c.k, worst);
  }
  EXPECT_EQ(cuda::tf32x3_products() - before, int64_t(cases.size())) << "every case ran on the 3xTF32 kernel";
}

}  // namespace
}  // namespace ingot::gpu_test
