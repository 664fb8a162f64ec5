#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "core/backend.h"
#include "core/strings.h"
#include "core/thread_pool.h"
#include "profiler/hooks.h"
#include "compiler/memory_plan.h"

namespace ingot {

// Copies at least this large are timed on the device (a CUDA event pair); smaller ones, such as a
// recurrent model's state, on the host: a pair of cudaEventRecord calls costs ~5 us, more than the
// copy (Silero VAD on the H200: 4 small copies per 0.17 ms run).
constexpr int64_t kDeviceTimedCopyBytes = 64 * 1024;

// One graph's run-time state beside its plan (compiler/executable.h): what runs change.
struct Executor::Plan {
  const GraphPlan* g;
  std::vector<std::unique_ptr<NodeState>> state;  // per step: the kernel's cache (locked while a kernel uses it)
  mutable std::vector<profiler::detail::NodeCache> profile;  // per step: the profiler's, while one records
  // Initializers already copied to the accelerator: uploaded on first use, kept for later runs.
  mutable std::unordered_map<int, Tensor> uploaded;
};

struct Executor::Env {
  const Plan* plan;
  const Env* parent;
  std::vector<Value> slots;
  std::vector<Value> moved;  // a slot's value copied to the other device, reused by later readers
  std::deque<Value> outer_copies;  // copies of enclosing graphs' values, for the current node only
  std::vector<bool> from_fallback;  // slots written by a fallback node (their copies count against it)

  const Value* find(const std::string& name) const {
    // A name defined in this graph shadows outer ones; its value may legitimately be None (an
    // empty optional), so it never falls through to an enclosing graph.
    if (auto it = plan->g->slot_of.find(name); it != plan->g->slot_of.end()) return &slots[size_t(it->second)];
    return parent ? parent->find(name) : nullptr;
  }
};

// Host-computed values a recording run copied to the device, by graph plan and slot (static for a
// shape plan: host values derive from shapes, weights and the specialized inputs), for its capture.
// A subgraph that ran twice (a Loop body) may have copied different values each time: `repeated`.
struct Executor::Uploads {
  struct Upload {
    Value value;
    const void* source;  // the host value's storage when copied (tells a second reader from a second run)
  };
  std::map<std::pair<const Plan*, int>, Upload> values;
  bool repeated = false;
};

// The static plan of one set of input shapes (compiler/memory_plan.h, core/device_graph.h).
struct Executor::ShapePlan {
  struct Buffer {
    int step, output;
    size_t bytes;
    Device device;
    size_t offset = 0;
  };
  std::vector<std::tuple<DType, Shape, Device>> key;
  std::vector<std::string> host_values;  // bytes of the host-read inputs specialized on ("" if not)
  std::vector<Buffer> buffers;
  std::unordered_map<int64_t, int> buffer_of;  // step << 16 | output -> buffers index
  MemoryPlanStats stats;  // stats.planned: the recording run is done
  std::shared_ptr<Storage> host_arena, device_arena;
  // CUDA graph: decided by the recording run, tried at the next (a failed capture clears it).
  bool capturable = false;
  Uploads uploads;
  std::vector<Tensor> input_buffers;  // undefined for specialized host inputs (baked into the graph)
  std::vector<Value> outputs;  // where the graph leaves the outputs
  Node replay_node;            // names the replays in a profile
  std::unique_ptr<DeviceGraph> graph;  // destroyed before the memory it uses
  std::mutex busy;  // held by the run using the plan (its arena, its graph)

  static int64_t id(int step, size_t output) { return int64_t(step) << 16 | int64_t(output); }
};

// One run's own state: its stats, where the uploads of a recording go (or a capture takes them from),
// and the node being run, whose subgraphs (If/Loop/Scan bodies) the kernel runs through the frame.
struct Executor::Frame final : SubgraphRunner {
  explicit Frame(Executor& executor) : ex(executor) {
    if (executor.options_.time_limit_s > 0) {
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(executor.options_.time_limit_s));
    }
  }
  std::vector<Value> run_subgraph(const Graph& graph, const std::vector<Value>& inputs) override {
    check_deadline();  // also between the iterations of a Loop whose body has no node
    return ex.run_subgraph(*this, graph, inputs);
  }
  // Checked before every node: a run that outlives the time limit stops with an error (a Loop with an
  // enormous trip count, a model far too slow for its inputs) instead of hanging its caller.
  void check_deadline() const {
    if (deadline && std::chrono::steady_clock::now() > *deadline) [[unlikely]]
      fail("the run was stopped: it took longer than its time limit of {} s (SessionOptions::time_limit_s, "
           "--time-limit)", ex.options_.time_limit_s);
  }

  Executor& ex;
  RunStats stats;
  // During a run that records a shape plan: where host values copied to the device are kept; during
  // its capture: where they are taken from (the capture makes no host copy).
  Uploads* upload_sink = nullptr;
  const Uploads* capture_uploads = nullptr;
  const Env* current_env = nullptr;          // the env of the node being run (parent for its subgraphs)
  const GraphPlan::Step* current_step = nullptr;  // the step being run
  std::optional<std::chrono::steady_clock::time_point> deadline;  // ExecutorOptions::time_limit_s
};

// Output allocation of the top-level graph's steps during a planned run. Recording (first run of
// a shape): fresh tensors, noting each buffer, the slots that hold it (views alias their input's
// buffer) and the last step that reads one of them. Arena: the plan's slices, or a fresh tensor
// when a request does not fit (data-dependent shapes).
class Executor::StepAllocator final : public OutputAllocator {
 public:
  StepAllocator(ShapePlan& sp, int num_slots, bool recording) : sp_(sp), recording_(recording) {
    if (recording) slot_buffer_.assign(size_t(num_slots), -1);
  }
  void begin_step(int step) { step_ = step; }

  Tensor allocate(size_t output, DType dtype, Shape shape, Device device) override {
    if (!recording_) {
      auto it = sp_.buffer_of.find(ShapePlan::id(step_, output));
      if (it != sp_.buffer_of.end()) {
        const ShapePlan::Buffer& b = sp_.buffers[size_t(it->second)];
        size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
        if (b.device == device && bytes <= b.bytes && dtype != DType::String) {
          return Tensor::view(device.type == DeviceType::CPU ? sp_.host_arena : sp_.device_arena, b.offset, dtype,
                              std::move(shape));
        }
      }
      return Tensor::empty(dtype, std::move(shape), device);
    }
    Tensor t = Tensor::empty(dtype, std::move(shape), device);
    if (t.nbytes() > 0 && dtype != DType::String) {
      for (Rec& r : recs_) {
        if (r.step == step_ && r.output == int(output)) r.valid = false;  // allocated twice in one step
      }
      recs_.push_back({step_, int(output), t.nbytes(), device, step_, true});
      by_storage_[t.storage().get()] = {int(recs_.size() - 1), t.storage()};
    }
    return t;
  }

  // After step `step` stored its outputs: the slots now holding a buffer (or a view of one); the
  // buffers a step with subgraphs may hand back as its outputs (`pinned`) live to the end.
  void after_step(const std::vector<int>& output_slots, const std::vector<Value>& slots,
                  const std::vector<int>& pinned) {
    if (!recording_) return;
    for (int s : pinned) {
      if (slot_buffer_[size_t(s)] >= 0) recs_[size_t(slot_buffer_[size_t(s)])].last = INT_MAX - 1;  // (+1 must not overflow)
    }
    for (int s : output_slots) {
      if (s < 0) continue;
      const Value& v = slots[size_t(s)];
      if (v.kind == Value::Kind::Tensor) {
        slot_buffer_[size_t(s)] = recorded(v.tensor);
      } else if (v.kind == Value::Kind::Sequence) {
        for (const Tensor& t : v.sequence) {  // escapes into a sequence: not planned
          if (int r = recorded(t); r >= 0) recs_[size_t(r)].valid = false;
        }
      }
    }
  }
  // Slot `s` is dead after step `step`.
  void freed(int s, int step) {
    if (!recording_ || slot_buffer_[size_t(s)] < 0) return;
    Rec& r = recs_[size_t(slot_buffer_[size_t(s)])];
    r.last = std::max(r.last, step);
  }
  // The graph's outputs leave the run: their buffers are not planned.
  void outputs(const std::vector<int>& output_slots) {
    if (!recording_) return;
    for (int s : output_slots) {
      if (s >= 0 && slot_buffer_[size_t(s)] >= 0) recs_[size_t(slot_buffer_[size_t(s)])].valid = false;
    }
  }

  // Lays the recorded buffers out in one arena per device kind.
  void finish() {
    sp_.buffers.clear();
    sp_.buffer_of.clear();
    MemoryPlanStats& st = sp_.stats;
    for (bool host : {true, false}) {  // the host's arena, then the accelerator's
      std::vector<BufferLife> lives;
      std::vector<const Rec*> recs;
      for (const Rec& r : recs_) {
        if (r.valid && (r.device.type == DeviceType::CPU) == host) {
          lives.push_back({r.bytes, r.step, r.last});
          recs.push_back(&r);
        }
      }
      if (lives.empty()) continue;
      MemoryPlan plan = plan_memory(lives);
      Device device = recs[0]->device;
      for (size_t i = 0; i < recs.size(); ++i) {
        sp_.buffer_of[ShapePlan::id(recs[i]->step, size_t(recs[i]->output))] = int(sp_.buffers.size());
        sp_.buffers.push_back({recs[i]->step, recs[i]->output, recs[i]->bytes, recs[i]->device, plan.offsets[i]});
      }
      (host ? sp_.host_arena : sp_.device_arena) =
          std::make_shared<Storage>(device, plan.arena_bytes, DType::UInt8);
      st.tensors += int64_t(recs.size());
      st.arena_bytes += int64_t(plan.arena_bytes);
      st.total_bytes += int64_t(plan.total_bytes);
      st.lower_bound += int64_t(plan.lower_bound);
    }
    st.planned = true;
  }

 private:
  struct Rec {
    int step, output;
    size_t bytes;
    Device device;
    int last;
    bool valid;
  };
  ShapePlan& sp_;
  bool recording_;
  int step_ = 0;
  std::vector<Rec> recs_;
  // The buffer a tensor's storage was recorded as, or -1. The weak reference tells a recorded storage
  // from a later one that happens to have its address (a freed intermediate's, say).
  int recorded(const Tensor& t) const {
    auto it = by_storage_.find(t.storage().get());
    if (it == by_storage_.end() || it->second.second.expired()) return -1;
    return it->second.first;
  }
  std::unordered_map<const Storage*, std::pair<int, std::weak_ptr<Storage>>> by_storage_;
  std::vector<int> slot_buffer_;
};

namespace {

// A host-read input small enough to specialize a shape plan on (a few scalars: cheap to match).
bool specializable(const Tensor& t) { return t.nbytes() <= 64 && t.dtype() != DType::String; }

using InputKey = std::vector<std::tuple<DType, Shape, Device>>;

// The dtype, shape and device of every input, or nullopt when one is not a tensor (no static plan).
std::optional<InputKey> input_key(const std::vector<Value>& inputs) {
  InputKey key;
  for (const Value& v : inputs) {
    if (v.kind != Value::Kind::Tensor) return std::nullopt;
    key.emplace_back(v.tensor.dtype(), v.tensor.shape(), v.tensor.device());
  }
  return key;
}

// The plan of `key` and `host_values` among `plans` (the main graph's, or a body's), made when
// missing: most recently used first, at most 8 kept.
template <class ShapePlanT>
std::shared_ptr<ShapePlanT> most_recent_plan(std::vector<std::shared_ptr<ShapePlanT>>& plans, InputKey key,
                                             std::vector<std::string> host_values) {
  constexpr size_t kMaxPlans = 8;
  auto it = std::find_if(plans.begin(), plans.end(),
                         [&](const auto& p) { return p->key == key && p->host_values == host_values; });
  if (it == plans.end()) {
    if (plans.size() == kMaxPlans) plans.pop_back();
    auto sp = std::make_shared<ShapePlanT>();
    sp->key = std::move(key);
    sp->host_values = std::move(host_values);
    plans.insert(plans.begin(), std::move(sp));
  } else {
    std::rotate(plans.begin(), it, it + 1);
  }
  return plans.front();
}

// The backend's name, as profiles record it (static storage).
std::string_view backend_name(Device d) { return backend_for(d).name(); }

// Accelerator runs enqueue one at a time per device: the device has one stream, and a cuDNN handle
// must not be used from two threads at once (concurrent CPU runs are not serialized).
std::mutex& device_run_mutex(int device) {
  static std::mutex mutexes[16];
  return mutexes[size_t(device) % std::size(mutexes)];
}

}  // namespace

Executor::Executor(std::shared_ptr<const Executable> executable, ExecutorOptions options)
    : executable_(std::move(executable)), model_(executable_->model()), device_(executable_->device()),
      options_(options) {
  for (const GraphPlan* g : executable_->plans()) {
    auto plan = std::make_unique<Plan>();
    plan->g = g;
    for (size_t i = 0; i < g->steps.size(); ++i) plan->state.push_back(std::make_unique<NodeState>());
    plan->profile.resize(g->steps.size());
    plans_[g->graph] = std::move(plan);
  }
}

Executor::~Executor() {
  finish_weight_uploads();
  if (profiler::enabled()) [[unlikely]]
    profiler::detail::forget_nodes();
}

void Executor::upload_weights_async() {
  if (device_.type == DeviceType::CPU) return;
  std::lock_guard lock(weight_uploads_mutex_);
  if (weight_uploads_.joinable()) return;
  stop_weight_uploads_ = false;
  weight_uploads_ = std::thread([this] {
    try {
      profiler::detail::PhaseScope phase("weights uploaded ahead");
      const Plan& plan = plan_for(*model_.graph);
      std::unordered_map<int, const Tensor*> weights;
      for (const auto& [slot, t] : plan.g->initializers) weights.emplace(slot, &t);
      for (const GraphPlan::Step& step : plan.g->steps) {
        if (step.kernel->any_device || step.device.type == DeviceType::CPU) continue;
        for (size_t i = 0; i < step.input_slots.size(); ++i) {
          if (stop_weight_uploads_.load(std::memory_order_relaxed)) return;
          auto w = weights.find(step.input_slots[i]);
          if (w == weights.end() || step.kernel->is_host_input(i)) continue;
          {
            std::lock_guard uploads(uploads_mutex_);
            if (plan.uploaded.count(w->first)) continue;
          }
          // Enqueued on the device's stream before it is published: a run that takes it from
          // Plan::uploaded enqueues its kernels after the copy.
          Tensor copy = w->second->to(step.device);
          std::lock_guard uploads(uploads_mutex_);
          plan.uploaded.try_emplace(w->first, std::move(copy));
        }
      }
    } catch (...) {
      // Whatever is left is copied by the run on first use, which reports any error itself.
    }
  });
}

void Executor::finish_weight_uploads() {
  std::lock_guard lock(weight_uploads_mutex_);
  if (!weight_uploads_.joinable()) return;
  stop_weight_uploads_ = true;
  weight_uploads_.join();
}

const Executor::Plan& Executor::plan_for(const Graph& graph) const {
  auto it = plans_.find(&graph);
  if (it == plans_.end()) fail("graph '{}' was not prepared by this executor", graph.name);
  return *it->second;
}

Executor::Result Executor::run(const std::vector<Value>& inputs) {
  profiler::detail::Range range;  // off: one relaxed load and branch, nothing else
  if (profiler::enabled()) [[unlikely]]
    range.begin();  // the run's time includes waiting for the device
  cpu_pool();  // make sure the pool and library thread counts are set up before timing-sensitive work
  std::unique_lock<std::mutex> device_lock;
  if (device_.type != DeviceType::CPU) device_lock = std::unique_lock(device_run_mutex(device_.index));
  Frame f(*this);
  std::vector<Value> staged;
  std::shared_ptr<ShapePlan> sp = options_.memory_plan ? shape_plan_for(f, inputs, staged) : nullptr;
  Result result;
  // A plan serves one run at a time; a run that finds it busy runs unplanned.
  if (sp) result.hold = std::unique_lock(sp->busy, std::try_to_lock);
  const std::vector<Value>& in = staged.empty() ? inputs : staged;
  result.outputs = result.hold ? run_planned(f, *sp, in) : run_graph(f, *model_.graph, in, nullptr);
  // upload_weights_async's thread ends with the first run (a failed run's: the destructor's or the
  // next run's); CPU sessions have none.
  if (device_.type != DeviceType::CPU) finish_weight_uploads();
  if (range.active()) [[unlikely]]
    range.end_session(model_.name);
  result.stats = f.stats;
  {
    std::lock_guard lock(stats_mutex_);
    last_stats_ = f.stats;
  }
  // Only a replay's outputs live in the plan; its caller keeps the plan alive and held while it reads them.
  if (result.stats.graph_replay) {
    result.plan = std::move(sp);
  } else if (result.hold) {
    result.hold.unlock();
  }
  return result;
}

RunStats Executor::run_stats() const {
  std::lock_guard lock(stats_mutex_);
  return last_stats_;
}

// The plan of these input shapes and host-read values (made on first sight), or null when the
// inputs are not all tensors of the declared count.
std::shared_ptr<Executor::ShapePlan> Executor::shape_plan_for(Frame& f, const std::vector<Value>& inputs,
                                                             std::vector<Value>& staged) {
  const Plan& top = plan_for(*model_.graph);
  if (inputs.size() != top.g->input_slots.size()) return nullptr;
  std::optional<InputKey> key = input_key(inputs);
  if (!key) return nullptr;
  std::vector<std::string> host_values;
  if (!executable_->host_read_inputs().empty()) host_values.resize(inputs.size());
  for (size_t i : executable_->host_read_inputs()) {
    const Tensor& t = inputs[i].tensor;
    if (!specializable(t)) continue;
    const Tensor* host = &t;
    if (t.device().type != DeviceType::CPU) {
      if (staged.empty()) staged = inputs;
      staged[i] = Value(transfer(f, t, Device::cpu(), nullptr, &top.g->slot_of, top.g->input_slots[i], false, false));
      host = &staged[i].tensor;
    }
    host_values[i].assign(static_cast<const char*>(host->raw_data()), host->nbytes());
  }
  std::lock_guard lock(plans_mutex_);
  return most_recent_plan(shape_plans_, std::move(*key), std::move(host_values));
}

std::vector<Value> Executor::run_planned(Frame& f, ShapePlan& sp, const std::vector<Value>& inputs) {
  const Graph& top = *model_.graph;
  if (sp.graph) return replay(f, sp, inputs);
  if (!sp.stats.planned) {
    StepAllocator recorder(sp, plan_for(top).g->num_slots, true);
    const bool gpu = device_.type != DeviceType::CPU;
    f.upload_sink = gpu ? &sp.uploads : nullptr;
    const int64_t staged_bytes = f.stats.device_to_host_bytes;  // host-read inputs staged for the key
    std::vector<Value> outputs = run_graph(f, top, inputs, nullptr, &recorder);
    f.upload_sink = nullptr;
    recorder.finish();
    // A graph can replay a run that never waits for the device: no CPU fallback, no copy to the host.
    if (gpu) {
      if (!options_.cuda_graphs) {
        sp.stats.why_no_graph = "CUDA graphs are off (SessionOptions::cuda_graphs)";
      } else if (!backend_for(device_).graphs()) {
        sp.stats.why_no_graph = "this backend cannot capture graphs";
      } else if (f.stats.fallback_ops > 0) {
        sp.stats.why_no_graph = fmt::format("{} nodes ran on the CPU", f.stats.fallback_ops);
      } else if (f.stats.device_to_host_bytes > staged_bytes) {
        sp.stats.why_no_graph = "the run copies device values to the host";
      } else if (sp.uploads.repeated) {
        sp.stats.why_no_graph = "a subgraph that ran more than once copied host values to the device";
      } else {
        sp.capturable = true;
      }
    }
    return outputs;
  }
  if (sp.capturable && !profiler::enabled()) {
    if (auto outputs = capture(f, sp, inputs)) return *outputs;
  }
  StepAllocator arena(sp, 0, false);
  return run_graph(f, top, inputs, nullptr, &arena);
}

// Captures a run into a CUDA graph and replays it; nullopt (with the reason kept) when the capture
// fails, in which case nothing of it ran.
std::optional<std::vector<Value>> Executor::capture(Frame& f, ShapePlan& sp, const std::vector<Value>& inputs) {
  std::vector<Value> device_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!sp.host_values.empty() && !sp.host_values[i].empty()) {
      // Specialized: the graph bakes in what host code did with this value (the key matched it).
      sp.input_buffers.emplace_back();
      device_inputs.push_back(inputs[i]);
      continue;
    }
    sp.input_buffers.push_back(Tensor::empty(inputs[i].tensor.dtype(), inputs[i].tensor.shape(), device_));
    device_inputs.emplace_back(sp.input_buffers.back());
  }
  DeviceGraphs& graphs = *backend_for(device_).graphs();
  StepAllocator arena(sp, 0, false);
  std::string why;
  std::vector<Value> outputs;
  f.capture_uploads = &sp.uploads;
  graphs.begin_capture(device_.index);
  try {
    outputs = run_graph(f, *model_.graph, device_inputs, nullptr, &arena);
  } catch (const std::exception& e) {  // ingot::Error included
    why = e.what();
  }
  f.capture_uploads = nullptr;
  std::string end_why;
  std::unique_ptr<DeviceGraph> graph = graphs.end_capture(device_.index, &end_why);
  if (!graph || !why.empty()) {
    sp.stats.why_no_graph = "capture failed: " + (why.empty() ? end_why : why);
    sp.input_buffers.clear();
    sp.capturable = false;
    f.stats = {};
    return std::nullopt;
  }
  sp.graph = std::move(graph);
  sp.outputs = std::move(outputs);
  sp.stats.cuda_graph = true;
  sp.stats.graph_nodes = int64_t(sp.graph->nodes());
  sp.replay_node.name = fmt::format("CUDA graph of {} ({} device operations)", model_.name, sp.graph->nodes());
  sp.replay_node.op_type = "CUDAGraphReplay";
  f.stats = {};
  return replay(f, sp, inputs);
}

std::vector<Value> Executor::replay(Frame& f, ShapePlan& sp, const std::vector<Value>& inputs) {
  const Plan& plan = plan_for(*model_.graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!sp.input_buffers[i].defined()) continue;  // a specialized host input
    transfer(f, inputs[i].tensor, device_, &sp.input_buffers[i], &plan.g->slot_of, plan.g->input_slots[i], false, false);
  }
  profiler::detail::Range range;  // off: one relaxed load and branch, nothing else
  if (profiler::detail::op_hooks()) [[unlikely]]
    range.begin_op(sp.replay_node, true);
  sp.graph->replay();
  if (range.active()) [[unlikely]]
    range.end_op(sp.replay_node, backend_name(device_), {}, false);
  f.stats.graph_replay = true;
  return sp.outputs;
}

MemoryPlanStats Executor::memory_plan() const {
  std::shared_ptr<ShapePlan> front;
  {
    std::lock_guard lock(plans_mutex_);
    if (shape_plans_.empty()) return {};
    front = shape_plans_.front();
  }
  std::lock_guard busy(front->busy);  // the stats are written by the run that uses the plan
  return front->stats;
}

std::vector<Value> Executor::run_subgraph(Frame& f, const Graph& graph, const std::vector<Value>& inputs) {
  const GraphPlan::Step* caller = f.current_step;
  std::vector<Value> outputs = run_body(f, graph, inputs, f.current_env);
  f.current_step = caller;
  // A host kernel (Loop, Scan, SequenceMap on the CPU) reads its bodies' results as host memory.
  if (device_.type != DeviceType::CPU && caller && caller->device.type == DeviceType::CPU &&
      !caller->kernel->any_device) {
    for (Value& v : outputs) v = copy_value(f, v, Device::cpu(), nullptr, -1, caller->fallback, false);
  }
  return outputs;
}

// A body (If branch, Loop/Scan body) on the CPU: its intermediates get a static plan of their own,
// per input shapes, like the main graph's (its outputs, handed to the caller, stay fresh tensors).
// A request that does not fit (another outer shape, a branch grown since) gets a fresh tensor.
// On a GPU bodies allocate as they run (a run that replays does not run them; an arena made while
// capturing would belong to the graph's memory pool).
std::vector<Value> Executor::run_body(Frame& f, const Graph& graph, const std::vector<Value>& inputs,
                                      const Env* parent) {
  std::optional<InputKey> key;
  if (!options_.memory_plan || device_.type != DeviceType::CPU || !(key = input_key(inputs))) {
    return run_graph(f, graph, inputs, parent);
  }
  std::shared_ptr<ShapePlan> plan;
  {
    std::lock_guard lock(plans_mutex_);
    plan = most_recent_plan(body_plans_[&graph], std::move(*key), {});
  }
  // Busy (another run's, or this run's own when a body runs inside itself): unplanned.
  std::unique_lock hold(plan->busy, std::try_to_lock);
  if (!hold) return run_graph(f, graph, inputs, parent);
  ShapePlan& sp = *plan;
  if (!sp.stats.planned) {
    StepAllocator recorder(sp, plan_for(graph).g->num_slots, true);
    std::vector<Value> outputs = run_graph(f, graph, inputs, parent, &recorder);
    recorder.finish();
    return outputs;
  }
  StepAllocator arena(sp, 0, false);
  return run_graph(f, graph, inputs, parent, &arena);
}

std::vector<Value> Executor::run_graph(Frame& f, const Graph& graph, const std::vector<Value>& inputs,
                                      const Env* parent, StepAllocator* alloc) {
  const Plan& plan = plan_for(graph);
  if (inputs.size() != plan.g->input_slots.size()) {
    fail("graph '{}' takes {} inputs, {} given", graph.name, plan.g->input_slots.size(), inputs.size());
  }
  Env env{&plan, parent, std::vector<Value>(size_t(plan.g->num_slots)), {}, {}, {}};
  if (device_.type != DeviceType::CPU) {
    env.moved.resize(size_t(plan.g->num_slots));
    env.from_fallback.resize(size_t(plan.g->num_slots));
  }
  for (const auto& [slot, t] : plan.g->initializers) env.slots[size_t(slot)] = Value(t);
  if (device_.type != DeviceType::CPU) {
    std::lock_guard lock(uploads_mutex_);
    for (const auto& [slot, t] : plan.uploaded) env.moved[size_t(slot)] = Value(t);
  }
  if (f.capture_uploads) {
    // Uploads of this graph (the map is ordered by plan, then slot).
    for (auto it = f.capture_uploads->values.lower_bound({&plan, INT_MIN});
         it != f.capture_uploads->values.end() && it->first.first == &plan; ++it) {
      env.moved[size_t(it->first.second)] = it->second.value;
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) env.slots[size_t(plan.g->input_slots[i])] = inputs[i];

  const Env* saved_env = f.current_env;
  std::vector<const Value*> in_values;
  std::vector<Value> out_values;
  for (size_t index = 0; index < plan.g->steps.size(); ++index) {
    const GraphPlan::Step& step = plan.g->steps[index];
    const Node& node = *step.node;
    try {
      f.check_deadline();
      in_values.clear();
      env.outer_copies.clear();
      for (size_t i = 0; i < step.input_slots.size(); ++i) {
        int s = step.input_slots[i];
        if (s == -1) {
          in_values.push_back(nullptr);
          continue;
        }
        const Value* v = s >= 0 ? &env.slots[size_t(s)] : env.find(node.inputs[i]);
        if (!v) fail("input {} ('{}') has no value", i, node.inputs[i]);
        if (device_.type != DeviceType::CPU && !step.kernel->any_device) {
          Device want = step.kernel->is_host_input(i) ? Device::cpu() : step.device;
          v = move_input(f, plan, env, s, node.inputs[i], v, want, step.fallback);
        }
        in_values.push_back(v);
      }
      out_values.assign(step.output_slots.size(), Value());
      f.current_env = &env;
      f.current_step = &step;
      if (step.fallback) ++f.stats.fallback_ops;
      KernelContext ctx(*step.def, node.attrs, step.opset, in_values, out_values, &f, plan.state[index].get(), step.device);
      ctx.set_constant_inputs(step.constant_inputs);
      if (alloc) {
        alloc->begin_step(int(index));
        ctx.set_output_allocator(alloc);
      }
      profiler::detail::Range range;  // off: one relaxed load and branch, nothing else
      if (profiler::detail::op_hooks()) [[unlikely]]
        range.begin_op(node, step.device.type != DeviceType::CPU);
      step.kernel->fn(ctx);
      if (range.active()) [[unlikely]]
        range.end_op(node, backend_name(step.device), in_values, step.fallback, &plan.profile[index]);
      f.current_env = saved_env;
    } catch (Error& e) {
      f.current_env = saved_env;
      e.add_context(node.label());
      throw;
    }
    for (size_t i = 0; i < step.output_slots.size(); ++i) {
      if (step.output_slots[i] < 0) continue;
      env.slots[size_t(step.output_slots[i])] = std::move(out_values[i]);
      if (step.fallback) env.from_fallback[size_t(step.output_slots[i])] = true;
    }
    if (alloc) alloc->after_step(step.output_slots, env.slots, step.body_reads);
    for (int s : step.free_after) {
      if (alloc) alloc->freed(s, int(index));
      env.slots[size_t(s)] = Value();
      if (!env.moved.empty()) env.moved[size_t(s)] = Value();
    }
  }
  if (alloc) alloc->outputs(plan.g->output_slots);
  std::vector<Value> outputs;
  for (size_t i = 0; i < plan.g->output_slots.size(); ++i) {
    int s = plan.g->output_slots[i];
    const Value* v = s >= 0 ? &env.slots[size_t(s)] : env.find(graph.outputs[i].name);
    if (!v) fail("graph '{}': output '{}' has no value", graph.name, graph.outputs[i].name);
    outputs.push_back(*v);
  }
  return outputs;
}

// `v` copied to device `want` (tensors already there are shared), counted in the run's stats and
// recorded by the profiler; `slot` (with its plan's name table) names the value, -1 when it has none.
Value Executor::copy_value(Frame& f, const Value& v, Device want,
                           const std::unordered_map<std::string, int>* slot_names, int slot, bool fallback,
                           bool from_fallback) {
  auto move = [&](const Tensor& t) { return transfer(f, t, want, nullptr, slot_names, slot, fallback, from_fallback); };
  if (v.kind == Value::Kind::Tensor) return Value(move(v.tensor));
  if (v.kind == Value::Kind::None) return v;
  std::vector<Tensor> items;
  for (const Tensor& t : v.sequence) items.push_back(move(t));
  return Value::make_sequence(std::move(items));
}

Tensor Executor::transfer(Frame& f, const Tensor& t, Device want, const Tensor* into,
                          const std::unordered_map<std::string, int>* slot_names, int slot, bool fallback,
                          bool from_fallback) {
  if (t.device() == want && !into) return t;
  auto bytes = int64_t(t.nbytes());
  RunStats& stats = f.stats;
  ++stats.copies;
  if (fallback || from_fallback) stats.fallback_copy_bytes += bytes;
  auto kind = profiler::detail::CopyKind::DeviceToDevice;
  if (want.type == DeviceType::CPU && t.device().type != DeviceType::CPU) {
    stats.device_to_host_bytes += bytes;
    kind = profiler::detail::CopyKind::DeviceToHost;
  } else if (t.device().type == DeviceType::CPU && want.type != DeviceType::CPU) {
    stats.host_to_device_bytes += bytes;
    kind = profiler::detail::CopyKind::HostToDevice;
  } else {
    stats.device_to_device_bytes += bytes;
  }
  profiler::detail::Range range;  // off: one relaxed load and branch, nothing else
  if (profiler::enabled()) [[unlikely]]
    range.begin_copy(bytes >= kDeviceTimedCopyBytes);
  Tensor copied;
  if (into) {
    copy_tensor(t, *into);
    copied = *into;
  } else {
    copied = t.to(want);
  }
  if (range.active()) [[unlikely]]
    range.end_copy(kind, bytes, want.type == DeviceType::CPU ? t.device().index : want.index, slot_names, slot,
                   fallback, from_fallback);
  return copied;
}

// Returns `v` on device `want`, copying it there when needed. A copy of a slot's value is kept in
// env.moved (and, for weights, in the plan) so that later readers on that device reuse it.
const Value* Executor::move_input(Frame& f, const Plan& plan, Env& env, int slot, const std::string& name,
                                  const Value* v, Device want, bool fallback) {
  auto on = [&](const Value& x) {
    if (x.kind == Value::Kind::Tensor) return x.tensor.device() == want;
    if (x.kind == Value::Kind::Sequence) {
      for (const Tensor& t : x.sequence) {
        if (t.device() != want) return false;
      }
    }
    return true;
  };
  if (on(*v)) return v;
  if (slot >= 0 && !env.moved.empty() && on(env.moved[size_t(slot)]) && env.moved[size_t(slot)].kind == v->kind) {
    return &env.moved[size_t(slot)];
  }
  if (slot >= 0 && want.type != DeviceType::CPU && plan.g->is_initializer(slot)) {
    // A weight uploaded since the run began (upload_weights_async).
    std::lock_guard lock(uploads_mutex_);
    if (auto w = plan.uploaded.find(slot); w != plan.uploaded.end() && w->second.device() == want) {
      env.moved[size_t(slot)] = Value(w->second);
      return &env.moved[size_t(slot)];
    }
  }
  // The graph and slot that own the value: this one, or an enclosing graph's (a branch reading an
  // outer value); uploads are kept under them.
  const Env* owner = &env;
  int owner_slot = slot;
  if (slot < 0) {
    owner_slot = -1;
    for (owner = env.parent; owner; owner = owner->parent) {
      if (auto it = owner->plan->g->slot_of.find(name); it != owner->plan->g->slot_of.end()) {
        owner_slot = it->second;
        break;
      }
    }
  }
  const Plan* owner_plan = owner ? owner->plan : nullptr;
  if (slot < 0 && owner_plan && want.type != DeviceType::CPU) {
    // An outer weight already uploaded, or (capturing) an outer value the recording run uploaded.
    {
      std::lock_guard lock(uploads_mutex_);
      if (auto w = owner_plan->uploaded.find(owner_slot);
          w != owner_plan->uploaded.end() && v->kind == Value::Kind::Tensor) {
        env.outer_copies.emplace_back(w->second);
        return &env.outer_copies.back();
      }
    }
    if (f.capture_uploads) {
      if (auto it = f.capture_uploads->values.find({owner_plan, owner_slot}); it != f.capture_uploads->values.end()) {
        env.outer_copies.push_back(it->second.value);
        return &env.outer_copies.back();
      }
    }
  }
  const bool from_fallback = slot >= 0 && env.from_fallback[size_t(slot)];
  Value copy =
      copy_value(f, *v, want, owner_plan ? &owner_plan->g->slot_of : nullptr, owner_slot, fallback, from_fallback);
  if (owner_plan && want.type != DeviceType::CPU) keep_upload(f, *owner_plan, *owner, owner_slot, *v, copy, slot < 0);
  if (slot < 0) {
    env.outer_copies.push_back(std::move(copy));
    return &env.outer_copies.back();
  }
  env.moved[size_t(slot)] = std::move(copy);
  return &env.moved[size_t(slot)];
}

// A host value copied to the device: a weight's copy is kept for later runs; while a shape plan is
// recorded, any other host-computed value (shape arithmetic, a specialized input) is kept for the
// capture, which must make no host copy.
void Executor::keep_upload(Frame& f, const Plan& plan, const Env& env, int slot, const Value& source,
                           const Value& copy, bool outer) {
  if (plan.g->is_initializer(slot)) {
    std::lock_guard lock(uploads_mutex_);
    plan.uploaded.try_emplace(slot, copy.tensor);
    return;
  }
  if (!f.upload_sink) return;
  // A top-level input is one only when specialized on (others differ from run to run).
  auto input = std::find(plan.g->input_slots.begin(), plan.g->input_slots.end(), slot);
  bool varies = !env.parent && input != plan.g->input_slots.end() &&
                !(source.kind == Value::Kind::Tensor && specializable(source.tensor) &&
                  std::binary_search(executable_->host_read_inputs().begin(), executable_->host_read_inputs().end(),
                                     size_t(input - plan.g->input_slots.begin())));
  if (varies) return;
  const void* from = source.kind == Value::Kind::Tensor ? static_cast<const void*>(source.tensor.storage().get())
                                                        : static_cast<const void*>(&source);
  auto [it, inserted] = f.upload_sink->values.try_emplace({&plan, slot}, Uploads::Upload{copy, from});
  // Copied twice in one run: a value of a graph that ran twice (a Loop body), unless it is the same
  // outer value read by two nodes of a branch.
  if (!inserted && !(outer && it->second.source == from)) f.upload_sink->repeated = true;
}

}  // namespace ingot
