// Placement on the GPU: nodes with CUDA kernels run there, the others fall back to the CPU with
// copies around them, the fallback is reported and counted, and results match the CPU session.
#include <ingot/session.h>
#include <stdlib.h>

#include "../unit/test_util.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using ingot::testing::make_node;
using ingot::testing::model_with;
using ingot::testing::save_model;
using ingot::testing::static_tensor_info;

// X -> Mul(X, X) -> Relu -> Sigmoid -> Add(., X) -> Y, plus a Shape -> Gather chain that stays on the host.
std::string chain_model() {
  onnx::GraphProto g;
  g.set_name("chain");
  *g.add_input() = static_tensor_info("X", onnx::TensorProto::FLOAT, {2, 3, 8});
  *g.add_node() = make_node("Mul", {"X", "X"}, {"sq"});
  *g.add_node() = make_node("Relu", {"sq"}, {"r"});
  *g.add_node() = make_node("Sigmoid", {"r"}, {"s"});
  *g.add_node() = make_node("Add", {"s", "X"}, {"Y"});
  *g.add_node() = make_node("Shape", {"X"}, {"shape"});
  *g.add_output() = static_tensor_info("Y", onnx::TensorProto::FLOAT, {2, 3, 8});
  *g.add_output() = static_tensor_info("shape", onnx::TensorProto::INT64, {3});
  return save_model(model_with(g), "chain.onnx");
}

TEST(CudaPlacement, EverythingOnTheGpuWithoutFallbacks) {
  INGOT_REQUIRE_GPU();
  std::string path = chain_model();
  SessionOptions gpu_options;
  gpu_options.device = Device{DeviceType::CUDA, 0};
  Session gpu = Session::load(path, gpu_options);
  Session cpu = Session::load(path);
  EXPECT_TRUE(gpu.fallbacks().empty()) << gpu.fallback_summary();
  Tensor x = random_tensor(DType::Float32, {2, 3, 8}, 1);
  auto expected = cpu.run({x});
  auto actual = gpu.run({x});
  expect_close(expected[0], actual[0].to(Device{DeviceType::CUDA, 0}), 1e-6, 1e-5, "Y");
  EXPECT_EQ(actual[1].to_int64_vector(), (std::vector<int64_t>{2, 3, 8}));
  TransferStats stats = gpu.last_run_stats();
  EXPECT_EQ(stats.fallback_ops, 0);
  EXPECT_EQ(stats.host_to_device_bytes, 2 * 3 * 8 * 4);  // X, once, although three nodes read it
}

TEST(CudaPlacement, HiddenKernelFallsBackVisiblyAndStaysCorrect) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv hide("INGOT_HIDE_CUDA_KERNELS", "Relu");
  std::string path = chain_model();
  SessionOptions gpu_options;
  gpu_options.device = Device{DeviceType::CUDA, 0};
  gpu_options.optimize = false;  // placement of the nodes as written (the passes fuse the chain)
  gpu_options.report_fallbacks = false;
  Session gpu = Session::load(path, gpu_options);
  Session cpu = Session::load(path);
  auto fallbacks = gpu.fallbacks();
  ASSERT_EQ(fallbacks.size(), 1u) << gpu.fallback_summary();
  EXPECT_EQ(fallbacks[0].op, "Relu");
  EXPECT_NE(gpu.fallback_summary().find("Relu x1"), std::string::npos) << gpu.fallback_summary();
  Tensor x = random_tensor(DType::Float32, {2, 3, 8}, 2);
  auto expected = cpu.run({x});
  auto actual = gpu.run({x});
  expect_close(expected[0], actual[0].to(Device{DeviceType::CUDA, 0}), 1e-6, 1e-5, "Y");
  TransferStats stats = gpu.last_run_stats();
  EXPECT_EQ(stats.fallback_ops, 1);
  // Relu's input comes down (192 bytes) and its output goes back up (192 bytes).
  EXPECT_EQ(stats.fallback_copy_bytes, 2 * 2 * 3 * 8 * 4);
  EXPECT_EQ(stats.device_to_host_bytes, 2 * 3 * 8 * 4);
}

// A kernel's own limits are asked at placement: CUDA kernels index at most 8 dims, so a rank-9 Relu
// runs on the CPU, reported with the reason, and computes the right result (it failed at run time).
TEST(CudaPlacement, KernelLimitsPlaceTheNodeOnTheCpuAtLoad) {
  INGOT_REQUIRE_GPU();
  const std::vector<int64_t> dims = {2, 1, 2, 1, 2, 1, 2, 1, 3};
  onnx::GraphProto g;
  g.set_name("rank9");
  *g.add_input() = static_tensor_info("X", onnx::TensorProto::FLOAT, dims);
  *g.add_node() = make_node("Relu", {"X"}, {"Y"});
  *g.add_output() = static_tensor_info("Y", onnx::TensorProto::FLOAT, dims);
  std::string path = save_model(model_with(g), "rank9.onnx");
  SessionOptions gpu_options;
  gpu_options.device = Device{DeviceType::CUDA, 0};
  gpu_options.optimize = false;  // the Relu as written
  gpu_options.report_fallbacks = false;
  Session gpu = Session::load(path, gpu_options);
  auto fallbacks = gpu.fallbacks();
  ASSERT_EQ(fallbacks.size(), 1u) << gpu.fallback_summary();
  EXPECT_EQ(fallbacks[0].op, "Relu");
  EXPECT_NE(fallbacks[0].reason.find("input 0 has rank 9, above the kernel's limit of 8"), std::string::npos)
      << fallbacks[0].reason;
  Tensor x = random_tensor(DType::Float32, dims, 3);
  Session cpu = Session::load(path);
  expect_close(cpu.run({x})[0], gpu.run({x})[0].to(Device{DeviceType::CUDA, 0}), 0, 0, "Y");
}

TEST(CudaPlacement, MissingDeviceIsAClearError) {
  if (cuda::available()) GTEST_SKIP() << "a GPU is present";
  SessionOptions options;
  options.device = Device{DeviceType::CUDA, 0};
  try {
    Session::load(chain_model(), options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 is not available"), std::string::npos) << e.what();
  }
}

TEST(CudaMemory, OutOfMemoryIsAnErrorAndTheProcessStaysUsable) {
  INGOT_REQUIRE_GPU();
  try {
    Tensor huge = Tensor::empty(DType::Float32, {int64_t(1) << 40}, Device{DeviceType::CUDA, 0});  // 4 TiB
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA out of memory"), std::string::npos) << e.what();
  }
  Tensor a = random_tensor(DType::Float32, {1000}, 3);
  expect_cuda_matches_cpu("Relu", {a});
}

TEST(CudaMemory, FreedBlocksAreReused) {
  INGOT_REQUIRE_GPU();
  { Tensor t = Tensor::empty(DType::Float32, {1 << 20}, Device{DeviceType::CUDA, 0}); }
  size_t mallocs = cuda::memory_stats().cuda_mallocs;
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty(DType::Float32, {1 << 20}, Device{DeviceType::CUDA, 0});
  EXPECT_EQ(cuda::memory_stats().cuda_mallocs, mallocs);
}

}  // namespace
}  // namespace ingot::gpu_test
