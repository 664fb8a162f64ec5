// ingot profile: run a model a few times under the profiler and print where the time went;
// optionally write a Chrome/Perfetto trace and an HTML report.
#include <ingot/profiler.h>
#include <ingot/session.h>

#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.h"
#include "core/tuning.h"
#include "profiler/hooks.h"
#include "inputs.h"

namespace ingot::cli {

namespace {

// Milliseconds since this process started: CLOCK_BOOTTIME against /proc/self/stat's starttime
// (field 22, clock ticks: 10 ms resolution on most kernels). Negative when it cannot be read.
double process_age_ms() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  std::getline(f, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 > line.size()) return -1;
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  timespec now{};
  if (field.empty() || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  const double start_s = std::strtod(field.c_str(), nullptr) / double(sysconf(_SC_CLK_TCK));
  return (double(now.tv_sec) + double(now.tv_nsec) * 1e-9 - start_s) * 1e3;
}

}  // namespace

Runner add_profile_command(CLI::App& app) {
  struct Options {
    std::string model, device = "cpu", precision = "fp32", trace, html;
    std::vector<std::string> inputs, input_shapes;
    int runs = 10, warmup = 2, threads = 0, top = 20;
    bool cuda_graphs = false, cold = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "Model file (.onnx)")->required();
  app.add_option("--device", o->device, "Device to run on")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--runs", o->runs, "Profiled runs")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o->warmup, "Unprofiled runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--input,-i", o->inputs, "NAME=FILE or FILE; inputs not given are random (seeded): static shapes or --input-shape")
      ->allow_extra_args(false);
  app.add_option("--input-shape", o->input_shapes, "NAME=DIMS: the shape of a random input, e.g. x=1,512");
  app.add_option("--trace", o->trace, "Write a Chrome/Perfetto trace (JSON) here");
  app.add_option("--html", o->html, "Write a self-contained HTML report here");
  app.add_option("--threads", o->threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  add_precision_option(app, o->precision);
  app.add_flag("--cuda-graphs", o->cuda_graphs,
               "On a GPU, profile CUDA graph replays (one event per run) instead of op by op");
  app.add_option("--top", o->top, "Op types shown in the summary")->check(CLI::PositiveNumber);
  app.add_flag("--cold", o->cold,
               "Profile the load and the first runs (no warm-up): where a fresh process's time to first output "
               "goes, by phase (reading the model, CUDA context, library handles, algorithm choices, uploads)");
  return [o] {
    SessionOptions options;
    options.device = Device::parse(o->device);
    options.threads = o->threads;
    options.cuda_graphs = o->cuda_graphs;
    options.precision = parse_precision(o->precision);
    profiler::Trace trace;
    std::optional<profiler::ScopedProfile> profile;
    const double age_at_start = o->cold ? process_age_ms() : -1;
    if (o->cold) profile.emplace(&trace);
    Session session = Session::load(o->model, options);
    const auto feeds = [&] {
      profiler::detail::PhaseScope phase("inputs");
      return make_feeds(session, o->inputs, o->input_shapes, 1, 0, false).feeds;
    }();
    for (int i = 0; i < o->warmup && !o->cold; ++i) session.run(feeds);
    if (!profile) profile.emplace(&trace);
    for (int i = 0; i < o->runs; ++i) session.run(feeds);
    profile.reset();
    std::cout << "model: " << o->model << " on " << options.device.str() << " ("
              << (o->cold ? fmt::format("the load and {} runs, no warm-up", o->runs)
                          : fmt::format("{} profiled runs after {} warm-up runs", o->runs, o->warmup))
              << ")\n";
    std::cout << trace.summary_table(size_t(o->top));
    if (o->cold) {
      // A package's stored choices should leave nothing to measure or compile on its first run.
      const tuning::Stats a = tuning::algorithms().stats(), c = tuning::device_code().stats();
      std::cout << fmt::format("stored choices: algorithms {} found, {} worked out; device code {} found, {} compiled\n",
                               a.hits, a.misses, c.hits, c.misses);
      // The timeline's origin against the process's start, and where the first output was ready.
      auto first_run = std::find_if(trace.events.begin(), trace.events.end(),
                                    [](const profiler::Event& e) { return e.kind == profiler::EventKind::SessionRun; });
      if (first_run != trace.events.end()) {
        std::cout << fmt::format("first run: {:.1f}-{:.1f} ms since the profile started", double(first_run->start_ns) * 1e-6,
                                 double(first_run->end_ns) * 1e-6);
        if (age_at_start >= 0) std::cout << fmt::format(" ({:.0f} ms after the process started, +-10 ms)", age_at_start);
        std::cout << "\n";
      }
    }
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
