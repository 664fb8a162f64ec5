#include "backends/cuda/cudnn_conv_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "backends/cuda/cuda_runtime.h"
#include "core/flags.h"
#include "core/tuning.h"
#include "profiler/hooks.h"

// The handle attributes of operation graphs and execution plans are deprecated from cuDNN 9.x on
// (a device property descriptor replaces them) but still required by the 9.0-9.x libraries a
// machine may have: set them and keep the build quiet about it.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace ingot::cuda {
namespace {

constexpr int64_t kMaxCandidates = 8;
constexpr const char* kNoEngine = "none";  // stored: no engine runs this graph
constexpr int64_t kAlignment = 16;  // bytes; every buffer handed in is checked (kernels/conv.cu)

// A step cuDNN refused: the graph is not built (the caller takes the legacy path).
struct Unsupported {};

// The handle plans are built with: a prebuilding worker's own (build_queued_plans), else the
// device's. A plan built with one handle runs with another (cudnnBackendExecute takes the caller's).
thread_local cudnnHandle_t t_build_handle = nullptr;
cudnnHandle_t build_handle() { return t_build_handle ? t_build_handle : cudnn(); }

void check(cudnnStatus_t status) {
  if (status != CUDNN_STATUS_SUCCESS) throw Unsupported{};
}

cudnnDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Int8: return CUDNN_DATA_INT8;
    default: throw Unsupported{};
  }
}

enum Uid : int64_t { kX = 1, kW, kY, kBias, kResidual, kScale, kResidualScale, kVirtual = 100 };

// Makes and owns descriptors (the ConvGraph destroys them).
class Builder {
 public:
  explicit Builder(std::vector<cudnnBackendDescriptor_t>& owned) : owned_(owned) {}

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    check(cudnnBackendCreateDescriptor(type, &d));
    owned_.push_back(d);
    return d;
  }
  template <class T>
  static void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                  const T* values, int64_t count = 1) {
    check(cudnnBackendSetAttribute(d, name, type, count, values));
  }
  static void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v);
  }

  // A 4-D tensor with logical dims [N, C, H, W] laid out channels first or last.
  cudnnBackendDescriptor_t tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last,
                                  cudnnDataType_t type, bool is_virtual) {
    const int64_t dims[4] = {n, c, h, w};
    int64_t strides[4] = {c * h * w, h * w, w, 1};
    if (channels_last) {
      strides[0] = h * w * c;
      strides[1] = 1;
      strides[2] = w * c;
      strides[3] = c;
    }
    cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims, 4);
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides, 4);
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kAlignment);
    if (is_virtual) {
      const bool yes = true;
      set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes);
    }
    check(cudnnBackendFinalize(d));
    return d;
  }

  // y = mode(x[, b]) in float32 arithmetic (Relu clipped above at `upper_clip` when > 0).
  cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                     cudnnBackendDescriptor_t y, double upper_clip = 0) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (upper_clip > 0) set(pw, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, &upper_clip);
    check(cudnnBackendFinalize(pw));
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    check(cudnnBackendFinalize(op));
    return op;
  }

 private:
  std::vector<cudnnBackendDescriptor_t>& owned_;
};

// The operation graph of the spec: conv, then the pointwise steps its flags ask for (float32
// graphs: + bias, + residual, Relu; int8 ones: ConvGraphSpec's requantization), the intermediate
// results virtual (int32 after an int8 conv, else float32); the last op writes Y.
cudnnBackendDescriptor_t operation_graph(Builder& b, const ConvGraphSpec& s) {
  const bool int8 = s.dtype == DType::Int8;
  const cudnnDataType_t io = data_type(s.dtype);
  const cudnnDataType_t y_type = int8 ? data_type(s.y_dtype) : io;
  const bool last = s.channels_last;
  cudnnBackendDescriptor_t x = b.tensor(kX, s.n, s.c, s.h, s.w, last, io, false);
  cudnnBackendDescriptor_t w = b.tensor(kW, s.k, s.c / s.group, s.r, s.s, last, io, false);
  auto per_channel = [&](int64_t uid, cudnnDataType_t type) { return b.tensor(uid, 1, s.k, 1, 1, last, type, false); };

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
    steps.push_back({CUDNN_POINTWISE_ADD, b.tensor(kResidual, s.n, s.k, s.out_h, s.out_w, last, r_type, false)});
    if (int8) steps.push_back({CUDNN_POINTWISE_MUL, per_channel(kResidualScale, CUDNN_DATA_FLOAT)});
  }
  if (s.relu) steps.push_back({CUDNN_POINTWISE_RELU_FWD, nullptr, int8 ? double(s.relu_max) : 0.0});

  int64_t next_virtual = kVirtual;
  // The output of the next op: Y for the last one, else a virtual tensor.
  auto result = [&](bool is_last, cudnnDataType_t virtual_type) {
    return is_last ? b.tensor(kY, s.n, s.k, s.out_h, s.out_w, last, y_type, false)
                   : b.tensor(next_virtual++, s.n, s.k, s.out_h, s.out_w, last, virtual_type, true);
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

  cudnnBackendDescriptor_t graph = b.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  Builder::set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), int64_t(ops.size()));
  cudnnHandle_t handle = build_handle();
  Builder::set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  check(cudnnBackendFinalize(graph));
  return graph;
}

// Whether an engine's arithmetic is what the spec's type promises. Float32 without TF32 is exact
// float32: no engine that runs on tensor cores (TF32) or converts its inputs down; 16-bit and TF32
// take any engine.
bool numerics_allowed(Builder& b, cudnnBackendDescriptor_t config, const ConvGraphSpec& s) {
  if (s.dtype != DType::Float32 || s.tf32) return true;
  cudnnBackendDescriptor_t engine = b.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t got = 0;
  check(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  check(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes));
  for (int64_t i = 0; i < std::min<int64_t>(count, CUDNN_NUMERICAL_NOTE_TYPE_COUNT); ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      return false;
  }
  return true;
}

// The heuristic's engine configurations for the graph whose numerics the spec allows, best first
// (at most kMaxCandidates).
std::vector<cudnnBackendDescriptor_t> engine_configs(Builder& b, cudnnBackendDescriptor_t graph,
                                                     const ConvGraphSpec& spec) {
  cudnnBackendDescriptor_t heur = b.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  Builder::set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  Builder::set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  check(cudnnBackendFinalize(heur));
  int64_t count = 0;
  check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr));
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i) configs.push_back(b.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  int64_t got = 0;
  check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                 configs.data()));
  configs.resize(size_t(std::max<int64_t>(0, std::min(got, count))));
  std::vector<cudnnBackendDescriptor_t> allowed;
  for (cudnnBackendDescriptor_t c : configs) {
    if (int64_t(allowed.size()) < kMaxCandidates && numerics_allowed(b, c, spec)) allowed.push_back(c);
  }
  return allowed;
}

// An execution plan for one configuration, or null when this engine does not take the graph.
cudnnBackendDescriptor_t execution_plan(Builder& b, cudnnBackendDescriptor_t config, int64_t* workspace) {
  cudnnBackendDescriptor_t plan = b.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  cudnnHandle_t handle = build_handle();
  Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  Builder::set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) return nullptr;
  int64_t count = 0;
  check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                 workspace));
  return plan;
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
cudnnBackendDescriptor_t plan_from_json(Builder& b, const std::string& json, int64_t* workspace) {
  cudnnBackendDescriptor_t plan = b.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, json.data(), int64_t(json.size()));
  cudnnHandle_t handle = build_handle();
  Builder::set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) return nullptr;
  int64_t count = 0;
  check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                 workspace));
  return plan;
}

std::atomic<int64_t> g_plans_loaded{0};

// The plan of a stored choice: loaded from its serialized form when one was stored for this same
// choice, else rebuilt from the engine and knobs; null when neither works (the caller searches).
cudnnBackendDescriptor_t stored_plan(Builder& b, const ConvGraphSpec& spec, const std::string& tuning_key,
                                     const std::string& choice, int64_t* workspace) {
  if (auto saved = flags::enabled("INGOT_CUDNN_SERIALIZED_PLANS") ? tuning::algorithms().peek(plan_key(tuning_key))
                                                                   : std::nullopt) {
    if (saved->size() > choice.size() && saved->compare(0, choice.size(), choice) == 0 &&
        (*saved)[choice.size()] == '\n') {
      profiler::detail::PhaseScope phase("cuDNN plan loaded");
      try {
        if (cudnnBackendDescriptor_t plan = plan_from_json(b, saved->substr(choice.size() + 1), workspace)) {
          ++g_plans_loaded;
          return plan;
        }
      } catch (const Unsupported&) {
        // this cuDNN does not take the serialized form: rebuilt from the choice below
      }
    }
  }
  cudnnBackendDescriptor_t graph = operation_graph(b, spec);
  cudnnBackendDescriptor_t config = stored_config(b, graph, choice);
  return config ? execution_plan(b, config, workspace) : nullptr;
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

int64_t ConvGraph::plans_loaded() { return g_plans_loaded.load(); }

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
  t_build_handle = handle;
  struct GiveBack {
    Prebuilt& p;
    int device;
    cudnnHandle_t handle;
    ~GiveBack() {
      t_build_handle = nullptr;
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
      g->plan_ = stored_plan(b, g->spec_, w.key, w.choice, &g->workspace_);
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
    if (stored) {
      profiler::detail::PhaseScope stored_phase("cuDNN plan of a stored choice");
      if ((g->plan_ = stored_plan(b, spec, tuning_key, *stored, &g->workspace_))) return g;
    }
    cudnnBackendDescriptor_t graph = nullptr;
    {
      profiler::detail::PhaseScope op_phase("cuDNN operation graph");
      graph = operation_graph(b, spec);
    }
    std::vector<cudnnBackendDescriptor_t> configs;
    {
      profiler::detail::PhaseScope heuristics_phase("cuDNN heuristics");
      configs = engine_configs(b, graph, spec);
    }
    profiler::detail::PhaseScope search_phase("cuDNN algorithm search");
    struct Candidate {
      size_t index;
      cudnnBackendDescriptor_t plan;
      int64_t workspace;
    };
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < configs.size(); ++i) {
      int64_t ws = 0;
      if (cudnnBackendDescriptor_t plan = execution_plan(b, configs[i], &ws)) candidates.push_back({i, plan, ws});
    }
    if (candidates.empty()) {
      tuning::algorithms().put(key, kNoEngine);
      return nullptr;
    }
    // Candidates that fail to run are skipped (an engine may finalize and still refuse).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    INGOT_CUDA_CHECK(cudaStreamIsCapturing(stream(), &capture));
    if (capture != cudaStreamCaptureStatusNone) {  // nothing can run now: the heuristic's first, not stored
      g->plan_ = candidates[0].plan;
      g->workspace_ = candidates[0].workspace;
      return g;
    }
    std::optional<size_t> best = fastest_of(candidates.size(), [&](size_t i) {
      return execute(candidates[i].plan, candidates[i].workspace, spec, args) == CUDNN_STATUS_SUCCESS;
    });
    if (!best) {  // none ran (not capturing: checked above)
      tuning::algorithms().put(key, kNoEngine);
      return nullptr;
    }
    g->plan_ = candidates[*best].plan;
    g->workspace_ = candidates[*best].workspace;
    try {
      const std::string choice = describe_config(b, configs[candidates[*best].index]);
      tuning::algorithms().put(key, choice);
      tuning::algorithms().put(spec_prefix() + tuning_key, serialize(spec));
      if (flags::enabled("INGOT_CUDNN_SERIALIZED_PLANS")) {
        if (std::string json = plan_json(g->plan_); !json.empty())
          tuning::algorithms().put(plan_key(tuning_key), choice + "\n" + json);
      }
    } catch (const Unsupported&) {
      // not stored: a later process asks the heuristic and measures again
    }
    return g;
  } catch (const Unsupported&) {
    return nullptr;
  }
}

ConvGraph::~ConvGraph() {
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
}

void ConvGraph::run(const ConvGraphArgs& args) const {
  INGOT_CUDNN_CHECK(execute(plan_, workspace_, spec_, args));
}

}  // namespace ingot::cuda
