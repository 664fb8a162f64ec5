// `ingot bench`: steady-state latency of one model (.onnx or .ingot) in this process.
#include <ingot/session.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.h"
#include "core/backend.h"
#include "core/dispatch.h"
#include "core/strings.h"
#include "core/thread_pool.h"
#include "inputs.h"

namespace ingot::cli {

namespace {


double percentile(const std::vector<double>& sorted, double p) {
  double pos = p * double(sorted.size() - 1);
  size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  struct Options {
    std::string model, device = "cpu", json;
    std::vector<std::string> inputs, input_shapes;
    int threads = 0, batch = 1, warmup = 5, iterations = 50;
    bool no_cuda_graphs = false, device_io = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "Model file (.onnx or .ingot)")->required();
  app.add_option("--device", o->device, "Device to run on")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--threads", o->threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--input,-i", o->inputs, "NAME=FILE (.npy or .pb); inputs not given are random")
      ->allow_extra_args(false);
  app.add_option("--input-shape", o->input_shapes, "NAME=DIMS: the shape of a random input, e.g. x=1,512");
  app.add_option("--batch", o->batch, "Size of a symbolic first dim of random inputs")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o->warmup, "Untimed runs first (at least one)")->check(CLI::NonNegativeNumber);
  app.add_option("--iterations", o->iterations, "Timed runs")->check(CLI::PositiveNumber);
  app.add_option("--json", o->json, "Also write the results as JSON here");
  app.add_flag("--no-cuda-graphs", o->no_cuda_graphs, "On a GPU, run op by op instead of replaying a CUDA graph");
  app.add_flag("--device-io", o->device_io,
               "On a GPU, inputs already on the device and outputs left there (each timed run still waits for "
               "the device): the model alone, as a GPU pipeline would call it");
  return [o] {
    using Clock = std::chrono::steady_clock;
    auto ms_since = [](Clock::time_point t) {
      return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    };
    SessionOptions options;
    options.device = Device::parse(o->device);
    options.threads = o->threads;
    options.cuda_graphs = !o->no_cuda_graphs;
    options.outputs_on_device = o->device_io;
    auto load_start = Clock::now();
    Session session = Session::load(o->model, options);
    double load_ms = ms_since(load_start);

    auto [feeds, random] = make_feeds(session, o->inputs, o->input_shapes, o->batch, 42, true);

    DeviceMemory* device_mem = nullptr;
    if (o->device_io && session.device().type != DeviceType::CPU) {
      device_mem = &backend_for(session.device()).memory();
      for (auto& [name, t] : feeds) t = t.to(session.device());
    }
    // One run, waited for: with --device-io the outputs stay on the device, so wait explicitly.
    auto run_once = [&, &feeds = feeds] {
      session.run(feeds);
      if (device_mem) device_mem->synchronize(session.device().index);
    };
    try {
      run_once();
    } catch (Error& e) {
      // Random inputs can be meaningless to a model (a sample rate of 0, a sequence of length 1).
      if (random) e.add_context("with random inputs (give real ones with --input NAME=FILE, or shapes with --input-shape)");
      throw;
    }
    for (int i = 1; i < o->warmup; ++i) run_once();
    std::vector<double> times;
    for (int i = 0; i < o->iterations; ++i) {
      auto start = Clock::now();
      run_once();
      times.push_back(ms_since(start));
    }
    std::sort(times.begin(), times.end());
    double median = percentile(times, 0.5), p90 = percentile(times, 0.9), min = times.front();
    double throughput = double(o->batch) * 1000.0 / median;
    int threads = num_threads();
    std::string device = session.device().str();

    std::cout << fmt::format("model: {}  device: {}  threads: {}  batch: {}{}\n", session.model_name(), device,
                             threads, o->batch, device_mem ? "  (inputs and outputs on the device)" : "");
    std::cout << "inputs: "
              << join(feeds, ", ", [](const auto& f) { return f.first + " " + f.second.describe(); }) << "\n";
    std::cout << fmt::format("load: {:.1f} ms\n", load_ms);
    std::cout << fmt::format("latency ({} iterations, {} warmup): median {:.3f} ms  p90 {:.3f} ms  min {:.3f} ms\n",
                             o->iterations, o->warmup, median, p90, min);
    std::cout << fmt::format("throughput: {:.1f} samples/s (batch {} / median)\n", throughput, o->batch);
    const MemoryPlanStats plan = session.memory_plan();
    if (plan.planned) {
      std::cout << fmt::format("memory plan: {} intermediate tensors in {:.2f} MiB of arena ({:.2f} MiB without reuse, "
                               "lower bound {:.2f} MiB)\n",
                               plan.tensors, double(plan.arena_bytes) / 1048576.0, double(plan.total_bytes) / 1048576.0,
                               double(plan.lower_bound) / 1048576.0);
    }
    if (session.device().type != DeviceType::CPU) {
      std::cout << (plan.cuda_graph ? fmt::format("CUDA graph: replayed ({} device operations)\n", plan.graph_nodes)
                                    : fmt::format("CUDA graph: none ({})\n", plan.why_no_graph));
    }
    if (!o->json.empty()) {
      nlohmann::json j = {{"model", session.model_name()},
                          {"median_ms", median},
                          {"p90_ms", p90},
                          {"min_ms", min},
                          {"throughput_per_s", throughput},
                          {"device", device},
                          {"threads", threads},
                          {"batch", o->batch},
                          {"iterations", o->iterations},
                          {"warmup", o->warmup},
                          {"load_ms", load_ms},
                          {"arena_bytes", plan.arena_bytes},
                          {"cuda_graph", plan.cuda_graph},
                          {"device_io", device_mem != nullptr}};
      std::ofstream out(o->json);
      if (!out) fail("cannot write '{}'", o->json);
      out << j.dump(2) << "\n";
    }
    return 0;
  };
}

}  // namespace ingot::cli
