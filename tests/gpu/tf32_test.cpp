// TF32 is opt-in: float32 products are exact float32 by default and within TF32's error when allowed.
#include "backends/cuda/kernels/gemm_3xtf32.h"
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

// The 3xTF32 kernel (gemm_3xtf32.cu) is within exact float32's error bound, where one TF32 product
// per product (above) is ~100x further off.
TEST(CudaTf32, ThreeTermProductsKeepFloat32Accuracy) {
  INGOT_REQUIRE_GPU();
  Tensor a = random_tensor(DType::Float32, {512, 512}, 3), b = random_tensor(DType::Float32, {512, 512}, 4);
  Tensor expected = ops::matmul(a, b);
  const Device gpu{DeviceType::CUDA, 0};
  const ScopedEnv env("INGOT_GEMM_3XTF32", "2");
  const int64_t before = cuda::tf32x3_calls();
  const double err = max_relative_error(expected, ops::matmul(a.to(gpu), b.to(gpu)));
  EXPECT_EQ(cuda::tf32x3_calls() - before, 1);
  EXPECT_LT(err, 1e-5);
  std::printf("max relative error: 3xTF32 %.2e\n", err);
}

// Long sums: the tensor core's adds truncate, so accumulating all of K on it drifts toward zero
// (one output 1.3e-3 off at K = 1536 on an H100); the kernel restarts its sums at each k8 step and
// adds them in float32 (INGOT_GEMM_3XTF32_STEP_SUMS, the default), which keeps it within a few
// times cuBLASLt's exact float32 error and below the one-sum form's, all measured against float64.
TEST(CudaTf32, LongSumsStayWithinExactFloat32Error) {
  INGOT_REQUIRE_GPU();
  Tensor a = random_tensor(DType::Float32, {128, 8192}, 5), b = random_tensor(DType::Float32, {8192, 128}, 6);
  Tensor expected = ops::matmul(a.cast(DType::Float64), b.cast(DType::Float64)).cast(DType::Float32);
  const Device gpu{DeviceType::CUDA, 0};
  const Tensor ga = a.to(gpu), gb = b.to(gpu);
  double exact = 0, whole = 0, steps = 0;
  {
    const ScopedEnv env("INGOT_GEMM_3XTF32", "0");
    exact = max_relative_error(expected, ops::matmul(ga, gb));
  }
  const ScopedEnv env("INGOT_GEMM_3XTF32", "2");
  const int64_t before = cuda::tf32x3_calls();
  {
    const ScopedEnv sums("INGOT_GEMM_3XTF32_STEP_SUMS", "0");
    whole = max_relative_error(expected, ops::matmul(ga, gb));
  }
  steps = max_relative_error(expected, ops::matmul(ga, gb));
  EXPECT_EQ(cuda::tf32x3_calls() - before, 2);
  EXPECT_LT(steps, 3 * exact + 1e-7);
  EXPECT_LT(steps, whole);
  std::printf("max relative error at K = 8192 against float64: exact float32 %.2e, 3xTF32 %.2e (one sum over K: %.2e)\n",
              exact, steps, whole);
}

}  // namespace
}  // namespace ingot::gpu_test
