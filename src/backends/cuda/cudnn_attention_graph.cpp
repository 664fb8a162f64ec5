#include "backends/cuda/cudnn_attention_graph.h"

#include <atomic>
#include <map>
#include <mutex>

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

cudnnStatus_t execute(const Plan& plan, const AttentionGraphArgs& a) {
  float scale = a.scale;
  int64_t uids[5] = {kQ, kK, kV, kY, kScale};
  void* ptrs[5] = {const_cast<void*>(a.q), const_cast<void*>(a.k), const_cast<void*>(a.v), a.y, &scale};
  return cudnn_graph::execute(plan.plan, plan.workspace, uids, ptrs, 5);
}

}  // namespace sdpa_graph

bool AttentionGraph::enabled() { return flags::enabled("INGOT_CUDNN_ATTENTION") && flags::enabled("INGOT_CUDNN_GRAPH"); }

std::unique_ptr<AttentionGraph> AttentionGraph::build(const AttentionGraphSpec& spec, const AttentionGraphArgs& args,
                                                      const std::string& tuning_key) {
  if (!enabled() || (spec.dtype != DType::Float16 && spec.dtype != DType::BFloat16)) return nullptr;
  profiler::detail::PhaseScope phase("cuDNN graph plan");
  cudnn_graph::Problem problem;
  problem.choice_key = cudnn_key_prefix() + "attention1." + tuning_key;
  problem.plan_key = cudnn_key_prefix() + "attentionplan1." + tuning_key;
  problem.graph = [spec](cudnn_graph::Builder& b) { return sdpa_graph::operation_graph(b, spec); };
  problem.run = [args](const cudnn_graph::Plan& plan) { return sdpa_graph::execute(plan, args); };
  std::unique_ptr<AttentionGraph> g(new AttentionGraph());
  g->spec_ = spec;
  cudnn_graph::Builder b(g->owned_);
  try {
    const cudnn_graph::Plan plan = cudnn_graph::choose_plan(b, problem, tuning::algorithms().find(problem.choice_key));
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
  // Per device (the key names the arch, not the device); never destroyed: plans must not be
  // released after the CUDA runtime has shut down at exit.
  static auto* mu = new std::mutex;
  static auto* graphs = new std::map<std::string, std::shared_ptr<const AttentionGraph>>;
  int device = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&device));
  const std::string key = std::to_string(device) + "|" + tuning_key;
  std::lock_guard lock(*mu);
  auto it = graphs->find(key);
  if (it == graphs->end()) it = graphs->emplace(key, build(spec, args, tuning_key)).first;
  return it->second;
}

AttentionGraph::~AttentionGraph() { cudnn_graph::destroy_all(owned_); }

namespace sdpa_graph {
std::atomic<int64_t> g_runs{0};
}

int64_t AttentionGraph::runs() { return sdpa_graph::g_runs.load(); }

void AttentionGraph::run(const AttentionGraphArgs& args) const {
  INGOT_CUDNN_CHECK(sdpa_graph::execute({plan_, workspace_}, args));
  ++sdpa_graph::g_runs;
}

}  // namespace ingot::cuda
