// Latency of one model in process: load once, warm up, then time Session::run repeatedly.
//
//   ingot-bench-latency MODEL --input NAME=FILE.npy [--input ...] [--threads N] [--warmup W] [--runs R]
//                       [--profile | --profile-ab BLOCK] [--no-optimize] [--device cpu|cuda]
//
// --no-optimize skips the graph passes (to measure what they gain).
// --profile records the timed runs with the profiler.
// Prints one JSON line: {"threads": N, "runs": R, "load_ms": ..., "median_ms": ..., "min_ms": ...,
// "mean_ms": ..., "times_ms": [...], "profile": false}. bench/cpu_latency.py runs it next to ONNX Runtime.
//
// --profile-ab BLOCK measures what profiling costs, in one process: blocks of BLOCK runs alternate
// with the profiler off and on (each "on" block one profile; start() and stop() are not timed), R runs
// each, so that both see the same memory layout, clock speed and neighbours (separate processes
// differ by a few per cent on this alone). Prints {"off_times_ms": [...], "on_times_ms": [...],
// "off_median_ms", "on_median_ms", "off_fast_half_ms", "on_fast_half_ms" (the mean of the faster half
// of the runs), ...}; docs/PROFILING.md reports on/off of the last two.
#include <ingot/error.h>
#include <ingot/profiler.h>
#include <ingot/session.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/npy.h"

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

int parse_count(const char* text, const char* flag, int minimum) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < minimum || value > 1000000)
    throw std::runtime_error(std::string(flag) + ": expected an integer >= " + std::to_string(minimum) + ", got '" +
                             text + "'");
  return int(value);
}

void print_times(const char* key, const std::vector<double>& times) {
  std::printf("\"%s\": [", key);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? ", " : "", times[i]);
  std::printf("]");
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double fast_half_mean(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t half = std::max<size_t>(1, v.size() / 2);
  return std::accumulate(v.begin(), v.begin() + ptrdiff_t(half), 0.0) / double(half);
}

// --profile-ab: `runs` runs with the profiler off and `runs` with it on, in alternating blocks.
int profile_ab(ingot::Session& session, const std::vector<std::pair<std::string, ingot::Tensor>>& feeds, int threads,
               int runs, int block, double load_ms) {
  std::vector<double> off, on;
  off.reserve(size_t(runs));
  on.reserve(size_t(runs));
  while (int(on.size()) < runs) {
    for (bool profiled : {false, true}) {
      std::vector<double>& times = profiled ? on : off;
      if (profiled) ingot::profiler::start();
      for (int i = 0; i < block && int(times.size()) < runs; ++i) {
        auto start = Clock::now();
        session.run(feeds);
        times.push_back(elapsed_ms(start));
      }
      if (profiled) ingot::profiler::stop();
    }
  }
  std::printf("{\"threads\": %d, \"runs\": %d, \"block\": %d, \"load_ms\": %.3f, \"off_median_ms\": %.4f, "
              "\"on_median_ms\": %.4f, \"off_fast_half_ms\": %.4f, \"on_fast_half_ms\": %.4f, ",
              threads, runs, block, load_ms, median_of(off), median_of(on), fast_half_mean(off), fast_half_mean(on));
  print_times("off_times_ms", off);
  std::printf(", ");
  print_times("on_times_ms", on);
  std::printf("}\n");
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: ingot-bench-latency MODEL --input NAME=FILE.npy [--input ...] [--threads N] "
               "[--warmup W] [--runs R] [--profile | --profile-ab BLOCK] [--no-optimize] [--device cpu|cuda]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  std::vector<std::pair<std::string, std::string>> input_files;
  int threads = 2, warmup = 3, runs = 20;
  bool profile = false, optimize = true;
  int ab_block = 0;
  std::string device = "cpu";
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      bool has_value = i + 1 < argc;
      if (arg == "--input" && has_value) {
        std::string spec = argv[++i];
        size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0)
          throw std::runtime_error("--input: expected NAME=FILE.npy, got '" + spec + "'");
        input_files.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
      } else if (arg == "--threads" && has_value) {
        threads = parse_count(argv[++i], "--threads", 1);
      } else if (arg == "--warmup" && has_value) {
        warmup = parse_count(argv[++i], "--warmup", 0);
      } else if (arg == "--runs" && has_value) {
        runs = parse_count(argv[++i], "--runs", 1);
      } else if (arg == "--profile") {
        profile = true;
      } else if (arg == "--profile-ab" && has_value) {
        ab_block = parse_count(argv[++i], "--profile-ab", 1);
      } else if (arg == "--device" && has_value) {
        device = argv[++i];
      } else if (arg == "--no-optimize") {
        optimize = false;
      } else if (model_path.empty() && !arg.starts_with("--")) {
        model_path = arg;
      } else {
        return usage();
      }
    }
    if (model_path.empty()) return usage();

    std::vector<std::pair<std::string, ingot::Tensor>> feeds;
    for (const auto& [name, file] : input_files) feeds.emplace_back(name, ingot::load_npy(file));

    ingot::SessionOptions options;
    options.threads = threads;
    options.optimize = optimize;
    options.device = ingot::Device::parse(device);
    options.report_fallbacks = false;
    auto load_start = Clock::now();
    ingot::Session session = ingot::Session::load(model_path, options);
    double load_ms = elapsed_ms(load_start);

    for (int i = 0; i < warmup; ++i) session.run(feeds);
    if (ab_block > 0) return profile_ab(session, feeds, threads, runs, ab_block, load_ms);
    std::vector<double> times;
    times.reserve(size_t(runs));
    if (profile) ingot::profiler::start();
    for (int i = 0; i < runs; ++i) {
      auto start = Clock::now();
      session.run(feeds);
      times.push_back(elapsed_ms(start));
    }
    if (profile) ingot::profiler::stop();
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    double mean = std::accumulate(times.begin(), times.end(), 0.0) / double(n);
    std::printf(
        "{\"threads\": %d, \"runs\": %d, \"load_ms\": %.3f, \"median_ms\": %.3f, \"min_ms\": %.3f, "
        "\"mean_ms\": %.3f, \"times_ms\": [",
        threads, runs, load_ms, median, sorted.front(), mean);
    for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.3f", i ? ", " : "", times[i]);
    std::printf("], \"profile\": %s}\n", profile ? "true" : "false");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
