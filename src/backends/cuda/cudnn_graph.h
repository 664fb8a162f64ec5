// What every cuDNN graph-API problem of the CUDA backend shares (cudnn_conv_graph.cpp: convolutions
// with their epilogues; cudnn_attention_graph.cpp: scaled dot-product attention): descriptors made
// and owned by a Builder, the heuristic's engine configurations, execution plans, and the choice of
// an engine once per problem, kept in core/tuning.h so that a package's later processes rebuild it
// without a search:
//
//   choice_key -> "engine=12;knobs=3:1,17:0"   (or "none": no engine runs the graph)
//   plan_key   -> choice "\n" the plan as cuDNN serializes it (runtime-compiled engines: their
//                 compiled kernel, which a later process loads instead of compiling it again)
//
// Internal to the CUDA backend.
#pragma once
#include <cudnn.h>
#include <ingot/dtype.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ingot::cuda::cudnn_graph {

// A step cuDNN refused: the graph is not built (the caller takes its other path).
struct Unsupported {};

inline void check(cudnnStatus_t status) {
  if (status != CUDNN_STATUS_SUCCESS) throw Unsupported{};
}

// Float16, BFloat16, Float32, Int8; Unsupported otherwise.
cudnnDataType_t data_type(DType dt);

constexpr int64_t kAlignment = 16;  // bytes: every buffer a graph's tensors name must be so aligned
constexpr const char* kNoEngine = "none";  // stored: no engine runs this graph

// Makes and owns descriptors (the owner destroys them, in reverse order: destroy_all).
class Builder {
 public:
  explicit Builder(std::vector<cudnnBackendDescriptor_t>& owned) : owned_(owned) {}

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type);
  template <class T>
  static void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                  const T* values, int64_t count = 1) {
    check(cudnnBackendSetAttribute(d, name, type, count, values));
  }
  static void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v);
  }

  // A tensor of the given dims and element strides (virtual: an intermediate result no buffer holds).
  cudnnBackendDescriptor_t tensor(int64_t uid, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                  cudnnDataType_t type, bool is_virtual);
  // A float32 scalar passed by value in the variant pack (a host pointer to it).
  cudnnBackendDescriptor_t scalar(int64_t uid, int rank);
  // y = mode(x[, b]) in float32 arithmetic (Relu clipped above at `upper_clip` when > 0).
  cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                     cudnnBackendDescriptor_t y, double upper_clip = 0);
  // y = reduce(x) over the axes where y's dims are 1, in float32.
  cudnnBackendDescriptor_t reduction(cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // c = a b (batched over the leading dims), float32 accumulation.
  cudnnBackendDescriptor_t matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c);
  // A finalized operation of `type` with its descriptor-valued attributes (null ones left unset).
  cudnnBackendDescriptor_t operation(
      cudnnBackendDescriptorType_t type,
      std::initializer_list<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>> operands);
  // The finalized operation graph of `ops` (built with the current build handle).
  cudnnBackendDescriptor_t graph(const std::vector<cudnnBackendDescriptor_t>& ops);

 private:
  std::vector<cudnnBackendDescriptor_t>& owned_;
};

void destroy_all(std::vector<cudnnBackendDescriptor_t>& owned);

// The handle plans are built with: a prebuilding worker's own (set_build_handle), else the device's.
// A plan built with one handle runs with another (cudnnBackendExecute takes the caller's).
cudnnHandle_t build_handle();
void set_build_handle(cudnnHandle_t handle);  // null: the device's again

// The engines' numerical notes of a configuration (CUDNN_NUMERICAL_NOTE_*).
std::vector<cudnnBackendNumericalNote_t> numerical_notes(Builder& b, cudnnBackendDescriptor_t config);

// Runs `plan` on the buffers `ptrs` of tensors `uids` (n of each) through `handle` (its stream; null:
// the device's), with `ws` as workspace when given (else the device's, sized to `workspace_bytes`).
cudnnStatus_t execute(cudnnBackendDescriptor_t plan, int64_t workspace_bytes, const int64_t* uids, void* const* ptrs,
                      int64_t n, cudnnHandle_t handle = nullptr, void* ws = nullptr);

// A plan of a problem and its workspace bytes; null plan: none.
struct Plan {
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
};

// One graph-API problem: its operation graph, which engines' numerics it accepts, and one run of a
// plan on the call's buffers (the status cuDNN gave).
struct Problem {
  std::string choice_key, plan_key;  // keys in core/tuning.h's algorithms()
  std::function<cudnnBackendDescriptor_t(Builder&)> graph;
  std::function<bool(Builder&, cudnnBackendDescriptor_t config)> allowed;  // null: every engine
  std::function<cudnnStatus_t(const Plan&)> run;
  // Also time the fallback heuristic's engines (float32 convolutions: precompiled engines, among
  // them the FFT and small-tile ones the instant heuristic does not rank) when
  // INGOT_CUDNN_FALLBACK_ENGINES=1 (off by default: not yet measured on a GPU).
  bool fallback_engines = false;
};

// The plan of a stored choice: loaded from its serialized form when one was stored for this same
// choice (INGOT_CUDNN_SERIALIZED_PLANS), else rebuilt from the engine and knobs; null when neither
// works.
Plan stored_plan(Builder& b, const Problem& problem, const std::string& choice);

// The problem's plan: the stored choice's (`stored`: what core/tuning.h's find() gave for
// problem.choice_key) when it still builds; else the fastest of the heuristic's
// first candidates (at most 8) timed by problem.run, its choice (and serialized plan) stored; that no
// engine runs the graph is stored too. While a CUDA graph is being captured nothing runs: the
// heuristic's first, not stored. Null plan when no engine runs it. `measured`: the choice, when it
// was measured and stored now (for callers that store more beside it).
Plan choose_plan(Builder& b, const Problem& problem, const std::optional<std::string>& stored,
                 std::string* measured = nullptr);

int64_t plans_loaded();  // how many plans were loaded from their serialized form (tests)

}  // namespace ingot::cuda::cudnn_graph
