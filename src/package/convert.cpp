// `ingot convert`: what Session::load does to an ONNX model before building the executor (the one
// compile pipeline, compiler/compile.h), done once ahead of time, with input shapes fixed first.
#include <fmt/format.h>
#include <ingot/convert.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "compiler/compile.h"
#include "core/strings.h"
#include "core/tuning.h"
#include "onnx/onnx_import.h"
#include "package/package.h"
#include "quant/quantize.h"

namespace ingot {

std::shared_ptr<Model> convert_model(const std::string& onnx_path, const ConvertOptions& options) {
  if (options.progress) options.progress("import", false);
  std::shared_ptr<Model> model = import_onnx(onnx_path);
  if (options.progress) options.progress("import", true);
  return convert_model(std::move(model), options);
}

std::shared_ptr<Model> convert_model(std::shared_ptr<Model> model, const ConvertOptions& options) {
  auto step = [&](const char* name, bool done) {
    if (options.progress) options.progress(name, done);
  };
  try {
    fix_input_shapes(*model, options.input_shapes);
  } catch (Error& e) {
    e.add_context("model '" + model->name + "'");
    throw;
  }
  // Progress in two parts: the lowerings and passes, then the precision and layout steps.
  step("passes", false);
  bool in_passes = true;
  auto finish_passes = [&] {
    if (!in_passes) return;
    in_passes = false;
    step("passes", true);
    step("precision", false);
  };
  compile(*model, {options.optimize, compute_dtype(options.precision), options.device.type},
          [&](const CompileStep& s, bool, const Model&) {
            if (s.stage == "precision" || s.stage == "layout") finish_passes();
            return true;
          });
  finish_passes();
  step("precision", true);
  return model;
}

namespace {

// On a GPU, runs the package (uniform random floats in [-1, 1), integer inputs 0; zeros would time
// tensor cores unrealistically fast) so that the backends measure their algorithm choices and
// generate their kernels (core/tuning.h); returns those to store in the package, with what happened
// in `note`. It runs once per set of `tuning_shapes`, else once. Symbolic dims no set names run at
// stand-in sizes (batch 1, other dims 64: large enough for the pooling windows of image models):
// generated code does not depend on shapes, so it is kept, but without tuning shapes the algorithms
// measured for stand-ins are not. A run that fails keeps nothing (the package still works; its
// first run does the work instead).
struct Tuned {
  std::vector<PackageBlob> algorithms, device_code;
};

// The inputs of one tuning run: `shapes` where it names the input, else the declared dims with
// stand-ins for symbolic ones (`symbolic` names the first input that needed one).
std::vector<Tensor> tuning_inputs(const Session& session, const InputShapes& shapes, std::mt19937& rng,
                                  std::string& symbolic) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (const auto& [name, dims] : shapes) {
    const auto& infos = session.inputs();
    const auto it = std::find_if(infos.begin(), infos.end(), [&n = name](const TensorInfo& i) { return i.name == n; });
    if (it == infos.end()) fail("tuning shape for '{}': the model has no such input", name);
    if (dims.size() != it->dims.size())
      fail("tuning shape {} for input '{}' has rank {}, the input is {}", shape_str(dims), name, dims.size(), it->str());
    for (size_t d = 0; d < dims.size(); ++d) {
      const std::string& declared = it->dims[d];
      const bool fixed = !declared.empty() && std::all_of(declared.begin(), declared.end(), ::isdigit);
      if (dims[d] <= 0 || (fixed && std::stoll(declared) != dims[d]))
        fail("tuning shape {} does not fit input '{}' ({})", shape_str(dims), name, it->str());
    }
  }
  std::vector<Tensor> inputs;
  for (const TensorInfo& info : session.inputs()) {
    std::vector<int64_t> dims;
    const auto named = std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == info.name; });
    if (named != shapes.end()) {
      dims = named->second;
    } else {
      for (size_t d = 0; d < info.dims.size(); ++d) {
        const std::string& dim = info.dims[d];
        if (!dim.empty() && std::all_of(dim.begin(), dim.end(), ::isdigit)) {
          dims.push_back(std::stoll(dim));
        } else {
          dims.push_back(d == 0 ? 1 : 64);
          if (symbolic.empty()) symbolic = info.name;
        }
      }
    }
    Tensor t = Tensor::zeros(info.dtype == DType::Undefined ? DType::Float32 : info.dtype, dims);
    if (is_floating(t.dtype())) {
      std::vector<double> v(size_t(t.numel()));
      for (double& x : v) x = dist(rng);
      t = Tensor::from_vector(v, dims).cast(t.dtype());
    }
    inputs.push_back(t);
  }
  return inputs;
}

Tuned tune(const std::string& package, Device device, const std::vector<InputShapes>& tuning_shapes,
           std::string& note) {
  SessionOptions options;
  options.device = device;
  options.report_fallbacks = false;
  options.cuda_graphs = false;
  Session session = Session::load(package, options);
  std::mt19937 rng(42);
  std::string symbolic;
  const std::vector<InputShapes> sets = tuning_shapes.empty() ? std::vector<InputShapes>{{}} : tuning_shapes;
  std::vector<std::vector<Tensor>> runs;
  for (const InputShapes& shapes : sets) runs.push_back(tuning_inputs(session, shapes, rng, symbolic));
  for (size_t i = 0; i < runs.size(); ++i) {
    try {
      session.run(runs[i]);
    } catch (const Error& e) {
      note = fmt::format("skipped: a run on random inputs{} failed: {}",
                         tuning_shapes.empty() ? "" : fmt::format(" (tuning shapes {})", i + 1), e.what());
      return {};
    }
  }
  auto blobs = [](tuning::Store& store) {
    std::vector<PackageBlob> out;
    for (const auto& [key, value] : store.entries()) out.push_back({key, {value.begin(), value.end()}});
    return out;
  };
  Tuned tuned;
  tuned.device_code = blobs(tuning::device_code());
  if (symbolic.empty() || !tuning_shapes.empty()) tuned.algorithms = blobs(tuning::algorithms());
  if (!symbolic.empty() && tuning_shapes.empty())
    note = fmt::format("no algorithms: input '{}' has symbolic dims, fix them with --input-shape or name shapes "
                       "to tune for with --tune-shape", symbolic);
  return tuned;
}

}  // namespace

ConvertResult convert(const std::string& model_path, const std::string& package_path, const ConvertSettings& settings) {
  auto report = [&](const std::string& step, bool done, const std::string& note = "") {
    if (settings.progress) settings.progress(step, done, note);
  };
  if (!settings.tuning_shapes.empty() && settings.device.type == DeviceType::CPU)
    fail("tuning shapes are for GPU packages (--device cuda): a CPU package has no algorithm choices to store");
  ConvertOptions options;
  options.device = settings.device;
  options.precision = settings.precision;
  options.optimize = settings.optimize;
  options.input_shapes = settings.input_shapes;
  options.progress = [&](const std::string& step, bool done) { report(step, done); };
  // The target is checked first: a conversion for a GPU this machine lacks would only fail at load.
  PackageMetadata meta;
  meta.device = settings.device.type == DeviceType::CPU ? "cpu" : "cuda";
  meta.arch = current_arch(settings.device);
  if (meta.arch.empty()) fail("--device {}: no CUDA device on this machine to build the package for", settings.device.str());
  meta.precision = std::string(precision_name(settings.precision));
  meta.source_model = std::filesystem::path(model_path).filename().string();

  std::shared_ptr<Model> model;
  std::optional<QuantizeReport> quantization;
  std::vector<quant::Sample> samples;
  if (settings.precision == Precision::INT8) {
    // Calibrated QDQ form first; the pipeline's fuse-qdq then folds it into integer kernels.
    QuantizeSettings qs = settings.quantize;
    qs.input_shapes = settings.input_shapes;
    report("import", false);
    quantization.emplace();
    model = quant::import_for_quantization(model_path, qs, *quantization, false);
    if (!qs.dynamic || !qs.calibration.empty()) samples = quant::load_calibration(*model, qs.calibration);
    report("import", true);
    report("quantize", false);
    try {
      quant::quantize_model(*model, samples, qs, *quantization, false);
    } catch (Error& e) {
      e.add_context("model '" + model->name + "'");
      throw;
    }
    report("quantize", true,
           fmt::format("{} products int8, {} float32", quantization->quantized, quantization->kept_float.size()));
    options.input_shapes.clear();  // fixed already
    model = convert_model(model, options);
  } else {
    model = convert_model(model_path, options);
  }
  if (quantization && !samples.empty()) {
    // The accuracy of the package's graph against the float model on the calibration samples.
    report("evaluate", false);
    std::shared_ptr<Model> reference = import_onnx(model_path);
    fix_input_shapes(*reference, settings.input_shapes);
    compile(*reference, {});
    quant::evaluate(reference, model, samples, settings.quantize, *quantization);
    double worst = 1.0;
    for (const OutputAccuracy& o : quantization->outputs) worst = std::min(worst, o.cosine);
    report("evaluate", true, fmt::format("lowest output cosine similarity {:.5f}", worst));
  }
  report("writing", false);
  save_package(*model, meta, package_path);
  ConvertResult r;
  r.path = package_path;
  r.device = meta.device;
  r.arch = meta.arch;
  r.precision = meta.precision;
  r.bytes = int64_t(std::filesystem::file_size(package_path));
  r.quantization = std::move(quantization);
  report("writing", true, fmt::format("{:.1f} MB", double(r.bytes) / 1e6));
  if (settings.device.type != DeviceType::CPU) {
    // Algorithm search now rather than at the package's first run; the package is written again
    // with the choices.
    report("tuning", false);
    Tuned tuned;
    try {
      tuned = tune(package_path, settings.device, settings.tuning_shapes, r.tuning_note);
    } catch (const Error&) {  // a tuning shape that does not fit the model: no package left behind
      std::error_code ec;
      std::filesystem::remove(package_path, ec);
      throw;
    }
    meta.algorithms = std::move(tuned.algorithms);
    meta.device_code = std::move(tuned.device_code);
    if (!meta.algorithms.empty() || !meta.device_code.empty()) {
      save_package(*model, meta, package_path);
      r.bytes = int64_t(std::filesystem::file_size(package_path));
    }
    r.algorithms = int(meta.algorithms.size());
    r.device_code = int(meta.device_code.size());
    report("tuning", true, fmt::format("{} stored tuning entries (algorithm choices and what rebuilds them), {} generated kernels{}", r.algorithms, r.device_code,
                                       r.tuning_note.empty() ? "" : "; " + r.tuning_note));
  }
  for (const PackageExtension& e : read_package_metadata(package_path).extensions) r.extensions.push_back(e.name);
  return r;
}

}  // namespace ingot
