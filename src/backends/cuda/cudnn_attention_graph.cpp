#include "backends/cuda/cudnn_attention_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/cudnn_graph.h"
#include "core/flags.h"
#include "core/tuning.h"
#include "profiler/hooks.h"

namespace ingot::cuda {
// Named apart from cudnn_conv_graph.cpp's helpers: the unity build may compile both in one unit.
namespace sdpa_graph {

using cudnn_graph::Builder;
using cudnn_graph::Plan;
using cudnn_graph::Unsupported;

enum Uid : int64_t { kQ = 1, kK, kV, kY, kScale, kVirtual = 100 };

// S = Q K^T (float32), S * scale, M = max over keys, exp(S - M), Z = sum over keys, M + log Z,
// P = exp / Z (rounded to the input type, as cuDNN's engines require), Y = P V. Every intermediate
// is virtual.
cudnnBackendDescriptor_t operation_graph(Builder& b, const AttentionGraphSpec& s) {
  const cudnnDataType_t io = cudnn_graph::data_type(s.dtype);
  const int64_t n = s.batch, h = s.heads;
  cudnnBackendDescriptor_t q = b.tensor(kQ, {n, h, s.tq, s.d}, {s.q[0], s.q[1], s.q[2], 1}, io, false);
  // K^T: K's rows read as columns.
  cudnnBackendDescriptor_t kt = b.tensor(kK, {n, h, s.d, s.tk}, {s.k[0], s.k[1], 1, s.k[2]}, io, false);
  cudnnBackendDescriptor_t v = b.tensor(kV, {n, h, s.tk, s.dv}, {s.v[0], s.v[1], s.v[2], 1}, io, false);
  cudnnBackendDescriptor_t y = b.tensor(kY, {n, h, s.tq, s.dv}, {s.y[0], s.y[1], s.y[2], 1}, io, false);
  cudnnBackendDescriptor_t scale = b.scalar(kScale, 4);
  int64_t next = kVirtual;
  const std::vector<int64_t> scores{n, h, s.tq, s.tk}, scores_strides{h * s.tq * s.tk, s.tq * s.tk, s.tk, 1};
  const std::vector<int64_t> rows{n, h, s.tq, 1}, rows_strides{h * s.tq, s.tq, 1, 1};
  auto virtual_scores = [&](cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return b.tensor(next++, scores, scores_strides, type, true);
  };
  auto virtual_rows = [&] { return b.tensor(next++, rows, rows_strides, CUDNN_DATA_FLOAT, true); };

  std::vector<cudnnBackendDescriptor_t> ops;
  cudnnBackendDescriptor_t raw = virtual_scores(), scaled = virtual_scores();
  ops.push_back(b.matmul(q, kt, raw));
  ops.push_back(b.pointwise(CUDNN_POINTWISE_MUL, raw, scale, scaled));
  cudnnBackendDescriptor_t row_max = virtual_rows(), shifted = virtual_scores(), exps = virtual_scores();
  ops.push_back(b.reduction(CUDNN_REDUCE_TENSOR_MAX, scaled, row_max));
  ops.push_back(b.pointwise(CUDNN_POINTWISE_SUB, scaled, row_max, shifted));
  ops.push_back(b.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exps));
  cudnnBackendDescriptor_t row_sum = virtual_rows(), probs = virtual_scores(io);
  ops.push_back(b.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum));
  // The softmax statistics M + log Z, virtual here (the backward pass's input): cuDNN's matcher
  // takes the pattern only with them (9.14: "Dropout set of ops not configured correctly" without;
  // cudnn-frontend adds them for inference too).
  cudnnBackendDescriptor_t log_sum = virtual_rows(), stats = virtual_rows();
  ops.push_back(b.pointwise(CUDNN_POINTWISE_LOG, row_sum, nullptr, log_sum));
  ops.push_back(b.pointwise(CUDNN_POINTWISE_ADD, row_max, log_sum, stats));
  ops.push_back(b.pointwise(CUDNN_POINTWISE_DIV, exps, row_sum, probs));
  ops.push_back(b.matmul(probs, v, y));
  return b.graph(ops);
}

cudnnStatus_t execute(const Plan& plan, const AttentionGraphArgs& a, cudnnHandle_t handle = nullptr,
                      void* ws = nullptr) {
  float scale = a.scale;
  int64_t uids[5] = {kQ, kK, kV, kY, kScale};
  void* ptrs[5] = {const_cast<void*>(a.q), const_cast<void*>(a.k), const_cast<void*>(a.v), a.y, &scale};
  return cudnn_graph::execute(plan.plan, plan.workspace, uids, ptrs, 5, handle, ws);
}

std::string choice_key(const std::string& tuning_key) { return cudnn_key_prefix() + "attention1." + tuning_key; }
std::string plan_key(const std::string& tuning_key) { return cudnn_key_prefix() + "attentionplan1." + tuning_key; }
// The spec beside a choice, so that a loaded package's plans are built before its first run needs them.
std::string spec_prefix() { return cudnn_key_prefix() + "attentionspec1."; }

cudnn_graph::Problem problem_of(const AttentionGraphSpec& spec, const std::string& tuning_key,
                                const AttentionGraphArgs& args) {
  cudnn_graph::Problem problem;
  problem.choice_key = choice_key(tuning_key);
  problem.plan_key = plan_key(tuning_key);
  problem.graph = [spec](cudnn_graph::Builder& b) { return operation_graph(b, spec); };
  problem.run = [args](const Plan& plan) { return execute(plan, args); };
  return problem;
}

// Elements an operand's buffer spans: its last element's offset + 1.
int64_t extent(const int64_t (&strides)[3], int64_t batch, int64_t heads, int64_t rows, int64_t cols) {
  return (batch - 1) * strides[0] + (heads - 1) * strides[1] + (rows - 1) * strides[2] + cols;
}

// Runs a plan built ahead once on zeroed scratch buffers through `handle` (bound to a stream of the
// prebuilding thread's own), so that CUDA loads its kernel (at its first launch: ~6 ms for
// Whisper-tiny's on an H100) there rather than in the first run. Problems over kMaxBytes are skipped.
void warm(const Plan& plan, const AttentionGraphSpec& s, cudnnHandle_t handle, cudaStream_t stream) {
  constexpr size_t kMaxBytes = size_t(256) << 20;
  const size_t elem = dtype_size(s.dtype);
  auto round = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t q = round(size_t(extent(s.q, s.batch, s.heads, s.tq, s.d)) * elem);
  const size_t k = round(size_t(extent(s.k, s.batch, s.heads, s.tk, s.d)) * elem);
  const size_t v = round(size_t(extent(s.v, s.batch, s.heads, s.tk, s.dv)) * elem);
  const size_t y = round(size_t(extent(s.y, s.batch, s.heads, s.tq, s.dv)) * elem);
  const size_t total = q + k + v + y + round(size_t(std::max<int64_t>(plan.workspace, 0)));
  if (total > kMaxBytes) return;
  void* scratch = nullptr;
  if (cudaMalloc(&scratch, total) == cudaSuccess && cudaMemsetAsync(scratch, 0, total, stream) == cudaSuccess) {
    char* p = static_cast<char*>(scratch);
    AttentionGraphArgs a{p, p + q, p + q + k, p + q + k + v, 1.0f};
    // A failure here is the first run's to report (it runs the same plan on its own buffers).
    (void)execute(plan, a, handle, plan.workspace > 0 ? p + q + k + v + y : nullptr);
    (void)cudaStreamSynchronize(stream);
  }
  (void)cudaGetLastError();
  if (scratch) (void)cudaFree(scratch);
}

// Graphs by device and tuning key, shared by every node of a problem; never destroyed: plans must
// not be released after the CUDA runtime has shut down at exit. The lock is held while a graph is
// built, so a run that needs one being built ahead waits for it instead of building it again.
struct Shared {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const AttentionGraph>> graphs;
};
Shared& shared() {
  static auto* s = new Shared;
  return *s;
}

std::string device_key(const std::string& tuning_key) {
  int device = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&device));
  return std::to_string(device) + "|" + tuning_key;
}

std::atomic<int64_t> g_runs{0};
std::atomic<int64_t> g_prebuilt{0};

}  // namespace sdpa_graph

std::string to_text(const AttentionGraphSpec& s) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", int(s.dtype), s.batch, s.heads, s.tq,
                     s.tk, s.d, s.dv, s.q[0], s.q[1], s.q[2], s.k[0], s.k[1], s.k[2], s.v[0], s.v[1], s.v[2], s.y[0],
                     s.y[1], s.y[2]);
}

std::optional<AttentionGraphSpec> attention_spec_from_text(const std::string& text) {
  long long v[19];
  const char* p = text.c_str();
  for (long long& x : v) {
    int used = 0;
    if (std::sscanf(p, "%lld%n", &x, &used) != 1) return std::nullopt;
    p += used;
  }
  if (*p != '\0') return std::nullopt;
  AttentionGraphSpec s;
  s.dtype = DType(v[0]);
  s.batch = v[1], s.heads = v[2], s.tq = v[3], s.tk = v[4], s.d = v[5], s.dv = v[6];
  for (int i = 0; i < 3; ++i) s.q[i] = v[7 + i], s.k[i] = v[10 + i], s.v[i] = v[13 + i], s.y[i] = v[16 + i];
  if ((s.dtype != DType::Float16 && s.dtype != DType::BFloat16) || s.batch <= 0 || s.heads <= 0 || s.tq <= 0 ||
      s.tk <= 0 || s.d <= 0 || s.dv <= 0)
    return std::nullopt;
  return s;
}

bool AttentionGraph::enabled() { return flags::enabled("INGOT_CUDNN_ATTENTION") && flags::enabled("INGOT_CUDNN_GRAPH"); }

std::unique_ptr<AttentionGraph> AttentionGraph::build(const AttentionGraphSpec& spec, const AttentionGraphArgs* args,
                                                      const std::string& tuning_key) {
  if (spec.dtype != DType::Float16 && spec.dtype != DType::BFloat16) return nullptr;
  profiler::detail::PhaseScope phase(args ? "cuDNN graph plan" : "cuDNN plan built ahead");
  const cudnn_graph::Problem problem = sdpa_graph::problem_of(spec, tuning_key, args ? *args : AttentionGraphArgs{});
  std::unique_ptr<AttentionGraph> g(new AttentionGraph());
  g->spec_ = spec;
  cudnn_graph::Builder b(g->owned_);
  try {
    cudnn_graph::Plan plan;
    if (args) {
      std::string measured;
      plan = cudnn_graph::choose_plan(b, problem, tuning::algorithms().find(problem.choice_key), &measured);
      if (!measured.empty()) tuning::algorithms().put(sdpa_graph::spec_prefix() + tuning_key, to_text(spec));
    } else if (auto stored = tuning::algorithms().peek(problem.choice_key); stored && *stored != cudnn_graph::kNoEngine) {
      plan = cudnn_graph::stored_plan(b, problem, *stored);  // ahead of the run: never a search
    }
    if (!plan.plan) return nullptr;
    g->plan_ = plan.plan, g->workspace_ = plan.workspace;
    return g;
  } catch (const cudnn_graph::Unsupported&) {
    return nullptr;
  }
}

std::shared_ptr<const AttentionGraph> AttentionGraph::get(const AttentionGraphSpec& spec,
                                                          const AttentionGraphArgs& args,
                                                          const std::string& tuning_key) {
  if (!enabled()) return nullptr;
  sdpa_graph::Shared& sh = sdpa_graph::shared();
  const std::string key = sdpa_graph::device_key(tuning_key);
  std::lock_guard lock(sh.mu);
  auto it = sh.graphs.find(key);
  if (it == sh.graphs.end()) it = sh.graphs.emplace(key, build(spec, &args, tuning_key)).first;
  return it->second;
}

bool AttentionGraph::has_stored_plans() {
  return enabled() && !tuning::algorithms().with_prefix(sdpa_graph::spec_prefix()).empty();
}

namespace sdpa_graph {

std::atomic<int64_t> g_build_handles{0};

// The cuDNN handle (on a stream of its own) that builds a device's plans ahead: the device's usual
// handle belongs to the run's thread. Made by the first build that has work and kept for the process
// (the plans it builds keep referring to it); `mu` serializes the builds that use it.
struct BuildContext {
  std::mutex mu;
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
};

BuildContext* build_context() {
  static std::mutex mu;
  static std::map<int, BuildContext> contexts;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  std::lock_guard lock(mu);
  return &contexts[device];  // std::map: the element's address stays valid
}

}  // namespace sdpa_graph

int AttentionGraph::prebuild_stored_plans() {
  if (!has_stored_plans()) return 0;
  // The work first: stored specs whose plan this process does not have yet.
  const std::string prefix = sdpa_graph::spec_prefix();
  std::vector<std::pair<std::string, AttentionGraphSpec>> todo;
  {
    sdpa_graph::Shared& sh = sdpa_graph::shared();
    std::lock_guard lock(sh.mu);
    for (const auto& [key, value] : tuning::algorithms().with_prefix(prefix)) {
      std::string tuning_key = key.substr(prefix.size());
      auto spec = attention_spec_from_text(value);
      if (spec && !sh.graphs.count(sdpa_graph::device_key(tuning_key))) todo.emplace_back(std::move(tuning_key), *spec);
    }
  }
  if (todo.empty()) return 0;
  sdpa_graph::BuildContext* bc = sdpa_graph::build_context();
  if (!bc) return 0;
  std::lock_guard build_lock(bc->mu);
  if (!bc->handle) {
    if (cudaStreamCreateWithFlags(&bc->stream, cudaStreamNonBlocking) != cudaSuccess) {
      (void)cudaGetLastError();
      bc->stream = nullptr;
      return 0;
    }
    if (cudnnCreate(&bc->handle) != CUDNN_STATUS_SUCCESS || cudnnSetStream(bc->handle, bc->stream) != CUDNN_STATUS_SUCCESS) {
      if (bc->handle) (void)cudnnDestroy(bc->handle);
      (void)cudaStreamDestroy(bc->stream);
      bc->handle = nullptr;
      bc->stream = nullptr;
      return 0;
    }
    ++sdpa_graph::g_build_handles;
  }
  cudnn_graph::set_build_handle(bc->handle);
  struct Reset {
    ~Reset() { cudnn_graph::set_build_handle(nullptr); }
  } reset;
  int built = 0;
  for (const auto& [tuning_key, spec] : todo) {
    sdpa_graph::Shared& sh = sdpa_graph::shared();
    const std::string dkey = sdpa_graph::device_key(tuning_key);
    std::lock_guard lock(sh.mu);
    if (sh.graphs.count(dkey)) continue;  // a run built it meanwhile
    try {
      std::shared_ptr<const AttentionGraph> g = build(spec, nullptr, tuning_key);
      if (!g) continue;  // not cached: the run searches with its own buffers
      {
        profiler::detail::PhaseScope warm_phase("cuDNN plan run ahead");
        sdpa_graph::warm({g->plan_, g->workspace_}, spec, bc->handle, bc->stream);
      }
      sh.graphs.emplace(dkey, std::move(g));
      ++built;
      ++sdpa_graph::g_prebuilt;
    } catch (...) {  // building ahead is best effort: the run builds its own (and reports)
    }
  }
  return built;
}

int64_t AttentionGraph::build_handles() { return sdpa_graph::g_build_handles.load(); }

int64_t AttentionGraph::prebuilt() { return sdpa_graph::g_prebuilt.load(); }

void AttentionGraph::forget_shared() {
  sdpa_graph::Shared& sh = sdpa_graph::shared();
  std::lock_guard lock(sh.mu);
  sh.graphs.clear();
}

AttentionGraph::~AttentionGraph() { cudnn_graph::destroy_all(owned_); }

int64_t AttentionGraph::runs() { return sdpa_graph::g_runs.load(); }

void AttentionGraph::run(const AttentionGraphArgs& args) const {
  INGOT_CUDNN_CHECK(sdpa_graph::execute({plan_, workspace_}, args));
  ++sdpa_graph::g_runs;
}

}  // namespace ingot::cuda
