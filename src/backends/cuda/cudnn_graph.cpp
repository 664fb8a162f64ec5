#include "backends/cuda/cudnn_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>
#include <string>

#include "backends/cuda/cuda_runtime.h"
#include "core/flags.h"
#include "core/tuning.h"
#include "profiler/hooks.h"

// The handle attributes of operation graphs and execution plans are deprecated from cuDNN 9.x on
// (a device property descriptor replaces them) but still required by the 9.0-9.x libraries a
// machine may have: set them and keep the build quiet about it.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace ingot::cuda::cudnn_graph {
namespace {

constexpr int64_t kMaxCandidates = 8;

thread_local cudnnHandle_t t_build_handle = nullptr;

std::string describe_config(Builder& b, cudnnBackendDescriptor_t config);

// The engine configurations of one heuristic mode for the graph, best first. A mode cuDNN refuses:
// an error (check's) where `required`, else none.
std::vector<cudnnBackendDescriptor_t> heuristic_configs(Builder& b, cudnnBackendDescriptor_t graph,
                                                        cudnnBackendHeurMode_t mode, bool required) {
  cudnnBackendDescriptor_t heur = b.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  Builder::set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  Builder::set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  int64_t count = 0;
  cudnnStatus_t st = cudnnBackendFinalize(heur);
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  if (st != CUDNN_STATUS_SUCCESS) {
    if (required) check(st);
    return {};
  }
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i) configs.push_back(b.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  int64_t got = 0;
  st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                configs.data());
  if (st != CUDNN_STATUS_SUCCESS) {
    if (required) check(st);
    return {};
  }
  configs.resize(size_t(std::max<int64_t>(0, std::min(got, count))));
  return configs;
}

// The configurations to time for the graph that `allowed` accepts: the instant heuristic's best
// (at most kMaxCandidates), then, where the problem asks, those of the fallback list not among them
// (at most kMaxCandidates more; with INGOT_CUDNN_FALLBACK_ENGINES=1, off by default: no faster on
// ResNet-50 fp32 b32 on an H100, nineteenth session). The fallback list is what cudnn.benchmark
// adds in PyTorch: for ResNet-50's float32 layers at batch 32 torch's profile shows FFT and
// small-tile engines that the instant heuristic does not rank.
std::vector<cudnnBackendDescriptor_t> engine_configs(Builder& b, cudnnBackendDescriptor_t graph,
                                                     const Problem& problem) {
  std::vector<cudnnBackendDescriptor_t> allowed;
  // `seen`: the configurations taken, described, when a second list must skip them (not otherwise:
  // the instant heuristic's list alone is taken as it always was).
  std::set<std::string>* seen = nullptr;
  auto take = [&](cudnnBackendHeurMode_t mode, bool required) {
    int64_t taken = 0;
    for (cudnnBackendDescriptor_t c : heuristic_configs(b, graph, mode, required)) {
      if (taken == kMaxCandidates) break;
      if (problem.allowed && !problem.allowed(b, c)) continue;
      if (seen && !seen->insert(describe_config(b, c)).second) continue;
      allowed.push_back(c);
      ++taken;
    }
  };
  take(CUDNN_HEUR_MODE_A, true);
  if (problem.fallback_engines && flags::enabled("INGOT_CUDNN_FALLBACK_ENGINES")) {
    std::set<std::string> described;
    for (cudnnBackendDescriptor_t c : allowed) described.insert(describe_config(b, c));
    seen = &described;
    take(CUDNN_HEUR_MODE_FALLBACK, false);
  }
  return allowed;
}

// An execution plan for one configuration, or null when this engine does not take the graph.
Plan execution_plan(Builder& b, cudnnBackendDescriptor_t config) {
  cudnnBackendDescriptor_t plan = b.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  cudnnHandle_t handle = build_handle();
  Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  Builder::set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) return {};
  Plan out{plan, 0};
  int64_t count = 0;
  check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                 &out.workspace));
  return out;
}

// A configuration as a stored choice: the engine's global index and its knob settings,
// "engine=12;knobs=3:1,17:0". Rebuilt from that by stored_config() without asking the heuristic
// again (which took ~6 ms of every convolution's first run on the H200: ResNet-50, 329 of a cold
// start's ~900 ms).
std::string describe_config(Builder& b, cudnnBackendDescriptor_t config) {
  cudnnBackendDescriptor_t engine = b.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t got = 0;
  check(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine));
  int64_t index = -1;
  check(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &index));
  std::vector<cudnnBackendDescriptor_t> choices;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) choices.push_back(b.make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
  int64_t count = 0;
  check(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 int64_t(choices.size()), &count, choices.data()));
  std::string out = fmt::format("engine={};knobs=", index);
  for (int64_t i = 0; i < std::min<int64_t>(count, int64_t(choices.size())); ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0;
    check(cudnnBackendGetAttribute(choices[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got,
                                   &type));
    check(cudnnBackendGetAttribute(choices[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got,
                                   &value));
    out += fmt::format("{}{}:{}", i ? "," : "", int(type), value);
  }
  return out;
}

// The configuration describe_config() wrote, for `graph`; null when it does not parse or cuDNN
// refuses it (another cuDNN build: the caller asks the heuristic).
cudnnBackendDescriptor_t stored_config(Builder& b, cudnnBackendDescriptor_t graph, const std::string& stored) {
  long long index = -1;
  int used = 0;
  if (std::sscanf(stored.c_str(), "engine=%lld;knobs=%n", &index, &used) != 1 || used == 0 || index < 0) return nullptr;
  try {
    cudnnBackendDescriptor_t engine = b.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    Builder::set_desc(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph);
    const int64_t global = index;
    Builder::set(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &global);
    check(cudnnBackendFinalize(engine));
    std::vector<cudnnBackendDescriptor_t> choices;
    for (const char* p = stored.c_str() + used; *p;) {
      int type = 0, n = 0;
      long long value = 0;
      if (std::sscanf(p, "%d:%lld%n", &type, &value, &n) != 2) return nullptr;
      cudnnBackendDescriptor_t choice = b.make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
      const auto knob = cudnnBackendKnobType_t(type);
      const int64_t v = value;
      Builder::set(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, &knob);
      Builder::set(choice, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, &v);
      check(cudnnBackendFinalize(choice));
      choices.push_back(choice);
      p += n;
      if (*p == ',') ++p;
    }
    cudnnBackendDescriptor_t config = b.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    Builder::set_desc(config, CUDNN_ATTR_ENGINECFG_ENGINE, engine);
    if (!choices.empty()) {
      Builder::set(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, choices.data(),
                   int64_t(choices.size()));
    }
    check(cudnnBackendFinalize(config));
    return config;
  } catch (const Unsupported&) {
    return nullptr;
  }
}

// The plan's serialized form, or "" where its engine has none.
std::string plan_json(cudnnBackendDescriptor_t plan) {
  int64_t n = 0;
  if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n,
                               nullptr) != CUDNN_STATUS_SUCCESS ||
      n <= 0) {
    return "";
  }
  std::string text(size_t(n), '\0');
  if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &n,
                               text.data()) != CUDNN_STATUS_SUCCESS) {
    return "";
  }
  text.resize(std::min(text.size(), size_t(std::max<int64_t>(n, 0))));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

// A plan from its serialized form; null when this cuDNN or GPU does not take it (another version or
// device: the caller rebuilds it from the choice).
Plan plan_from_json(Builder& b, const std::string& json) {
  cudnnBackendDescriptor_t plan = b.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, json.data(), int64_t(json.size()));
  cudnnHandle_t handle = build_handle();
  Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) return {};
  Plan out{plan, 0};
  int64_t count = 0;
  check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                 &out.workspace));
  return out;
}

std::atomic<int64_t> g_plans_loaded{0};

}  // namespace

int64_t plans_loaded() { return g_plans_loaded.load(); }

cudnnDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Int8: return CUDNN_DATA_INT8;
    default: throw Unsupported{};
  }
}

cudnnHandle_t build_handle() { return t_build_handle ? t_build_handle : cudnn(); }
void set_build_handle(cudnnHandle_t handle) { t_build_handle = handle; }

cudnnBackendDescriptor_t Builder::make(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = nullptr;
  check(cudnnBackendCreateDescriptor(type, &d));
  owned_.push_back(d);
  return d;
}

cudnnBackendDescriptor_t Builder::tensor(int64_t uid, const std::vector<int64_t>& dims,
                                         const std::vector<int64_t>& strides, cudnnDataType_t type, bool is_virtual) {
  cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), int64_t(dims.size()));
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), int64_t(strides.size()));
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kAlignment);
  if (is_virtual) {
    const bool yes = true;
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes);
  }
  check(cudnnBackendFinalize(d));
  return d;
}

cudnnBackendDescriptor_t Builder::scalar(int64_t uid, int rank) {
  const std::vector<int64_t> ones(size_t(rank), 1);
  cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const bool yes = true;
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, ones.data(), int64_t(ones.size()));
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, ones.data(), int64_t(ones.size()));
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kAlignment);
  set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes);
  check(cudnnBackendFinalize(d));
  return d;
}

cudnnBackendDescriptor_t Builder::pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                                            double upper_clip) {
  cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
  set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
  if (upper_clip > 0) set(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, &upper_clip);
  check(cudnnBackendFinalize(pw));
  return operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw},
                                                                  {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x},
                                                                  {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
                                                                  {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}});
}

cudnnBackendDescriptor_t Builder::reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode);
  set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &precision);
  check(cudnnBackendFinalize(r));
  return operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
                                                                  {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y},
                                                                  {CUDNN_ATTR_OPERATION_REDUCTION_DESC, r}});
}

cudnnBackendDescriptor_t Builder::matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                                         cudnnBackendDescriptor_t c) {
  cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &precision);
  check(cudnnBackendFinalize(mm));
  return operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
                                                               {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
                                                               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c},
                                                               {CUDNN_ATTR_OPERATION_MATMUL_DESC, mm}});
}

cudnnBackendDescriptor_t Builder::operation(
    cudnnBackendDescriptorType_t type,
    std::initializer_list<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>> operands) {
  cudnnBackendDescriptor_t op = make(type);
  for (const auto& [name, desc] : operands) {
    if (desc) set_desc(op, name, desc);
  }
  check(cudnnBackendFinalize(op));
  return op;
}

cudnnBackendDescriptor_t Builder::graph(const std::vector<cudnnBackendDescriptor_t>& ops) {
  cudnnBackendDescriptor_t g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), int64_t(ops.size()));
  cudnnHandle_t handle = build_handle();
  set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  check(cudnnBackendFinalize(g));
  return g;
}

void destroy_all(std::vector<cudnnBackendDescriptor_t>& owned) {
  for (auto it = owned.rbegin(); it != owned.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  owned.clear();
}

cudnnStatus_t execute(cudnnBackendDescriptor_t plan, int64_t workspace_bytes, const int64_t* uids, void* const* ptrs,
                      int64_t n, cudnnHandle_t handle, void* ws) {
  if (!ws && workspace_bytes > 0) ws = workspace(size_t(workspace_bytes));
  cudnnBackendDescriptor_t pack = nullptr;
  cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pack);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(handle ? handle : cudnn(), plan, pack);
  cudnnBackendDestroyDescriptor(pack);
  return st;
}

std::vector<cudnnBackendNumericalNote_t> numerical_notes(Builder& b, cudnnBackendDescriptor_t config) {
  cudnnBackendDescriptor_t engine = b.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t got = 0;
  check(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  check(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes));
  return {notes, notes + std::clamp<int64_t>(count, 0, CUDNN_NUMERICAL_NOTE_TYPE_COUNT)};
}

Plan stored_plan(Builder& b, const Problem& problem, const std::string& choice) {
  if (auto saved = flags::enabled("INGOT_CUDNN_SERIALIZED_PLANS") ? tuning::algorithms().peek(problem.plan_key)
                                                                   : std::nullopt) {
    if (saved->size() > choice.size() && saved->compare(0, choice.size(), choice) == 0 &&
        (*saved)[choice.size()] == '\n') {
      profiler::detail::PhaseScope phase("cuDNN plan loaded");
      try {
        if (Plan plan = plan_from_json(b, saved->substr(choice.size() + 1)); plan.plan) {
          ++g_plans_loaded;
          return plan;
        }
      } catch (const Unsupported&) {
        // this cuDNN does not take the serialized form: rebuilt from the choice below
      }
    }
  }
  cudnnBackendDescriptor_t graph = problem.graph(b);
  cudnnBackendDescriptor_t config = stored_config(b, graph, choice);
  return config ? execution_plan(b, config) : Plan{};
}

Plan choose_plan(Builder& b, const Problem& problem, const std::optional<std::string>& stored,
                 std::string* measured) {
  if (stored && *stored == kNoEngine) return {};
  if (stored) {
    profiler::detail::PhaseScope stored_phase("cuDNN plan of a stored choice");
    if (Plan plan = stored_plan(b, problem, *stored); plan.plan) return plan;
  }
  cudnnBackendDescriptor_t graph = nullptr;
  {
    profiler::detail::PhaseScope op_phase("cuDNN operation graph");
    graph = problem.graph(b);
  }
  std::vector<cudnnBackendDescriptor_t> configs;
  {
    profiler::detail::PhaseScope heuristics_phase("cuDNN heuristics");
    configs = engine_configs(b, graph, problem);
  }
  profiler::detail::PhaseScope search_phase("cuDNN algorithm search");
  struct Candidate {
    size_t index;
    Plan plan;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (Plan plan = execution_plan(b, configs[i]); plan.plan) candidates.push_back({i, plan});
  }
  if (candidates.empty()) {
    tuning::algorithms().put(problem.choice_key, kNoEngine);
    return {};
  }
  // Candidates that fail to run are skipped (an engine may finalize and still refuse).
  if (capturing()) return candidates[0].plan;  // nothing can run now: the heuristic's first, not stored
  std::optional<size_t> best = fastest_of(candidates.size(), [&](size_t i) {
    return problem.run(candidates[i].plan) == CUDNN_STATUS_SUCCESS;
  });
  if (!best) {  // none ran (not capturing: checked above)
    tuning::algorithms().put(problem.choice_key, kNoEngine);
    return {};
  }
  const Plan plan = candidates[*best].plan;
  try {
    const std::string choice = describe_config(b, configs[candidates[*best].index]);
    tuning::algorithms().put(problem.choice_key, choice);
    if (flags::enabled("INGOT_CUDNN_SERIALIZED_PLANS")) {
      if (std::string json = plan_json(plan.plan); !json.empty())
        tuning::algorithms().put(problem.plan_key, choice + "\n" + json);
    }
    if (measured) *measured = choice;
  } catch (const Unsupported&) {
    // not stored: a later process asks the heuristic and measures again
  }
  return plan;
}

}  // namespace ingot::cuda::cudnn_graph
