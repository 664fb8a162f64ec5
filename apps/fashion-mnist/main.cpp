// ingot-fashion-mnist: trains a small CNN (or, --network lstm, an LSTM reading each image as a
// sequence of 28 rows) on Fashion-MNIST (Debian's dataset-fashion-mnist) with Ingot's nn modules,
// autograd and AdamW, on the CPU or a GPU, and reports the test accuracy. Public API only
// (include/ingot/).
//
//   ingot-fashion-mnist [--device cpu|cuda] [--network cnn|lstm] [--precision fp32|bf16|fp16] [--compile] [--epochs N]
//                       [--batch B] [--lr LR] [--json FILE] [--plot FILE.png] [--save FILE.safetensors]
//                       [--export FILE.onnx|FILE.ingot] [--profile TRACE.json] [--data DIR] [--limit N] [--gpus N]
//
// --gpus N (alias --nproc) trains data-parallel: the program launches N copies of itself
// (distributed::launch, as `ingot launch` does), each on cuda:RANK (NCCL) or on its share of the
// CPU cores (Gloo), every rank a 1/N share of each epoch, gradients averaged by
// DistributedDataParallel; rank 0 evaluates, reports and writes the files.
#include <ingot/amp.h>
#include <ingot/autograd.h>
#include <ingot/data.h>
#include <ingot/distributed.h>
#include <ingot/error.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>
#include <ingot/profiler.h>
#include <ingot/safetensors.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/plot.h"

using namespace ingot;
using Clock = std::chrono::steady_clock;

namespace {

// The network: conv3x3(1->32)+BN+ReLU, conv3x3(32->64)+BN+ReLU, maxpool2,
// conv3x3(64->128)+BN+ReLU, maxpool2, Linear(6272->256)+ReLU+Dropout(0.3), Linear(256->10).
std::shared_ptr<nn::Sequential> make_network() {
  nn::ConvOptions same{.padding = 1};
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Conv2d>(1, 32, 3, same)).add(std::make_shared<nn::BatchNorm2d>(32)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::Conv2d>(32, 64, 3, same)).add(std::make_shared<nn::BatchNorm2d>(64)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::MaxPool2d>(2));
  net->add(std::make_shared<nn::Conv2d>(64, 128, 3, same)).add(std::make_shared<nn::BatchNorm2d>(128)).add(std::make_shared<nn::ReLU>());
  net->add(std::make_shared<nn::MaxPool2d>(2));
  net->add(std::make_shared<nn::Flatten>());
  net->add(std::make_shared<nn::Linear>(6272, 256)).add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::Dropout>(0.3));
  net->add(std::make_shared<nn::Linear>(256, 10));
  return net;
}

// The sequence task: each image a sequence of 28 rows of 28 pixels, read top to bottom by a
// 2-layer LSTM (hidden 128); the last layer's final state is classified by a Linear.
class RowLSTM : public nn::Layer {
 public:
  RowLSTM() { lstm_ = register_module("lstm", std::make_shared<nn::LSTM>(28, 128, nn::RNNOptions{.num_layers = 2, .batch_first = true})); }
  Tensor forward(const Tensor& images) override {
    nn::RNNOutput o = lstm_->forward(ops::reshape(images, {0, 28, 28}));  // [B, 1, 28, 28] -> [B, 28, 28]
    // The last time step of the output, [B, 1, 128] -> [B, 128].
    auto one = [](int64_t v) { return Tensor::from_vector<int64_t>({v}, {1}); };
    Tensor last = ops::call("Slice", {o.output, one(-1), one(INT64_MAX), one(1)}).at(0);
    return ops::reshape(last, {0, -1});
  }

 private:
  std::shared_ptr<nn::LSTM> lstm_;
};

std::shared_ptr<nn::Sequential> make_lstm_network() {
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<RowLSTM>()).add(std::make_shared<nn::Linear>(128, 10));
  return net;
}

// uint8 [B, 28, 28] -> float32 [B, 1, 28, 28] normalized with the training set's mean and std;
// uint8 labels -> int64.
void to_float(Tensor& images, Tensor& labels) {
  const int64_t b = images.dim(0);
  Tensor x = Tensor::empty(DType::Float32, {b, 1, 28, 28});
  const uint8_t* src = images.data<uint8_t>();
  float* dst = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = (float(src[i]) / 255.0f - 0.2860f) / 0.3530f;
  Tensor y = Tensor::empty(DType::Int64, {b});
  for (int64_t i = 0; i < b; ++i) y.data<int64_t>()[i] = labels.data<uint8_t>()[i];
  images = x;
  labels = y;
}

Tensor first_rows(const Tensor& t, int64_t n) { return n > 0 && n < t.dim(0) ? t.slice_rows(0, n).clone() : t; }

double accuracy(nn::Sequential& net, const Tensor& images, const Tensor& labels, Device device, bool autocast, DType low) {
  net.eval();
  autograd::NoGradGuard no_grad;
  amp::Autocast region(device.type, low, autocast);
  data::DataLoader loader(images, labels, {.batch_size = 1000, .shuffle = false, .device = device, .transform = to_float});
  int64_t correct = 0;
  while (auto batch = loader.next()) {
    Tensor predicted = ops::call("ArgMax", {net.forward(batch->inputs)}, {{"axis", int64_t(1)}, {"keepdims", int64_t(0)}}, 1).at(0);
    std::vector<int64_t> p = predicted.to_vector<int64_t>(), t = batch->targets.to_vector<int64_t>();
    for (size_t i = 0; i < p.size(); ++i) correct += p[i] == t[i];
  }
  net.train();
  return double(correct) / double(images.dim(0));
}

// One line on stderr, redrawn in place on a terminal.
void progress(int epoch, int epochs, int64_t batch, int64_t batches, double loss, double samples_per_s, bool tty) {
  if (!tty && batch != batches) return;
  const int width = 30, filled = int(width * batch / std::max<int64_t>(batches, 1));
  std::fprintf(stderr, "%sepoch %d/%d [%s%s] %lld/%lld loss %.4f %.0f samples/s%s", tty ? "\r" : "", epoch, epochs,
               std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
               (long long)batch, (long long)batches, loss, samples_per_s, tty && batch != batches ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains a CNN on Fashion-MNIST with Ingot and reports the test accuracy"};
  std::string device_name = "cpu", network = "cnn", precision = "fp32", json, plot, save, exported, profile, dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  bool compiled = false;
  int64_t batch_size = 128, limit = 0;
  double lr = 1e-3;
  uint64_t seed = 0;
  app.add_option("--device", device_name, "cpu or cuda[:N]");
  app.add_option("--network", network, "cnn (the issue's CNN) or lstm (rows as a sequence)")
      ->check(CLI::IsMember({"cnn", "lstm"}));
  app.add_option("--precision", precision, "fp32, or bf16 / fp16 autocast (fp16 with a GradScaler)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_flag("--compile", compiled, "Run each training step as one compiled graph (optim::CompiledStep; not with fp16)");
  app.add_option("--epochs", epochs, "Passes over the training set")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch_size, "Batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "AdamW learning rate");
  app.add_option("--seed", seed, "Seed of initialisation, dropout and shuffling");
  app.add_option("--limit", limit, "Train on the first N images only (0: all 60000)");
  app.add_option("--data", dir, "Folder with the idx files (Debian's dataset-fashion-mnist)");
  app.add_option("--json", json, "Write {test_accuracy, epochs, seconds_per_epoch, samples_per_s, final_loss}");
  app.add_option("--plot", plot, "Write a PNG of the loss and accuracy per epoch");
  app.add_option("--save", save, "Write the trained weights as safetensors");
  app.add_option("--export", exported,
                 "Write the trained network as ONNX (FILE.onnx) or as a package for --device (FILE.ingot), batch dim dynamic");
  app.add_option("--profile", profile, "Profile training steps 4-8 into this Chrome trace (JSON) and print the op table");
  int nproc = 1;
  app.add_option("--gpus,--nproc", nproc,
                 "Data-parallel processes (one per GPU with --device cuda: rank r on cuda:r; on the CPU each on its "
                 "share of the cores); --batch is per process")
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  try {
    if (auto status = distributed::relaunch_as_ranks(argc, argv, nproc)) return *status;  // the launcher
    Device device = Device::parse(device_name);
    const bool parallel = distributed::launched();
    if (parallel) {
      if (compiled) fail("--compile with --gpus: a compiled step has no backward pass to reduce gradients in (not yet)");
      distributed::init_process_group({.backend = device.type == DeviceType::CUDA ? "nccl" : "gloo"});
      device = distributed::device();
    }
    const int rank = distributed::get_rank(), world = distributed::get_world_size();
    manual_seed(seed);
    auto read = [&](const char* name) { return data::read_idx(dir + "/" + name); };
    Tensor train_x = first_rows(read("train-images-idx3-ubyte.gz"), limit), train_y = first_rows(read("train-labels-idx1-ubyte.gz"), limit);
    Tensor test_x = read("t10k-images-idx3-ubyte.gz"), test_y = read("t10k-labels-idx1-ubyte.gz");
    auto net = network == "lstm" ? make_lstm_network() : make_network();
    net->to(device);
    optim::AdamW opt(net->parameters(), [&] {
      optim::AdamWOptions o;
      o.lr = lr;
      return o;
    }());
    // Data-parallel: rank 0's initial weights everywhere, gradients averaged during each backward.
    std::unique_ptr<distributed::DDP> ddp;
    if (parallel) ddp = std::make_unique<distributed::DDP>(net);
    auto forward = [&](const Tensor& x) { return ddp ? ddp->forward(x) : net->forward(x); };
    const bool autocast = precision != "fp32";
    const DType low = precision == "fp16" ? DType::Float16 : DType::BFloat16;
    amp::GradScaler scaler({.enabled = precision == "fp16"});
    if (compiled && precision == "fp16")
      fail("--compile with --precision fp16: the GradScaler's skipped steps cannot be compiled; use bf16");
    auto loss_of = [&](const std::vector<Tensor>& b) {
      amp::Autocast region(device.type, low, autocast);
      return nn::functional::cross_entropy(forward(b[0]), b[1]);
    };
    std::unique_ptr<optim::CompiledStep> compiled_step;
    if (compiled) compiled_step = std::make_unique<optim::CompiledStep>(*net, opt, loss_of);
    data::DataLoader loader(train_x, train_y, {.batch_size = batch_size, .shuffle = true, .device = device,
                                               .transform = to_float, .world_size = world, .rank = rank, .seed = seed});
    if (rank == 0)
      std::fprintf(stderr, "ingot-fashion-mnist: %lld parameters, %lld training images, batch %lld, %s%s\n",
                   (long long)net->num_parameters(), (long long)train_x.dim(0), (long long)batch_size, device.str().c_str(),
                   parallel ? (" x " + std::to_string(world) + " ranks, " + distributed::describe()).c_str() : "");
    const bool tty = isatty(STDERR_FILENO) && !parallel;  // (the launcher relays lines)
    std::vector<apps::plot::Series> curves{{"train loss", {}}, {"test accuracy", {}}};
    double seconds = 0, final_loss = 0, test_accuracy = 0;
    int64_t samples = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const auto start = Clock::now();
      double loss_sum = 0;
      int64_t seen = 0;
      Tensor pending;  // the previous batch's loss, read one batch late (no wait for the device)
      while (auto batch = loader.next()) {
        const bool profiling = !profile.empty() && rank == 0 && epoch == 1 && batch->index >= 3 && batch->index < 8;
        if (profiling && batch->index == 3) profiler::start();
        Tensor loss;
        if (compiled_step) {
          loss = (*compiled_step)({batch->inputs, batch->targets});
        } else {
          opt.zero_grad();
          loss = loss_of({batch->inputs, batch->targets});
          scaler.scale(loss).backward();
          scaler.step(opt);
          scaler.update();
        }
        if (pending.defined()) loss_sum += pending.to(Device::cpu()).cast(DType::Float64).item_double() * double(batch_size);
        pending = loss.detach();
        if (profiling && batch->index == 7) {
          profiler::Trace trace = profiler::stop();
          trace.write_chrome_json(profile);
          std::fprintf(stderr, "\nprofile of steps 4-8 (%s):\n%s\n", profile.c_str(), trace.summary_table().c_str());
        }
        seen += batch->inputs.dim(0);
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        if (tty && batch->index % 10 == 0)
          progress(epoch, epochs, batch->index + 1, loader.batches_per_epoch(), loss_sum / std::max<int64_t>(seen - batch->inputs.dim(0), 1),
                   double(seen) / elapsed, tty);
      }
      loss_sum += pending.to(Device::cpu()).cast(DType::Float64).item_double() * double(batch_size);
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      seconds += elapsed;
      samples += seen;
      final_loss = loss_sum / double(seen);
      if (rank != 0) continue;  // rank 0 reports and evaluates (its weights are every rank's)
      progress(epoch, epochs, loader.batches_per_epoch(), loader.batches_per_epoch(), final_loss, double(seen) * world / elapsed, tty);
      test_accuracy = accuracy(*net, test_x, test_y, device, autocast, low);
      std::fprintf(stderr, "epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s\n", epoch, final_loss, 100 * test_accuracy, elapsed);
      if (compiled_step && epoch == 1) std::fprintf(stderr, "compiled step: %s\n", compiled_step->report().c_str());
      curves[0].values.push_back(final_loss);
      curves[1].values.push_back(test_accuracy);
    }
    if (parallel) distributed::destroy_process_group();
    if (rank != 0) return 0;
    samples *= world;  // every rank trained on as many samples as this one
    std::printf("test accuracy %.2f%% after %d epochs (%.1f s per epoch, %.0f samples/s)\n", 100 * test_accuracy, epochs,
                seconds / epochs, double(samples) / seconds);
    if (!json.empty()) {
      nlohmann::json j = {{"test_accuracy", test_accuracy}, {"epochs", epochs}, {"seconds_per_epoch", seconds / epochs},
                          {"samples_per_s", double(samples) / seconds}, {"final_loss", final_loss}, {"device", device.str()},
                          {"precision", precision}, {"network", network}, {"compile", compiled}, {"batch", batch_size}, {"train_images", train_x.dim(0)},
                          {"processes", world}};
      std::ofstream(json) << j.dump(2) << "\n";
    }
    if (!plot.empty()) apps::plot::save_epochs_png(plot, "Fashion-MNIST, Ingot " + device.str(), curves);
    if (!save.empty()) save_safetensors(save, net->state_dict(), {{"epochs", std::to_string(epochs)}});
    if (!exported.empty()) {
      nn::ExportOptions o;
      o.dynamic_batch = true;
      o.input_names = {"images"};
      o.output_names = {"logits"};
      o.name = "fashion_mnist";
      o.device = device;
      Tensor example = test_x.slice_rows(0, 2), unused = test_y.slice_rows(0, 2);
      to_float(example, unused);
      example = example.to(device);
      const bool package = exported.size() > 6 && exported.substr(exported.size() - 6) == ".ingot";
      if (package) {
        nn::export_package(*net, example, exported, o);
      } else {
        nn::export_onnx(*net, example, exported, o);
      }
      std::fprintf(stderr, "exported %s\n", exported.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ingot-fashion-mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
