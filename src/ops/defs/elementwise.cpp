// Elementwise operators: arithmetic, comparison and logic (numpy broadcasting), variadic
// Max/Min/Sum/Mean, unary math, activations, and Cast/CastLike. All but CastLike (whose second input
// gives only a dtype) carry OpTag::Elementwise.
#include <cfloat>

#include "ops/batching.h"
#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// ---- Gradient rules (ops/gradient.h). dy is the output's cotangent; y the forward output.
using G = GradBuilder;
using V = GradValue;

// Before opset 7 a binary op broadcast B at `axis` of A only when asked (`broadcast` = 1): numpy's rules
// do not describe that, so its gradient is refused rather than summed wrongly.
void check_numpy_broadcast(G& b) {
  if (b.opset() < 7 && b.has_attr("broadcast") && b.attr_int("broadcast") != 0)
    b.unsupported("with opset 1-6's `broadcast` attribute (re-export the model at opset 7 or later)");
}
V mask(G& b, const V& condition, const V& like) { return b.cast_like(condition, like); }

void add_vjp(G& b) {
  check_numpy_broadcast(b);
  if (b.wants(0)) b.grad(0, b.sum_to(b.dy(), b.x(0)));
  if (b.wants(1)) b.grad(1, b.sum_to(b.dy(), b.x(1)));
}
void sub_vjp(G& b) {
  check_numpy_broadcast(b);
  if (b.wants(0)) b.grad(0, b.sum_to(b.dy(), b.x(0)));
  if (b.wants(1)) b.grad(1, b.sum_to(b.neg(b.dy()), b.x(1)));
}
void mul_vjp(G& b) {
  check_numpy_broadcast(b);
  if (b.wants(0)) b.grad(0, b.sum_to(b.mul(b.dy(), b.x(1)), b.x(0)));
  if (b.wants(1)) b.grad(1, b.sum_to(b.mul(b.dy(), b.x(0)), b.x(1)));
}
void div_vjp(G& b) {
  check_numpy_broadcast(b);
  if (b.wants(0)) b.grad(0, b.sum_to(b.div(b.dy(), b.x(1)), b.x(0)));
  if (b.wants(1)) b.grad(1, b.sum_to(b.neg(b.div(b.mul(b.dy(), b.y()), b.x(1))), b.x(1)));
}
// y = a - q b with q = trunc(a / b) (fmod = 1) or floor(a / b) (fmod = 0), constant almost
// everywhere: da = dy, db = -q dy, and q = (a - y) / b.
void mod_vjp(G& b) {
  check_numpy_broadcast(b);
  if (b.wants(0)) b.grad(0, b.sum_to(b.dy(), b.x(0)));
  if (b.wants(1)) {
    V q = b.div(b.sub(b.x(0), b.y()), b.x(1));
    b.grad(1, b.sum_to(b.neg(b.mul(b.dy(), q)), b.x(1)));
  }
}
void pow_vjp(G& b) {
  check_numpy_broadcast(b);
  const V& a = b.x(0);
  if (b.wants(0)) {
    V e = b.cast_like(b.x(1), a);  // the exponent may be an integer
    V d = b.mul(e, b.call1("Pow", {a, b.sub(e, b.scalar(1.0, e))}));
    b.grad(0, b.sum_to(b.mul(b.dy(), d), a));
  }
  if (b.wants(1)) b.grad(1, b.sum_to(b.mul(b.mul(b.dy(), b.y()), b.call1("Log", {a})), b.x(1)));
}
// Unary ops: input 0's gradient is dy * f'(x), with f' from x or y.
void unary(G& b, const V& derivative) {
  if (b.wants(0)) b.grad(0, b.mul(b.dy(), derivative));
}
void abs_vjp(G& b) { unary(b, b.call1("Sign", {b.x(0)})); }
void neg_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.neg(b.dy()));
}
void reciprocal_vjp(G& b) { unary(b, b.neg(b.mul(b.y(), b.y()))); }
void sqrt_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.div(b.mul(b.dy(), b.scalar(0.5, b.y())), b.y()));
}
void exp_vjp(G& b) { unary(b, b.y()); }
void log_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.div(b.dy(), b.x(0)));
}
// Piecewise constant (Floor, Ceil, Round, Sign): zero almost everywhere.
void zero_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.zeros_like(b.dy()));
}
void relu_vjp(G& b) { unary(b, mask(b, b.call1("Greater", {b.x(0), b.scalar(0.0, b.x(0))}), b.x(0))); }
void sigmoid_vjp(G& b) { unary(b, b.mul(b.y(), b.one_minus(b.y()))); }
void tanh_vjp(G& b) { unary(b, b.one_minus(b.mul(b.y(), b.y()))); }
void erf_vjp(G& b) {
  const V& x = b.x(0);
  unary(b, b.mul(b.scalar(1.1283791670955126, x), b.call1("Exp", {b.neg(b.mul(x, x))})));  // 2 / sqrt(pi)
}
void sin_vjp(G& b) { unary(b, b.call1("Cos", {b.x(0)})); }
void cos_vjp(G& b) { unary(b, b.neg(b.call1("Sin", {b.x(0)}))); }
void tan_vjp(G& b) { unary(b, b.add(b.scalar(1.0, b.y()), b.mul(b.y(), b.y()))); }
V one_minus_x2(G& b) { return b.one_minus(b.mul(b.x(0), b.x(0))); }
void asin_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.div(b.dy(), b.call1("Sqrt", {one_minus_x2(b)})));
}
void acos_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.neg(b.div(b.dy(), b.call1("Sqrt", {one_minus_x2(b)}))));
}
void atan_vjp(G& b) {
  const V& x = b.x(0);
  if (b.wants(0)) b.grad(0, b.div(b.dy(), b.add(b.scalar(1.0, x), b.mul(x, x))));
}
void sinh_vjp(G& b) { unary(b, b.call1("Cosh", {b.x(0)})); }
void cosh_vjp(G& b) { unary(b, b.call1("Sinh", {b.x(0)})); }
void asinh_vjp(G& b) {
  const V& x = b.x(0);
  if (b.wants(0)) b.grad(0, b.div(b.dy(), b.call1("Sqrt", {b.add(b.mul(x, x), b.scalar(1.0, x))})));
}
void acosh_vjp(G& b) {
  const V& x = b.x(0);
  if (b.wants(0)) b.grad(0, b.div(b.dy(), b.call1("Sqrt", {b.sub(b.mul(x, x), b.scalar(1.0, x))})));
}
void atanh_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.div(b.dy(), one_minus_x2(b)));
}
void softplus_vjp(G& b) { unary(b, b.call1("Sigmoid", {b.x(0)})); }
void softsign_vjp(G& b) {
  V d = b.add(b.scalar(1.0, b.x(0)), b.call1("Abs", {b.x(0)}));
  if (b.wants(0)) b.grad(0, b.div(b.dy(), b.mul(d, d)));
}
void hard_swish_vjp(G& b) {
  const V& x = b.x(0);
  // 0 below -3, 1 above 3, (2x + 3) / 6 between.
  V mid = b.add(b.mul(x, b.scalar(1.0 / 3.0, x)), b.scalar(0.5, x));
  V below = mask(b, b.call1("Less", {x, b.scalar(-3.0, x)}), x);
  V above = mask(b, b.call1("Greater", {x, b.scalar(3.0, x)}), x);
  V inside = b.one_minus(b.add(below, above));
  unary(b, b.add(b.mul(inside, mid), above));
}
void mish_vjp(G& b) {
  const V& x = b.x(0);
  V t = b.call1("Tanh", {b.call1("Softplus", {x})});
  unary(b, b.add(t, b.mul(b.mul(x, b.one_minus(b.mul(t, t))), b.call1("Sigmoid", {x}))));
}
V positive(G& b) { return mask(b, b.call1("Greater", {b.x(0), b.scalar(0.0, b.x(0))}), b.x(0)); }
void leaky_relu_vjp(G& b) {
  V m = positive(b);
  unary(b, b.add(m, b.mul(b.one_minus(m), b.scalar(b.attr_float("alpha"), m))));
}
void elu_vjp(G& b) {
  V m = positive(b);
  unary(b, b.add(m, b.mul(b.one_minus(m), b.add(b.y(), b.scalar(b.attr_float("alpha"), m)))));
}
void selu_vjp(G& b) {
  V m = positive(b);
  const double alpha = b.attr_float("alpha"), gamma = b.attr_float("gamma");
  unary(b, b.add(b.mul(m, b.scalar(gamma, m)), b.mul(b.one_minus(m), b.add(b.y(), b.scalar(alpha * gamma, m)))));
}
void celu_vjp(G& b) {
  V m = positive(b);
  V e = b.call1("Exp", {b.div(b.x(0), b.scalar(b.attr_float("alpha"), m))});
  unary(b, b.add(m, b.mul(b.one_minus(m), e)));
}
void hard_sigmoid_vjp(G& b) {
  const V& x = b.x(0);
  V v = b.add(b.mul(x, b.scalar(b.attr_float("alpha"), x)), b.scalar(b.attr_float("beta"), x));
  V inside = b.mul(mask(b, b.call1("Greater", {v, b.scalar(0.0, v)}), x), mask(b, b.call1("Less", {v, b.scalar(1.0, v)}), x));
  unary(b, b.mul(inside, b.scalar(b.attr_float("alpha"), x)));
}
void thresholded_relu_vjp(G& b) {
  unary(b, mask(b, b.call1("Greater", {b.x(0), b.scalar(b.attr_float("alpha"), b.x(0))}), b.x(0)));
}
void shrink_vjp(G& b) {
  const V& x = b.x(0);
  const double lambd = b.attr_float("lambd");
  unary(b, b.add(mask(b, b.call1("Less", {x, b.scalar(-lambd, x)}), x), mask(b, b.call1("Greater", {x, b.scalar(lambd, x)}), x)));
}
void prelu_vjp(G& b) {
  V m = positive(b);
  if (b.wants(0)) b.grad(0, b.sum_to(b.mul(b.dy(), b.add(m, b.mul(b.one_minus(m), b.x(1)))), b.x(0)));
  if (b.wants(1)) b.grad(1, b.sum_to(b.mul(b.dy(), b.mul(b.one_minus(m), b.x(0))), b.x(1)));
}
// Clip: the gradient passes where min <= x <= max; a bound given as an input gets it where it clipped.
void clip_vjp(G& b) {
  const V& x = b.x(0);
  V lo, hi;
  if (b.opset() >= 11) {
    lo = b.x(1);
    hi = b.x(2);
  } else {
    lo = b.scalar(b.attr_float("min"), x);
    hi = b.scalar(b.attr_float("max"), x);
  }
  V pass = b.scalar(1.0, x);
  if (lo.defined()) pass = b.mul(pass, mask(b, b.call1("GreaterOrEqual", {x, lo}), x));
  if (hi.defined()) pass = b.mul(pass, mask(b, b.call1("LessOrEqual", {x, hi}), x));
  if (b.wants(0)) b.grad(0, b.sum_to(b.mul(b.dy(), pass), x));
  if (b.wants(1)) b.grad(1, b.sum_to(b.mul(b.dy(), mask(b, b.call1("Less", {x, lo}), x)), lo));
  if (b.wants(2)) b.grad(2, b.sum_to(b.mul(b.dy(), mask(b, b.call1("Greater", {x, hi}), x)), hi));
}
void where_vjp(G& b) {
  V zero = b.scalar(0.0, b.dy());
  if (b.wants(1)) b.grad(1, b.sum_to(b.call1("Where", {b.x(0), b.dy(), zero}), b.x(1)));
  if (b.wants(2)) b.grad(2, b.sum_to(b.call1("Where", {b.x(0), zero, b.dy()}), b.x(2)));
}
// Max/Min: the gradient goes to every input equal to the result (all of them at a tie).
void extremum_vjp(G& b) {
  for (size_t i = 0; i < b.num_inputs(); ++i) {
    if (b.wants(i)) b.grad(i, b.sum_to(b.mul(b.dy(), b.equal_mask(b.x(i), b.y(), b.dy())), b.x(i)));
  }
}
void sum_vjp(G& b) {
  for (size_t i = 0; i < b.num_inputs(); ++i) {
    if (b.wants(i)) b.grad(i, b.sum_to(b.dy(), b.x(i)));
  }
}
void mean_vjp(G& b) {
  V share = b.div(b.dy(), b.scalar(double(b.num_inputs()), b.dy()));
  for (size_t i = 0; i < b.num_inputs(); ++i) {
    if (b.wants(i)) b.grad(i, b.sum_to(share, b.x(i)));
  }
}
void cast_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.cast_like(b.dy(), b.x(0)));
}

}  // namespace


// Before opset 7, binary ops broadcast only when `broadcast` = 1, aligning B at `axis` of A;
// opset 1 also carried the meaningless `consumed_inputs`. The kernels accept both forms.
#define INGOT_LEGACY_BINARY_OP(name, text)              \
  INGOT_OP(name)                                        \
      .versions(1)                                      \
      .inputs(2)                                        \
      .attr("broadcast", 0)                             \
      .optional_attr("axis", AttrKind::Int)             \
      .optional_attr("consumed_inputs", AttrKind::Ints) \
      .tag(OpTag::Elementwise)                          \
      .summary(text)

INGOT_LEGACY_BINARY_OP(Add, "A + B with numpy broadcasting.").tag(OpTag::AutocastFollow)
    .vjp(add_vjp);
INGOT_LEGACY_BINARY_OP(Sub, "A - B with numpy broadcasting.").tag(OpTag::AutocastFollow)
    .vjp(sub_vjp);
INGOT_LEGACY_BINARY_OP(Mul, "A * B with numpy broadcasting.").tag(OpTag::AutocastFollow)
    .vjp(mul_vjp);
INGOT_LEGACY_BINARY_OP(Div, "A / B with numpy broadcasting; integer division truncates toward zero.").tag(OpTag::AutocastFollow)
    .vjp(div_vjp);
INGOT_LEGACY_BINARY_OP(Pow, "A raised to B; B may have a different numeric dtype than A (opset 12+).")
    .vjp(pow_vjp);
INGOT_LEGACY_BINARY_OP(And, "Logical and of two bool tensors.");
INGOT_LEGACY_BINARY_OP(Or, "Logical or of two bool tensors.");
INGOT_LEGACY_BINARY_OP(Xor, "Logical xor of two bool tensors.");
INGOT_LEGACY_BINARY_OP(Equal, "A == B (bool output).").tag(OpTag::AutocastFollow);
INGOT_LEGACY_BINARY_OP(Greater, "A > B (bool output).").tag(OpTag::AutocastFollow);
INGOT_LEGACY_BINARY_OP(Less, "A < B (bool output).").tag(OpTag::AutocastFollow);
#undef INGOT_LEGACY_BINARY_OP

INGOT_OP(GreaterOrEqual).versions(12).inputs(2).summary("A >= B (bool output).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(LessOrEqual).versions(12).inputs(2).summary("A <= B (bool output).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(Mod).versions(10).inputs(2).attr("fmod", 0).summary(
    "Remainder: with fmod = 0 its sign follows the divisor (Python %), with fmod = 1 the dividend (C fmod).")
    .tag(OpTag::Elementwise)
    .vjp(mod_vjp);
INGOT_OP(BitShift)
    .versions(11)
    .inputs(2)
    .required_attr("direction", AttrKind::String)
    .summary("Shifts unsigned integers LEFT or RIGHT by B bits (0 when B >= the bit width).")
    .tag(OpTag::Elementwise);
INGOT_OP(BitwiseAnd).versions(18).inputs(2).summary("Bitwise and of integer tensors.")
    .tag(OpTag::Elementwise);
INGOT_OP(BitwiseOr).versions(18).inputs(2).summary("Bitwise or of integer tensors.")
    .tag(OpTag::Elementwise);
INGOT_OP(BitwiseXor).versions(18).inputs(2).summary("Bitwise xor of integer tensors.")
    .tag(OpTag::Elementwise);
INGOT_OP(BitwiseNot).versions(18).inputs(1).summary("Bitwise complement of an integer tensor.")
    .tag(OpTag::Elementwise);
INGOT_OP(Not).versions(1).inputs(1).summary("Logical not of a bool tensor.")
    .tag(OpTag::Elementwise);
INGOT_OP(PRelu)
    .versions(1)
    .inputs(2)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("X where X >= 0, slope * X elsewhere; slope broadcasts to X.")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(prelu_vjp);
INGOT_OP(Where).versions(9).inputs(3).summary("X where condition is true, else Y (three-way broadcasting).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(where_vjp);

// Variadic folds over 1..N broadcast inputs.
#define INGOT_VARIADIC_OP(name, text)                                                                        \
  INGOT_OP(name).versions(1).inputs(1, -1).optional_attr("consumed_inputs", AttrKind::Ints).tag(OpTag::Elementwise) \
      .summary(text)
INGOT_VARIADIC_OP(Max, "Elementwise maximum of the inputs; NaN propagates.").tag(OpTag::AutocastFollow)
    .vjp(extremum_vjp);
INGOT_VARIADIC_OP(Min, "Elementwise minimum of the inputs; NaN propagates.").tag(OpTag::AutocastFollow)
    .vjp(extremum_vjp);
INGOT_VARIADIC_OP(Sum, "Elementwise sum of the inputs.").tag(OpTag::AutocastFollow)
    .vjp(sum_vjp);
INGOT_VARIADIC_OP(Mean, "Elementwise mean of the inputs.").tag(OpTag::AutocastFollow)
    .vjp(mean_vjp);
#undef INGOT_VARIADIC_OP

// Unary ops that exist since opset 1 carried `consumed_inputs` there.
#define INGOT_UNARY_OP_V1(name, text)                                                                          \
  INGOT_OP(name).versions(1).inputs(1).optional_attr("consumed_inputs", AttrKind::Ints).tag(OpTag::Elementwise) \
      .summary(text)
INGOT_UNARY_OP_V1(Abs, "|X|.").tag(OpTag::AutocastFollow)
    .vjp(abs_vjp);
INGOT_UNARY_OP_V1(Neg, "-X.").tag(OpTag::AutocastFollow)
    .vjp(neg_vjp);
INGOT_UNARY_OP_V1(Reciprocal, "1 / X.")  // float32 under autocast (PyTorch's fp32 list)
    .vjp(reciprocal_vjp);
INGOT_UNARY_OP_V1(Sqrt, "Square root.").tag(OpTag::AutocastFollow)
    .vjp(sqrt_vjp);
INGOT_UNARY_OP_V1(Exp, "e^X.")
    .vjp(exp_vjp);
INGOT_UNARY_OP_V1(Log, "Natural logarithm.")
    .vjp(log_vjp);
INGOT_UNARY_OP_V1(Ceil, "Smallest integer >= X.").tag(OpTag::AutocastFollow)
    .vjp(zero_vjp);
INGOT_UNARY_OP_V1(Floor, "Largest integer <= X.").tag(OpTag::AutocastFollow)
    .vjp(zero_vjp);
INGOT_UNARY_OP_V1(Relu, "max(X, 0).").tag(OpTag::AutocastFollow)
    .vjp(relu_vjp);
INGOT_UNARY_OP_V1(Sigmoid, "1 / (1 + e^-X).").tag(OpTag::AutocastFollow)
    .vjp(sigmoid_vjp);
INGOT_UNARY_OP_V1(Tanh, "Hyperbolic tangent.").tag(OpTag::AutocastFollow)
    .vjp(tanh_vjp);
#undef INGOT_UNARY_OP_V1

#define INGOT_UNARY_OP(name, since, text) \
  INGOT_OP(name).versions(since).inputs(1).tag(OpTag::Elementwise).summary(text)
INGOT_UNARY_OP(Round, 11, "Round to nearest integer, halves to even.").tag(OpTag::AutocastFollow)
    .vjp(zero_vjp);
INGOT_UNARY_OP(Sign, 9, "-1, 0 or 1 by the sign of X (NaN stays NaN).").tag(OpTag::AutocastFollow)
    .vjp(zero_vjp);
INGOT_UNARY_OP(Erf, 9, "Gauss error function.").tag(OpTag::Float32Inside)
    .vjp(erf_vjp);
INGOT_UNARY_OP(Sin, 7, "Sine.")
    .vjp(sin_vjp);
INGOT_UNARY_OP(Cos, 7, "Cosine.")
    .vjp(cos_vjp);
INGOT_UNARY_OP(Tan, 7, "Tangent.")
    .vjp(tan_vjp);
INGOT_UNARY_OP(Asin, 7, "Arcsine.")
    .vjp(asin_vjp);
INGOT_UNARY_OP(Acos, 7, "Arccosine.")
    .vjp(acos_vjp);
INGOT_UNARY_OP(Atan, 7, "Arctangent.")
    .vjp(atan_vjp);
INGOT_UNARY_OP(Sinh, 9, "Hyperbolic sine.")
    .vjp(sinh_vjp);
INGOT_UNARY_OP(Cosh, 9, "Hyperbolic cosine.")
    .vjp(cosh_vjp);
INGOT_UNARY_OP(Asinh, 9, "Inverse hyperbolic sine.")
    .vjp(asinh_vjp);
INGOT_UNARY_OP(Acosh, 9, "Inverse hyperbolic cosine.")
    .vjp(acosh_vjp);
INGOT_UNARY_OP(Atanh, 9, "Inverse hyperbolic tangent.")
    .vjp(atanh_vjp);
INGOT_UNARY_OP(IsNaN, 9, "True where X is NaN.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(HardSwish, 14, "X * max(0, min(1, X / 6 + 1/2)).").tag(OpTag::AutocastFollow)
    .vjp(hard_swish_vjp);
INGOT_UNARY_OP(Softplus, 1, "log(1 + e^X).")  // float32 under autocast (PyTorch's fp32 list)
    .vjp(softplus_vjp);
INGOT_UNARY_OP(Softsign, 1, "X / (1 + |X|).").tag(OpTag::AutocastFollow)
    .vjp(softsign_vjp);
INGOT_UNARY_OP(Mish, 18, "X * tanh(softplus(X)).").tag(OpTag::AutocastFollow)
    .vjp(mish_vjp);
#undef INGOT_UNARY_OP

INGOT_OP(IsInf)
    .versions(10)
    .inputs(1)
    .attr("detect_negative", 1)
    .attr("detect_positive", 1)
    .summary("True where X is infinite (of the selected signs).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);

INGOT_OP(LeakyRelu)
    .versions(1)
    .inputs(1)
    .attr("alpha", 0.01f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("X where X >= 0, alpha * X elsewhere.")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(leaky_relu_vjp);
INGOT_OP(Elu)
    .versions(1)
    .inputs(1)
    .attr("alpha", 1.0f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("X where X >= 0, alpha * (e^X - 1) elsewhere.")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(elu_vjp);
INGOT_OP(Selu)
    .versions(1)
    .inputs(1)
    .attr("alpha", 1.67326319217681884765625f)
    .attr("gamma", 1.05070102214813232421875f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("gamma * (X where X > 0, alpha * (e^X - 1) elsewhere).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(selu_vjp);
INGOT_OP(Celu).versions(12).inputs(1).attr("alpha", 1.0f).summary("max(0, X) + min(0, alpha * (e^(X / alpha) - 1)).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(celu_vjp);
INGOT_OP(HardSigmoid)
    .versions(1)
    .inputs(1)
    .attr("alpha", 0.2f)
    .attr("beta", 0.5f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("max(0, min(1, alpha * X + beta)).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(hard_sigmoid_vjp);
INGOT_OP(ThresholdedRelu).versions(10).inputs(1).attr("alpha", 1.0f).summary("X where X > alpha, else 0.")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(thresholded_relu_vjp);
INGOT_OP(Shrink)
    .versions(9)
    .inputs(1)
    .attr("bias", 0.0f)
    .attr("lambd", 0.5f)
    .summary("X + bias where X < -lambd, X - bias where X > lambd, else 0.")
    .tag(OpTag::Elementwise)
    .vjp(shrink_vjp);
// Clip: bounds are attributes before opset 11 (defaults are ONNX's Clip-6 ones) and optional
// inputs from opset 11.
INGOT_OP(Clip)
    .versions(1)
    .inputs(1, 3)
    .attr("min", -FLT_MAX)
    .attr("max", FLT_MAX)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("Limits X to [min, max] (attributes before opset 11, optional inputs from it).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow)
    .vjp(clip_vjp)
    .batch(batching::first_input_only);  // scalar bounds: batched ones run per element

INGOT_OP(Cast)
    .versions(6)
    .inputs(1)
    .required_attr("to", AttrKind::Int)
    .dtype_attr("to")
    .attr("saturate", 1)
    .summary("Converts to the dtype `to` (numbers, bool, float16/bfloat16, and strings both ways).")
    .tag(OpTag::Elementwise)
    .vjp(cast_vjp);
INGOT_OP(CastLike).versions(15).inputs(2).attr("saturate", 1).summary("Converts input 0 to the dtype of input 1.")
    .vjp(cast_vjp)
    .batch(batching::first_input_only);

}  // namespace ingot
