// Loading and running a model.
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

// The precision float32 models compute in. FP16/BF16 run convolutions, matrix products and
// elementwise ops in float16/bfloat16 and keep Softmax, reductions, normalizations, Exp/Log/Pow/Erf
// and RNNs in float32 (like PyTorch autocast); inputs and outputs stay float32.
// INT8 (packages only: `ingot convert --precision int8 --calib ...`, include/ingot/quantize.h):
// convolutions and matrix products in int8, the rest float32.
enum class Precision { FP32, FP16, BF16, INT8 };
// The dtype a precision computes convolutions and matrix products in.
inline DType compute_dtype(Precision p) {
  return p == Precision::FP16 ? DType::Float16 : p == Precision::BF16 ? DType::BFloat16 : DType::Float32;
}

struct SessionOptions {
  Device device = Device::cpu();
  int threads = 0;       // CPU threads, 0: every CPU the process may use. Process-wide: the CPU pool is shared.
  bool optimize = true;  // run the graph passes (src/passes/pipeline.cpp) before building the executor
  // Print the one-line CPU-fallback report to stderr when the model loads (it is always available
  // from Session::fallbacks()).
  bool report_fallbacks = true;
  Precision precision = Precision::FP32;  // reduced precision: the to_half_precision pass, after the pipeline
  // Let float32 matrix products and convolutions on the GPU use TF32 tensor cores (about 1e-3
  // relative error, several times faster). Process-wide, like `threads`. Off: exact float32.
  bool allow_tf32 = false;
  // Static plans: from the second run with given input shapes on, intermediate tensors live in one
  // arena laid out from the first run (liveness-based reuse; Session::memory_plan()).
  bool memory_plan = true;
  // On a GPU, capture the second run with given input shapes as a CUDA graph and replay it from then
  // on (one launch per run), when the run has no CPU fallback and no device-to-host copy. Needs
  // memory_plan. Per-op profiles see one replay event instead of ops: `ingot profile` turns it off.
  bool cuda_graphs = true;
  // Return outputs where they were computed (on a GPU session: device tensors, ready to feed other
  // GPU work without a round trip; Session::run then returns once the work is queued, so call
  // device_memory(type)->synchronize() before timing). Default: copied to the host.
  bool outputs_on_device = false;
  // A run still going after this many seconds stops with an error naming the node it reached (a Loop
  // whose trip count comes from a bad input, a model far too slow for its inputs). 0: no limit.
  double time_limit_s = 0;
  // Host memory Ingot's tensors may hold, process-wide like `threads` (a session that sets it sets it
  // for all): creating a tensor past it fails with an error naming its size, where the machine would
  // otherwise swap or kill the process. 0: leave it (default: 90% of physical memory).
  int64_t memory_limit_bytes = 0;
};

// A node that runs on the CPU although the session's device is an accelerator.
struct Fallback {
  std::string node, op, reason;
};

// Data moved between devices by the last run.
struct TransferStats {
  int64_t host_to_device_bytes = 0, device_to_host_bytes = 0, device_to_device_bytes = 0;
  int64_t copies = 0;
  int64_t fallback_ops = 0;         // fallback node executions
  int64_t fallback_copy_bytes = 0;  // bytes copied because of fallbacks
  bool graph_replay = false;        // the run replayed a captured CUDA graph
};

// The static memory plan (and CUDA graph) of the last run's input shapes.
struct MemoryPlanStats {
  bool planned = false;        // false until a run with these shapes has been recorded
  int64_t tensors = 0;         // intermediate tensors placed in the arenas
  int64_t arena_bytes = 0;     // the arenas' sizes, all devices (the plan's peak)
  int64_t total_bytes = 0;     // the same tensors without reuse
  int64_t lower_bound = 0;     // the most bytes alive at one step
  bool cuda_graph = false;     // runs with these shapes replay a CUDA graph
  int64_t graph_nodes = 0;     // its device operations
  std::string why_no_graph;    // on a GPU: why they do not ("" when they do, or not tried yet)
};


struct TensorInfo {
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<std::string> dims;  // "3", "batch", "?"
  std::string str() const;
};

class Model;

class Session {
 public:
  // Loads an ONNX model; throws ingot::Error (malformed file, unsupported op, ...).
  static Session load(const std::string& path, SessionOptions options = {});
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  const std::string& model_name() const;

  // Inputs by name; outputs in graph-output order. Inputs are checked against the model's declared
  // dtypes and shapes (symbolic dims must agree across inputs).
  std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& feeds);
  // Inputs in graph-input order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  Device device() const;
  // Nodes placed on the CPU for want of an accelerator kernel (empty on the CPU device).
  std::vector<Fallback> fallbacks() const;
  std::string fallback_summary() const;  // one line, "" when there are none
  TransferStats last_run_stats() const;
  MemoryPlanStats memory_plan() const;

  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot
INGOT_API_END
