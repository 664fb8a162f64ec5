// 2-D forward convolutions through cuDNN's graph (backend) API: conv -> + bias -> + residual ->
// Relu as one operation graph, so cuDNN can pick its runtime-fusion and newest engines (the legacy
// cudnnFind* API sees a subset of them). Used by the CUDA Conv/FusedConv kernels for float16,
// bfloat16 and float32 (kernels/conv.cu; float32 on engines without tensor cores unless TF32 is
// allowed); the legacy path stays for everything else and when no engine takes the graph.
//
// The engine is chosen once per problem: a choice stored in core/tuning.h (the engine's global
// index and knob settings, keyed by the cuDNN version and GPU arch) rebuilt without asking the
// heuristic when it still finalizes, else the fastest of the heuristic's first candidates timed on
// the call's own buffers (not while a CUDA graph is being captured: then the heuristic's first),
// and stored; that no engine runs the graph is stored too (the legacy path takes it).
#pragma once
#include <cudnn.h>
#include <ingot/dtype.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ingot::cuda {

struct ConvGraphSpec {
  DType dtype = DType::Float16;  // of X, W, B, R, Y
  bool tf32 = false;             // float32: engines may use TF32 tensor cores
  bool channels_last = false;    // X, R, Y [N,H,W,C] and W [K,R,S,C/g] instead of NCHW/KCRS
  int64_t n = 0, c = 0, h = 0, w = 0;  // X (logical NCHW)
  int64_t k = 0, r = 0, s = 0;         // W: k output channels, r x s window, c / group inputs each
  int64_t group = 1;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_begin[2] = {0, 0}, pad_end[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  bool bias = false, residual = false, relu = false;
};

// The buffers of one call (device pointers; bias and residual null when the spec has none).
struct ConvGraphArgs {
  const void *x = nullptr, *w = nullptr, *bias = nullptr, *residual = nullptr;
  void* y = nullptr;
};

class ConvGraph {
 public:
  // A graph for `spec` with its engine chosen (timed on `args` when measuring), or null when cuDNN
  // has no engine for it (or INGOT_CUDNN_GRAPH=0). `tuning_key` names the problem in core/tuning.h.
  static std::unique_ptr<ConvGraph> build(const ConvGraphSpec& spec, const ConvGraphArgs& args,
                                          const std::string& tuning_key);
  // False when INGOT_CUDNN_GRAPH=0: build() returns null and the legacy API takes every convolution.
  static bool enabled();
  ~ConvGraph();
  ConvGraph(const ConvGraph&) = delete;
  ConvGraph& operator=(const ConvGraph&) = delete;

  const ConvGraphSpec& spec() const { return spec_; }
  void run(const ConvGraphArgs& args) const;

 private:
  ConvGraph() = default;
  ConvGraphSpec spec_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor made for the graph
  cudnnBackendDescriptor_t plan_ = nullptr;
  int64_t workspace_ = 0;
};

}  // namespace ingot::cuda
