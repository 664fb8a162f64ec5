// `ingot convert`: runs the load-time pipeline (import, lowering, optimization passes, precision)
// once and saves the result as an .ingot package that loads without running any of it.
#include <ingot/convert.h>
#include <ingot/session.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "inputs.h"
#include "core/strings.h"
#include "package/package.h"
#include "quantize_options.h"

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

}  // namespace

Runner add_convert_command(CLI::App& app) {
  struct Options {
    std::string model, output, device = "cpu", precision = "fp32";
    std::vector<std::string> input_shapes, tune_shapes;
    bool quiet = false, no_optimize = false;
    QuantizeCliOptions q;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "ONNX model to convert (.onnx)")->required();
  app.add_option("--output,-o", o->output, "Package to write (.ingot)")->required();
  app.add_option("--device", o->device, "Device the package is built for")->check(CLI::IsMember({"cpu", "cuda"}));
  add_precision_option(app, o->precision);
  app.add_option("--input-shape", o->input_shapes, "NAME=DIMS: fix an input's symbolic dims, e.g. x=1,3,224,224")
      ->allow_extra_args(false);
  app.add_option("--tune-shape", o->tune_shapes,
                 "NAME=DIMS[;NAME=DIMS...]: a shape set the package will run at (repeatable; --device cuda): "
                 "algorithm choices are measured and stored for each while the inputs stay symbolic, "
                 "e.g. --tune-shape x=6,3,48,320 --tune-shape x=6,3,48,640")
      ->allow_extra_args(false);
  app.add_flag("--no-optimize", o->no_optimize, "Skip the optimization passes (lowerings still run)");
  add_quantize_options(app, o->q);
  app.add_flag("--quiet,-q", o->quiet, "No progress display");
  return [o] {
    ConvertSettings settings;
    settings.device = Device::parse(o->device);
    settings.precision = parse_precision(o->precision);
    settings.optimize = !o->no_optimize;
    for (const auto& spec : o->input_shapes) settings.input_shapes.push_back(parse_input_shape(spec));
    for (const auto& set : o->tune_shapes) {
      InputShapes shapes;
      for (size_t begin = 0; begin <= set.size();) {
        const size_t end = std::min(set.find(';', begin), set.size());
        if (end > begin) shapes.push_back(parse_input_shape(set.substr(begin, end - begin)));
        begin = end + 1;
      }
      settings.tuning_shapes.push_back(std::move(shapes));
    }
    const bool gpu = settings.device.type != DeviceType::CPU;
    const bool int8 = settings.precision == Precision::INT8;
    if (!int8 && (!o->q.calib.empty() || o->q.dynamic))
      throw CLI::ValidationError("--calib/--dynamic", "quantization is for --precision int8");
    if (int8) {
      settings.quantize = quantize_settings(o->q, o->quiet);
      // For the GPU, symmetric int8 activations unless asked otherwise: what cuDNN's int8
      // convolutions (and TensorRT) take; asymmetric ones run Ingot's direct kernels there.
      if (gpu && !o->q.asymmetric) settings.quantize.symmetric = true;
    }
    Progress progress(gpu ? 5 : int8 ? 6 : 4);
    if (!o->quiet) {
      settings.progress = [&](const std::string& step, bool done, const std::string& note) {
        if (!done) {
          const std::string detail = step == "import"    ? " " + std::filesystem::path(o->model).filename().string()
                                     : step == "writing" ? " " + o->output
                                     : step == "tuning"  ? " (algorithm search and code generation on " + o->device + ")"
                                                         : "";
          progress.start(step, detail);
        } else if (step == "precision" && (settings.precision == Precision::FP32 || int8)) {
          progress.done(int8 ? "" : " (fp32: nothing to do)");
        } else {
          progress.done(note.empty() ? "" : " (" + note + ")");
        }
      };
    }
    const ConvertResult r = convert(o->model, o->output, settings);
    std::cout << "wrote " << r.path << " (" << r.device << " " << r.arch << ", " << r.precision
              << (r.extensions.empty() ? "" : ", extensions: " + join(r.extensions, ", ")) << ")\n";
    if (r.quantization) write_report(o->q, *r.quantization);
    return 0;
  };
}

}  // namespace ingot::cli
