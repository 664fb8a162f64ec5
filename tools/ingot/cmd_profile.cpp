// ingot profile: run a model a few times under the profiler and print where the time went;
// optionally write a Chrome/Perfetto trace and an HTML report.
#include <ingot/profiler.h>
#include <ingot/session.h>

#include <iostream>
#include <random>

#include "commands.h"
#include "core/strings.h"
#include "inputs.h"

namespace ingot::cli {

namespace {

// A seeded random tensor for an input whose shape is static. Integer inputs get small values
// (0..3) and booleans 0/1 so that index-like inputs stay in range for typical models.
Tensor random_input(const TensorInfo& info, std::mt19937& rng) {
  Shape shape;
  for (const std::string& d : info.dims) {
    char* end = nullptr;
    long long v = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || v < 0) {
      fail("input '{}' has a symbolic shape [{}]: give it with --input {}=FILE (.npy or .pb)", info.name,
           join(info.dims, ","), info.name);
    }
    shape.push_back(v);
  }
  if (info.dtype == DType::String || info.dtype == DType::Undefined) {
    fail("input '{}' has dtype {}: give it with --input {}=FILE", info.name, dtype_name(info.dtype), info.name);
  }
  Tensor values = Tensor::empty(DType::Float64, shape);
  double* p = values.data<double>();
  bool is_float = info.dtype == DType::Float32 || info.dtype == DType::Float64 || info.dtype == DType::Float16 ||
                  info.dtype == DType::BFloat16;
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, info.dtype == DType::Bool ? 1 : 3);
  for (int64_t i = 0; i < values.numel(); ++i) p[i] = is_float ? real(rng) : double(small(rng));
  return values.cast(info.dtype);
}

}  // namespace

Runner add_profile_command(CLI::App& app) {
  struct Options {
    std::string model, device = "cpu", precision = "fp32", trace, html;
    std::vector<std::string> inputs;
    int runs = 10, warmup = 2, threads = 0, top = 20;
    bool cuda_graphs = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "Model file (.onnx)")->required();
  app.add_option("--device", o->device, "Device to run on")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--runs", o->runs, "Profiled runs")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o->warmup, "Unprofiled runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--input,-i", o->inputs, "NAME=FILE or FILE; inputs not given are random (seeded) when static")
      ->allow_extra_args(false);
  app.add_option("--trace", o->trace, "Write a Chrome/Perfetto trace (JSON) here");
  app.add_option("--html", o->html, "Write a self-contained HTML report here");
  app.add_option("--threads", o->threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--precision", o->precision, "Compute precision of float32 models (fp16/bf16: like autocast)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_flag("--cuda-graphs", o->cuda_graphs,
               "On a GPU, profile CUDA graph replays (one event per run) instead of op by op");
  app.add_option("--top", o->top, "Op types shown in the summary")->check(CLI::PositiveNumber);
  return [o] {
    SessionOptions options;
    options.device = Device::parse(o->device);
    options.threads = o->threads;
    options.cuda_graphs = o->cuda_graphs;
    options.precision = o->precision == "fp16"   ? Precision::FP16
                        : o->precision == "bf16" ? Precision::BF16
                                                 : Precision::FP32;
    Session session = Session::load(o->model, options);
    std::vector<std::string> names;
    for (const auto& in : session.inputs()) names.push_back(in.name);
    auto feeds = load_inputs(o->inputs, names);
    std::mt19937 rng(0);
    for (const TensorInfo& info : session.inputs()) {
      bool given = std::any_of(feeds.begin(), feeds.end(), [&](const auto& f) { return f.first == info.name; });
      if (!given) feeds.emplace_back(info.name, random_input(info, rng));
    }
    for (int i = 0; i < o->warmup; ++i) session.run(feeds);
    profiler::Trace trace;
    {
      profiler::ScopedProfile profile(&trace);
      for (int i = 0; i < o->runs; ++i) session.run(feeds);
    }
    std::cout << "model: " << o->model << " on " << options.device.str() << " (" << o->runs << " profiled runs after "
              << o->warmup << " warm-up runs)\n";
    std::cout << trace.summary_table(size_t(o->top));
    if (!o->trace.empty()) {
      trace.write_chrome_json(o->trace);
      std::cout << "wrote trace " << o->trace << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
    }
    if (!o->html.empty()) {
      trace.write_html(o->html, "ingot profile: " + o->model);
      std::cout << "wrote report " << o->html << "\n";
    }
    return 0;
  };
}

}  // namespace ingot::cli
