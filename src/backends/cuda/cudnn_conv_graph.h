// 2-D forward convolutions through cuDNN's graph (backend) API: conv -> + bias -> + residual ->
// Relu as one operation graph, so cuDNN can pick its runtime-fusion and newest engines (the legacy
// cudnnFind* API sees a subset of them). Used by the CUDA Conv/FusedConv kernels for float16,
// bfloat16 and float32 (kernels/conv.cu; float32 on engines without tensor cores unless TF32 is
// allowed), and by the int8 QuantizedConv kernel (kernels/quantized_products.cu: int8 in, the
// requantization as pointwise steps, int8 or float32 out); the legacy path (Ingot's own kernel
// for int8) stays for everything else and when no engine takes the graph.
//
// The engine is chosen once per problem: a choice stored in core/tuning.h (the engine's global
// index and knob settings, keyed by the cuDNN version and GPU arch) rebuilt without asking the
// heuristic when it still finalizes, else the fastest of the heuristic's first candidates timed on
// the call's own buffers (not while a CUDA graph is being captured: then the heuristic's first),
// and stored; that no engine runs the graph is stored too (the legacy path takes it). Beside a
// choice: the graph's spec (so a loaded package's plans can be built ahead, prebuild_stored_plans)
// and the plan as cuDNN serializes it where its engine has a serialized form (runtime-compiled
// engines, whose plan would otherwise compile its kernel again in every process).
#pragma once
#include <cudnn.h>
#include <ingot/dtype.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ingot::cuda {

struct ConvGraphSpec {
  DType dtype = DType::Float16;  // of X, W, B, R, Y; or Int8 (below)
  bool tf32 = false;             // float32: engines may use TF32 tensor cores
  bool channels_last = false;    // X, R, Y [N,H,W,C] and W [K,R,S,C/g] instead of NCHW/KCRS
  int64_t n = 0, c = 0, h = 0, w = 0;  // X (logical NCHW)
  int64_t k = 0, r = 0, s = 0;         // W: k output channels, r x s window, c / group inputs each
  int64_t group = 1;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_begin[2] = {0, 0}, pad_end[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  bool bias = false, residual = false, relu = false;
  // Int8 graphs (dtype Int8: X and W int8 with zero points 0, accumulated in int32):
  //   v = acc * scale[k] + bias[k]              (scale and bias float32 [K], always given)
  //   v = (v + R) * residual_scale[k]           (with a residual: R int8 or float32)
  //   v = min(relu(v), relu_max)                (with relu)
  //   Y = v as y_dtype: int8 (rounded to nearest, saturated) or float32.
  // What requantization needs, given the scales folded so (kernels/quantized_products.cu).
  DType y_dtype = DType::Int8;
  DType residual_dtype = DType::Int8;
  float relu_max = 0;  // > 0: the clip (Relu6 and the like); 0: none
};

// The buffers of one call (device pointers; those the spec does not use null).
struct ConvGraphArgs {
  const void *x = nullptr, *w = nullptr, *bias = nullptr, *residual = nullptr;
  void* y = nullptr;
  const void *scale = nullptr, *residual_scale = nullptr;  // int8 graphs
};

class ConvGraph {
 public:
  // A graph for `spec` with its engine chosen (timed on `args` when measuring), or null when cuDNN
  // has no engine for it (or INGOT_CUDNN_GRAPH=0). `tuning_key` names the problem in core/tuning.h.
  static std::unique_ptr<ConvGraph> build(const ConvGraphSpec& spec, const ConvGraphArgs& args,
                                          const std::string& tuning_key);
  // False when INGOT_CUDNN_GRAPH=0: build() returns null and the legacy API takes every convolution.
  static bool enabled();
  // Plans built ahead of the convolutions that need them (a loaded package's): queue_stored_plans()
  // queues every choice in core/tuning.h's store whose spec was stored beside it (returns how many
  // it queued); build_queued_plans() builds queued plans on the calling thread, with a cuDNN handle
  // of its own, until none is left (several threads may run it; returns how many it built);
  // build() takes a plan built ahead instead of building it, waits for one being built, or takes a
  // queued one off the queue and builds it itself (with INGOT_CUDA_COLD_KERNELS=1 the convolution
  // first runs a call or two on the cold tier instead while being_built() says a worker has it);
  // prebuild_stored_plans() is both on one thread.
  // The CUDA backend runs workers when a session loads (Backend::prepare_async, INGOT_CUDNN_PREBUILD).
  static int queue_stored_plans();
  static int build_queued_plans(int device);
  static int prebuild_stored_plans(int device);
  static bool has_stored_plans();  // whether the store holds a choice with its spec
  // Whether a worker has the plan for `tuning_key` queued or is building it (the cold tier's test).
  static bool being_built(const std::string& tuning_key);
  // Whether any plan is queued or being built: a package's first run is still being prepared (the
  // legacy API's convolutions then take the cold tier too, rather than choose their algorithm and
  // load cuDNN's kernels in the first run).
  static bool preparing();
  static int64_t prebuilt_taken();  // how many plans build() took from prebuild_stored_plans (tests)
  static int64_t plans_loaded();    // how many plans were loaded from their serialized form (tests)
  ~ConvGraph();
  ConvGraph(const ConvGraph&) = delete;
  ConvGraph& operator=(const ConvGraph&) = delete;

  const ConvGraphSpec& spec() const { return spec_; }
  void run(const ConvGraphArgs& args) const;

 private:
  ConvGraph() = default;
  static std::unique_ptr<ConvGraph> take_prebuilt(const std::string& tuning_key, const std::string& choice,
                                                  const ConvGraphSpec& spec);
  ConvGraphSpec spec_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor made for the graph
  cudnnBackendDescriptor_t plan_ = nullptr;
  int64_t workspace_ = 0;
};

}  // namespace ingot::cuda
