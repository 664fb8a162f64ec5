// QuantizeLinear / DequantizeLinear on the GPU against the CPU kernels (which tests/unit checks
// against float64 references and the ONNX suite), and a QDQ model from `ingot::quantize` running on
// the GPU without CPU fallbacks.
#include <gtest/gtest.h>
#include <ingot/quantize.h>
#include <ingot/session.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "../unit/test_util.h"
#include "core/npy.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

TEST(CudaQuantization, QuantizeAndDequantizePerTensorAndPerAxis) {
  INGOT_REQUIRE_GPU();
  Tensor x = random_tensor(DType::Float32, {2, 5, 7, 9}, 3, -4, 4);
  Tensor scale = Tensor::from_vector(std::vector<float>{0.031f}, {});
  Tensor scales = Tensor::from_vector(std::vector<float>{0.01f, 0.02f, 0.05f, 0.1f, 0.013f}, {5});
  for (DType q : {DType::UInt8, DType::Int8}) {
    SCOPED_TRACE(std::string(dtype_name(q)));
    Tensor zp = q == DType::UInt8 ? Tensor::from_vector(std::vector<uint8_t>{121}, {})
                                  : Tensor::from_vector(std::vector<int8_t>{-7}, {});
    Tensor zps = q == DType::UInt8 ? Tensor::from_vector(std::vector<uint8_t>{0, 10, 128, 200, 255}, {5})
                                   : Tensor::from_vector(std::vector<int8_t>{-128, -5, 0, 5, 127}, {5});
    // Exact: both round x / scale half to even in float32.
    expect_cuda_matches_cpu("QuantizeLinear", {x, scale, zp}, {}, 1, 0, 0);
    expect_cuda_matches_cpu("QuantizeLinear", {x, scales, zps}, {{"axis", int64_t(1)}}, 1, 0, 0);
    Tensor xq = ops::call("QuantizeLinear", {x, scales, zps}, {{"axis", int64_t(1)}})[0];
    expect_cuda_matches_cpu("DequantizeLinear", {xq, scales, zps}, {{"axis", int64_t(1)}}, 1, 0, 0);
    expect_cuda_matches_cpu("DequantizeLinear", {xq, scale, zp}, {}, 1, 0, 0);
  }
  // Saturation, NaN to the zero point, halves to even; float16 input; int32 (bias) dequantization.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor edge = Tensor::from_vector<float>({nan, 1e20f, -1e20f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f}, {8});
  Tensor one = Tensor::from_vector(std::vector<float>{1.0f}, {});
  expect_cuda_matches_cpu("QuantizeLinear", {edge, one, Tensor::from_vector(std::vector<uint8_t>{3}, {})}, {}, 1, 0, 0);
  expect_cuda_matches_cpu("QuantizeLinear", {x.cast(DType::Float16), scale, Tensor()}, {}, 1, 0, 0);
  Tensor bias = Tensor::from_vector(std::vector<int32_t>{-100000, 0, 7, 123456}, {4});
  expect_cuda_matches_cpu("DequantizeLinear", {bias, Tensor::from_vector(std::vector<float>{1e-4f}, {})}, {}, 1, 0, 0);
}

// Conv -> Relu -> Gemm, quantized to a QDQ model: on the GPU every node has a CUDA kernel (the
// Q/DQ included), and the outputs match the CPU session's (which folds the Q/DQ into integer
// kernels: they agree to a requantization step).
TEST(CudaQuantization, QdqModelRunsWithoutFallbacks) {
  INGOT_REQUIRE_GPU();
  using namespace ingot::testing;
  onnx::GraphProto g;
  g.set_name("qdq_gpu");
  std::mt19937 rng(1);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {1, 4, 10, 10});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {1, 6});
  add_random_initializer(g, "w1", {8, 4, 3, 3}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "w2", {6, 512}, rng, -0.1f, 0.1f);
  *g.add_node() = make_node("Conv", {"x", "w1"}, {"c"});
  *g.add_node() = make_node("Relu", {"c"}, {"r"});
  *g.add_node() = make_node("Flatten", {"r"}, {"f"});
  auto gemm = make_node("Gemm", {"f", "w2"}, {"y"});
  auto* tb = gemm.add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  *g.add_node() = gemm;
  const std::string model = save_model(model_with(g, 13), "qdq_gpu.onnx");
  auto calib = temp_dir() / "qdq_gpu_calib";
  std::filesystem::create_directories(calib);
  for (uint32_t i = 0; i < 4; ++i)
    save_npy((calib / (std::to_string(i) + ".npy")).string(), random_tensor(DType::Float32, {1, 4, 10, 10}, 50 + i));
  QuantizeSettings s;
  s.calibration = {calib.string()};
  const std::string qdq = (temp_dir() / "qdq_gpu.qdq.onnx").string();
  quantize(model, qdq, s);
  SessionOptions o;
  o.device = Device{DeviceType::CUDA, 0};
  o.outputs_on_device = true;
  Session gpu = Session::load(qdq, o);
  EXPECT_TRUE(gpu.fallbacks().empty()) << gpu.fallback_summary();
  Tensor x = random_tensor(DType::Float32, {1, 4, 10, 10}, 99);
  Tensor y_gpu = gpu.run({x})[0];
  Tensor y_cpu = Session::load(qdq).run({x})[0];
  expect_close(y_cpu, y_gpu, 0.05, 0.02, "QDQ model, GPU vs CPU");
}

}  // namespace
}  // namespace ingot::gpu_test
