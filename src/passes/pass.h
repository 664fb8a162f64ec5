// Graph passes (XLA-style): each pass has a name and rewrites a model in place, reporting whether it
// changed anything. The optimization passes' order is listed in pipeline.cpp; compiler/compile.cpp
// runs them between the lowerings and the precision and layout steps (the one compile pipeline).
#pragma once
#include <functional>
#include <span>
#include <string_view>

#include "graph/graph.h"

namespace ingot {

struct Pass {
  std::string_view name;
  bool (*run)(Model& model);  // true when the model changed
  // Also run on every If/Loop/Scan body (as the main graph of a model sharing the opsets): passes
  // whose rewrites stay inside one graph and name nothing new (a new name could shadow a value a
  // body reads from an enclosing graph).
  bool in_bodies = false;
  // Only for CUDA targets: a rewrite that pays for itself on a GPU's launches and tile counts and
  // costs a CPU more than it saves.
  bool cuda_only = false;
};

// QDQ models: DequantizeLinear -> Conv/MatMul/Gemm [-> Add] [-> activation] [-> QuantizeLinear]
// into ai.ingot.QuantizedConv / QuantizedMatMul, and DQ -> MaxPool/Reshape/... -> Q with the same
// parameters into the op on the 8-bit values.
bool fuse_qdq(Model& model);
// QuantizedConv/QuantizedMatMul (float output) -> elementwise chain with constants [-> QuantizeLinear]:
// the chain becomes the product's `epilogue` program (see fuse_qdq.cpp).
bool fuse_quantized_epilogue(Model& model);
// After the layout step: DQ -> ReduceMean | GlobalAveragePool -> Q and DQ, DQ -> Mul -> Q (per
// tensor) into ai.ingot.QuantizedReduceMean / QuantizedMul (see fuse_qdq.cpp).
bool fuse_qdq_pointwise(Model& model);
// Nodes whose inputs are all constant (and Shape of a static shape) become initializers.
bool constant_folding(Model& model);
// Identity, inference Dropout, Cast to the same dtype, Reshape to the same static shape: removed.
bool remove_identity(Model& model);
// Inference BatchNormalization after a Conv or Gemm with constant weights: folded into the weights and bias.
bool fold_batchnorm(Model& model);
// Gather/Slice of Shape(x) that pick only static dims of a partially symbolic x: constants.
bool simplify_shapes(Model& model);
// Mul and/or Add by scalar or per-channel constants after a Conv or Gemm: folded likewise.
bool fold_scale_shift(Model& model);
// Conv [-> Add(residual)] [-> Relu] into one FusedConv node (domain "ai.ingot").
bool fuse_conv_add_relu(Model& model);
// Layer normalization written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul[, Add]):
// one LayerNormalization (ai.ingot's below opset 17).
bool fuse_layer_norm(Model& model);
// x * Clip(x + 3, 0, 6) / 6: one HardSwish (ai.ingot's below opset 14).
bool fuse_hard_swish(Model& model);
// Exp(x [- ReduceMax(x)]) / ReduceSum(.) over one axis: one Softmax (with Sub(., Log(.)): LogSoftmax).
bool fuse_softmax(Model& model);
// MatMul(Q, K^T) [scale] [+ mask] -> Softmax -> MatMul(., V): one Attention node (domain "ai.ingot").
bool fuse_attention(Model& model);
// MatMul [-> Add(bias)] [-> Relu] and Gemm -> Relu into one FusedMatMul node (domain "ai.ingot").
bool fuse_matmul_bias_act(Model& model);
// Matrix products of one A with constant weights of one K, each too small to fill a GPU (a
// transformer's Q, K, V projections at batch 1), as one FusedMatMul and a Split. See
// merge_sibling_matmuls.cpp (CUDA targets; INGOT_MERGE_SIBLING_MATMULS=0 turns it off).
bool merge_sibling_matmuls(Model& model);
// Chains of elementwise float ops (arithmetic, activations, Clip; GELU written out is one) whose
// intermediates nothing else reads: one FusedElementwise node (domain "ai.ingot") each.
bool fuse_elementwise(Model& model);
// Nodes whose outputs nothing reads, and unread initializers: removed.
bool dead_code(Model& model);

// The optimization passes, in the order they run.
std::span<const Pass> pipeline_passes();
// The lowerings, which every model needs whatever the optimization setting.
std::span<const Pass> lowering_passes();

// One pass on the main graph, and on every body when it runs there (Pass::in_bodies).
bool run_pass(const Pass& pass, Model& model);

// Reduced precision (the compile pipeline's precision step, when the compute dtype is float16 or
// bfloat16): float32 computation moves to `dtype` (float16 or bfloat16) like autocast, with
// Softmax, reductions, normalizations, Exp/Log/Pow/Erf and RNNs kept in float32 and the graph's
// inputs and outputs still float32. See to_half_precision.cpp for the rules.
bool to_half_precision(Model& model, DType dtype);

// INGOT_DISABLE_PASSES=a,b names passes to skip (optimization passes, "to-half-precision" and
// "channels-last").
bool pass_disabled(std::string_view pass);

// Channels-last layout (the compile pipeline's layout step: after to_half_precision for a CUDA target
// in float16/bfloat16, where 2-D convolutions become FusedConv with layout "NHWC", cuDNN's
// tensor-core layout; for a CPU target, where the int8 QuantizedConvs take it, oneDNN's): the
// elementwise ops and global average pools between them follow, with Transposes only where the
// layout changes. See channels_last.cpp.
// Which convolutions move: every 2-D one (16-bit CUDA targets), or the int8 QuantizedConvs only
// (CPU targets, and float32 CUDA ones, whose float convolutions stay channels first).
// `pool_dtypes`: 2-D MaxPools of channels-last values of these dtypes become ai.ingot.MaxPool with
// layout "NHWC" (the dtypes the target's kernel for it takes: compile.cpp asks the kernel registry;
// empty: pools stay channels first).
enum class ChannelsLastScope : uint8_t { AllConvolutions, Int8Convolutions };
bool to_channels_last(Model& model, ChannelsLastScope scope = ChannelsLastScope::AllConvolutions,
                      std::vector<DType> pool_dtypes = {});

// Lowerings: rewrites every model needs before it can run, whatever the optimization setting
// (ops that no kernel implements directly).
// ai.onnx.preview.training.Gradient -> reverse-mode differentiation with ordinary nodes.
bool lower_gradient(Model& model);

}  // namespace ingot
