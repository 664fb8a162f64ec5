// Autocast and GradScaler (include/ingot/amp.h). The policy checks are PyTorch's autocast op lists
// (aten/src/ATen/autocast_mode.cpp: lower_precision_fp, fp32, promote) written out here; the
// numeric checks compare a bfloat16 autocast forward and backward with the float32 one.
#include <gtest/gtest.h>
#include <ingot/amp.h>
#include <ingot/autograd.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>

namespace ingot {
namespace {

TEST(Amp, PoliciesFollowPyTorchsAutocastLists) {
  // lower_precision_fp: convolutions, matrix products, linear, attention.
  for (const char* op : {"Conv", "ConvTranspose", "MatMul", "Gemm"}) EXPECT_EQ(amp::autocast_policy(op), "low") << op;
  EXPECT_EQ(amp::autocast_policy("Attention", "ai.ingot"), "low");
  EXPECT_EQ(amp::autocast_policy("FusedMatMul", "ai.ingot"), "low");
  // fp32: exp/log/pow, reductions, softmax/log_softmax, layer/group norm, losses, upsampling.
  for (const char* op : {"Exp", "Log", "Pow", "ReduceSum", "ReduceMean", "Softmax", "LogSoftmax", "LayerNormalization",
                         "GroupNormalization", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "CumSum",
                         "Softplus", "Reciprocal"})
    EXPECT_EQ(amp::autocast_policy(op), "float32") << op;
  // Not listed by PyTorch (they run in their input's type): here they follow their inputs.
  for (const char* op : {"Relu", "Add", "Mul", "MaxPool", "Reshape", "Transpose", "Concat", "Gather", "Where"})
    EXPECT_EQ(amp::autocast_policy(op), "follow") << op;
  EXPECT_EQ(amp::autocast_policy("NoSuchOp"), "");
}

Tensor random(Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.cast(DType::Float64).to_vector<double>(), y = b.cast(DType::Float64).to_vector<double>();
  double scale = 0, worst = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst / std::max(scale, 1e-30);
}

// A small CNN's forward and backward under bfloat16 autocast: the conv and linear outputs are
// bfloat16, the loss float32, the gradients float32 (the parameters' dtype), and all within
// bfloat16's precision of the float32 run. (Average pooling: a max pool's choices change where
// bfloat16 rounding makes ties, which moves gradients by more than rounding.)
TEST(Amp, CpuBfloat16AutocastMatchesFloat32WithinItsPrecision) {
  manual_seed(4);
  nn::Sequential net{std::make_shared<nn::Conv2d>(2, 6, 3, nn::ConvOptions{.padding = 1}), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::AvgPool2d>(2), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(6 * 4 * 4, 5)};
  Tensor x = random({3, 2, 8, 8}, 1);
  Tensor y = Tensor::from_vector<int64_t>({1, 4, 0}, {3});
  auto run = [&](bool autocast) {
    net.zero_grad();
    Tensor logits, loss;
    {
      amp::Autocast region(DeviceType::CPU, DType::BFloat16, autocast);
      EXPECT_EQ(amp::is_autocast_enabled(DeviceType::CPU), autocast);
      logits = net.forward(x);
      loss = nn::functional::cross_entropy(logits, y);
    }
    EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(logits.dtype(), autocast ? DType::BFloat16 : DType::Float32);
    EXPECT_EQ(loss.dtype(), DType::Float32);  // losses run in float32
    loss.backward();
    std::vector<Tensor> grads;
    for (const Tensor& p : net.parameters()) {
      EXPECT_EQ(p.grad().dtype(), DType::Float32);
      grads.push_back(p.grad());
    }
    return std::make_tuple(logits.cast(DType::Float32), loss, grads);
  };
  auto [l16, loss16, g16] = run(true);
  auto [l32, loss32, g32] = run(false);
  EXPECT_LT(max_rel_diff(l16, l32), 2e-2);
  EXPECT_LT(std::abs(loss16.item_double() - loss32.item_double()), 2e-2 * std::abs(loss32.item_double()));
  for (size_t i = 0; i < g16.size(); ++i) EXPECT_LT(max_rel_diff(g16[i], g32[i]), 5e-2) << "gradient " << i;
}

TEST(Amp, FollowOpsPromoteMixedInputsAndRegionsNest) {
  Tensor a = random({4}, 2), b = random({4}, 3).cast(DType::BFloat16);
  {
    amp::Autocast outer(DeviceType::CPU);
    EXPECT_EQ(amp::autocast_dtype(DeviceType::CPU), DType::BFloat16);
    EXPECT_EQ(ops::add(a, b).dtype(), DType::Float32);  // promoted to the wider
    EXPECT_EQ(ops::relu(b).dtype(), DType::BFloat16);   // follows
    EXPECT_EQ(ops::exp(b).dtype(), DType::Float32);     // fp32 list
    {
      amp::Autocast off(DeviceType::CPU, DType::Undefined, false);
      EXPECT_EQ(ops::matmul(ops::reshape(a, {1, 4}), ops::reshape(a, {4, 1})).dtype(), DType::Float32);
    }
    EXPECT_EQ(ops::matmul(ops::reshape(a, {1, 4}), ops::reshape(a, {4, 1})).dtype(), DType::BFloat16);
    // CUDA regions do not affect CPU tensors.
    amp::Autocast cuda(DeviceType::CUDA);
    EXPECT_TRUE(amp::is_autocast_enabled(DeviceType::CUDA));
  }
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CUDA));
  EXPECT_THROW(amp::Autocast(DeviceType::CPU, DType::Float64), Error);
}

// The scaler's sequence, as PyTorch's GradScaler defines it: the scale doubles after
// growth_interval finite steps and halves (the step skipped) after an inf or NaN.
TEST(Amp, GradScalerGrowsBacksOffAndSkips) {
  Tensor w = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  w.set_requires_grad(true);
  optim::SGD opt({w}, {.lr = 0.5});
  amp::GradScaler scaler({.init_scale = 8, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 3});
  auto step = [&](float gradient) {
    opt.zero_grad();
    Tensor loss = ops::mul(w, Tensor::from_vector<float>({gradient, gradient}, {2}));
    loss = ops::call("ReduceSum", {loss}, {{"keepdims", int64_t(0)}}, 1).at(0);
    Tensor scaled = scaler.scale(loss);
    if (std::isfinite(gradient)) {
      EXPECT_EQ(scaled.item_double(), loss.item_double() * scaler.get_scale());
    }
    scaled.backward();
    scaler.unscale(opt);
    if (std::isfinite(gradient)) {
      EXPECT_EQ(w.grad().to_vector<float>()[0], gradient);  // unscaled
    }
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  };
  std::vector<double> scales;
  std::vector<float> w0;
  EXPECT_TRUE(step(0.25f));
  scales.push_back(scaler.get_scale());
  EXPECT_TRUE(step(0.25f));
  scales.push_back(scaler.get_scale());
  EXPECT_TRUE(step(0.25f));  // third finite step: the scale grows
  scales.push_back(scaler.get_scale());
  w0 = w.to_vector<float>();
  EXPECT_FALSE(step(std::numeric_limits<float>::infinity()));  // skipped, backs off
  scales.push_back(scaler.get_scale());
  EXPECT_EQ(w.to_vector<float>(), w0);
  EXPECT_FALSE(step(std::nanf("")));
  scales.push_back(scaler.get_scale());
  EXPECT_TRUE(step(0.25f));
  scales.push_back(scaler.get_scale());
  EXPECT_EQ(scales, (std::vector<double>{8, 8, 16, 8, 4, 4}));
  EXPECT_EQ(scaler.growth_tracker(), 1);
  // Three finite steps of 0.5 * 0.25 each moved w.
  EXPECT_FLOAT_EQ(w.to_vector<float>()[0], 1.0f - 4 * 0.125f);
  amp::GradScaler restored;
  restored.load_state_dict(scaler.state_dict());
  EXPECT_EQ(restored.get_scale(), 4);
  EXPECT_EQ(restored.growth_tracker(), 1);
}

}  // namespace
}  // namespace ingot
