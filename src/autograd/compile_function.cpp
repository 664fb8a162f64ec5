// compile(f) (include/ingot/autograd.h): trace, compile pipeline, Executable, per input signature.
#include <ingot/autograd.h>

#include <map>
#include <mutex>
#include <tuple>

#include "autograd/trace.h"
#include "compiler/compile.h"
#include "runtime/executor.h"

namespace ingot {
namespace {

using Signature = std::vector<std::tuple<DType, Shape, int, int>>;  // dtype, shape, device type and index

Signature signature_of(const std::vector<Tensor>& args) {
  Signature s;
  for (const Tensor& t : args) {
    if (!t.defined()) fail("compile: argument {} is undefined", s.size());
    s.emplace_back(t.dtype(), t.shape(), int(t.device().type), t.device().index);
  }
  return s;
}

Device device_of(const std::vector<Tensor>& args) {
  for (const Tensor& t : args) {
    if (t.device().type != DeviceType::CPU) return t.device();
  }
  return Device::cpu();
}

}  // namespace

struct CompiledFunction::State {
  struct Entry {
    std::shared_ptr<Model> model;
    std::unique_ptr<Executor> executor;
  };
  Function f;
  mutable std::mutex mutex;
  std::map<Signature, std::shared_ptr<Entry>> entries;
};

CompiledFunction::CompiledFunction(Function f) : state_(std::make_shared<State>()) { state_->f = std::move(f); }

CompiledFunction compile(Function f) { return CompiledFunction(std::move(f)); }

size_t CompiledFunction::traces() const {
  std::lock_guard lock(state_->mutex);
  return state_->entries.size();
}

std::string CompiledFunction::graph_text(const std::vector<Tensor>& args) const {
  std::lock_guard lock(state_->mutex);
  auto it = state_->entries.find(signature_of(args));
  return it == state_->entries.end() ? "" : print_graph(*it->second->model->graph);
}

std::string CompiledFunction::report(const std::vector<Tensor>& args) const {
  std::shared_ptr<State::Entry> e;
  {
    std::lock_guard lock(state_->mutex);
    auto it = state_->entries.find(signature_of(args));
    if (it == state_->entries.end()) return "";
    e = it->second;
  }
  const MemoryPlanStats plan = e->executor->memory_plan();
  std::string fallbacks = e->executor->executable().fallback_summary();
  return fmt::format("{} nodes{}; memory plan: {} bytes in {} tensors; CUDA graph: {}",
                     e->model->graph->nodes.size(), fallbacks.empty() ? "" : "; " + fallbacks, plan.arena_bytes,
                     plan.tensors, plan.cuda_graph ? fmt::format("replayed ({} operations)", plan.graph_nodes)
                                   : plan.why_no_graph.empty() ? "none" : plan.why_no_graph);
}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& args) const {
  // Inside another trace: f's ops become part of that one.
  if (autograd::detail::Tracer::active()) return state_->f(args);
  const Signature sig = signature_of(args);
  std::shared_ptr<State::Entry> entry;
  {
    std::lock_guard lock(state_->mutex);
    if (auto it = state_->entries.find(sig); it != state_->entries.end()) entry = it->second;
  }
  if (!entry) {
    // The first call with this signature runs f eagerly under the tracer and returns its results.
    std::vector<Tensor> outs;
    auto e = std::make_shared<State::Entry>();
    try {
      {
        autograd::detail::Tracer tracer;
        for (const Tensor& a : args) tracer.add_input(a);
        outs = state_->f(args);
        e->model = tracer.finish(outs, "compiled function");
      }
      verify(*e->model);
      const Device device = device_of(args);
      ingot::compile(*e->model, {true, DType::Float32, device.type});
      std::vector<bool> on_device;
      for (const Tensor& a : args) on_device.push_back(a.device().type != DeviceType::CPU);
      e->executor = std::make_unique<Executor>(Executable::build(e->model, device, std::move(on_device)));
    } catch (Error& err) {
      err.add_context("compile(f)");
      throw;
    }
    std::lock_guard lock(state_->mutex);
    state_->entries.try_emplace(sig, std::move(e));
    for (Tensor& t : outs) t = t.detach();
    return outs;
  }
  std::vector<Value> values;
  for (const Tensor& a : args) values.emplace_back(a.detach());
  Executor::Result run = entry->executor->run(values);
  std::vector<Tensor> outs;
  for (const Value& v : run.outputs) outs.push_back(run.stats.graph_replay ? v.tensor.clone() : v.tensor);
  return outs;
}

}  // namespace ingot
