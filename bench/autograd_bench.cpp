// Autograd costs (docs/PERFORMANCE.md, "Autograd"): the host time of a tiny eager op with and without
// the tape and of its backward, and an MLP training step (784-256-10, batch 32, cross-entropy, SGD)
// eager against compile(step). bench/autograd_torch.py measures the same with PyTorch.
//
//   ingot-bench-autograd [--device cpu|cuda] [--threads N] [--json FILE]
#include <ingot/autograd.h>
#include <ingot/ops.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/backend.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/op_def.h"

using namespace ingot;
using Clock = std::chrono::steady_clock;

namespace {

Device g_device;

void synchronize() {
  if (g_device.type != DeviceType::CPU) backend_for(g_device).memory().synchronize(g_device.index);
}

// Median over `samples` of the time per call of `fn` run `calls` times back to back, in ns.
template <class Fn>
double per_call_ns(Fn fn, int calls, int samples) {
  for (int i = 0; i < calls / 10 + 1; ++i) fn();
  synchronize();
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    auto start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    synchronize();
    t.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / calls);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Host time per call of `fn`: `calls` back-to-back calls timed without waiting for the device (few
// enough that a stream's launch queue never fills), the device drained between samples, in ns. On
// the CPU this equals per_call_ns; on an accelerator per_call_ns is bounded below by the device's
// own rate of tiny kernels, this by the host work alone.
template <class Fn>
double host_ns(Fn fn, int calls, int samples) {
  for (int i = 0; i < calls; ++i) fn();
  synchronize();
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    auto start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    t.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / calls);
    synchronize();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Tensor uniform(Shape shape, double scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-float(scale), float(scale));
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t.to(g_device);
}

std::vector<Tensor> mlp_loss(const std::vector<Tensor>& a) {  // w1, b1, w2, b2, x, labels
  Tensor h = ops::relu(ops::add(ops::matmul(a[4], a[0]), a[1]));
  Tensor logits = ops::add(ops::matmul(h, a[2]), a[3]);
  return {ops::call("SoftmaxCrossEntropyLoss", {logits, a[5]}, {}, 1).at(0)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Autograd host costs and an MLP training step, eager and compiled"};
  std::string device = "cpu", json;
  app.add_option("--device", device);
  app.add_option("--json", json);
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (default: the CPUs this process may use)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) set_num_threads(threads);
  g_device = Device::parse(device);
  nlohmann::json out = {{"device", device},
                        {"threads", num_threads()},
                        {"hardware_concurrency", std::thread::hardware_concurrency()}};

  Tensor a = uniform({1}, 1, 1), b = uniform({1}, 1, 2);
  out["op_ns"] = per_call_ns([&] { ops::add(a, b); }, 20000, 9);
  Tensor ag = a.detach();
  ag.set_requires_grad(true);
  out["op_recorded_ns"] = per_call_ns([&] { ops::add(ag, b); }, 20000, 9);
  const double forward_backward = per_call_ns([&] { ops::add(ag, b).backward(); }, 5000, 9);
  out["backward_ns"] = forward_backward - out["op_recorded_ns"].get<double>();
  out["op_host_ns"] = host_ns([&] { ops::add(a, b); }, 200, 15);
  // Where a tiny op's host time goes: the kernel alone (its output's allocation and the launch, with
  // the catalogue and registry lookups, the opset choice and the tape check left out), a bare
  // allocation, and a minimal asynchronous device call (a 4-byte memset) as the driver's floor.
  {
    const OpDef& def = *OpCatalogue::instance().find("", "Add");
    int opset = 21;
    const KernelDef& kernel = *KernelRegistry::instance().find("", "Add", g_device.type, opset);
    const Attributes no_attrs;
    const Value va(a), vb(b);
    out["kernel_host_ns"] = host_ns(
        [&] {
          std::vector<Value> outputs(1);
          NodeState state;
          KernelContext ctx(def, no_attrs, opset, {&va, &vb}, outputs, nullptr, &state, g_device);
          kernel.fn(ctx);
        },
        200, 15);
    out["alloc_host_ns"] = host_ns([&] { (void)Tensor::empty(DType::Float32, {1}, g_device); }, 200, 15);
    Tensor scratch = Tensor::empty(DType::Float32, {1}, g_device);
    DeviceMemory* memory = g_device.type == DeviceType::CPU ? nullptr : &backend_for(g_device).memory();
    if (memory) {
      out["memset_host_ns"] =
          host_ns([&] { memory->fill_zero(scratch.raw_data(), sizeof(float), g_device.index); }, 200, 15);
    }
  }
  out["op_recorded_host_ns"] = host_ns([&] { ops::add(ag, b); }, 200, 15);
  out["backward_host_ns"] =
      host_ns([&] { ops::add(ag, b).backward(); }, 100, 15) - out["op_recorded_host_ns"].get<double>();

  // The MLP step: loss, gradients, p -= 0.01 g, as one function of (params, batch) -> new params.
  std::vector<Tensor> params = {uniform({784, 256}, 0.05, 3), uniform({256}, 0.01, 4), uniform({256, 10}, 0.05, 5),
                                uniform({10}, 0.01, 6)};
  Tensor x = uniform({32, 784}, 1, 7);
  std::vector<int64_t> labels(32);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int64_t(i % 10);
  Tensor y = Tensor::from_vector<int64_t>(labels, {32}).to(g_device);
  Function gradients = grad(mlp_loss, {0, 1, 2, 3});
  Tensor lr = Tensor::scalar<float>(0.01f).to(g_device);
  Function step = [&](const std::vector<Tensor>& args) {
    std::vector<Tensor> g = gradients(args);
    std::vector<Tensor> next;
    for (size_t i = 0; i < 4; ++i) next.push_back(ops::sub(args[i], ops::mul(g[i], lr)));
    return next;
  };
  auto args_of = [&](const std::vector<Tensor>& p) { return std::vector<Tensor>{p[0], p[1], p[2], p[3], x, y}; };
  std::vector<Tensor> p = params;
  out["mlp_step_eager_us"] = per_call_ns([&] { p = step(args_of(p)); }, 20, 9) / 1000;
  CompiledFunction compiled = compile(step);
  p = params;
  out["mlp_step_compiled_us"] = per_call_ns([&] { p = compiled(args_of(p)); }, 20, 9) / 1000;
  out["compile_speedup"] = out["mlp_step_eager_us"].get<double>() / out["mlp_step_compiled_us"].get<double>();
  out["compiled_report"] = compiled.report(args_of(p));
  std::cout << out.dump(2) << "\n";
  if (!json.empty()) std::ofstream(json) << out.dump(2) << "\n";
  return 0;
}
