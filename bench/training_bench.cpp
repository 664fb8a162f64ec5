// Training-step throughput of Ingot's eager nn path (docs/TRAINING.md, "Benchmarks"); PyTorch's
// same models and steps: bench/training_torch.py.
//
//   ingot-bench-training --model resnet50|transformer|fashion [--device cuda] [--precision fp32|bf16|fp16]
//                        [--batch N] [--steps N] [--warmup N] [--compile] [--profile] [--json FILE] [--gpus N]
//
// resnet50: torchvision's ResNet-50 (bottlenecks [3, 4, 6, 3]), synthetic 224x224 images and labels,
// cross-entropy, SGD (lr 0.1, momentum 0.9, weight decay 1e-4). transformer: a Whisper-tiny-encoder
// sized stack (4 pre-norm layers, d 384, 6 heads, feed-forward 1536, GELU, sequence 1500) on
// synthetic features, MSE to a synthetic target, AdamW (lr 1e-4). fashion: the Fashion-MNIST
// example's CNN on synthetic 28x28 images, AdamW (lr 1e-3). bf16 / fp16 run the forward under
// autocast (fp16 with a GradScaler). Steps are timed after warm-up, from the first to the last
// step's loss being read back (one wait at the end). --compile runs each step as one compiled graph
// (optim::CompiledStep; not with fp16); --profile then profiles three more steps and prints the time
// per op type to stderr. --gpus N: data-parallel over N processes (this program launched N times,
// rank r on cuda:r through NCCL, or on its share of the CPU cores through Gloo; DistributedDataParallel,
// --batch per process); rank 0 prints the row, samples/s counting every rank's batches.
#include <CLI/CLI.hpp>
#include <ingot/amp.h>
#include <ingot/distributed.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>
#include <ingot/profiler.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>

using namespace ingot;
using Clock = std::chrono::steady_clock;

namespace {

using LayerPtr = std::shared_ptr<nn::Layer>;

LayerPtr conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, k, nn::ConvOptions{.stride = stride, .padding = k / 2, .bias = false});
}

// torchvision's Bottleneck: 1x1, 3x3 (stride), 1x1 (x4), each with batch norm; the shortcut a 1x1
// convolution with batch norm where the shape changes.
class Bottleneck : public nn::Layer {
 public:
  Bottleneck(int64_t in, int64_t width, int64_t stride) {
    const int64_t out = width * 4;
    body_ = register_module("body", std::make_shared<nn::Sequential>(std::vector<LayerPtr>{
                                        conv(in, width, 1), std::make_shared<nn::BatchNorm2d>(width), std::make_shared<nn::ReLU>(),
                                        conv(width, width, 3, stride), std::make_shared<nn::BatchNorm2d>(width),
                                        std::make_shared<nn::ReLU>(), conv(width, out, 1), std::make_shared<nn::BatchNorm2d>(out)}));
    if (stride != 1 || in != out)
      shortcut_ = register_module("downsample", std::make_shared<nn::Sequential>(std::vector<LayerPtr>{
                                                    conv(in, out, 1, stride), std::make_shared<nn::BatchNorm2d>(out)}));
  }
  Tensor forward(const Tensor& x) override {
    return ops::relu(ops::add(body_->forward(x), shortcut_ ? shortcut_->forward(x) : x));
  }

 private:
  std::shared_ptr<nn::Sequential> body_, shortcut_;
};

std::shared_ptr<nn::Sequential> resnet50() {
  auto net = std::make_shared<nn::Sequential>();
  net->add(conv(3, 64, 7, 2)).add(std::make_shared<nn::BatchNorm2d>(64)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::MaxPool2d>(3, 2, 1));
  int64_t in = 64;
  const int64_t blocks[] = {3, 4, 6, 3}, widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      net->add(std::make_shared<Bottleneck>(in, widths[stage], b == 0 && stage > 0 ? 2 : 1));
      in = widths[stage] * 4;
    }
  }
  net->add(std::make_shared<nn::GlobalAvgPool>()).add(std::make_shared<nn::Flatten>()).add(std::make_shared<nn::Linear>(2048, 1000));
  return net;
}

// A pre-norm encoder layer: x + attn(LN(x)), then x + W2 GELU(W1 LN(x)).
class EncoderLayer : public nn::Layer {
 public:
  EncoderLayer(int64_t d, int64_t heads, int64_t ff) {
    attn_ = register_module("self_attn", std::make_shared<nn::MultiheadAttention>(d, heads, nn::MultiheadAttentionOptions{.batch_first = true}));
    norm1_ = register_module("norm1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{d}));
    norm2_ = register_module("norm2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{d}));
    fc1_ = register_module("linear1", std::make_shared<nn::Linear>(d, ff));
    fc2_ = register_module("linear2", std::make_shared<nn::Linear>(ff, d));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = norm1_->forward(x);
    Tensor y = ops::add(x, attn_->forward(h, h, h).output);
    return ops::add(y, fc2_->forward(nn::functional::gelu(fc1_->forward(norm2_->forward(y)))));
  }

 private:
  std::shared_ptr<nn::MultiheadAttention> attn_;
  std::shared_ptr<nn::LayerNorm> norm1_, norm2_;
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};

std::shared_ptr<nn::Sequential> transformer() {
  auto net = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) net->add(std::make_shared<EncoderLayer>(384, 6, 1536));
  net->add(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{384}));
  return net;
}

std::shared_ptr<nn::Sequential> fashion() {
  nn::ConvOptions same{.padding = 1};
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Conv2d>(1, 32, 3, same)).add(std::make_shared<nn::BatchNorm2d>(32)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::Conv2d>(32, 64, 3, same)).add(std::make_shared<nn::BatchNorm2d>(64)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::MaxPool2d>(2));
  net->add(std::make_shared<nn::Conv2d>(64, 128, 3, same)).add(std::make_shared<nn::BatchNorm2d>(128)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::MaxPool2d>(2)).add(std::make_shared<nn::Flatten>());
  net->add(std::make_shared<nn::Linear>(6272, 256)).add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::Dropout>(0.3));
  net->add(std::make_shared<nn::Linear>(256, 10));
  return net;
}

Tensor randn(Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}
Tensor labels(int64_t n, int64_t classes) {
  Tensor t = Tensor::empty(DType::Int64, {n});
  for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = (i * 7919) % classes;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Training-step throughput of Ingot's eager nn path"};
  std::string model = "fashion", device_name = "cpu", precision = "fp32", json;
  int64_t batch = 0;
  int steps = 20, warmup = 3;
  app.add_option("--model", model)->check(CLI::IsMember({"resnet50", "transformer", "fashion"}));
  app.add_option("--device", device_name);
  app.add_option("--precision", precision)->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--batch", batch, "Batch size (default: resnet50 128, transformer 8, fashion 128)");
  app.add_option("--steps", steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup);
  app.add_option("--json", json);
  bool compiled = false, profile = false;
  app.add_flag("--compile", compiled, "Each step as one compiled graph (optim::CompiledStep)");
  app.add_flag("--profile", profile, "Profile three steps after the timed ones (time per op type to stderr)");
  int nproc = 1;
  app.add_option("--gpus,--nproc", nproc, "Data-parallel processes (DistributedDataParallel; --batch is per process)")
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  try {
    if (auto status = distributed::relaunch_as_ranks(argc, argv, nproc)) return *status;  // the launcher
    Device device = Device::parse(device_name);
    const bool parallel = distributed::launched();
    if (parallel) {
      if (compiled) throw std::runtime_error("--compile with --gpus: a compiled step has no backward pass to reduce gradients in");
      distributed::init_process_group({.backend = device.type == DeviceType::CUDA ? "nccl" : "gloo"});
      device = distributed::device();
    }
    const int world = distributed::get_world_size();
    manual_seed(0);
    std::shared_ptr<nn::Sequential> net;
    Tensor x, y;
    std::unique_ptr<optim::Optimizer> opt;
    if (model == "resnet50") {
      batch = batch ? batch : 128;
      net = resnet50();
      x = randn({batch, 3, 224, 224}, 1), y = labels(batch, 1000);
    } else if (model == "transformer") {
      batch = batch ? batch : 8;
      net = transformer();
      x = randn({batch, 1500, 384}, 1), y = randn({batch, 1500, 384}, 2);
    } else {
      batch = batch ? batch : 128;
      net = fashion();
      x = randn({batch, 1, 28, 28}, 1), y = labels(batch, 10);
    }
    net->to(device);
    x = x.to(device), y = y.to(device);
    if (model == "resnet50") {
      opt = std::make_unique<optim::SGD>(net->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
    } else {
      optim::AdamWOptions o;
      o.lr = model == "transformer" ? 1e-4 : 1e-3;
      opt = std::make_unique<optim::AdamW>(net->parameters(), o);
    }
    std::unique_ptr<distributed::DDP> ddp;
    if (parallel) ddp = std::make_unique<distributed::DDP>(net);
    const bool autocast = precision != "fp32";
    const DType low = precision == "fp16" ? DType::Float16 : DType::BFloat16;
    amp::GradScaler scaler({.enabled = precision == "fp16"});
    if (compiled && precision == "fp16") throw std::runtime_error("--compile with fp16: the GradScaler's skipped steps cannot be compiled");
    auto loss_of = [&](const std::vector<Tensor>& b) {
      amp::Autocast region(device.type, low, autocast);
      Tensor out = ddp ? ddp->forward(b[0]) : net->forward(b[0]);
      return model == "transformer" ? nn::functional::mse_loss(out, b[1]) : nn::functional::cross_entropy(out, b[1]);
    };
    std::unique_ptr<optim::CompiledStep> compiled_step;
    if (compiled) compiled_step = std::make_unique<optim::CompiledStep>(*net, *opt, loss_of);
    auto step = [&] {
      if (compiled_step) return (*compiled_step)({x, y});
      opt->zero_grad();
      Tensor loss = loss_of({x, y});
      scaler.scale(loss).backward();
      scaler.step(*opt);
      scaler.update();
      return loss;
    };
    for (int i = 0; i < warmup; ++i) (void)step().to(Device::cpu());
    if (parallel) distributed::barrier();  // every rank starts the timed steps together
    const auto start = Clock::now();
    Tensor loss;
    for (int i = 0; i < steps; ++i) loss = step();
    const double final_loss = loss.to(Device::cpu()).cast(DType::Float64).item_double();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (distributed::get_rank() != 0) return 0;
    nlohmann::json out = {{"model", model},
                          {"device", device.str()},
                          {"precision", precision},
                          {"batch", batch},
                          {"steps", steps},
                          {"ms_per_step", 1e3 * seconds / steps},
                          {"samples_per_s", double(batch) * world * steps / seconds},
                          {"processes", world},
                          {"final_loss", final_loss},
                          {"compile", compiled},
                          {"parameters", net->num_parameters()}};
    std::cout << out.dump() << "\n";
    if (compiled_step) std::fprintf(stderr, "compiled step: %s\n", compiled_step->report().c_str());
    if (profile) {
      profiler::start();
      for (int i = 0; i < 3; ++i) loss = step();
      (void)loss.to(Device::cpu());
      const profiler::Trace trace = profiler::stop();
      std::fprintf(stderr, "profile of 3 steps (%s %s %s):\n%s\n", model.c_str(), device.str().c_str(), precision.c_str(),
                   trace.summary_table().c_str());
    }
    if (!json.empty()) std::ofstream(json) << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ingot-bench-training: %s\n", e.what());
    return 1;
  }
  return 0;
}
