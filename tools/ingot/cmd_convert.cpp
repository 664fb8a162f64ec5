// `ingot convert`: runs the load-time pipeline (import, lowering, optimization passes, precision)
// once and saves the result as an .ingot package that loads without running any of it.
#include <ingot/session.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>

#include "commands.h"
#include "inputs.h"
#include "core/strings.h"
#include "core/tuning.h"
#include "package/package.h"

namespace ingot::cli {

namespace {

// One line per step on stderr: "[2/4] passes ......... 12.3 ms".
class Progress {
 public:
  explicit Progress(int steps) : steps_(steps), tty_(isatty(STDERR_FILENO)) {}
  void start(const std::string& step, const std::string& detail = "") {
    ++index_;
    started_ = Clock::now();
    std::fprintf(stderr, "[%d/%d] %-10s%s", index_, steps_, step.c_str(), detail.c_str());
    if (tty_) std::fprintf(stderr, " ...");
    std::fflush(stderr);
  }
  void done(const std::string& note = "") {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    if (tty_) std::fprintf(stderr, "\b\b\b\b    \b\b\b\b");
    std::fprintf(stderr, " %.1f ms%s\n", ms, note.c_str());
  }

 private:
  using Clock = std::chrono::steady_clock;
  int steps_, index_ = 0;
  bool tty_;
  Clock::time_point started_;
};

// On a GPU, runs the package once (uniform random floats in [-1, 1), integer inputs 0; zeros would
// time tensor cores unrealistically fast) so that the backends measure their algorithm choices and
// generate their kernels (core/tuning.h); returns those to store in the package, with what happened
// in `note`. Symbolic dims run at stand-in sizes (batch 1, other dims 64: large enough for the
// pooling windows of image models): generated code does not depend on shapes, so it is kept, but
// the algorithms measured for those shapes are not. A run that fails keeps nothing (the package
// still works; its first run does the work instead).
struct Tuned {
  std::vector<PackageBlob> algorithms, device_code;
};
Tuned tune(const std::string& package, Device device, std::string& note) {
  SessionOptions options;
  options.device = device;
  options.report_fallbacks = false;
  options.cuda_graphs = false;
  Session session = Session::load(package, options);
  std::mt19937 rng(42);
  std::vector<Tensor> inputs;
  std::string symbolic;
  for (const TensorInfo& info : session.inputs()) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < info.dims.size(); ++d) {
      if (is_static_dim(info.dims[d])) {
        dims.push_back(std::stoll(info.dims[d]));
      } else {
        dims.push_back(d == 0 ? 1 : 64);
        if (symbolic.empty()) symbolic = info.name;
      }
    }
    inputs.push_back(random_input(info, 1, &dims, rng));
  }
  try {
    session.run(inputs);
  } catch (const Error& e) {
    note = fmt::format(" (skipped: a run on random inputs failed: {})", e.what());
    return {};
  }
  auto blobs = [](tuning::Store& store) {
    std::vector<PackageBlob> out;
    for (const auto& [key, value] : store.entries()) out.push_back({key, {value.begin(), value.end()}});
    return out;
  };
  Tuned tuned;
  tuned.device_code = blobs(tuning::device_code());
  if (symbolic.empty()) tuned.algorithms = blobs(tuning::algorithms());
  note = fmt::format(" ({} algorithm choices, {} generated kernels{})", tuned.algorithms.size(), tuned.device_code.size(),
                     symbolic.empty() ? ""
                                      : fmt::format("; no algorithms: input '{}' has symbolic dims, fix them with "
                                                    "--input-shape", symbolic));
  return tuned;
}

}  // namespace

Runner add_convert_command(CLI::App& app) {
  struct Options {
    std::string model, output, device = "cpu", precision = "fp32";
    std::vector<std::string> input_shapes;
    bool quiet = false, no_optimize = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "ONNX model to convert (.onnx)")->required();
  app.add_option("--output,-o", o->output, "Package to write (.ingot)")->required();
  app.add_option("--device", o->device, "Device the package is built for")->check(CLI::IsMember({"cpu", "cuda"}));
  add_precision_option(app, o->precision);
  app.add_option("--input-shape", o->input_shapes, "NAME=DIMS: fix an input's symbolic dims, e.g. x=1,3,224,224")
      ->allow_extra_args(false);
  app.add_flag("--no-optimize", o->no_optimize, "Skip the optimization passes (lowerings still run)");
  app.add_flag("--quiet,-q", o->quiet, "No progress display");
  return [o] {
    ConvertOptions options;
    options.device = Device::parse(o->device);
    options.precision = parse_precision(o->precision);
    options.optimize = !o->no_optimize;
    for (const auto& spec : o->input_shapes) options.input_shapes.push_back(parse_input_shape(spec));
    // The target is checked first: a conversion for a GPU this machine lacks would only fail at load.
    PackageMetadata meta;
    meta.device = o->device;
    meta.arch = current_arch(options.device);
    if (meta.arch.empty()) fail("--device {}: no CUDA device on this machine to build the package for", o->device);
    meta.precision = o->precision;
    meta.source_model = std::filesystem::path(o->model).filename().string();

    const bool gpu = options.device.type != DeviceType::CPU;
    Progress progress(gpu ? 5 : 4);
    if (!o->quiet) {
      options.progress = [&](const std::string& step, bool done) {
        if (done) {
          progress.done(step == "precision" && options.precision == Precision::FP32 ? " (fp32: nothing to do)" : "");
        } else {
          progress.start(step, step == "import" ? " " + meta.source_model : "");
        }
      };
    }
    auto model = convert_model(o->model, options);
    if (!o->quiet) progress.start("writing", " " + o->output);
    save_package(*model, meta, o->output);
    if (!o->quiet) {
      auto bytes = std::filesystem::file_size(o->output);
      progress.done(fmt::format(" ({:.1f} MB)", double(bytes) / 1e6));
    }
    if (gpu) {
      // Algorithm search now rather than at the package's first run; the package is written again
      // with the choices.
      if (!o->quiet) progress.start("tuning", " (algorithm search and code generation on " + options.device.str() + ")");
      std::string note;
      Tuned tuned = tune(o->output, options.device, note);
      meta.algorithms = std::move(tuned.algorithms);
      meta.device_code = std::move(tuned.device_code);
      if (!meta.algorithms.empty() || !meta.device_code.empty()) save_package(*model, meta, o->output);
      if (!o->quiet) progress.done(note);
    }
    std::cout << "wrote " << o->output << " (" << meta.device << " " << meta.arch << ", " << meta.precision << ")\n";
    return 0;
  };
}

}  // namespace ingot::cli
