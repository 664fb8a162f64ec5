#include <ingot/profiler.h>
#include <ingot/session.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/npy.h"
#include "core/strings.h"
#include "core/thread_pool.h"
#include "inputs.h"
#include "onnx/onnx_import.h"

namespace ingot::cli {

// "x=1,3,224,224" -> {"x", {1,3,224,224}}
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& spec) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    fail("--input-shape {}: expected NAME=DIMS, e.g. x=1,3,224,224", spec);
  std::vector<int64_t> dims;
  std::string text = spec.substr(eq + 1);
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    char* stop = nullptr;
    long long v = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || v < 0)
      fail("--input-shape {}: '{}' is not a dimension (a non-negative integer)", spec, item);
    dims.push_back(v);
    begin = end + 1;
  }
  return {spec.substr(0, eq), dims};
}

bool is_static_dim(const std::string& dim) {
  return !dim.empty() && std::all_of(dim.begin(), dim.end(), [](char c) { return std::isdigit(c); });
}

// A random input for `info` (bench, convert's tuning run): its shape `fixed` when given, else a symbolic or unknown
// first dim is `batch` and any other one 1. Floats are uniform in [-1, 1); integers and bools are 0
// (safe as indices and sizes).
Tensor random_input(const TensorInfo& info, int64_t batch, const std::vector<int64_t>* fixed, std::mt19937& rng) {
  Shape shape;
  if (fixed) {
    if (fixed->size() != info.dims.size())
      fail("--input-shape {}: {} dims given, the input has {}", info.name, fixed->size(), info.dims.size());
    shape = *fixed;
  }
  for (size_t d = 0; d < info.dims.size() && !fixed; ++d) {
    const std::string& text = info.dims[d];
    shape.push_back(is_static_dim(text) ? std::stoll(text) : d == 0 ? batch : 1);
  }
  DType dtype = info.dtype == DType::Undefined ? DType::Float32 : info.dtype;
  if (dtype == DType::String) fail("input '{}' is a string tensor: give it with --input", info.name);
  Tensor t = Tensor::zeros(dtype, shape);
  if (is_floating(dtype)) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    Tensor f = Tensor::empty(DType::Float32, shape);
    for (float& v : f.span<float>()) v = dist(rng);
    t = f.cast(dtype);
  }
  return t;
}

Tensor load_tensor_file(const std::string& path) {
  if (path.ends_with(".npy")) return load_npy(path);
  if (path.ends_with(".pb")) return load_tensor_pb(path);
  fail("input file '{}': expected a .npy or .pb file", path);
}

std::vector<std::pair<std::string, Tensor>> load_inputs(const std::vector<std::string>& args,
                                                        const std::vector<std::string>& input_names) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  size_t next_positional = 0;
  for (const std::string& arg : args) {
    std::string name, path = arg;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      std::string candidate = arg.substr(0, eq);
      if (std::find(input_names.begin(), input_names.end(), candidate) != input_names.end()) {
        name = candidate;
        path = arg.substr(eq + 1);
      } else if (!std::filesystem::exists(arg)) {
        std::string names = join(input_names, ", ");
        fail("--input {}: the model has no input named '{}' (inputs: {})", arg, candidate, names);
      }
    }
    if (name.empty()) {
      if (next_positional >= input_names.size())
        fail("--input {}: more inputs given than the model takes ({})", arg, input_names.size());
      name = input_names[next_positional++];
    }
    feeds.emplace_back(name, load_tensor_file(path));
  }
  return feeds;
}

Feeds make_feeds(const Session& session, const std::vector<std::string>& inputs,
                 const std::vector<std::string>& input_shapes, int64_t batch, uint32_t seed, bool symbolic_ok) {
  std::vector<std::string> names;
  for (const auto& in : session.inputs()) names.push_back(in.name);
  auto given = load_inputs(inputs, names);
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& spec : input_shapes) {
    shapes.push_back(parse_input_shape(spec));
    if (std::find(names.begin(), names.end(), shapes.back().first) == names.end())
      fail("--input-shape {}: the model has no input named '{}'", spec, shapes.back().first);
  }
  std::mt19937 rng(seed);
  Feeds out;
  for (const auto& info : session.inputs()) {
    auto it = std::find_if(given.begin(), given.end(), [&](const auto& f) { return f.first == info.name; });
    if (it != given.end()) {
      out.feeds.emplace_back(info.name, it->second);
      continue;
    }
    auto fixed = std::find_if(shapes.begin(), shapes.end(), [&](const auto& s) { return s.first == info.name; });
    if (fixed == shapes.end() && !symbolic_ok && !std::all_of(info.dims.begin(), info.dims.end(), is_static_dim)) {
      fail("input '{}' has a symbolic shape [{}]: give it with --input {}=FILE (.npy or .pb) or --input-shape {}=DIMS",
           info.name, join(info.dims, ","), info.name, info.name);
    }
    out.feeds.emplace_back(info.name, random_input(info, batch, fixed == shapes.end() ? nullptr : &fixed->second, rng));
    out.random = true;
  }
  return out;
}

namespace {

// "8G", "512M", "64K" (powers of 1024) or a byte count.
int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double unit = 1;
  const std::string suffix = used ? text.substr(used) : "";
  if (suffix == "K" || suffix == "k") unit = 1024.0;
  else if (suffix == "M" || suffix == "m") unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") unit = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "t") unit = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty()) used = 0;
  if (!used || !(value > 0) || value * unit >= 9.2e18)
    fail("{}: expected a size such as 8G, 512M or a byte count, got '{}'", flag, text);
  return int64_t(value * unit);
}

void print_summary(const TensorInfo& info, const Tensor& t) {
  std::cout << info.name << ": " << t.describe();
  if (t.dtype() != DType::String && t.numel() > 0) {
    Tensor f = t.cast(DType::Float64);
    auto v = f.span<double>();
    double lo = v[0], hi = v[0], sum = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
    std::cout << fmt::format("  min {:.6g} max {:.6g} mean {:.6g}  [", lo, hi, sum / double(v.size()));
    for (size_t i = 0; i < std::min<size_t>(v.size(), 6); ++i)
      std::cout << (i ? ", " : "") << fmt::format("{:.6g}", v[i]);
    std::cout << (v.size() > 6 ? ", ...]" : "]");
  }
  std::cout << "\n";
}

}  // namespace

Runner add_run_command(CLI::App& app) {
  struct Options {
    std::string model, device = "cpu", precision = "fp32", output_dir, profile;
    std::vector<std::string> inputs;
    int threads = 0, repeat = 1;
    bool tf32 = false;
    double time_limit = 0;
    std::string memory_limit;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "Model file (.onnx)")->required();
  app.add_option("--input,-i", o->inputs, "NAME=FILE or FILE (in graph-input order); .npy or TensorProto .pb")
      ->allow_extra_args(false);
  app.add_option("--device", o->device, "Device to run on")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--output-dir,-o", o->output_dir, "Write output_<i>.npy and outputs.json here");
  app.add_option("--threads", o->threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  add_precision_option(app, o->precision);
  app.add_option("--profile", o->profile,
                 "Write a Chrome/Perfetto trace (JSON) here: the model's load (its phases), then the run");
  app.add_flag("--tf32", o->tf32, "Let float32 matrix products and convolutions on the GPU use TF32");
  app.add_option("--repeat", o->repeat,
                 "Run N times, keeping the last run's outputs; the earlier runs get float32 inputs halved, so the "
                 "last proves that a planned or replayed run reads its own inputs")
      ->check(CLI::PositiveNumber);
  app.add_option("--time-limit", o->time_limit, "Stop a run still going after this many seconds, with an error (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--memory-limit", o->memory_limit,
                 "Host memory tensors may hold, e.g. 8G, 512M or bytes (default: 90% of physical memory)");
  return [o] {
    SessionOptions options;
    options.device = Device::parse(o->device);
    options.threads = o->threads;
    options.time_limit_s = o->time_limit;
    if (!o->memory_limit.empty()) options.memory_limit_bytes = parse_byte_size(o->memory_limit, "--memory-limit");
    options.allow_tf32 = o->tf32;
    options.precision = parse_precision(o->precision);
    // With --profile the load is traced too: a fresh process's one-off steps (reading the model,
    // creating the CUDA context and library handles, the first run's uploads) are its cold start.
    std::optional<profiler::ScopedProfile> profile;
    if (!o->profile.empty() && o->repeat == 1) profile.emplace();
    Session session = Session::load(o->model, options);
    std::vector<std::string> names;
    for (const auto& in : session.inputs()) names.push_back(in.name);
    auto feeds = load_inputs(o->inputs, names);
    std::vector<Tensor> outputs;
    if (o->repeat > 1) {
      auto other = feeds;
      for (auto& [name, t] : other) {
        if (t.dtype() != DType::Float32) continue;
        t = t.clone();
        for (float& v : t.span<float>()) v *= 0.5f;
      }
      for (int i = 1; i < o->repeat; ++i) session.run(other);
    }
    if (!o->profile.empty() && !profile) profile.emplace();  // --repeat: the last run only
    outputs = session.run(feeds);
    if (profile) profile->stop().write_chrome_json(o->profile);
    if (o->output_dir.empty()) {
      for (size_t i = 0; i < outputs.size(); ++i) print_summary(session.outputs()[i], outputs[i]);
      std::cout.flush();  // the first output reaches a pipe now, not at exit (bench/cold_start.py times it)
      return 0;
    }
    std::filesystem::create_directories(o->output_dir);
    nlohmann::json index = nlohmann::json::array();
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string file = "output_" + std::to_string(i) + ".npy";
      save_npy((std::filesystem::path(o->output_dir) / file).string(), outputs[i]);
      index.push_back({{"index", i},
                       {"name", session.outputs()[i].name},
                       {"dtype", dtype_name(outputs[i].dtype())},
                       {"shape", outputs[i].shape()},
                       {"file", file}});
    }
    std::ofstream(std::filesystem::path(o->output_dir) / "outputs.json") << index.dump(2) << "\n";
    std::cout << "wrote " << outputs.size() << " outputs to " << o->output_dir << "\n";
    return 0;
  };
}

}  // namespace ingot::cli
