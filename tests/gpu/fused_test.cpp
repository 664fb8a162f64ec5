// ai.ingot.FusedElementwise on the GPU against its CPU kernel (itself checked against the unfused
// graph in tests/unit/fuse_elementwise_test.cpp): every op, every float dtype, broadcasting, and
// the device-code store that carries generated cubins in and out of packages. With NVRTC the
// generated kernels run; scripts/gpu-test.sh runs this file again with INGOT_NO_NVRTC=1 for the
// interpreter kernel.
#include <ingot/attribute.h>

#include "backends/cuda/nvrtc.h"
#include "core/tuning.h"
#include "gpu_test_util.h"
#include "ops/semantics/fused_elementwise.h"

namespace ingot::gpu_test {
namespace {

void expect_fused_matches(const std::string& program, const std::vector<Tensor>& inputs, const std::string& what) {
  SCOPED_TRACE(what + ": " + program);
  Attributes attrs;
  attrs["program"] = Attribute(program);
  const DType dt = inputs[0].dtype();
  // float32: the device math functions differ from the CPU's in the last bits (both within a few ulp).
  expect_cuda_matches_cpu("FusedElementwise", inputs, attrs, 1, dt == DType::Float32 ? 1e-5 : -1,
                          dt == DType::Float32 ? 2e-5 : -1, "ai.ingot");
}

TEST(FusedElementwise, EveryOpMatchesTheCpuInEveryDtype) {
  INGOT_REQUIRE_GPU();
  const bool generated = cuda::nvrtc::available();
  tuning::device_code().clear();
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    // Positive inputs for Log/Sqrt/Pow; a second input broadcast along the last axis.
    Tensor x = random_tensor(dt, {3, 5, 67}, 11, 0.05, 3.0);
    Tensor y = random_tensor(dt, {67}, 12, -2.0, 2.0);
#define INGOT_UNARY(name) expect_fused_matches(std::string(#name) + "(x0); Mul(t0, 1.5)", {x}, std::string(dtype_name(dt)));
#define INGOT_BINARY(name) \
  expect_fused_matches(std::string(#name) + "(x0, x1); " + #name + "(t0, 0.75)", {x, y}, std::string(dtype_name(dt)));
    INGOT_FUSED_UNARY_OPS(INGOT_UNARY)
    INGOT_FUSED_BINARY_OPS(INGOT_BINARY)
#undef INGOT_UNARY
#undef INGOT_BINARY
    // Sizes that are multiples of 4 with inputs of the output's shape or of one element: the
    // generated kernels' four-elements-per-thread path (the shapes above take the scalar loop).
    Tensor x4 = random_tensor(dt, {2, 3, 64}, 14, 0.05, 3.0);
    Tensor y4 = random_tensor(dt, {2, 3, 64}, 15, -2.0, 2.0);
    Tensor s4 = random_tensor(dt, {1}, 16, 0.5, 2.0);
#define INGOT_UNARY(name) expect_fused_matches(std::string(#name) + "(x0); Mul(t0, 1.5)", {x4}, std::string(dtype_name(dt)) + " x4");
#define INGOT_BINARY(name)                                                                                     \
  expect_fused_matches(std::string(#name) + "(x0, x1); " + #name + "(t0, x2)", {x4, y4, s4},                  \
                       std::string(dtype_name(dt)) + " x4");
    INGOT_FUSED_UNARY_OPS(INGOT_UNARY)
    INGOT_FUSED_BINARY_OPS(INGOT_BINARY)
#undef INGOT_UNARY
#undef INGOT_BINARY
    // Negative and NaN-free mixed-sign inputs through the activations.
    Tensor z = random_tensor(dt, {2, 1, 300}, 13, -6.0, 6.0);
    expect_fused_matches("Sigmoid(x0); Tanh(x0); Mul(t0, t1); HardSwish(t2); Relu(x0); LeakyRelu(t4, 0.1); Add(t3, t5)",
                         {z}, std::string(dtype_name(dt)));
  }
  // One generated kernel per structure and dtype, kept in the store for `ingot convert`.
  const auto entries = tuning::device_code().entries();
  if (generated) {
    ASSERT_FALSE(entries.empty());
    EXPECT_NE(entries[0].first.find("fused_elementwise"), std::string::npos) << entries[0].first;
  } else {
    EXPECT_TRUE(entries.empty()) << "the interpreter generates nothing";
  }
}

TEST(FusedElementwise, BroadcastsLikeTheCpu) {
  INGOT_REQUIRE_GPU();
  // GELU with a bias: x [2, 3, 4, 5] + b [3, 1, 1] (middle-axis broadcast), a scalar, a row [5], and
  // inputs of lower rank than the output.
  const std::string gelu_bias = "Add(x0, x1); Div(t0, 1.41421354); Erf(t1); Add(t2, 1); Mul(t0, t3); Mul(t4, 0.5)";
  for (DType dt : {DType::Float32, DType::Float16}) {
    Tensor x = random_tensor(dt, {2, 3, 4, 5}, 21);
    expect_fused_matches(gelu_bias, {x, random_tensor(dt, {3, 1, 1}, 22)}, "bias [3,1,1]");
    expect_fused_matches(gelu_bias, {x, random_tensor(dt, {1}, 23)}, "scalar [1]");
    expect_fused_matches(gelu_bias, {x, random_tensor(dt, {5}, 24)}, "row [5]");
    expect_fused_matches("Mul(x0, x1); Sub(t0, x2)",
                         {random_tensor(dt, {4, 1}, 25), random_tensor(dt, {1, 7}, 26), random_tensor(dt, {2, 1, 1}, 27)},
                         "[4,1] * [1,7] - [2,1,1]");
  }
  // Large enough for several grid-stride rounds per thread.
  expect_fused_matches("Mul(x0, x1); Sigmoid(t0); Mul(x0, t1)",
                       {random_tensor(DType::Float32, {33, 100003}, 28), random_tensor(DType::Float32, {33, 1}, 29)},
                       "large");
}

// Generated code is looked up before it is compiled: a store filled from a package (here: put back
// by hand, as load_package does) makes a run compile nothing.
TEST(FusedElementwise, StoredCubinsAreUsedInsteadOfCompiling) {
  INGOT_REQUIRE_GPU();
  std::string why;
  if (!cuda::nvrtc::available(&why)) GTEST_SKIP() << "generated kernels need NVRTC here: " << why;
  const std::string program = "Mul(x0, 3); Add(t0, x1); Tanh(t1)";
  Tensor x = random_tensor(DType::Float32, {5, 9}, 31), y = random_tensor(DType::Float32, {9}, 32);
  tuning::device_code().clear();
  expect_fused_matches(program, {x, y}, "compiling run");
  const auto found = tuning::device_code().entries();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(tuning::device_code().stats().misses, 1);
  tuning::device_code().clear();
  for (const auto& [k, v] : found) tuning::device_code().put(k, v);
  // Different constants, same structure: the same kernel.
  expect_fused_matches("Mul(x0, -0.5); Add(t0, x1); Tanh(t1)", {x, y}, "stored run");
  EXPECT_EQ(tuning::device_code().stats().misses, 0);
  EXPECT_GE(tuning::device_code().stats().hits, 1);
  tuning::device_code().clear();
}

}  // namespace
}  // namespace ingot::gpu_test
