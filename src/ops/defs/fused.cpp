// Ingot's own fused operators (domain "ai.ingot"), created by graph passes (src/passes/), never by
// importers of ordinary ONNX files.
#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {
void layer_norm_vjp_fused(GradBuilder& b) {
  // Ingot's LayerNormalization is ONNX's: its rule is ONNX's.
  OpCatalogue::instance().find("", "LayerNormalization")->vjp(b);
}
void hard_swish_vjp_fused(GradBuilder& b) { OpCatalogue::instance().find("", "HardSwish")->vjp(b); }
}  // namespace

namespace {
const std::vector<DType> kFloats = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
}  // namespace

// Written by fuse_conv_add_relu: Y = activation(Conv(X, W, B) + R). B and R are optional ("").
// `layout` "NHWC" (written by the channels-last pass): X, R and Y are [N, spatial..., C] and W is
// [M, kernel..., C/group] (ops/semantics/conv_geometry.h).
INGOT_OP(FusedConv)
    .domain(kIngotDomain)
    .versions(1)
    .input("X", "T")
    .input("W", "T")
    .optional_input("B", "T")
    .optional_input("R", "T")
    .output("Y", "T")
    .type("T", kFloats)
    .attr("activation", "")
    .attr("layout", "NCHW")
    .conv_attrs()
    .summary("Conv plus an optional residual R (same shape as the output) and activation ('Relu', 'HardSwish' or ''); "
             "layout 'NHWC' puts channels last in X, W, R and Y.")
    .tag(OpTag::AutocastLowPrecision);

// Written by fuse_matmul_bias_act: Y = activation(alpha * MatMul(A, transB ? B^T : B) + bias + R),
// MatMul's numpy semantics (batch broadcasting, 1-D A); transB swaps B's last two axes; bias has N
// elements ([N] or [1, N]); the residual R has the product's shape; both optional ("").
INGOT_OP(FusedMatMul)
    .domain(kIngotDomain)
    .versions(1)
    .input("A", "T")
    .input("B", "T")
    .optional_input("bias", "T")
    .optional_input("R", "T")
    .output("Y", "T")
    .type("T", kFloats)
    .attr("activation", "")
    .attr("transB", 0)
    .attr("alpha", 1.0f)
    .summary("alpha * MatMul (B transposed when transB) plus an optional bias of N elements and residual (the "
             "product's shape), then activation ('Relu' or '').")
    .tag(OpTag::AutocastLowPrecision);

// Written by fuse_attention: Y = Softmax(scale * Q K^T + mask) V over the last axis, without the
// score matrix in memory where a backend can avoid it. Q [..., Tq, D], K [..., Tk, D], V [..., Tk, Dv]
// (leading dims broadcast numpy-style, like MatMul's), optional additive mask broadcastable to
// [..., Tq, Tk]; Y [..., Tq, Dv]. `transposed` (flags for Q, K, V and Y, or empty): a flagged
// operand of rank 4 is given (Y: produced) as [B, T, H, D], the heads' usual layout before the
// Transposes exporters write, instead of [B, H, T, D]. Arguments: ops/semantics/attention_args.h.
INGOT_OP(Attention)
    .domain(kIngotDomain)
    .versions(1)
    .input("Q", "T")
    .input("K", "T")
    .input("V", "T")
    .optional_input("mask", "T")
    .output("Y", "T")
    .type("T", kFloats)
    .attr("scale", 1.0f)
    .attr("transposed", Ints{})
    .summary("Scaled dot-product attention: Softmax(scale * Q K^T + mask) V over the last axis; the leading dims "
             "broadcast; the additive mask (optional) broadcasts to [..., Tq, Tk]; `transposed` flags Q, K, V, Y "
             "given as [B, T, H, D].")
    .tag(OpTag::AutocastLowPrecision);

// Written by fuse_layer_norm and fuse_hard_swish for models below the opset that has the op: the
// same semantics and kernels as ONNX's LayerNormalization (opset 17) and HardSwish (opset 14).
INGOT_OP(LayerNormalization)
    .domain(kIngotDomain)
    .versions(1)
    .input("X", "T")
    .input("Scale", "T")
    .optional_input("B", "T")
    .output("Y", "T")
    .optional_output("Mean", "U")
    .optional_output("InvStdDev", "U")
    .type("T", kFloats)
    .type("U", {DType::Float32})
    .attr("axis", -1)
    .attr("epsilon", 1e-5f)
    .attr("stash_type", 1)
    .summary("ONNX's LayerNormalization (opset 17) for older models: normalizes over axes [axis, rank).")
    .tag(OpTag::Float32Inside)
    .vjp(layer_norm_vjp_fused);

INGOT_OP(HardSwish)
    .domain(kIngotDomain)
    .versions(1)
    .input("X", "T")
    .output("Y", "T")
    .type("T", kFloats)
    .summary("ONNX's HardSwish (opset 14) for older models: X * max(0, min(1, X / 6 + 1/2)).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(hard_swish_vjp_fused);

// Written by fuse_elementwise: a chain of elementwise float ops evaluated in one pass over the
// output; `program` is its instruction list (ops/semantics/fused_elementwise.h). The inputs
// broadcast numpy-style and share one float dtype, which is the output's.
INGOT_OP(FusedElementwise)
    .domain(kIngotDomain)
    .versions(1)
    .variadic_input("X", "T")
    .output("Y", "T")
    .type("T", kFloats)
    .inputs(1, 8)
    .required_attr("program", AttrKind::String)
    .summary("A chain of elementwise float ops in one kernel; `program` lists them (x0.. inputs, t0.. results).")
    .tag(OpTag::Elementwise);

}  // namespace ingot
