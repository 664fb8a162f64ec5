// Ingot's own fused operators (domain "ai.ingot"), created by graph passes (src/passes/), never by
// importers of ordinary ONNX files.
#include "ops/gradient.h"
#include "ops/op_def.h"
#include "ops/semantics/fused_elementwise.h"

namespace ingot {
namespace {
using G = GradBuilder;
using V = GradValue;

void layer_norm_vjp_fused(GradBuilder& b) {
  // Ingot's LayerNormalization is ONNX's: its rule is ONNX's.
  OpCatalogue::instance().find("", "LayerNormalization")->vjp(b);
}
void hard_swish_vjp_fused(GradBuilder& b) { OpCatalogue::instance().find("", "HardSwish")->vjp(b); }

// The fused ops differentiate through the ops they fuse: the unfused forward is recomputed where a
// rule needs an intermediate, and each part's own rule (GradBuilder::vjp_of) runs in reverse.

// dz of y = activation(z) (activation "" is the identity), z recomputed by `pre` when needed.
V activation_backward(G& b, const std::string& activation, const V& z, const V& y, const V& dy) {
  if (activation.empty()) return dy;
  if (activation != "Relu" && activation != "HardSwish") b.unsupported("with activation " + activation);
  return b.vjp_of(activation, {z}, {}, {y}, {dy}).at(0);
}

// Y = activation(Conv(X, W, B) + R).
void fused_conv_vjp(G& b) {
  if (b.attr("layout", AttrKind::String).s != "NCHW") b.unsupported("in layout NHWC");
  const std::string activation = b.attr("activation", AttrKind::String).s;
  Attributes conv = b.attrs();
  conv.erase("activation");
  conv.erase("layout");
  std::vector<V> conv_in{b.x(0), b.x(1)};
  if (b.has_input(2)) conv_in.push_back(b.x(2));
  V c = b.call1("Conv", conv_in, conv);
  V z = b.has_input(3) ? b.add(c, b.x(3)) : c;
  V dz = activation_backward(b, activation, z, b.y(), b.dy());
  std::vector<V> g = b.vjp_of("Conv", conv_in, conv, {c}, {dz});
  for (size_t i = 0; i < g.size(); ++i) b.grad(i, g[i]);
  if (b.has_input(3)) b.grad(3, b.sum_to(dz, b.x(3)));
}

// Y = activation(alpha * MatMul(A, B or B^T) + bias + R).
void fused_matmul_vjp(G& b) {
  const std::string activation = b.attr("activation", AttrKind::String).s;
  const bool trans_b = b.attr_int("transB") != 0;
  const double alpha = b.attr_float("alpha");
  V w = trans_b ? b.transpose_last_two(b.x(1)) : b.x(1);
  V product = b.matmul(b.x(0), w);
  V z = alpha == 1.0 ? product : b.mul(product, b.scalar(alpha, product));
  if (b.has_input(2)) z = b.add(z, b.x(2));
  if (b.has_input(3)) z = b.add(z, b.x(3));
  V dz = activation_backward(b, activation, z, b.y(), b.dy());
  V dproduct = alpha == 1.0 ? dz : b.mul(dz, b.scalar(alpha, dz));
  std::vector<V> g = b.vjp_of("MatMul", {b.x(0), w}, {}, {product}, {dproduct});
  b.grad(0, g[0]);
  if (g[1].defined()) b.grad(1, trans_b ? b.transpose_last_two(g[1]) : g[1]);
  if (b.has_input(2)) b.grad(2, b.sum_to(dz, b.x(2)));
  if (b.has_input(3)) b.grad(3, b.sum_to(dz, b.x(3)));
}

// Y = Softmax(scale Q K^T + mask) V, with operands flagged `transposed` given as [B, T, H, D].
void attention_vjp(G& b) {
  std::vector<int64_t> flags = b.attr_ints("transposed");
  flags.resize(4, 0);
  const std::vector<int64_t> bthd{0, 2, 1, 3};  // [B, T, H, D] <-> [B, H, T, D]; its own inverse
  auto untransposed = [&](const V& v, size_t i) { return flags[i] ? b.transpose(v, bthd) : v; };
  V q = untransposed(b.x(0), 0), k = untransposed(b.x(1), 1), v = untransposed(b.x(2), 2);
  V dy = untransposed(b.dy(), 3);
  V kt = b.transpose_last_two(k);
  // The scale folded into Q (a [.., T, D] product, not one over the [.., T, T] scores).
  const double scale = b.attr_float("scale");
  V qs = b.mul(q, b.scalar(scale, q));
  V scores = b.matmul(qs, kt);
  V logits = b.has_input(3) ? b.add(scores, b.x(3)) : scores;
  V p = b.call1("Softmax", {logits}, {{"axis", int64_t(-1)}});
  V y = b.matmul(p, v);
  std::vector<V> gpv = b.vjp_of("MatMul", {p, v}, {}, {y}, {dy});
  V dlogits = b.vjp_of("Softmax", {logits}, {{"axis", int64_t(-1)}}, {p}, {gpv[0]}).at(0);
  std::vector<V> gqk = b.vjp_of("MatMul", {qs, kt}, {}, {scores}, {dlogits});
  b.grad(0, untransposed(b.mul(gqk[0], b.scalar(scale, gqk[0])), 0));
  if (gqk[1].defined()) b.grad(1, untransposed(b.transpose_last_two(gqk[1]), 1));
  b.grad(2, untransposed(gpv[1], 2));
  if (b.has_input(3)) b.grad(3, b.sum_to(dlogits, b.x(3)));
}

// The program recomputed instruction by instruction as the ONNX ops it names, then each one's rule
// in reverse, the cotangents of reused values added up.
void fused_elementwise_vjp(G& b) {
  const fused::Program program = fused::Program::parse(b.attr("program", AttrKind::String).s, int(b.num_inputs()));
  std::vector<V> temps;
  std::vector<std::vector<V>> operands;
  auto value = [&](const fused::Operand& o) -> V {
    switch (o.kind) {
      case fused::Operand::Kind::Input: return b.x(size_t(o.index));
      case fused::Operand::Kind::Temp: return temps.at(size_t(o.index));
      default: return b.scalar(o.value, b.x(0));
    }
  };
  auto attrs_of = [&](const fused::Instr& in) {
    Attributes a;
    if (in.op == fused::Op::LeakyRelu) a["alpha"] = in.b.value;
    return a;
  };
  for (const fused::Instr& in : program.instrs) {
    const std::string op(fused::op_name(in.op));
    std::vector<V> args{value(in.a)};
    if (fused::arity(in.op) == 2 && in.op != fused::Op::LeakyRelu) args.push_back(value(in.b));
    temps.push_back(b.call1(op, args, attrs_of(in)));
    operands.push_back(args);
  }
  std::vector<V> dtemp(temps.size()), dinput(b.num_inputs());
  auto accumulate = [&](V& into, const V& g) { into = into.defined() ? b.add(into, g) : g; };
  if (!temps.empty()) dtemp.back() = b.dy();
  for (size_t k = program.instrs.size(); k-- > 0;) {
    if (!dtemp[k].defined()) continue;
    const fused::Instr& in = program.instrs[k];
    std::vector<V> g = b.vjp_of(fused::op_name(in.op), operands[k], attrs_of(in), {temps[k]}, {dtemp[k]});
    const fused::Operand* refs[2] = {&in.a, &in.b};
    for (size_t j = 0; j < operands[k].size(); ++j) {
      if (j >= g.size() || !g[j].defined()) continue;
      if (refs[j]->kind == fused::Operand::Kind::Temp) accumulate(dtemp[size_t(refs[j]->index)], g[j]);
      if (refs[j]->kind == fused::Operand::Kind::Input) accumulate(dinput[size_t(refs[j]->index)], g[j]);
    }
  }
  for (size_t i = 0; i < dinput.size(); ++i) {
    if (dinput[i].defined()) b.grad(i, dinput[i]);
  }
}
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
    .tag(OpTag::AutocastLowPrecision)
    .vjp(fused_conv_vjp);

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
    .tag(OpTag::AutocastLowPrecision)
    .vjp(fused_matmul_vjp);

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
    .tag(OpTag::AutocastLowPrecision)
    .vjp(attention_vjp);

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
    .tag(OpTag::Elementwise)
    .vjp(fused_elementwise_vjp);

}  // namespace ingot
