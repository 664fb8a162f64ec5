#include "backends/cuda/cudnn_conv_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/cudnn_graph.h"
#include "core/flags.h"
#include "core/tuning.h"
#include "profiler/hooks.h"

namespace ingot::cuda {
namespace {

using cudnn_graph::Builder;
using cudnn_graph::check;
using cudnn_graph::data_type;
using cudnn_graph::kNoEngine;
using cudnn_graph::Plan;
using cudnn_graph::Unsupported;

enum Uid : int64_t { kX = 1, kW, kY, kBias, kResidual, kScale, kResidualScale, kVirtual = 100 };

// A 4-D tensor with logical dims [N, C, H, W] laid out channels first or last.
cudnnBackendDescriptor_t nchw_tensor(Builder& b, int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w,
                                     bool channels_last, cudnnDataType_t type, bool is_virtual) {
  std::vector<int64_t> strides{c * h * w, h * w, w, 1};
  if (channels_last) strides = {h * w * c, 1, w * c, c};
  return b.tensor(uid, {n, c, h, w}, strides, type, is_virtual);
}

// The operation graph of the spec: conv, then the pointwise steps its flags ask for (float32
// graphs: + bias, + residual, Relu; int8 ones: ConvGraphSpec's requantization), the intermediate
// results virtual (int32 after an int8 conv, else float32); the last op writes Y.
cudnnBackendDescriptor_t operation_graph(Builder& b, const ConvGraphSpec& s) {
  const bool int8 = s.dtype == DType::Int8;
  const cudnnDataType_t io = data_type(s.dtype);
  const cudnnDataType_t y_type = int8 ? data_type(s.y_dtype) : io;
  const bool last = s.channels_last;
  cudnnBackendDescriptor_t x = nchw_tensor(b, kX, s.n, s.c, s.h, s.w, last, io, false);
  cudnnBackendDescriptor_t w = nchw_tensor(b, kW, s.k, s.c / s.group, s.r, s.s, last, io, false);
  auto per_channel = [&](int64_t uid, cudnnDataType_t type) { return nchw_tensor(b, uid, 1, s.k, 1, 1, last, type, false); };

  struct Step {
    cudnnPointwiseMode_t mode;
    cudnnBackendDescriptor_t operand;  // B, or null (unary)
    double upper_clip = 0;
  };
  std::vector<Step> steps;
  if (int8) {
    steps.push_back({CUDNN_POINTWISE_MUL, per_channel(kScale, CUDNN_DATA_FLOAT)});
    steps.push_back({CUDNN_POINTWISE_ADD, per_channel(kBias, CUDNN_DATA_FLOAT)});
  } else if (s.bias) {
    steps.push_back({CUDNN_POINTWISE_ADD, per_channel(kBias, io)});
  }
  if (s.residual) {
    const cudnnDataType_t r_type = int8 ? data_type(s.residual_dtype) : io;
    steps.push_back({CUDNN_POINTWISE_ADD, nchw_tensor(b, kResidual, s.n, s.k, s.out_h, s.out_w, last, r_type, false)});
    if (int8) steps.push_back({CUDNN_POINTWISE_MUL, per_channel(kResidualScale, CUDNN_DATA_FLOAT)});
  }
  if (s.relu) steps.push_back({CUDNN_POINTWISE_RELU_FWD, nullptr, int8 ? double(s.relu_max) : 0.0});

  int64_t next_virtual = kVirtual;
  // The output of the next op: Y for the last one, else a virtual tensor.
  auto result = [&](bool is_last, cudnnDataType_t virtual_type) {
    return is_last ? nchw_tensor(b, kY, s.n, s.k, s.out_h, s.out_w, last, y_type, false)
                   : nchw_tensor(b, next_virtual++, s.n, s.k, s.out_h, s.out_w, last, virtual_type, true);
  };
  cudnnBackendDescriptor_t conv_out = result(steps.empty(), int8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT);

  cudnnBackendDescriptor_t conv = b.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = int8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute);
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode);
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial);
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, s.dilation, 2);
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, s.stride, 2);
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, s.pad_begin, 2);
  Builder::set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, s.pad_end, 2);
  check(cudnnBackendFinalize(conv));

  std::vector<cudnnBackendDescriptor_t> ops;
  cudnnBackendDescriptor_t op = b.make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.0f, beta = 0.0f;
  Builder::set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  Builder::set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  Builder::set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv_out);
  Builder::set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  Builder::set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha);
  Builder::set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta);
  check(cudnnBackendFinalize(op));
  ops.push_back(op);

  cudnnBackendDescriptor_t current = conv_out;
  for (size_t i = 0; i < steps.size(); ++i) {
    cudnnBackendDescriptor_t out = result(i + 1 == steps.size(), CUDNN_DATA_FLOAT);
    ops.push_back(b.pointwise(steps[i].mode, current, steps[i].operand, out, steps[i].upper_clip));
    current = out;
  }

  return b.graph(ops);
}

// Whether an engine's arithmetic is what the spec's type promises. Float32 without TF32 is exact
// float32: no engine that runs on tensor cores (TF32) or converts its inputs down; 16-bit and TF32
// take any engine.
bool numerics_allowed(Builder& b, cudnnBackendDescriptor_t config, const ConvGraphSpec& s) {
  if (s.dtype != DType::Float32 || s.tf32) return true;
  for (cudnnBackendNumericalNote_t note : cudnn_graph::numerical_notes(b, config)) {
    if (note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      return false;
  }
  return true;
}

// Runs `plan` on `a` through `handle` (its stream), with `ws` as workspace when given (else the
// device's, sized to `workspace_bytes`).
cudnnStatus_t execute(cudnnBackendDescriptor_t plan, int64_t workspace_bytes, const ConvGraphSpec& s,
                      const ConvGraphArgs& a, cudnnHandle_t handle = nullptr, void* ws = nullptr) {
  int64_t uids[7] = {kX, kW, kY};
  void* ptrs[7] = {const_cast<void*>(a.x), const_cast<void*>(a.w), a.y};
  int64_t n = 3;
  const bool int8 = s.dtype == DType::Int8;
  if (s.bias || int8) uids[n] = kBias, ptrs[n++] = const_cast<void*>(a.bias);
  if (int8) uids[n] = kScale, ptrs[n++] = const_cast<void*>(a.scale);
  if (s.residual) uids[n] = kResidual, ptrs[n++] = const_cast<void*>(a.residual);
  if (s.residual && int8) uids[n] = kResidualScale, ptrs[n++] = const_cast<void*>(a.residual_scale);
  return cudnn_graph::execute(plan, workspace_bytes, uids, ptrs, n, handle, ws);
}

// Keys in core/tuning.h's algorithms(): the choice for a problem, and the spec it was made for
// (so that a loaded package's plans can be built before the convolutions ask for them).
std::string choice_key(const std::string& tuning_key) {
  return cudnn_key_prefix() + "convgraph2." + tuning_key;
}
std::string spec_prefix() { return cudnn_key_prefix() + "convspec2."; }
// The plan cuDNN serialized for a choice: "CHOICE\nJSON" (runtime-compiled engines: with their
// compiled kernel, so a later process loads it instead of compiling it again, ~28 ms per plan on the
// H200 for ResNet-50's float16 convolutions).
std::string plan_key(const std::string& tuning_key) {
  return cudnn_key_prefix() + "convplan2." + tuning_key;
}

// The graph-API problem of a spec, run on `args`.
cudnn_graph::Problem problem_of(const ConvGraphSpec& spec, const std::string& tuning_key, const ConvGraphArgs& args) {
  cudnn_graph::Problem p;
  p.choice_key = choice_key(tuning_key);
  p.plan_key = plan_key(tuning_key);
  p.graph = [spec](Builder& b) { return operation_graph(b, spec); };
  p.allowed = [spec](Builder& b, cudnnBackendDescriptor_t config) { return numerics_allowed(b, config, spec); };
  p.run = [spec, args](const Plan& plan) { return execute(plan.plan, plan.workspace, spec, args); };
  p.fallback_engines = spec.dtype == DType::Float32;
  return p;
}

std::string serialize(const ConvGraphSpec& s) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {:.9g}",
                     int(s.dtype), int(s.tf32), int(s.channels_last), s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.group,
                     s.out_h, s.out_w, s.pad_begin[0], s.pad_begin[1], s.pad_end[0], s.pad_end[1], s.stride[0],
                     s.stride[1], s.dilation[0], s.dilation[1], int(s.bias), int(s.residual), int(s.relu),
                     int(s.y_dtype), int(s.residual_dtype), s.relu_max);
}

bool same_problem(const ConvGraphSpec& a, const ConvGraphSpec& b) { return serialize(a) == serialize(b); }

std::optional<ConvGraphSpec> deserialize(const std::string& text) {
  long long v[26];
  float relu_max = 0;
  int used = 0;
  const char* p = text.c_str();
  for (long long& x : v) {
    if (std::sscanf(p, "%lld%n", &x, &used) != 1) return std::nullopt;
    p += used;
  }
  if (std::sscanf(p, "%g%n", &relu_max, &used) != 1 || p[used] != '\0') return std::nullopt;
  ConvGraphSpec s;
  s.dtype = DType(v[0]);
  s.tf32 = v[1], s.channels_last = v[2];
  s.n = v[3], s.c = v[4], s.h = v[5], s.w = v[6], s.k = v[7], s.r = v[8], s.s = v[9], s.group = v[10];
  s.out_h = v[11], s.out_w = v[12];
  s.pad_begin[0] = v[13], s.pad_begin[1] = v[14], s.pad_end[0] = v[15], s.pad_end[1] = v[16];
  s.stride[0] = v[17], s.stride[1] = v[18], s.dilation[0] = v[19], s.dilation[1] = v[20];
  s.bias = v[21], s.residual = v[22], s.relu = v[23];
  s.y_dtype = DType(v[24]), s.residual_dtype = DType(v[25]);
  s.relu_max = relu_max;
  if (s.n <= 0 || s.c <= 0 || s.k <= 0 || s.group <= 0 || s.c % s.group != 0) return std::nullopt;
  return s;
}

// Plans of stored choices built ahead of the convolutions that need them, by tuning key; each with
// the stored choice it was built from (used only while the store still says the same). Several
// workers take the queue's plans in turn; a convolution that needs one still queued takes it off and
// builds it itself, one being built it waits for.
struct Prebuilt {
  std::mutex mu;
  std::condition_variable done;
  struct Entry {
    std::string choice;
    std::unique_ptr<ConvGraph> graph;
  };
  struct Work {
    std::string key, choice;  // tuning key, the stored choice
    ConvGraphSpec spec;
  };
  std::map<std::string, Entry> ready;
  std::deque<Work> queue;          // to be built, in order (a key no longer in `queued` is skipped)
  std::set<std::string> queued;    // the keys still to be built by a worker
  std::set<std::string> building;  // the ones workers are building now
  int64_t taken = 0;               // plans build() took (tests)
  std::map<int, std::vector<cudnnHandle_t>> idle_handles;  // workers' handles by device, kept for the process
};

Prebuilt& prebuilt() {
  static auto* p = new Prebuilt();  // outlives the prebuilding thread at exit
  return *p;
}

// Runs plans built ahead once on zeroed scratch buffers, on a stream of its own, so that CUDA loads
// their kernels (on the first launch) on the prebuilding worker rather than in the first run
// (INGOT_CUDNN_WARMUP). One scratch allocation grows to the largest plan; problems needing more
// than kMaxBytes are skipped rather than holding the device's memory for them.
class PlanWarmer {
 public:
  explicit PlanWarmer(cudnnHandle_t handle) : handle_(handle) {}
  ~PlanWarmer() {
    if (!stream_) return;
    (void)cudaStreamSynchronize(stream_);
    if (scratch_) (void)cudaFree(scratch_);
    (void)cudnnSetStream(handle_, stream());  // the handle goes back to the device's stream
    (void)cudaStreamDestroy(stream_);
  }
  void run(cudnnBackendDescriptor_t plan, int64_t workspace_bytes, const ConvGraphSpec& s) {
    const bool int8 = s.dtype == DType::Int8;
    const size_t elem = dtype_size(s.dtype), y_elem = int8 ? dtype_size(s.y_dtype) : elem;
    auto round = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t x = round(size_t(s.n * s.c * s.h * s.w) * elem);
    const size_t w = round(size_t(s.k * (s.c / std::max<int64_t>(s.group, 1)) * s.r * s.s) * elem);
    const size_t y = round(size_t(s.n * s.k * s.out_h * s.out_w) * y_elem);
    const size_t vec = round(size_t(s.k) * (int8 ? sizeof(float) : elem));  // bias; scale (int8)
    const size_t r = s.residual ? round(size_t(s.n * s.k * s.out_h * s.out_w) *
                                        (int8 ? dtype_size(s.residual_dtype) : elem))
                                : 0;
    const size_t total = x + w + y + 3 * vec + r + round(size_t(std::max<int64_t>(workspace_bytes, 0)));
    if (total > kMaxBytes) return;
    if (!stream_) {
      if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
        (void)cudaGetLastError();
        stream_ = nullptr;
        return;
      }
      INGOT_CUDNN_CHECK(cudnnSetStream(handle_, stream_));
    }
    if (total > capacity_) {
      (void)cudaStreamSynchronize(stream_);
      if (scratch_) (void)cudaFree(scratch_);
      scratch_ = nullptr;
      capacity_ = 0;
      if (cudaMalloc(&scratch_, total) != cudaSuccess) {
        (void)cudaGetLastError();
        scratch_ = nullptr;
        return;
      }
      capacity_ = total;
      INGOT_CUDA_CHECK(cudaMemsetAsync(scratch_, 0, total, stream_));  // zeros: no NaN or Inf in the sums
    }
    char* p = static_cast<char*>(scratch_);
    ConvGraphArgs a;
    a.x = p, p += x;
    a.w = p, p += w;
    a.y = p, p += y;
    a.bias = p, p += vec;
    a.scale = p, p += vec;
    a.residual_scale = p, p += vec;
    if (s.residual) a.residual = p, p += r;
    // A failure here is the first run's to report (it runs the same plan on its own buffers).
    (void)execute(plan, workspace_bytes, s, a, handle_, workspace_bytes > 0 ? p : nullptr);
  }

 private:
  static constexpr size_t kMaxBytes = size_t(256) << 20;
  cudnnHandle_t handle_;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

bool ConvGraph::enabled() { return flags::enabled("INGOT_CUDNN_GRAPH"); }

// The prebuilt plan for `tuning_key` made from `choice` for `spec`: waits while a worker builds it;
// null when it is not built or queued (then taken off the queue: the caller builds it itself).
std::unique_ptr<ConvGraph> ConvGraph::take_prebuilt(const std::string& tuning_key, const std::string& choice,
                                                    const ConvGraphSpec& spec) {
  Prebuilt& p = prebuilt();
  std::unique_lock lock(p.mu);
  if (p.ready.empty() && p.building.empty() && p.queued.empty()) return nullptr;
  p.queued.erase(tuning_key);
  p.done.wait(lock, [&] { return !p.building.count(tuning_key); });
  auto it = p.ready.find(tuning_key);
  if (it == p.ready.end()) return nullptr;
  std::unique_ptr<ConvGraph> g;
  if (it->second.choice == choice && it->second.graph && same_problem(it->second.graph->spec(), spec))
    g = std::move(it->second.graph);
  p.ready.erase(it);
  p.taken += g != nullptr;
  return g;
}

bool ConvGraph::being_built(const std::string& tuning_key) {
  Prebuilt& p = prebuilt();
  std::lock_guard lock(p.mu);
  return p.queued.count(tuning_key) || p.building.count(tuning_key);
}

bool ConvGraph::preparing() {
  Prebuilt& p = prebuilt();
  std::lock_guard lock(p.mu);
  return !p.queued.empty() || !p.building.empty();
}

int64_t ConvGraph::prebuilt_taken() {
  std::lock_guard lock(prebuilt().mu);
  return prebuilt().taken;
}

bool ConvGraph::has_stored_plans() { return enabled() && !tuning::algorithms().with_prefix(spec_prefix()).empty(); }

int64_t ConvGraph::plans_loaded() { return cudnn_graph::plans_loaded(); }

int ConvGraph::queue_stored_plans() {
  if (!enabled()) return 0;
  // What the store holds now: the package's choices with their specs.
  std::vector<Prebuilt::Work> work;
  const std::string prefix = spec_prefix();
  for (const auto& [key, value] : tuning::algorithms().with_prefix(prefix)) {
    const std::string tuning_key = key.substr(prefix.size());
    auto choice = tuning::algorithms().peek(choice_key(tuning_key));
    auto spec = deserialize(value);
    if (!choice || *choice == kNoEngine || !spec) continue;
    work.push_back({tuning_key, *choice, *spec});
  }
  Prebuilt& p = prebuilt();
  std::lock_guard lock(p.mu);
  int queued = 0;
  for (Prebuilt::Work& w : work) {
    auto it = p.ready.find(w.key);
    if (p.building.count(w.key) || p.queued.count(w.key) || (it != p.ready.end() && it->second.choice == w.choice))
      continue;
    p.queued.insert(w.key);
    p.queue.push_back(std::move(w));
    ++queued;
  }
  return queued;
}

int ConvGraph::build_queued_plans(int device) {
  if (!enabled()) return 0;
  Prebuilt& p = prebuilt();
  // A handle of its own on the device's stream, kept for the next worker when done.
  cudnnHandle_t handle = nullptr;
  {
    std::lock_guard lock(p.mu);
    if (p.queued.empty()) return 0;
    if (auto& idle = p.idle_handles[device]; !idle.empty()) {
      handle = idle.back();
      idle.pop_back();
    }
  }
  if (!handle) {
    INGOT_CUDNN_CHECK(cudnnCreate(&handle));
    INGOT_CUDNN_CHECK(cudnnSetStream(handle, stream()));
  }
  cudnn_graph::set_build_handle(handle);
  struct GiveBack {
    Prebuilt& p;
    int device;
    cudnnHandle_t handle;
    ~GiveBack() {
      cudnn_graph::set_build_handle(nullptr);
      std::lock_guard lock(p.mu);
      p.idle_handles[device].push_back(handle);
    }
  } give_back{p, device, handle};
  int built = 0;
  std::optional<PlanWarmer> warmer;  // declared after give_back: done before the handle goes back
  if (flags::enabled("INGOT_CUDNN_WARMUP")) warmer.emplace(handle);
  for (;;) {
    Prebuilt::Work w;
    {
      std::lock_guard lock(p.mu);
      while (!p.queue.empty() && !p.queued.count(p.queue.front().key)) p.queue.pop_front();  // taken meanwhile
      if (p.queue.empty()) break;
      w = std::move(p.queue.front());
      p.queue.pop_front();
      p.queued.erase(w.key);
      p.building.insert(w.key);
    }
    std::unique_ptr<ConvGraph> g(new ConvGraph());
    g->spec_ = w.spec;
    bool ok = false;
    try {
      Builder b(g->owned_);
      profiler::detail::PhaseScope phase("cuDNN plan built ahead");
      const Plan plan = cudnn_graph::stored_plan(b, problem_of(g->spec_, w.key, {}), w.choice);
      g->plan_ = plan.plan, g->workspace_ = plan.workspace;
      ok = g->plan_ != nullptr;
      if (ok && warmer) {
        profiler::detail::PhaseScope warm_phase("cuDNN plan run ahead");
        try {
          warmer->run(g->plan_, g->workspace_, g->spec_);
        } catch (...) {  // running ahead is best effort: the plan stands, no more warming on this worker
          warmer.reset();
        }
      }
    } catch (...) {  // Unsupported, or anything else: the convolution builds its own (and reports)
      ok = false;
    }
    {
      std::lock_guard lock(p.mu);
      if (ok) p.ready[w.key] = {w.choice, std::move(g)};
      p.building.erase(w.key);
      built += ok;
    }
    p.done.notify_all();
  }
  return built;
}

int ConvGraph::prebuild_stored_plans(int device) {
  queue_stored_plans();
  return build_queued_plans(device);
}

std::unique_ptr<ConvGraph> ConvGraph::build(const ConvGraphSpec& spec, const ConvGraphArgs& args,
                                            const std::string& tuning_key) {
  if (!enabled()) return nullptr;
  profiler::detail::PhaseScope phase("cuDNN graph plan");
  // A stored choice that still finalizes: no heuristic query, no timing (built ahead on another
  // thread when the package recorded its spec). A stored kNoEngine: the heuristic had nothing that
  // runs this graph (ResNet-50's float32 convolutions with a residual: 32-55 ms per query on the
  // H200, for nothing), the legacy path takes it.
  const std::string key = choice_key(tuning_key);
  const std::optional<std::string> stored = tuning::algorithms().find(key);
  if (stored && *stored == kNoEngine) return nullptr;
  if (stored) {
    if (auto ahead = take_prebuilt(tuning_key, *stored, spec)) return ahead;
  }
  std::unique_ptr<ConvGraph> g(new ConvGraph());
  g->spec_ = spec;
  Builder b(g->owned_);
  try {
    std::string measured;
    const Plan plan = cudnn_graph::choose_plan(b, problem_of(spec, tuning_key, args), stored, &measured);
    if (!plan.plan) return nullptr;
    g->plan_ = plan.plan, g->workspace_ = plan.workspace;
    // The spec beside a new choice: a loaded package's plans are then built ahead.
    if (!measured.empty()) tuning::algorithms().put(spec_prefix() + tuning_key, serialize(spec));
    return g;
  } catch (const Unsupported&) {
    return nullptr;
  }
}

ConvGraph::~ConvGraph() { cudnn_graph::destroy_all(owned_); }

void ConvGraph::run(const ConvGraphArgs& args) const {
  INGOT_CUDNN_CHECK(execute(plan_, workspace_, spec_, args));
}

}  // namespace ingot::cuda
