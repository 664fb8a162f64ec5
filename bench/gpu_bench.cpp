// GPU micro-benchmarks (issue 4), run by scripts/gpu-test.sh on the GPU machine; bench/gpu_torch.py
// times the same problems with PyTorch in the same call and prints both side by side.
//
//   copy      device-to-device copy of a large buffer: the bandwidth ceiling (bytes read + written)
//   add       elementwise Add of two large float32 tensors, as a fraction of that ceiling
//   matmul    4096x4096x4096 bfloat16 (and float16, float32) matrix products, TFLOP/s
//   conv      ResNet-50 convolution layers, batch 32, float16 and float32
//
// Timing: CUDA events on Ingot's stream around `iterations` launches after warm-up; the median of
// `repeats` such samples. Inputs are random, never zeros.
#include <cuda_runtime.h>
#include <ingot/ops.h>
#include <ingot/tensor.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "graph/graph.h"
#include "runtime/executor.h"

namespace {

using namespace ingot;
const Device kGpu{DeviceType::CUDA, 0};

Tensor random_gpu(DType dt, Shape shape, uint32_t seed) {
  Tensor host = Tensor::empty(DType::Float32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = host.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) p[i] = dist(rng);
  return host.cast(dt).to(kGpu);
}

// Median milliseconds per call of fn.
double time_ms(const std::function<void()>& fn, int iterations = 20, int repeats = 7) {
  for (int i = 0; i < 3; ++i) fn();
  cuda::synchronize();
  cudaEvent_t start, stop;
  INGOT_CUDA_CHECK(cudaEventCreate(&start));
  INGOT_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    INGOT_CUDA_CHECK(cudaEventRecord(start, cuda::stream()));
    for (int i = 0; i < iterations; ++i) fn();
    INGOT_CUDA_CHECK(cudaEventRecord(stop, cuda::stream()));
    INGOT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    INGOT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(double(ms) / iterations);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct ConvLayer {
  const char* name;
  int64_t c_in, hw, c_out, k, stride;
};
// ResNet-50's distinct convolution shapes (batch 32, 224x224 input).
const ConvLayer kResNetLayers[] = {
    {"conv1 7x7/2 3->64 @224", 3, 224, 64, 7, 2},       {"res2 1x1 64->64 @56", 64, 56, 64, 1, 1},
    {"res2 3x3 64->64 @56", 64, 56, 64, 3, 1},          {"res2 1x1 64->256 @56", 64, 56, 256, 1, 1},
    {"res3 3x3/2 128->128 @56", 128, 56, 128, 3, 2},    {"res3 3x3 128->128 @28", 128, 28, 128, 3, 1},
    {"res4 3x3 256->256 @14", 256, 14, 256, 3, 1},      {"res4 1x1 1024->256 @14", 1024, 14, 256, 1, 1},
    {"res5 3x3 512->512 @7", 512, 7, 512, 3, 1},        {"res5 1x1 512->2048 @7", 512, 7, 2048, 1, 1},
};

// A one-Conv model run through the executor, as a session runs it: the weight is uploaded once and
// cuDNN's algorithm is chosen on the first run (eager calls keep no such per-node state).
std::unique_ptr<Executor> conv_model(DType dt, const Tensor& weight, const Attributes& attrs) {
  auto g = std::make_shared<Graph>();
  g->name = "conv";
  g->inputs.push_back({"X", ValueType{ValueKind::Tensor, dt, std::nullopt}});
  g->outputs.push_back({"Y", ValueType{ValueKind::Tensor, dt, std::nullopt}});
  g->initializers["W"] = weight;
  Node n;
  n.name = "conv";
  n.op_type = "Conv";
  n.inputs = {"X", "W"};
  n.outputs = {"Y"};
  n.attrs = attrs;
  g->nodes.push_back(std::move(n));
  auto m = std::make_shared<Model>();
  m->name = "conv";
  m->graph = g;
  m->opsets[""] = 17;
  return std::make_unique<Executor>(m, kGpu);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Ingot GPU micro-benchmarks");
  std::string json_path;
  int64_t elements = int64_t(1) << 28;  // 1 GiB per float32 tensor
  app.add_option("--json", json_path, "Write the results here");
  app.add_option("--elements", elements, "Elements of the copy/add tensors");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!cuda::available()) {
      fmt::print(stderr, "no CUDA device\n");
      return 1;
    }
    nlohmann::json out;
    out["device"] = cuda::device_name(0);
    fmt::print("device: {}\n", cuda::device_name(0));

    // Copy ceiling and elementwise add.
    {
      Tensor a = random_gpu(DType::Float32, {elements}, 1), b = random_gpu(DType::Float32, {elements}, 2);
      Tensor c = Tensor::empty(DType::Float32, {elements}, kGpu);
      const double bytes = double(elements) * 4;
      double copy_ms = time_ms([&] { copy_tensor(a, c); });
      double add_ms = time_ms([&] { Tensor s = ops::add(a, b); });
      double copy_gbs = 2 * bytes / copy_ms / 1e6, add_gbs = 3 * bytes / add_ms / 1e6;
      fmt::print("copy  {:>8.3f} ms  {:>7.0f} GB/s (read + write)\n", copy_ms, copy_gbs);
      fmt::print("add   {:>8.3f} ms  {:>7.0f} GB/s = {:.1f}% of copy bandwidth\n", add_ms, add_gbs,
                 100 * add_gbs / copy_gbs);
      out["copy"] = {{"ms", copy_ms}, {"gb_per_s", copy_gbs}, {"bytes", 2 * bytes}};
      out["add"] = {{"ms", add_ms}, {"gb_per_s", add_gbs}, {"fraction_of_copy", add_gbs / copy_gbs}};
    }
    // Matrix products.
    for (DType dt : {DType::BFloat16, DType::Float16, DType::Float32}) {
      const int64_t n = 4096;
      Tensor a = random_gpu(dt, {n, n}, 3), b = random_gpu(dt, {n, n}, 4);
      double ms = time_ms([&] { Tensor c = ops::matmul(a, b); }, 10, 5);
      double tflops = 2.0 * n * n * n / ms / 1e9;
      fmt::print("matmul {}x{}x{} {:<8} {:>8.3f} ms {:>7.1f} TFLOP/s\n", n, n, n, dtype_name(dt), ms, tflops);
      out["matmul"][std::string(dtype_name(dt))] = {{"ms", ms}, {"tflops", tflops}, {"n", n}};
    }
    // ResNet-50 convolution layers.
    for (DType dt : {DType::Float16, DType::Float32}) {
      for (const ConvLayer& l : kResNetLayers) {
        const int64_t batch = 32, pad = l.k / 2;
        Tensor x = random_gpu(dt, {batch, l.c_in, l.hw, l.hw}, 5);
        Tensor w = random_gpu(dt, {l.c_out, l.c_in, l.k, l.k}, 6).to(Device::cpu());
        Attributes attrs{{"kernel_shape", std::vector<int64_t>{l.k, l.k}},
                         {"strides", std::vector<int64_t>{l.stride, l.stride}},
                         {"pads", std::vector<int64_t>{pad, pad, pad, pad}}};
        auto conv = conv_model(dt, w, attrs);
        std::vector<Value> feed{Value(x)};
        double ms = time_ms([&] { auto y = conv->run(feed); }, 10, 5);
        int64_t out_hw = (l.hw + 2 * pad - l.k) / l.stride + 1;
        double tflops = 2.0 * batch * l.c_out * out_hw * out_hw * l.c_in * l.k * l.k / ms / 1e9;
        fmt::print("conv {:<26} {:<8} {:>8.3f} ms {:>7.1f} TFLOP/s\n", l.name, dtype_name(dt), ms, tflops);
        out["conv"][std::string(dtype_name(dt))][l.name] = {{"ms", ms}, {"tflops", tflops}};
      }
    }
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
