#include <ingot/session.h>

#include <fmt/format.h>

#include <cstdio>
#include <map>

#include "compiler/compile.h"
#include "core/backend.h"
#include "core/flags.h"
#include "core/strings.h"
#include "core/math_mode.h"
#include "core/thread_pool.h"
#include "onnx/onnx_import.h"
#include "package/package.h"
#include "profiler/hooks.h"
#include "runtime/executor.h"

namespace ingot {

std::string TensorInfo::str() const {
  return name + ": " + std::string(dtype_name(dtype)) + "[" + join(dims, ",") + "]";
}

struct Session::Impl {
  std::shared_ptr<Model> model;
  std::unique_ptr<Executor> executor;
  std::vector<TensorInfo> inputs, outputs;
  bool outputs_on_device = false;

  // Checks a feed against the declared type; symbolic dims must agree across all inputs.
  void check_input(size_t index, const Tensor& t, std::map<std::string, int64_t>& symbols) const {
    const ValueInfo& vi = model->graph->inputs[index];
    if (!t.defined()) fail("input '{}' is missing", vi.name);
    if (vi.type.dtype != DType::Undefined && t.dtype() != vi.type.dtype) {
      fail("input '{}': expected dtype {}, got {}", vi.name, dtype_name(vi.type.dtype), dtype_name(t.dtype()));
    }
    if (!vi.type.shape) return;
    const auto& dims = *vi.type.shape;
    auto expected = [&] { return "[" + join(dims, ",", [](const Dim& d) { return d.str(); }) + "]"; };
    if (size_t(t.rank()) != dims.size()) {
      fail("input '{}': expected shape {} (rank {}), got {}", vi.name, expected(), dims.size(), t.describe());
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].is_static() && dims[d].value != t.shape()[d]) {
        fail("input '{}': expected shape {}, got {} (dimension {} must be {})", vi.name, expected(), t.describe(), d,
             dims[d].value);
      }
      if (!dims[d].is_static() && !dims[d].symbol.empty()) {
        auto [it, inserted] = symbols.emplace(dims[d].symbol, t.shape()[d]);
        if (!inserted && it->second != t.shape()[d]) {
          fail("input '{}': dimension {} ('{}') is {}, but another input set '{}' to {}", vi.name, d, dims[d].symbol,
               t.shape()[d], dims[d].symbol, it->second);
        }
      }
    }
  }
};

static TensorInfo info_of(const ValueInfo& vi) {
  TensorInfo info{vi.name, vi.type.dtype, {}};
  if (vi.type.shape) {
    for (const Dim& d : *vi.type.shape) info.dims.push_back(d.str());
  }
  return info;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Session Session::load(const std::string& path, SessionOptions options) {
  set_num_threads(options.threads);
  set_allow_tf32(options.allow_tf32);
  if (options.memory_limit_bytes < 0) fail("memory_limit_bytes must be positive (0: leave the limit as it is)");
  if (options.memory_limit_bytes > 0) set_host_memory_limit(options.memory_limit_bytes);
  if (!(options.time_limit_s >= 0)) fail("time_limit_s must be 0 (no limit) or positive");
  auto impl = std::make_unique<Impl>();
  impl->outputs_on_device = options.outputs_on_device;
  // A GPU's driver and context take ~0.2 s to start: they do so while the model is read.
  Backend* accelerator = options.device.type == DeviceType::CPU ? nullptr : find_backend(options.device.type);
  if (accelerator) accelerator->start_async(options.device.index);
  // A package was optimized (and converted to its precision) by `ingot convert`: no pass runs here.
  const bool package = is_package_file(path);
  if (package) {
    profiler::detail::PhaseScope phase("load package");
    impl->model = load_package(path, options);
  } else {
    if (options.precision == Precision::INT8) {
      fail("model '{}': int8 needs calibration: convert it with `ingot convert --precision int8 --calib ...` and "
           "load the package (or load a QDQ model from `ingot quantize` in fp32)",
           path);
    }
    {
      profiler::detail::PhaseScope phase("import ONNX");
      impl->model = import_onnx(path);
    }
    profiler::detail::PhaseScope phase("optimize");
    compile(*impl->model, {options.optimize, compute_dtype(options.precision), options.device.type});
  }
  if (accelerator) accelerator->prepare_async(options.device.index);  // e.g. a package's cuDNN plans
  {
    profiler::detail::PhaseScope phase("build executor");
    impl->executor =
        std::make_unique<Executor>(Executable::build(impl->model, options.device),
                                   ExecutorOptions{options.memory_plan, options.cuda_graphs, options.time_limit_s});
  }
  // A package's weights go to the device while the first run goes on.
  if (package && accelerator && flags::enabled("INGOT_UPLOAD_AHEAD")) impl->executor->upload_weights_async();
  if (options.report_fallbacks) {
    if (std::string s = impl->executor->executable().fallback_summary(); !s.empty()) {
      fmt::print(stderr, "ingot: model '{}': {}\n", impl->model->name, s);
    }
  }
  for (const auto& in : impl->model->graph->inputs) impl->inputs.push_back(info_of(in));
  for (const auto& out : impl->model->graph->outputs) impl->outputs.push_back(info_of(out));
  return Session(std::move(impl));
}

const std::vector<TensorInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Session::outputs() const { return impl_->outputs; }
const std::string& Session::model_name() const { return impl_->model->name; }

std::vector<Tensor> Session::run(const std::vector<std::pair<std::string, Tensor>>& feeds) {
  std::vector<Tensor> ordered(impl_->inputs.size());
  for (const auto& [name, t] : feeds) {
    size_t i = 0;
    while (i < impl_->inputs.size() && impl_->inputs[i].name != name) ++i;
    if (i == impl_->inputs.size()) {
      std::string names = join(impl_->inputs, ", ", [](const TensorInfo& in) { return in.name; });
      Error e(fmt::format("the model has no input named '{}' (inputs: {})", name, names));
      e.add_context("model '" + impl_->model->name + "'");
      throw e;
    }
    ordered[i] = t;
  }
  return run(ordered);
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  try {
    if (inputs.size() != impl_->inputs.size()) {
      std::vector<std::string> absent;
      for (size_t i = inputs.size(); i < impl_->inputs.size(); ++i) absent.push_back(impl_->inputs[i].name);
      std::string missing = join(absent, "', '");
      if (inputs.size() > impl_->inputs.size())
        fail("{} inputs given, the model takes {}", inputs.size(), impl_->inputs.size());
      fail("input '{}' is missing", missing);
    }
    std::map<std::string, int64_t> symbols;
    std::vector<Value> values;
    for (size_t i = 0; i < inputs.size(); ++i) {
      impl_->check_input(i, inputs[i], symbols);
      values.emplace_back(inputs[i].detach());  // a graph run records nothing on the autograd tape
    }
    Executor::Result run = impl_->executor->run(values);
    const std::vector<Value>& results = run.outputs;
    std::vector<Tensor> out;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].kind != Value::Kind::Tensor) {
        fail("output '{}' is a {}, which Session::run cannot return as a tensor", impl_->outputs[i].name,
             results[i].describe());
      }
      const Tensor& t = results[i].tensor;
      // A replayed CUDA graph writes its outputs into the same buffers every run: hand out copies.
      const bool replayed = run.stats.graph_replay;
      out.push_back(!impl_->outputs_on_device ? t.to(Device::cpu()) : replayed ? t.clone() : t);
    }
    return out;
  } catch (Error& e) {
    e.add_context("model '" + impl_->model->name + "'");
    throw;
  }
}

Device Session::device() const { return impl_->executor->device(); }

std::vector<Fallback> Session::fallbacks() const {
  std::vector<Fallback> out;
  for (const auto& p : impl_->executor->executable().fallbacks()) out.push_back({p.node, p.op, p.reason});
  return out;
}

std::string Session::fallback_summary() const { return impl_->executor->executable().fallback_summary(); }

TransferStats Session::last_run_stats() const {
  const RunStats r = impl_->executor->run_stats();
  return {r.host_to_device_bytes, r.device_to_host_bytes, r.device_to_device_bytes, r.copies,
          r.fallback_ops,         r.fallback_copy_bytes,  r.graph_replay};
}

MemoryPlanStats Session::memory_plan() const { return impl_->executor->memory_plan(); }

}  // namespace ingot
