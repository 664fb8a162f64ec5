// Training on CUDA: the fused optimizer steps and Philox dropout against their CPU kernels, and a
// small network's training step (nn modules, losses, AdamW) on the GPU against the same on the CPU;
// the recurrent and attention modules' gradients on the GPU against the CPU's.
#include <ingot/autograd.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>

#include <functional>
#include <map>
#include <set>

#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

void expect_near(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = got.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  std::vector<double> w = want.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) / (1 + std::abs(w[i])));
  EXPECT_LE(worst, tol) << what;
}

// Three parameters of different sizes (one larger than a launch's blocks cover) through 4 steps of
// every optimizer, on the GPU and on the CPU, from the same gradients.
TEST(CudaTraining, OptimizerStepsMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  for (const std::string name : {"sgd", "sgd_nesterov", "adam", "adamw_amsgrad"}) {
    SCOPED_TRACE(name);
    std::vector<Tensor> cpu_params, gpu_params;
    for (int k = 0; k < 3; ++k) {
      Tensor p = random_tensor(DType::Float32, {k == 2 ? 300000 : 17 + k, 3}, 10 + uint32_t(k));
      Tensor c = p.clone(), g = p.to(gpu);
      c.set_requires_grad(true);
      g.set_requires_grad(true);
      cpu_params.push_back(c);
      gpu_params.push_back(g);
    }
    auto make = [&](std::vector<Tensor> params) -> std::unique_ptr<optim::Optimizer> {
      if (name == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
      if (name == "sgd_nesterov") return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
      if (name == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01});
      optim::AdamWOptions o;
      o.amsgrad = true;
      return std::make_unique<optim::AdamW>(params, o);
    };
    auto cpu_opt = make(cpu_params), gpu_opt = make(gpu_params);
    for (int step = 0; step < 4; ++step) {
      for (size_t k = 0; k < 3; ++k) {
        Tensor grad = random_tensor(DType::Float32, cpu_params[k].shape(), 100 + uint32_t(step * 3 + k));
        cpu_params[k].set_grad(grad);
        gpu_params[k].set_grad(grad.to(gpu));
      }
      cpu_opt->step();
      gpu_opt->step();
    }
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(gpu_params[k].device(), gpu);
      expect_near(gpu_params[k], cpu_params[k], 2e-6, "parameter " + std::to_string(k));
    }
  }
}

TEST(CudaTraining, UnscaleGradsMatchesTheCpuAndFindsInfs) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  for (bool with_inf : {false, true}) {
    Tensor a = random_tensor(DType::Float32, {1000, 7}, 1), b = random_tensor(DType::Float32, {33}, 2);
    if (with_inf) b.data<float>()[5] = INFINITY;
    Tensor ga = a.to(gpu), gb = b.to(gpu);
    Tensor inv = Tensor::scalar<double>(0.125);
    Tensor cpu_found = ops::call("UnscaleGrads", {inv, a, b}, {}, 3, "ai.ingot").at(0);
    Tensor gpu_found = ops::call("UnscaleGrads", {inv, ga, gb}, {}, 3, "ai.ingot").at(0);
    EXPECT_EQ(gpu_found.to_vector<float>(), cpu_found.to_vector<float>());
    EXPECT_EQ(cpu_found.to_vector<float>()[0], with_inf ? 1.0f : 0.0f);
    expect_near(ga, a, 0, "a (in place)");
  }
}

TEST(CudaTraining, DropoutMaskIsTheCpusBitForBit) {
  INGOT_REQUIRE_GPU();
  Tensor x = random_tensor(DType::Float32, {257, 129}, 3);
  const Attributes attrs{{"ratio", 0.3f}, {"seed", int64_t(123456789)}};
  std::vector<Tensor> cpu = ops::call("Dropout", {x}, attrs, 2, "ai.ingot");
  std::vector<Tensor> gpu = ops::call("Dropout", {x.to(Device::parse("cuda"))}, attrs, 2, "ai.ingot");
  EXPECT_EQ(gpu[1].to_vector<bool>(), cpu[1].to_vector<bool>());
  expect_near(gpu[0], cpu[0], 1e-7, "output");
  const std::vector<bool> m = cpu[1].to_vector<bool>();
  const double kept = double(std::count(m.begin(), m.end(), true)) / double(m.size());
  EXPECT_NEAR(kept, 0.7, 0.01);
}

// conv + batch norm + relu + pool + linear + dropout + cross-entropy, one SGD step: the loss and
// the updated parameters on the GPU equal the CPU's (float32 both, same initial weights and mask).
// (SGD: Adam's first step moves every parameter by lr sign(g), so the conv bias that batch norm
// cancels, whose gradient is rounding noise, would move by +-lr on either device.)
TEST(CudaTraining, ANetworksTrainingStepMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  auto build = [] {
    manual_seed(42);
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
        std::make_shared<nn::Conv2d>(1, 8, 3, nn::ConvOptions{.padding = 1}), std::make_shared<nn::BatchNorm2d>(8),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(8 * 7 * 7, 10), std::make_shared<nn::Dropout>(0.2)});
    return net;
  };
  Tensor x = random_tensor(DType::Float32, {16, 1, 14, 14}, 5);
  Tensor y = Tensor::empty(DType::Int64, {16});
  for (int64_t i = 0; i < 16; ++i) y.data<int64_t>()[i] = i % 10;
  auto step = [&](Device device) {
    auto net = build();
    net->to(device);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    manual_seed(7);  // the same dropout seed on both
    Tensor loss = nn::functional::cross_entropy(net->forward(x.to(device)), y.to(device), {.label_smoothing = 0.1});
    loss.backward();
    opt.step();
    return std::make_pair(loss, net->state_dict());
  };
  auto [cpu_loss, cpu_state] = step(Device::cpu());
  auto [gpu_loss, gpu_state] = step(Device::parse("cuda"));
  expect_near(gpu_loss, cpu_loss, 1e-5, "loss");
  for (const auto& [name, t] : cpu_state) {
    EXPECT_EQ(gpu_state.at(name).device().type, DeviceType::CUDA) << name;
    expect_near(gpu_state.at(name), t, 1e-4, name);
  }
}

// LSTM, GRU and MultiheadAttention on CUDA against the CPU: outputs, input gradients and every
// parameter's gradient (the CPU path is tested against PyTorch in tests/unit/nn_test.cpp).
TEST(CudaTraining, RecurrentAndAttentionModulesMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  struct Case {
    const char* name;
    std::function<std::shared_ptr<nn::Module>()> make;
    std::function<std::vector<Tensor>(nn::Module&, const Tensor&)> run;
    Shape input;
  };
  std::vector<Case> cases = {
      {"lstm", [] { return std::make_shared<nn::LSTM>(6, 8, nn::RNNOptions{.num_layers = 2, .bidirectional = true}); },
       [](nn::Module& m, const Tensor& x) {
         auto o = static_cast<nn::LSTM&>(m).forward(x);
         return std::vector<Tensor>{o.output, o.h_n, o.c_n};
       },
       {7, 3, 6}},
      {"gru", [] { return std::make_shared<nn::GRU>(6, 8, nn::RNNOptions{.batch_first = true}); },
       [](nn::Module& m, const Tensor& x) {
         auto o = static_cast<nn::GRU&>(m).forward(x);
         return std::vector<Tensor>{o.output, o.h_n};
       },
       {3, 7, 6}},
      {"mha", [] { return std::make_shared<nn::MultiheadAttention>(32, 4, nn::MultiheadAttentionOptions{.batch_first = true}); },
       [](nn::Module& m, const Tensor& x) {
         return std::vector<Tensor>{static_cast<nn::MultiheadAttention&>(m).forward(x, x, x, {.is_causal = true}).output};
       },
       {2, 64, 32}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x0 = random_tensor(DType::Float32, c.input, 3);
    auto grads = [&](Device device) {
      manual_seed(5);
      auto m = c.make();
      m->to(device);
      Tensor x = x0.to(device);
      x.set_requires_grad(true);
      std::vector<Tensor> outs = c.run(*m, x);
      Tensor loss;
      for (const Tensor& y : outs) {
        Tensor term = ops::reduce_sum(ops::mul(y, y), {}, false);
        loss = loss.defined() ? ops::add(loss, term) : term;
      }
      loss.backward();
      std::map<std::string, Tensor> r{{"x.grad", x.grad()}};
      for (size_t i = 0; i < outs.size(); ++i) r["out" + std::to_string(i)] = outs[i];
      for (const auto& [name, p] : m->named_parameters()) r[name + ".grad"] = p.grad();
      return r;
    };
    auto cpu = grads(Device::cpu()), gpu = grads(Device::parse("cuda"));
    for (const auto& [name, t] : cpu) expect_near(gpu.at(name), t, 1e-4, name);
  }
}

// ai.ingot.ConvWeightGrad on CUDA (cuDNN's backward-filter; asymmetric pads through a padded copy,
// 16-bit inputs, in 16 bits and widened to float32) against the CPU's.
TEST(CudaTraining, ConvWeightGradMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  using Ints = std::vector<int64_t>;
  struct Case {
    Shape x, dy;
    Attributes attrs;
  };
  const std::vector<Case> cases = {
      {{8, 3, 28, 28}, {8, 16, 28, 28}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 4, 11, 11}, {2, 6, 6, 5}, {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"dilations", Ints{1, 2}}}},
      {{3, 8, 7, 7}, {3, 8, 7, 7}, {{"kernel_shape", Ints{3, 3}}, {"group", int64_t(8)}, {"pads", Ints{1, 1, 1, 1}}}},
      {{4, 64, 14, 14}, {4, 128, 7, 7}, {{"kernel_shape", Ints{1, 1}}, {"strides", Ints{2, 2}}}},
      {{2, 3, 20}, {2, 4, 6}, {{"kernel_shape", Ints{5}}, {"strides", Ints{3}}}},
  };
  uint64_t seed = 11;
  for (const Case& c : cases) {
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
      SCOPED_TRACE(shape_str(c.x) + " " + std::string(dtype_name(dt)));
      const Tensor x = random_tensor(DType::Float32, c.x, seed++).cast(dt), dy = random_tensor(DType::Float32, c.dy, seed++).cast(dt);
      const Tensor want = ops::call("ConvWeightGrad", {x.cast(DType::Float32), dy.cast(DType::Float32)}, c.attrs, 1, "ai.ingot").at(0);
      const Device gpu = Device::parse("cuda");
      for (int64_t widen : {0, 1}) {
        if (widen && dt == DType::Float32) continue;
        Attributes attrs = c.attrs;
        attrs["widen"] = widen;
        const Tensor got = ops::call("ConvWeightGrad", {x.to(gpu), dy.to(gpu)}, attrs, 1, "ai.ingot").at(0);
        EXPECT_EQ(got.device().type, DeviceType::CUDA);
        EXPECT_EQ(got.dtype(), dt);
        // 16-bit results are rounded once (and cuDNN may accumulate partial sums in 16 bits; widened,
        // TF32 products).
        expect_near(got, want, dt == DType::Float32 ? 1e-4 : 3e-2, widen ? "dW widened" : "dW");
      }
    }
  }
}

// optim::CompiledStep on the GPU against the eager step on the CPU: five steps with the learning
// rate changed at every one (a schedule), SGD with momentum over conv + batch norm and AdamW over
// an MLP (bias correction changes every step). From the third step the whole step replays as one
// CUDA graph: the hyperparameters and the step count are device inputs, read by the kernels.
TEST(CudaTraining, CompiledStepMatchesTheEagerCpuStepAndReplaysAsOneCudaGraph) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  using Build = std::function<std::shared_ptr<nn::Sequential>()>;
  using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  struct Case {
    std::string name;
    Build build;
    MakeOpt make_opt;
    Shape x;
  };
  const std::vector<Case> cases = {
      {"conv bn sgd momentum",
       [] {
         manual_seed(3);
         return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
             std::make_shared<nn::Conv2d>(1, 8, 3, nn::ConvOptions{.padding = 1}), std::make_shared<nn::BatchNorm2d>(8),
             std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
             std::make_shared<nn::Linear>(8 * 7 * 7, 10)});
       },
       [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4}); },
       {16, 1, 14, 14}},
      {"mlp adamw",
       [] {
         manual_seed(4);
         return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
             std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(196, 64), std::make_shared<nn::GELU>(),
             std::make_shared<nn::Linear>(64, 10)});
       },
       [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{}); },
       {16, 1, 14, 14}},
  };
  Tensor y = Tensor::empty(DType::Int64, {16});
  for (int64_t i = 0; i < 16; ++i) y.data<int64_t>()[i] = (i * 7) % 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_tensor(DType::Float32, c.x, 9);
    auto cpu_net = c.build(), gpu_net = c.build();
    gpu_net->to(gpu);
    auto cpu_opt = c.make_opt(cpu_net->parameters()), gpu_opt = c.make_opt(gpu_net->parameters());
    optim::CompiledStep step(*gpu_net, *gpu_opt, [&](const std::vector<Tensor>& b) {
      return nn::functional::cross_entropy(gpu_net->forward(b[0]), b[1]);
    });
    const Tensor xg = x.to(gpu), yg = y.to(gpu);
    for (int t = 0; t < 5; ++t) {
      const double lr = (c.name == "mlp adamw" ? 1e-3 : 0.05) * (1 + 0.5 * t);
      cpu_opt->set_lr(lr);
      gpu_opt->set_lr(lr);
      cpu_opt->zero_grad();
      Tensor cpu_loss = nn::functional::cross_entropy(cpu_net->forward(x), y);
      cpu_loss.backward();
      cpu_opt->step();
      Tensor gpu_loss = step({xg, yg});
      EXPECT_EQ(gpu_loss.device().type, DeviceType::CUDA);
      expect_near(gpu_loss, cpu_loss, 1e-4, "loss of step " + std::to_string(t));
    }
    const auto gpu_state = gpu_net->state_dict();
    for (const auto& [name, t] : cpu_net->state_dict()) {
      EXPECT_EQ(gpu_state.at(name).device().type, DeviceType::CUDA) << name;
      expect_near(gpu_state.at(name), t, 2e-4, name);
    }
    const auto gpu_opt_state = gpu_opt->state_dict();
    for (const auto& [name, t] : cpu_opt->state_dict()) expect_near(gpu_opt_state.at(name), t, 2e-4, "optimizer " + name);
    EXPECT_NE(step.report().find("CUDA graph: replayed"), std::string::npos) << step.report();
  }
}

// Dropout in a compiled step on the GPU draws a new mask at every replay of the captured graph (its
// seed is a device input): with lr 0 the parameters stay, so the losses differ by the masks only.
TEST(CudaTraining, CompiledStepDrawsANewDropoutMaskAtEveryReplay) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  manual_seed(2);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(16, 64), std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Linear>(64, 1)});
  net->to(gpu);
  optim::SGD opt(net->parameters(), {.lr = 0.0});
  const Tensor x = random_tensor(DType::Float32, {8, 16}, 3).to(gpu), target = Tensor::zeros(DType::Float32, {8, 1}).to(gpu);
  optim::CompiledStep step(*net, opt, [&](const std::vector<Tensor>& b) { return nn::functional::mse_loss(net->forward(b[0]), b[1]); });
  std::set<double> losses;
  for (int t = 0; t < 6; ++t) losses.insert(step({x, target}).to(Device::cpu()).cast(DType::Float64).item_double());
  EXPECT_EQ(losses.size(), 6u);
  EXPECT_NE(step.report().find("CUDA graph: replayed"), std::string::npos) << step.report();
}

// Batch norm in training mode on CUDA against the CPU: the forward's batch statistics and
// ai.ingot.BatchNormGrad, for shapes whose channels are split over many blocks (a ResNet's first
// layer at batch 32), few elements per channel, and 16-bit tensors with float32 parameters. The
// inputs have a large mean: the shifted sums must not cancel.
TEST(CudaTraining, BatchNormTrainingForwardAndBackwardMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  const std::vector<Shape> shapes = {{32, 64, 56, 56}, {128, 2048, 7, 7}, {3, 5, 2}, {16, 7}};
  uint64_t seed = 60;
  for (const Shape& shape : shapes) {
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      SCOPED_TRACE(shape_str(shape) + " " + std::string(dtype_name(dt)));
      const int64_t c = shape[1];
      const Tensor x = ops::add(random_tensor(DType::Float32, shape, seed++), Tensor::scalar<float>(20.0f)).cast(dt);
      const Tensor dy = random_tensor(DType::Float32, shape, seed++).cast(dt);
      const Tensor scale = random_tensor(DType::Float32, {c}, seed++), bias = random_tensor(DType::Float32, {c}, seed++);
      const Tensor mean = Tensor::zeros(DType::Float32, {c}), var = ops::add(Tensor::zeros(DType::Float32, {c}), Tensor::scalar<float>(1.0f));
      const Attributes train{{"training_mode", int64_t(1)}, {"momentum", 0.9f}};
      auto on = [&](const Tensor& t, Device d) { return t.to(d); };
      const auto cpu_fwd = ops::call("BatchNormalization", {x, scale, bias, mean, var}, train, 3);
      const auto gpu_fwd = ops::call("BatchNormalization", {on(x, gpu), on(scale, gpu), on(bias, gpu), on(mean, gpu), on(var, gpu)}, train, 3);
      const double tol = dt == DType::Float32 ? 2e-4 : 2e-2;
      expect_near(gpu_fwd[0], cpu_fwd[0], tol, "Y");
      expect_near(gpu_fwd[1], cpu_fwd[1], 1e-4, "running mean");
      expect_near(gpu_fwd[2], cpu_fwd[2], 1e-3, "running var");
      const auto cpu_bwd = ops::call("BatchNormGrad", {dy, x, scale}, {}, 3, "ai.ingot");
      const auto gpu_bwd = ops::call("BatchNormGrad", {on(dy, gpu), on(x, gpu), on(scale, gpu)}, {}, 3, "ai.ingot");
      EXPECT_EQ(gpu_bwd[0].device().type, DeviceType::CUDA);
      expect_near(gpu_bwd[0], cpu_bwd[0], tol, "dX");
      // Sums over up to 100k elements: relative to their size.
      expect_near(gpu_bwd[1], cpu_bwd[1], dt == DType::Float32 ? 1e-3 : 1e-1, "dscale");
      expect_near(gpu_bwd[2], cpu_bwd[2], dt == DType::Float32 ? 1e-3 : 1e-1, "dbias");
    }
  }
}

// ai.ingot.SoftmaxGrad on CUDA against the CPU: short rows (a warp each), long rows (a block each:
// attention over 1500 keys), columns (an inner axis) and the coerced 2-D form; float32 and bfloat16.
TEST(CudaTraining, SoftmaxGradMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const Device gpu = Device::parse("cuda");
  struct Case {
    Shape shape;
    int64_t axis, coerce;
  };
  const std::vector<Case> cases = {{{64, 100}, -1, 0}, {{4, 6, 1500}, -1, 0}, {{5, 7, 9}, 1, 0}, {{3, 4, 5}, 1, 1}};
  uint64_t seed = 80;
  for (const Case& c : cases) {
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      SCOPED_TRACE(shape_str(c.shape) + " " + std::string(dtype_name(dt)));
      const Tensor y = ops::softmax(random_tensor(DType::Float32, c.shape, seed++), -1).cast(dt);
      const Tensor dy = random_tensor(DType::Float32, c.shape, seed++).cast(dt);
      const Attributes a{{"axis", c.axis}, {"coerce_2d", c.coerce}};
      const Tensor want = ops::call("SoftmaxGrad", {dy, y}, a, 1, "ai.ingot").at(0);
      const Tensor got = ops::call("SoftmaxGrad", {dy.to(gpu), y.to(gpu)}, a, 1, "ai.ingot").at(0);
      EXPECT_EQ(got.device().type, DeviceType::CUDA);
      expect_near(got, want, dt == DType::Float32 ? 1e-5 : 1e-2, "dX");
    }
  }
}

}  // namespace
}  // namespace ingot::gpu_test
