// Eager autograd on CUDA tensors: a small CNN's loss and gradients computed on the GPU equal the
// CPU's (float32 both), the gradients stay on the device, and an op without a CUDA kernel falls back.
#include <ingot/autograd.h>
#include <ingot/ops.h>

#include <random>

#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using Ints = std::vector<int64_t>;

Tensor uniform(Shape shape, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-float(scale), float(scale));
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

struct Net {
  std::vector<Tensor> params;  // w1, b1, w2, b2, w3, b3
  Tensor loss;
};

// conv -> relu -> max pool -> conv (stride 2) -> tanh -> global average pool -> gemm -> cross-entropy.
Net run(Device device) {
  std::vector<Tensor> host = {uniform({8, 3, 3, 3}, 1, 0.4), uniform({8}, 2, 0.1),  uniform({16, 8, 3, 3}, 3, 0.2),
                              uniform({16}, 4, 0.1),         uniform({5, 16}, 5, 0.3), uniform({5}, 6, 0.1)};
  Net net;
  for (const Tensor& h : host) {
    Tensor p = h.to(device);
    p.set_requires_grad(true);
    net.params.push_back(p);
  }
  Tensor x = uniform({4, 3, 16, 16}, 7, 1.0).to(device);
  Tensor labels = Tensor::from_vector<int64_t>({1, 4, 0, 2}, {4}).to(device);
  auto& p = net.params;
  Tensor h = ops::relu(ops::call("Conv", {x, p[0], p[1]}, {{"pads", Ints{1, 1, 1, 1}}}, 1).at(0));
  h = ops::call("MaxPool", {h}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, 1).at(0);
  h = ops::tanh(ops::call("Conv", {h, p[2], p[3]}, {{"strides", Ints{2, 2}}}, 1).at(0));
  h = ops::call("Flatten", {ops::call("GlobalAveragePool", {h}, {}, 1).at(0)}, {}, 1).at(0);
  Tensor logits = ops::call("Gemm", {h, p[4], p[5]}, {{"transB", int64_t(1)}}, 1).at(0);
  net.loss = ops::call("SoftmaxCrossEntropyLoss", {logits, labels}, {}, 1).at(0);
  net.loss.backward();
  return net;
}

TEST(CudaAutograd, CnnGradientsMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  Net cpu = run(Device::cpu());
  Net gpu = run(Device::parse("cuda"));
  EXPECT_NEAR(gpu.loss.item_double(), cpu.loss.item_double(), 1e-4);
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    Tensor g = gpu.params[i].grad();
    ASSERT_TRUE(g.defined()) << "parameter " << i;
    EXPECT_EQ(g.device().type, DeviceType::CUDA) << "parameter " << i;
    std::vector<float> a = g.to_vector<float>(), e = cpu.params[i].grad().to_vector<float>();
    ASSERT_EQ(a.size(), e.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], e[k], 1e-4 + 1e-3 * std::abs(e[k])) << "parameter " << i << "[" << k << "]";
  }
}

TEST(CudaAutograd, AnOpWithoutACudaKernelFallsBackInEagerCalls) {
  INGOT_REQUIRE_GPU();
  // Float64 Erf has no CUDA kernel for every dtype on every build: whichever way, the call works and
  // the result comes back on the device.
  Tensor x = uniform({6}, 8, 1.0).cast(DType::Float64).to(Device::parse("cuda"));
  x.set_requires_grad(true);
  Tensor y = ops::call("ReduceSum", {ops::call("Erf", {x}, {}, 1).at(0)}, {{"keepdims", int64_t(0)}}, 1).at(0);
  EXPECT_EQ(y.device().type, DeviceType::CUDA);
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  std::vector<double> g = x.grad().to_vector<double>(), xv = x.detach().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], 2 / std::sqrt(M_PI) * std::exp(-xv[i] * xv[i]), 1e-9);
}

// compile(grad(loss)) of device tensors: the step's graph runs on the GPU without a copy to the host
// (integer labels included), so from the third call it replays as one CUDA graph, and it computes
// what the eager step computes.
TEST(CudaAutograd, ACompiledGradientStepReplaysACudaGraph) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  auto loss = [](const std::vector<Tensor>& a) {  // w, b, x, labels
    Tensor logits = ops::add(ops::matmul(a[2], a[0]), a[1]);
    return std::vector<Tensor>{ops::call("SoftmaxCrossEntropyLoss", {logits, a[3]}, {}, 1).at(0)};
  };
  std::vector<Tensor> args = {uniform({16, 5}, 9, 0.3).to(gpu), uniform({5}, 10, 0.1).to(gpu), uniform({8, 16}, 11, 1.0).to(gpu),
                              Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2}, {8}).to(gpu)};
  Function step = grad(loss, {0, 1});
  CompiledFunction compiled = compile(step);
  std::vector<Tensor> eager = step(args), out;
  for (int i = 0; i < 4; ++i) out = compiled(args);
  EXPECT_NE(compiled.report(args).find("CUDA graph: replayed"), std::string::npos) << compiled.report(args);
  ASSERT_EQ(out.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    std::vector<float> a = out[k].to_vector<float>(), e = eager[k].to_vector<float>();
    ASSERT_EQ(a.size(), e.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-5 + 1e-4 * std::abs(e[i])) << k << "[" << i << "]";
  }
}

}  // namespace
}  // namespace ingot::gpu_test
