// Scaled dot-product attention through cuDNN's graph API: Y = Softmax(scale * Q K^T) V as one
// operation graph (matmul, scale, max, subtract, exp, sum, divide, matmul: the pattern cuDNN's
// fused flash-attention engines take; what cudnn-frontend's sdpa node builds for inference), for
// float16 and bfloat16. Used by the CUDA Attention kernel (kernels/attention.cu) ahead of Ingot's own
// flash kernel where cuDNN has an engine: on Hopper its kernels are warpgroup-MMA (wgmma) ones, which
// mma.sync cannot match (Whisper-tiny's [32, 6, 1500, 64] on an H100: 0.29 ms against 0.475).
// The engine is chosen once per problem and stored like a convolution's (cudnn_graph.h).
#pragma once
#include <cudnn.h>
#include <ingot/dtype.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ingot::cuda {

struct AttentionGraphSpec {
  DType dtype = DType::Float16;  // of Q, K, V, Y: Float16 or BFloat16
  int64_t batch = 0, heads = 0;  // the leading dims, folded in two (sem::attention_lead2)
  int64_t tq = 0, tk = 0, d = 0, dv = 0;
  // Element strides of each operand along (batch, heads, rows); the last dim is contiguous.
  int64_t q[3] = {}, k[3] = {}, v[3] = {}, y[3] = {};
};

// The spec as stored beside a choice in core/tuning.h (19 integers), and back; nothing for text
// that is not one (a malformed store entry is skipped, never built).
std::string to_text(const AttentionGraphSpec& spec);
std::optional<AttentionGraphSpec> attention_spec_from_text(const std::string& text);

struct AttentionGraphArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* y = nullptr;
  float scale = 1.0f;  // passed by value: not part of the graph
};

class AttentionGraph {
 public:
  // The graph for `spec` with its engine chosen (timed on `args` when measuring), or null when cuDNN
  // has no engine for it (or INGOT_CUDNN_ATTENTION=0). `tuning_key` names the problem in core/tuning.h.
  // One graph per problem in the process, shared by the nodes that have it (a transformer's layers):
  // one plan built or loaded, one kernel module loaded (Whisper-tiny's first run on an H100 spent
  // 4 x 5 ms loading the same serialized plan and 4 x 6 ms loading its kernel before).
  static std::shared_ptr<const AttentionGraph> get(const AttentionGraphSpec& spec, const AttentionGraphArgs& args,
                                                   const std::string& tuning_key);
  static bool enabled();
  // Plans built ahead of the runs that need them (a loaded package's, on a background thread when
  // the CUDA backend prepares the device: cuda_runtime.cpp): every problem whose spec the store
  // holds beside its choice, from the stored choice only (never a search), each run once on scratch
  // buffers so that its kernel is loaded. Returns how many it built.
  static int prebuild_stored_plans();
  static bool has_stored_plans();
  static int64_t prebuilt();  // plans prebuild_stored_plans() built in this process (tests)
  static int64_t build_handles();  // cuDNN handles prebuild_stored_plans() created (tests: one per device)
  static void forget_shared();  // drops the process's shared graphs (tests: what a fresh process has)
  static int64_t runs();  // calls run() made in this process (tests: which path ran)
  ~AttentionGraph();
  AttentionGraph(const AttentionGraph&) = delete;
  AttentionGraph& operator=(const AttentionGraph&) = delete;

  void run(const AttentionGraphArgs& args) const;

 private:
  AttentionGraph() = default;
  // With `args`: the stored choice, else a search timed on them; without: the stored choice only.
  static std::unique_ptr<AttentionGraph> build(const AttentionGraphSpec& spec, const AttentionGraphArgs* args,
                                               const std::string& tuning_key);
  AttentionGraphSpec spec_;
  std::vector<cudnnBackendDescriptor_t> owned_;
  cudnnBackendDescriptor_t plan_ = nullptr;
  int64_t workspace_ = 0;
};

}  // namespace ingot::cuda
