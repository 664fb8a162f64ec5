// The int8 quantization options `ingot quantize` and `ingot convert --precision int8` share, and the
// calibration progress line.
#pragma once
#include <ingot/quantize.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace ingot::cli {

struct QuantizeCliOptions {
  std::vector<std::string> calib, keep_float;
  std::string method = "minmax", report;
  double percentile = 99.999, min_cosine = 0;
  bool per_tensor = false, per_channel = false, symmetric = false, asymmetric = false, dynamic = false;
  bool no_equalize = false, no_bias_correction = false;
};

inline void add_quantize_options(CLI::App& app, QuantizeCliOptions& o) {
  app.add_option("--calib", o.calib,
                 "Calibration inputs: .npy files (one sample, or a batch on axis 0) or folders of them; several "
                 "inputs: folders holding <input>.npy per sample");
  app.add_option("--calib-method", o.method, "How activation ranges are chosen from the calibration runs")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy"}));
  app.add_option("--percentile", o.percentile, "--calib-method percentile: the share of values kept in range (%)")
      ->check(CLI::Range(50.0, 100.0));
  auto* pc = app.add_flag("--per-channel", o.per_channel, "Weight scales per output channel (the default)");
  app.add_flag("--per-tensor", o.per_tensor, "One scale per weight tensor")->excludes(pc);
  auto* sym = app.add_flag("--symmetric", o.symmetric, "Activations int8 with zero point 0 (the default of convert --device cuda)");
  app.add_flag("--asymmetric", o.asymmetric, "Activations uint8 with a zero point (the default, but for convert --device cuda)")->excludes(sym);
  app.add_option("--keep-float", o.keep_float, "Op types or node names (or output names) to leave in float32");
  app.add_option("--min-cosine", o.min_cosine,
                 "Keep the products that lose most in float32 until every output's cosine similarity to the float "
                 "model (calibration set) reaches this, e.g. 0.99")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--no-equalize", o.no_equalize,
               "Leave depthwise -> 1x1 convolution pairs as they are (default: equalize their channels' ranges first)");
  app.add_flag("--no-bias-correction", o.no_bias_correction,
               "Leave the biases as they are (default: each quantized product's bias absorbs the shift of its output's "
               "per-channel mean that quantization causes, measured on the calibration set)");
  app.add_option("--report", o.report, "Write the quantization and accuracy report here (JSON)");
  app.add_flag("--dynamic", o.dynamic,
               "Dynamic quantization: matrix products' weights int8, activations quantized per call (no --calib "
               "needed; given, it measures the accuracy)");
}

// Calibration and evaluation progress on stderr: a counter rewritten in place on a terminal, one
// line per step otherwise.
inline QuantizeSettings quantize_settings(const QuantizeCliOptions& o, bool quiet) {
  QuantizeSettings s;
  s.calibration = o.calib;
  s.method = o.method == "percentile" ? CalibrationMethod::Percentile
             : o.method == "entropy"  ? CalibrationMethod::Entropy
                                      : CalibrationMethod::MinMax;
  s.percentile = o.percentile;
  s.per_channel = !o.per_tensor;
  s.symmetric = o.symmetric;
  s.keep_float = o.keep_float;
  s.min_cosine = o.min_cosine;
  s.dynamic = o.dynamic;
  s.equalize = !o.no_equalize;
  s.bias_correction = !o.no_bias_correction;
  if (!quiet) {
    const bool tty = isatty(STDERR_FILENO);
    s.progress = [tty](const std::string& step, int64_t done, int64_t total) {
      if (tty) {
        std::fprintf(stderr, "\r      %s %lld/%lld%s", step.c_str(), (long long)done, (long long)total,
                     done == total ? "\n" : "");
      } else if (done == total) {
        const char* unit = step == "sensitivity" ? "rounds" : step == "bias correction" ? "segments" : "samples";
        std::fprintf(stderr, "      %s: %lld %s\n", step.c_str(), (long long)total, unit);
      }
      std::fflush(stderr);
    };
  }
  return s;
}

inline void write_report(const QuantizeCliOptions& o, const QuantizeReport& r) {
  std::fputs(r.text().c_str(), stdout);
  if (o.report.empty()) return;
  std::ofstream f(o.report);
  f << r.json();
  if (!f) throw CLI::ValidationError("--report", "cannot write " + o.report);
}

}  // namespace ingot::cli
