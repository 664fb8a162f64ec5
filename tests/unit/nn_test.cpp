// nn modules, losses, optimizers, clipping and schedules against PyTorch (Debian python3-torch, in
// float64): tests/data/nn/make_reference.py wrote the references, with its own safetensors writer.
// Also the safetensors round trip, the idx reader and the DataLoader.
#include <gtest/gtest.h>
#include <ingot/autograd.h>
#include <ingot/data.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>
#include <ingot/safetensors.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>

#include "ops/semantics/philox.h"

namespace ingot {
namespace {

const std::map<std::string, Tensor>& ref() {
  static const std::map<std::string, Tensor> r =
      load_safetensors(std::string(INGOT_SOURCE_DIR) + "/tests/data/nn/reference.safetensors");
  return r;
}
const Tensor& at(const std::string& key) {
  auto it = ref().find(key);
  if (it == ref().end()) throw std::runtime_error("no reference tensor " + key);
  return it->second;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  const std::vector<double> w = want.cast(DType::Float64).to_vector<double>();
  double worst = 0;
  size_t where = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = std::abs(g[i] - w[i]) / (1 + std::abs(w[i]));
    if (!(e <= worst)) {
      worst = e;
      where = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << where << " is " << g[where] << ", PyTorch " << w[where];
}

Tensor sum_all(const Tensor& t) { return ops::call("ReduceSum", {t}, {{"keepdims", int64_t(0)}}, 1).at(0); }

// Loads the case's parameters into `m` (float64), runs forward and backward with the case's
// cotangent, and compares the output, the input's gradient, every parameter's gradient and
// (training batch norm) the buffers after the forward.
void check_layer(const std::string& name, nn::Layer& m, bool train = true, double tol = 1e-10) {
  SCOPED_TRACE(name);
  m.to(DType::Float64);
  m.train(train);
  std::map<std::string, Tensor> state;
  const std::string prefix = name + ".param.";
  for (const auto& [k, v] : ref()) {
    if (k.rfind(prefix, 0) == 0) state[k.substr(prefix.size())] = v;
  }
  m.load_state_dict(state);  // strict: the module's names are PyTorch's
  Tensor x = at(name + ".input").clone();
  const bool float_input = is_floating(x.dtype());
  if (float_input) x.set_requires_grad(true);
  Tensor y = m.forward(x);
  expect_close(y, at(name + ".output"), tol, name + " output");
  sum_all(ops::mul(y, at(name + ".cotangent"))).backward();
  if (float_input) expect_close(x.grad(), at(name + ".grad_input"), tol, name + " grad input");
  for (const auto& [pname, p] : m.named_parameters()) expect_close(p.grad(), at(name + ".grad." + pname), tol, name + " grad " + pname);
  for (const auto& [bname, b] : m.named_buffers()) {
    auto it = ref().find(name + ".after." + bname);
    if (it != ref().end()) expect_close(b, it->second, tol, name + " buffer " + bname);
  }
}

TEST(Nn, LayersMatchPyTorch) {
  nn::Linear linear(5, 3), linear3d(5, 3);
  check_layer("linear", linear);
  check_layer("linear3d", linear3d);
  nn::Conv2d conv2d(4, 6, 3, {.stride = 2, .padding = 1, .groups = 2});
  check_layer("conv2d", conv2d);
  nn::Conv1d conv1d(3, 4, 3, {.padding = 1, .dilation = 2});
  check_layer("conv1d", conv1d);
  nn::ConvTranspose2d convt(4, 2, 3, {.stride = 2, .padding = 1, .output_padding = 1});
  check_layer("convt", convt);
  nn::BatchNorm2d bn2d(3);
  check_layer("bn2d_train", bn2d, true, 1e-7);  // ONNX's momentum attribute is a float32
  nn::BatchNorm1d bn1d(3);
  check_layer("bn1d_eval", bn1d, false);
  nn::LayerNorm layernorm({4, 5});
  check_layer("layernorm", layernorm);
  nn::GroupNorm groupnorm(2, 6);
  check_layer("groupnorm", groupnorm);
  nn::Embedding embedding(10, 4);
  check_layer("embedding", embedding);
  nn::MaxPool2d maxpool(2);
  check_layer("maxpool", maxpool);
  nn::AvgPool2d avgpool(3, 2, 1);
  check_layer("avgpool", avgpool);
  nn::GELU gelu;
  check_layer("gelu", gelu);
  nn::SiLU silu;
  check_layer("silu", silu);
  nn::LeakyReLU leaky(0.2);
  check_layer("leakyrelu", leaky, true, 1e-7);  // ONNX's alpha attribute is a float32
  nn::Sigmoid sigmoid;
  check_layer("sigmoid", sigmoid);
  nn::Tanh tanh_layer;
  check_layer("tanh", tanh_layer);
  nn::ReLU relu;
  check_layer("relu", relu);
  nn::Flatten flatten;
  check_layer("flatten", flatten);
}

void check_loss(const std::string& name, const std::function<Tensor(const Tensor&, const Tensor&)>& loss) {
  SCOPED_TRACE(name);
  Tensor x = at(name + ".input").clone();
  x.set_requires_grad(true);
  Tensor l = loss(x, at(name + ".target"));
  expect_close(l, at(name + ".loss"), 1e-12, name + " loss");
  sum_all(ops::mul(l, at(name + ".cotangent"))).backward();
  expect_close(x.grad(), at(name + ".grad_input"), 1e-12, name + " grad input");
}

TEST(Nn, LossesMatchPyTorch) {
  namespace F = nn::functional;
  const Tensor w = at("ce_weight_ignore.weight");
  check_loss("ce_plain", [](const Tensor& x, const Tensor& t) { return F::cross_entropy(x, t); });
  check_loss("ce_weight_ignore", [&](const Tensor& x, const Tensor& t) {
    return F::cross_entropy(x, t, {.weight = w, .ignore_index = 1});
  });
  check_loss("ce_smooth", [](const Tensor& x, const Tensor& t) { return F::cross_entropy(x, t, {.label_smoothing = 0.1}); });
  check_loss("ce_smooth_weight_ignore", [&](const Tensor& x, const Tensor& t) {
    return F::cross_entropy(x, t, {.weight = w, .ignore_index = 1, .label_smoothing = 0.2});
  });
  check_loss("ce_sum", [](const Tensor& x, const Tensor& t) {
    return F::cross_entropy(x, t, {.reduction = "sum", .label_smoothing = 0.05});
  });
  check_loss("ce_none", [](const Tensor& x, const Tensor& t) {
    return F::cross_entropy(x, t, {.reduction = "none", .label_smoothing = 0.1});
  });
  check_loss("ce_spatial", [](const Tensor& x, const Tensor& t) { return F::cross_entropy(x, t); });
  check_loss("nll", [&](const Tensor& x, const Tensor& t) {
    return F::nll_loss(ops::call("LogSoftmax", {x}, {{"axis", int64_t(1)}}, 1).at(0), t, {.weight = w});
  });
  check_loss("mse", [](const Tensor& x, const Tensor& t) { return F::mse_loss(x, t); });
  check_loss("bce", [](const Tensor& x, const Tensor& t) {
    return F::binary_cross_entropy_with_logits(x, t, at("bce.pos_weight"));
  });
  check_loss("bce_plain", [](const Tensor& x, const Tensor& t) { return F::binary_cross_entropy_with_logits(x, t); });
}

// A module of several inputs and outputs: loads the case's parameters (float64), calls `run` with
// the case's inputs (float ones requiring gradients), and compares every output, the gradients of
// sum(output * cotangent) with respect to the float inputs, and every parameter's.
using Named = std::map<std::string, Tensor>;
void check_multi(const std::string& name, nn::Module& m, const std::function<Named(const Named&)>& run, double tol = 1e-10) {
  SCOPED_TRACE(name);
  m.to(DType::Float64);
  Named state, inputs;
  for (const auto& [k, v] : ref()) {
    if (k.rfind(name + ".param.", 0) == 0) state[k.substr(name.size() + 7)] = v;
    if (k.rfind(name + ".in.", 0) == 0) {
      Tensor x = v.clone();
      if (is_floating(x.dtype())) x.set_requires_grad(true);
      inputs[k.substr(name.size() + 4)] = x;
    }
  }
  m.load_state_dict(state);
  Named outputs = run(inputs);
  Tensor loss;
  for (const auto& [k, y] : outputs) {
    expect_close(y, at(name + ".out." + k), tol, name + " " + k);
    Tensor term = sum_all(ops::mul(y, at(name + ".cot." + k)));
    loss = loss.defined() ? ops::add(loss, term) : term;
  }
  loss.backward();
  for (const auto& [k, x] : inputs) {
    if (is_floating(x.dtype())) expect_close(x.grad(), at(name + ".grad_in." + k), tol, name + " grad " + k);
  }
  for (const auto& [pname, p] : m.named_parameters()) expect_close(p.grad(), at(name + ".grad." + pname), tol, name + " grad " + pname);
}

TEST(Nn, RecurrentLayersMatchPyTorch) {
  auto lstm_run = [](nn::LSTM& m) {
    return [&m](const Named& in) {
      auto get = [&](const char* k) { return in.count(k) ? in.at(k) : Tensor{}; };
      nn::RNNOutput o = m.forward(in.at("x"), get("h0"), get("c0"));
      return Named{{"output", o.output}, {"h_n", o.h_n}, {"c_n", o.c_n}};
    };
  };
  auto gru_run = [](nn::GRU& m) {
    return [&m](const Named& in) {
      nn::RNNOutput o = m.forward(in.at("x"), in.count("h0") ? in.at("h0") : Tensor{});
      return Named{{"output", o.output}, {"h_n", o.h_n}};
    };
  };
  nn::LSTM lstm(3, 4);
  check_multi("lstm", lstm, lstm_run(lstm));
  nn::LSTM lstm2bi(3, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  check_multi("lstm2bi", lstm2bi, lstm_run(lstm2bi));
  nn::GRU gru(3, 4, {.num_layers = 2});
  check_multi("gru", gru, gru_run(gru));
  nn::GRU grubi(3, 5, {.batch_first = true, .bidirectional = true});
  check_multi("grubi", grubi, gru_run(grubi));
  EXPECT_EQ(lstm2bi.named_parameters().size(), 16u);  // 2 layers x 2 directions x (w_ih, w_hh, b_ih, b_hh)
  EXPECT_THROW(lstm.forward(Tensor::zeros(DType::Float64, {5, 2, 4})), Error);
  EXPECT_THROW(lstm.forward(Tensor::zeros(DType::Float64, {5, 2, 3}), Tensor::zeros(DType::Float64, {2, 2, 4})), Error);
}

TEST(Nn, MultiheadAttentionMatchesPyTorch) {
  const double fused_tol = 1e-7;  // the fused Attention op's scale attribute is a float32
  nn::MultiheadAttention self(8, 2);
  check_multi("mha_self", self, [&](const Named& in) {
    nn::AttentionOutput o = self.forward(in.at("x"), in.at("x"), in.at("x"),
                                         {.key_padding_mask = in.at("key_padding_mask"), .need_weights = true});
    return Named{{"output", o.output}, {"weights", o.weights}};
  });
  nn::MultiheadAttention cross(8, 4, {.batch_first = true});
  check_multi("mha_cross", cross, [&](const Named& in) {
    return Named{{"output", cross.forward(in.at("q"), in.at("kv"), in.at("kv"), {.attn_mask = in.at("attn_mask")}).output}};
  }, fused_tol);
  nn::MultiheadAttention causal(6, 3, {.batch_first = true});
  check_multi("mha_causal", causal, [&](const Named& in) {
    return Named{{"output", causal.forward(in.at("x"), in.at("x"), in.at("x"), {.is_causal = true}).output}};
  }, fused_tol);
  std::vector<std::string> names;
  for (const auto& [k, v] : self.named_parameters()) names.push_back(k);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_THROW(nn::MultiheadAttention(8, 3), Error);
  EXPECT_THROW(self.forward(Tensor::zeros(DType::Float64, {5, 2, 7}), Tensor::zeros(DType::Float64, {5, 2, 8}),
                            Tensor::zeros(DType::Float64, {5, 2, 8})),
               Error);
}

TEST(Nn, BadInputsAreNamed) {
  nn::Linear linear(5, 3);
  EXPECT_THROW(linear.forward(Tensor::zeros(DType::Float32, {2, 4})), Error);
  nn::Conv2d conv(3, 4, 3);
  EXPECT_THROW(conv.forward(Tensor::zeros(DType::Float32, {3, 8, 8})), Error);
  try {
    nn::functional::cross_entropy(Tensor::zeros(DType::Float32, {4, 3}), Tensor::zeros(DType::Int64, {5}));
    FAIL() << "a target of the wrong length was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy: target"), std::string::npos) << e.what();
  }
  std::map<std::string, Tensor> bad = linear.state_dict();
  bad["weight"] = Tensor::zeros(DType::Float32, {3, 6});
  EXPECT_THROW(linear.load_state_dict(bad), Error);
  bad = linear.state_dict();
  bad["extra"] = Tensor::zeros(DType::Float32, {1});
  EXPECT_THROW(linear.load_state_dict(bad), Error);
}

// The issue's Fashion-MNIST network has PyTorch's state_dict keys, and Module::to keeps parameters
// leaves that an optimizer can hold.
TEST(Nn, SequentialNamesParametersAndBuffersAsPyTorch) {
  nn::Sequential net{std::make_shared<nn::Conv2d>(1, 4, 3), std::make_shared<nn::BatchNorm2d>(4),
                     std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4 * 26 * 26, 2)};
  std::vector<std::string> names;
  for (const auto& [k, v] : net.state_dict()) names.push_back(k);
  EXPECT_EQ(names, (std::vector<std::string>{"0.bias", "0.weight", "1.bias", "1.num_batches_tracked", "1.running_mean",
                                             "1.running_var", "1.weight", "4.bias", "4.weight"}));
  EXPECT_EQ(net.parameters().size(), 6u);
  EXPECT_EQ(net.num_parameters(), 4 * 9 + 4 + 4 + 4 + 2 * 4 * 26 * 26 + 2);
  net.to(DType::Float64);
  for (const Tensor& p : net.parameters()) {
    EXPECT_EQ(p.dtype(), DType::Float64);
    EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  }
}

// Every parameter initialised within PyTorch's bounds (kaiming-uniform with a = sqrt(5): 1/sqrt(fan_in)).
TEST(Nn, InitialisationFollowsPyTorch) {
  manual_seed(3);
  nn::Linear linear(100, 50);
  nn::Conv2d conv(8, 16, 3, {.groups = 2});
  auto within = [](const Tensor& t, double bound) {
    double lo = 1e9, hi = -1e9;
    for (float v : t.span<float>()) {
      lo = std::min(lo, double(v));
      hi = std::max(hi, double(v));
    }
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    EXPECT_GT(hi - lo, bound);  // spread over the range, not constant
  };
  within(linear.weight, 0.1);
  within(linear.bias, 0.1);
  within(conv.weight, 1 / std::sqrt(4.0 * 9));
  manual_seed(3);
  nn::Linear again(100, 50);
  EXPECT_EQ(again.weight.to_vector<float>(), linear.weight.to_vector<float>());  // seeded
}

void check_optimizer(const std::string& name, const std::function<std::unique_ptr<optim::Optimizer>(Tensor&)>& make) {
  SCOPED_TRACE(name);
  Tensor p = at(name + ".p0").clone();
  p.set_requires_grad(true);
  auto opt = make(p);
  for (int t = 1; t <= 5; ++t) {
    p.set_grad(at(name + ".g" + std::to_string(t)));
    opt->step();
    expect_close(p, at(name + ".p" + std::to_string(t)), 1e-12, name + " step " + std::to_string(t));
  }
  EXPECT_EQ(opt->steps(), 5);
}

TEST(Optim, StepsMatchPyTorch) {
  using namespace optim;
  check_optimizer("sgd", [](Tensor& p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1}); });
  check_optimizer("sgd_momentum", [](Tensor& p) {
    return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  });
  check_optimizer("sgd_nesterov", [](Tensor& p) {
    return std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  });
  check_optimizer("adam", [](Tensor& p) {
    return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .weight_decay = 0.01});
  });
  check_optimizer("adam_amsgrad", [](Tensor& p) {
    return std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .amsgrad = true});
  });
  check_optimizer("adamw", [](Tensor& p) {
    AdamWOptions o;
    o.lr = 0.01;
    o.weight_decay = 0.1;
    return std::make_unique<AdamW>(std::vector<Tensor>{p}, o);
  });
  check_optimizer("adamw_maximize", [](Tensor& p) {
    AdamWOptions o;
    o.lr = 0.01;
    o.amsgrad = true;
    o.maximize = true;
    return std::make_unique<AdamW>(std::vector<Tensor>{p}, o);
  });
}

// Several parameters (one without a gradient, left alone) in one fused node; the state round-trips.
TEST(Optim, ManyParametersInOneStepAndStateRoundTrip) {
  Tensor a = at("adam.p0").clone(), b = at("adam.p0").clone(), c = at("adam.p0").clone();
  for (Tensor* t : {&a, &b, &c}) t->set_requires_grad(true);
  optim::Adam opt({a, b, c}, {.lr = 0.01, .weight_decay = 0.01});
  for (int t = 1; t <= 2; ++t) {
    a.set_grad(at("adam.g" + std::to_string(t)));
    b.set_grad(at("adam.g" + std::to_string(t)));
    opt.step();
  }
  expect_close(a, at("adam.p2"), 1e-12, "a");
  expect_close(b, at("adam.p2"), 1e-12, "b");
  expect_close(c, at("adam.p0"), 0, "c (no gradient)");
  // A second optimizer loaded from the first's state continues identically.
  Tensor a2 = a.detach().clone();
  a2.set_requires_grad(true);
  optim::Adam resumed({a2, b.detach().clone().set_requires_grad(true), c.detach().clone().set_requires_grad(true)},
                      {.lr = 0.01, .weight_decay = 0.01});
  resumed.load_state_dict(opt.state_dict());
  for (int t = 3; t <= 5; ++t) {
    a2.set_grad(at("adam.g" + std::to_string(t)));
    resumed.step();
  }
  expect_close(a2, at("adam.p5"), 1e-12, "resumed");
}

TEST(Optim, ClipGradNormMatchesPyTorch) {
  for (const auto& [key, norm] : std::vector<std::pair<std::string, double>>{{"l2", 2.0}, {"inf", INFINITY}, {"l1", 1.0}}) {
    SCOPED_TRACE(key);
    Tensor a = Tensor::zeros(DType::Float64, {3, 4}), b = Tensor::zeros(DType::Float64, {5});
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    a.set_grad(at("clip.g0").clone());
    b.set_grad(at("clip.g1").clone());
    Tensor total = optim::clip_grad_norm({a, b}, 0.5, norm);
    expect_close(total, at("clip." + key + ".total"), 1e-12, "total");
    expect_close(a.grad(), at("clip." + key + ".g0"), 1e-12, "g0");
    expect_close(b.grad(), at("clip." + key + ".g1"), 1e-12, "g1");
  }
}

void check_schedule(const std::string& name, optim::Optimizer& opt, optim::LRScheduler& sched, int steps, bool momentum) {
  SCOPED_TRACE(name);
  std::vector<double> lrs{opt.lr()}, moms{opt.momentum()};
  for (int i = 0; i < steps; ++i) {
    sched.step();
    lrs.push_back(opt.lr());
    moms.push_back(opt.momentum());
  }
  const int64_t n = int64_t(lrs.size());
  expect_close(Tensor::from_vector<double>(lrs, {n}), at("sched." + name + ".lr"), 1e-12, "lr");
  if (momentum) expect_close(Tensor::from_vector<double>(moms, {n}), at("sched." + name + ".momentum"), 1e-12, "momentum");
}

TEST(Optim, SchedulesMatchPyTorch) {
  Tensor p = Tensor::zeros(DType::Float64, {2});
  p.set_requires_grad(true);
  {
    optim::SGD opt({p}, {.lr = 0.1});
    optim::StepLR s(opt, 3, 0.5);
    check_schedule("step", opt, s, 10, false);
  }
  {
    optim::SGD opt({p}, {.lr = 0.1});
    optim::CosineAnnealingLR s(opt, 10, 0.001);
    check_schedule("cosine", opt, s, 10, false);
  }
  {
    optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
    optim::OneCycleLR s(opt, 0.1, 20);
    check_schedule("onecycle_sgd", opt, s, 19, true);
  }
  {
    optim::Adam opt({p}, {.lr = 0.1});
    optim::OneCycleLR s(opt, 0.05, 12, {.pct_start = 0.25});
    check_schedule("onecycle_adam", opt, s, 11, true);
  }
}

// optim::CompiledStep against the eager step it replaces: four steps of a CNN with batch norm
// (its running statistics and counter are updated by the compiled graph too) under SGD with
// momentum, plain SGD and AdamW, with the lr changed between steps and the batch size too; the
// losses, every parameter and buffer after every step, and the optimizer's state agree.
TEST(Optim, CompiledStepMatchesTheEagerStep) {
  auto make = [] {
    manual_seed(5);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
        std::make_shared<nn::Conv2d>(1, 4, 3, nn::ConvOptions{.padding = 1}), std::make_shared<nn::BatchNorm2d>(4),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(4 * 4 * 4, 5)});
  };
  // Two batch sizes (6, then 4, then 6 twice): the second traces anew, the later ones run the
  // first's graph (its second run reuses what its kernels cached in the first).
  Tensor x6 = Tensor::empty(DType::Float32, {6, 1, 8, 8});
  for (int64_t i = 0; i < x6.numel(); ++i) x6.data<float>()[i] = float(std::sin(0.37 * double(i)));
  const Tensor y6 = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 0}, {6});
  const Tensor x4 = x6.slice_rows(1, 5).clone(), y4 = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4});
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<std::string, Make>> optimizers = {
      {"sgd momentum", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4}); }},
      {"sgd", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1}); }},
      {"adamw", [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{}); }},
  };
  for (const auto& [name, make_opt] : optimizers) {
    SCOPED_TRACE(name);
    auto eager_net = make(), compiled_net = make();
    auto eager_opt = make_opt(eager_net->parameters()), compiled_opt = make_opt(compiled_net->parameters());
    optim::CompiledStep step(*compiled_net, *compiled_opt, [&](const std::vector<Tensor>& b) {
      return nn::functional::cross_entropy(compiled_net->forward(b[0]), b[1]);
    });
    for (int t = 0; t < 4; ++t) {
      const Tensor& x = t == 1 ? x4 : x6;
      const Tensor& y = t == 1 ? y4 : y6;
      eager_opt->set_lr(0.05 * (t + 1));
      compiled_opt->set_lr(0.05 * (t + 1));
      eager_opt->zero_grad();
      Tensor eager_loss = nn::functional::cross_entropy(eager_net->forward(x), y);
      eager_loss.backward();
      eager_opt->step();
      Tensor compiled_loss = step({x, y});
      expect_close(compiled_loss, eager_loss, 1e-5, "loss of step " + std::to_string(t));
      for (const auto& [k, v] : eager_net->state_dict())
        expect_close(compiled_net->state_dict().at(k), v, 1e-5, k + " after step " + std::to_string(t));
    }
    for (const auto& [k, v] : eager_net->state_dict()) expect_close(compiled_net->state_dict().at(k), v, 1e-5, k);
    const auto compiled_state = compiled_opt->state_dict();
    for (const auto& [k, v] : eager_opt->state_dict()) expect_close(compiled_state.at(k), v, 1e-5, "optimizer " + k);
    EXPECT_NE(step.report().find("nodes"), std::string::npos) << step.report();
  }
}

// Dropout inside a compiled step draws a new mask every call (its seed is an argument of the graph,
// not a constant of the trace): with lr 0 the parameters stay, so the losses differ by the masks only.
TEST(Optim, CompiledStepDrawsANewDropoutMaskEveryStep) {
  manual_seed(2);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(16, 64), std::make_shared<nn::Dropout>(0.5), std::make_shared<nn::Linear>(64, 1)});
  optim::SGD opt(net->parameters(), {.lr = 0.0});
  Tensor x = Tensor::empty(DType::Float32, {8, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(std::cos(0.11 * double(i)));
  Tensor target = Tensor::zeros(DType::Float32, {8, 1});
  optim::CompiledStep step(*net, opt, [&](const std::vector<Tensor>& b) { return nn::functional::mse_loss(net->forward(b[0]), b[1]); });
  std::set<double> losses;
  for (int t = 0; t < 4; ++t) losses.insert(step({x, target}).cast(DType::Float64).item_double());
  EXPECT_EQ(losses.size(), 4u);
  // An optimizer over other tensors than the module's is refused.
  nn::Linear other(16, 64);
  optim::SGD wrong(other.parameters(), {.lr = 0.1});
  EXPECT_THROW(optim::CompiledStep(*net, wrong, [](const std::vector<Tensor>& b) { return b[0]; }), Error);
}

// A small regression trained end to end: nn + autograd + AdamW reduce the loss.
TEST(Optim, TrainingAnMlpReducesItsLoss) {
  manual_seed(1);
  nn::Sequential net{std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(16, 1)};
  optim::AdamW opt(net.parameters(), [] {
    optim::AdamWOptions o;
    o.lr = 0.02;
    return o;
  }());
  Tensor x = Tensor::empty(DType::Float32, {64, 4}), y = Tensor::empty(DType::Float32, {64, 1});
  for (int64_t i = 0; i < 64; ++i) {
    float s = 0;
    for (int64_t j = 0; j < 4; ++j) {
      x.data<float>()[i * 4 + j] = std::sin(float(i * 4 + j));
      s += x.data<float>()[i * 4 + j] * float(j + 1) * 0.3f;
    }
    y.data<float>()[i] = std::tanh(s);
  }
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::mse_loss(net.forward(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item_double();
  }
  EXPECT_LT(last, first * 0.05) << "loss " << first << " -> " << last;
}

// Random123's known-answer vectors for Philox4x32-10 (kat_vectors: counter, key -> output).
TEST(Dropout, PhiloxMatchesRandom123KnownAnswers) {
  struct Kat {
    uint32_t c[4], k[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}, {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}};
  for (const Kat& k : kats) {
    const sem::Philox4 r = sem::philox4x32(k.c[0], k.c[1], k.c[2], k.c[3], k.k[0], k.k[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i;
  }
}

// nn::Dropout: in training, about p of the elements are zero and the rest scaled by 1 / (1 - p);
// the same seed gives the same mask; in eval mode it is the identity.
TEST(Dropout, TrainingMasksAndScalesEvalPassesThrough) {
  Tensor x = Tensor::empty(DType::Float32, {200, 100});
  for (float& v : x.span<float>()) v = 2.0f;
  nn::Dropout drop(0.3);
  manual_seed(9);
  Tensor y = drop.forward(x);
  manual_seed(9);
  Tensor again = drop.forward(x);
  EXPECT_EQ(y.to_vector<float>(), again.to_vector<float>());
  int64_t zeros = 0;
  for (float v : y.span<float>()) {
    if (v == 0.0f) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(v, 2.0f / 0.7f);
    }
  }
  EXPECT_NEAR(double(zeros) / double(x.numel()), 0.3, 0.01);
  drop.eval();
  EXPECT_EQ(drop.forward(x).to_vector<float>(), x.to_vector<float>());
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ingot_nn_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  std::map<std::string, Tensor> t;
  t["f32"] = Tensor::from_vector<float>({1.5f, -2, 3}, {3});
  t["f64"] = Tensor::from_vector<double>({1e-300, 2}, {2, 1});
  t["i64"] = Tensor::from_vector<int64_t>({-5, 7, 1LL << 40}, {1, 3});
  t["u8"] = Tensor::from_vector<uint8_t>({0, 255}, {2});
  t["bool"] = Tensor::from_vector<bool>({true, false, true}, {3});
  t["scalar"] = Tensor::scalar<float>(4.0f);
  t["empty"] = Tensor::zeros(DType::Float32, {0, 3});
  const std::string path = temp_path("roundtrip.safetensors");
  save_safetensors(path, t, {{"epoch", "7"}});
  std::map<std::string, std::string> meta;
  auto back = load_safetensors(path, &meta);
  EXPECT_EQ(meta.at("epoch"), "7");
  ASSERT_EQ(back.size(), t.size());
  for (const auto& [k, v] : t) {
    SCOPED_TRACE(k);
    ASSERT_EQ(back.at(k).dtype(), v.dtype());
    ASSERT_EQ(back.at(k).shape(), v.shape());
    EXPECT_EQ(std::memcmp(back.at(k).raw_data(), v.raw_data(), v.nbytes()), 0);
  }
  // The file layout is the format's: the header size, then JSON starting with '{'.
  std::ifstream f(path, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(f.get(), '{');
  std::filesystem::remove(path);
}

TEST(Safetensors, DamagedFilesAreErrorsNamingTheProblem) {
  const std::string path = temp_path("bad.safetensors");
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; };
  auto expect_error = [&](const std::string& needle) {
    try {
      load_safetensors(path);
      ADD_FAILURE() << "loaded a damaged file (" << needle << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  write("abc");
  expect_error("too short");
  std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})";
  std::string size(8, '\0');
  size[0] = char(header.size());
  write(size + header + std::string(8, '\0'));
  expect_error("tensor 'w' is float32 [4] but has 8 bytes");
  header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})";
  size[0] = char(header.size());
  write(size + header + std::string(8, '\0'));
  expect_error("outside the 8 data bytes");
  header = R"({"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})";
  size[0] = char(header.size());
  write(size + header + std::string(8, '\0'));
  expect_error("dtype 'Q7'");
  EXPECT_THROW(load_safetensors(temp_path("missing.safetensors")), Error);
  std::filesystem::remove(path);
}

// A module's state through a file: the reloaded copy computes the same output.
TEST(Safetensors, ModuleCheckpointRoundTrip) {
  manual_seed(5);
  nn::Sequential a{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4)};
  nn::Sequential b{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4)};
  Tensor x = Tensor::from_vector<float>({1, 2, 3, -1, 0, 2}, {2, 3});
  a.forward(x);  // moves the running statistics
  const std::string path = temp_path("module.safetensors");
  save_safetensors(path, a.state_dict());
  b.load_state_dict(load_safetensors(path));
  a.eval();
  b.eval();
  EXPECT_EQ(a.forward(x).to_vector<float>(), b.forward(x).to_vector<float>());
  std::filesystem::remove(path);
}

void write_idx(const std::string& path, const std::vector<unsigned char>& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
}

TEST(Data, ReadsIdxFilesPlainAndGzipped) {
  // uint8 [2, 2, 3] and int32 [2] (big-endian on disk).
  std::vector<unsigned char> images{0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int i = 0; i < 12; ++i) images.push_back((unsigned char)(i * 20));
  const std::string a = temp_path("images.idx"), b = temp_path("ints.idx.gz");
  write_idx(a, images, false);
  write_idx(b, {0, 0, 0x0C, 1, 0, 0, 0, 2, 0x00, 0x00, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE}, true);
  Tensor t = data::read_idx(a);
  EXPECT_EQ(t.dtype(), DType::UInt8);
  EXPECT_EQ(t.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(t.data<uint8_t>()[11], 220);
  Tensor u = data::read_idx(b);
  EXPECT_EQ(u.dtype(), DType::Int32);
  EXPECT_EQ(u.to_vector<int32_t>(), (std::vector<int32_t>{258, -2}));
  images.resize(images.size() - 3);  // truncated
  write_idx(a, images, false);
  EXPECT_THROW(data::read_idx(a), Error);
  write_idx(a, {1, 2, 3, 4}, false);
  EXPECT_THROW(data::read_idx(a), Error);
  EXPECT_THROW(data::read_idx(temp_path("absent.idx")), Error);
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Data, LoaderCoversEveryRowOncePerEpochInBatches) {
  const int64_t rows = 10;
  Tensor x = Tensor::empty(DType::Int64, {rows, 2}), y = Tensor::empty(DType::Int64, {rows});
  for (int64_t i = 0; i < rows; ++i) {
    x.data<int64_t>()[2 * i] = i;
    x.data<int64_t>()[2 * i + 1] = 100 + i;
    y.data<int64_t>()[i] = 1000 + i;
  }
  manual_seed(2);
  int transforms = 0;
  data::DataLoader loader(x, y, {.batch_size = 4, .transform = [&](Tensor&, Tensor&) { ++transforms; }});
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  std::vector<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    std::vector<int64_t> sizes;
    while (auto b = loader.next()) {
      sizes.push_back(b->inputs.dim(0));
      for (int64_t r = 0; r < b->inputs.dim(0); ++r) {
        const int64_t i = b->inputs.data<int64_t>()[2 * r];
        EXPECT_EQ(b->inputs.data<int64_t>()[2 * r + 1], 100 + i);  // rows stay whole
        EXPECT_EQ(b->targets.data<int64_t>()[r], 1000 + i);       // and paired
        seen.push_back(i);
      }
    }
    EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
    orders.push_back(seen);
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(rows);
    for (int64_t i = 0; i < rows; ++i) all[size_t(i)] = i;
    EXPECT_EQ(seen, all);
  }
  EXPECT_NE(orders[0], orders[1]);  // reshuffled
  EXPECT_EQ(transforms, 6);
  data::DataLoader fixed(x, y, {.batch_size = 4, .shuffle = false, .drop_last = true});
  EXPECT_EQ(fixed.batches_per_epoch(), 2);
  std::vector<int64_t> first;
  while (auto b = fixed.next()) {
    for (int64_t r = 0; r < b->inputs.dim(0); ++r) first.push_back(b->inputs.data<int64_t>()[2 * r]);
  }
  EXPECT_EQ(first, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_THROW(data::DataLoader(x, Tensor::zeros(DType::Int64, {3}), {}), Error);
}

// Data-parallel sharding (LoaderOptions world_size / rank / seed, DistributedSampler's rule): in an
// epoch the ranks' rows are rows rank, rank + W, ... of one order shared by all ranks (the same seed
// and epoch give the same order in every loader), padded by repeating its start (10 rows over 3
// ranks: 4 each, rows 0 and 1 of the order twice) or cut with drop_last (3 each); every row is seen;
// the order changes with the epoch, and set_epoch replays one.
TEST(Data, DistributedLoaderShardsOneSharedOrder) {
  const int64_t rows = 10, world = 3;
  Tensor x = Tensor::empty(DType::Int64, {rows, 1}), y = Tensor::empty(DType::Int64, {rows});
  for (int64_t i = 0; i < rows; ++i) x.data<int64_t>()[i] = y.data<int64_t>()[i] = i;
  auto epoch_rows = [](data::DataLoader& loader) {
    std::vector<int64_t> seen;
    while (auto b = loader.next())
      for (int64_t r = 0; r < b->inputs.dim(0); ++r) seen.push_back(b->inputs.data<int64_t>()[r]);
    return seen;
  };
  for (bool drop_last : {false, true}) {
    SCOPED_TRACE(drop_last ? "drop_last" : "padded");
    const int64_t share = drop_last ? rows / world : (rows + world - 1) / world;
    std::vector<std::unique_ptr<data::DataLoader>> ranks;
    for (int64_t r = 0; r < world; ++r)
      ranks.push_back(std::make_unique<data::DataLoader>(
          x, y, data::LoaderOptions{.batch_size = 2, .drop_last = drop_last, .world_size = world, .rank = r, .seed = 7}));
    EXPECT_EQ(ranks[0]->size(), share);
    EXPECT_EQ(ranks[0]->batches_per_epoch(), drop_last ? share / 2 : (share + 1) / 2);
    std::vector<std::vector<int64_t>> epochs;
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<std::vector<int64_t>> got;
      for (auto& loader : ranks) got.push_back(epoch_rows(*loader));
      // The shared order, read back: position k of it is rank k % W's row k / W.
      std::vector<int64_t> order(size_t(share * world));
      for (int64_t r = 0; r < world; ++r) {
        const int64_t taken = drop_last ? share / 2 * 2 : share;  // batches cut by drop_last too
        ASSERT_EQ(int64_t(got[size_t(r)].size()), taken);
        for (int64_t i = 0; i < taken; ++i) order[size_t(r + i * world)] = got[size_t(r)][size_t(i)];
      }
      if (!drop_last) {
        std::vector<int64_t> first(order.begin(), order.begin() + rows), padding(order.begin() + rows, order.end());
        std::vector<int64_t> sorted = first;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int64_t> all(rows);
        std::iota(all.begin(), all.end(), int64_t(0));
        EXPECT_EQ(sorted, all);  // every row once, then the start again
        EXPECT_EQ(padding, std::vector<int64_t>(first.begin(), first.begin() + int64_t(padding.size())));
      }
      epochs.push_back(order);
    }
    EXPECT_NE(epochs[0], epochs[1]);
    // Another loader with the same seed, set to epoch 1: the same rows as rank 1's second epoch.
    data::DataLoader again(x, y, {.batch_size = 2, .drop_last = drop_last, .world_size = world, .rank = 1, .seed = 7});
    again.set_epoch(1);
    std::vector<int64_t> replay = epoch_rows(again);
    for (size_t i = 0; i < replay.size(); ++i) EXPECT_EQ(replay[i], epochs[1][size_t(1 + int64_t(i) * world)]);
  }
  EXPECT_THROW(data::DataLoader(x, y, {.world_size = 2, .rank = 2}), Error);
  EXPECT_THROW(data::DataLoader(x, y, {.world_size = 0}), Error);
}

TEST(Data, ATransformErrorReachesTheCaller) {
  Tensor x = Tensor::zeros(DType::Float32, {4, 1}), y = Tensor::zeros(DType::Int64, {4});
  data::DataLoader loader(x, y, {.batch_size = 2, .transform = [](Tensor&, Tensor&) { fail("bad row"); }});
  EXPECT_THROW(loader.next(), Error);
}

}  // namespace
}  // namespace ingot
