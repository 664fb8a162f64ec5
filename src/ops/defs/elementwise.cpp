// Elementwise operators: arithmetic, comparison and logic (numpy broadcasting), variadic
// Max/Min/Sum/Mean, unary math, activations, and Cast/CastLike. All but CastLike (whose second input
// gives only a dtype) carry OpTag::Elementwise.
#include <cfloat>

#include "ops/op_def.h"

namespace ingot {

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

INGOT_LEGACY_BINARY_OP(Add, "A + B with numpy broadcasting.").tag(OpTag::AutocastFollow);
INGOT_LEGACY_BINARY_OP(Sub, "A - B with numpy broadcasting.").tag(OpTag::AutocastFollow);
INGOT_LEGACY_BINARY_OP(Mul, "A * B with numpy broadcasting.").tag(OpTag::AutocastFollow);
INGOT_LEGACY_BINARY_OP(Div, "A / B with numpy broadcasting; integer division truncates toward zero.").tag(OpTag::AutocastFollow);
INGOT_LEGACY_BINARY_OP(Pow, "A raised to B; B may have a different numeric dtype than A (opset 12+).");
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
    .tag(OpTag::Elementwise);
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
    .tag(OpTag::AutocastFollow);
INGOT_OP(Where).versions(9).inputs(3).summary("X where condition is true, else Y (three-way broadcasting).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);

// Variadic folds over 1..N broadcast inputs.
#define INGOT_VARIADIC_OP(name, text)                                                                        \
  INGOT_OP(name).versions(1).inputs(1, -1).optional_attr("consumed_inputs", AttrKind::Ints).tag(OpTag::Elementwise) \
      .summary(text)
INGOT_VARIADIC_OP(Max, "Elementwise maximum of the inputs; NaN propagates.").tag(OpTag::AutocastFollow);
INGOT_VARIADIC_OP(Min, "Elementwise minimum of the inputs; NaN propagates.").tag(OpTag::AutocastFollow);
INGOT_VARIADIC_OP(Sum, "Elementwise sum of the inputs.").tag(OpTag::AutocastFollow);
INGOT_VARIADIC_OP(Mean, "Elementwise mean of the inputs.").tag(OpTag::AutocastFollow);
#undef INGOT_VARIADIC_OP

// Unary ops that exist since opset 1 carried `consumed_inputs` there.
#define INGOT_UNARY_OP_V1(name, text)                                                                          \
  INGOT_OP(name).versions(1).inputs(1).optional_attr("consumed_inputs", AttrKind::Ints).tag(OpTag::Elementwise) \
      .summary(text)
INGOT_UNARY_OP_V1(Abs, "|X|.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Neg, "-X.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Reciprocal, "1 / X.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Sqrt, "Square root.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Exp, "e^X.");
INGOT_UNARY_OP_V1(Log, "Natural logarithm.");
INGOT_UNARY_OP_V1(Ceil, "Smallest integer >= X.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Floor, "Largest integer <= X.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Relu, "max(X, 0).").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Sigmoid, "1 / (1 + e^-X).").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP_V1(Tanh, "Hyperbolic tangent.").tag(OpTag::AutocastFollow);
#undef INGOT_UNARY_OP_V1

#define INGOT_UNARY_OP(name, since, text) \
  INGOT_OP(name).versions(since).inputs(1).tag(OpTag::Elementwise).summary(text)
INGOT_UNARY_OP(Round, 11, "Round to nearest integer, halves to even.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(Sign, 9, "-1, 0 or 1 by the sign of X (NaN stays NaN).").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(Erf, 9, "Gauss error function.").tag(OpTag::Float32Inside);
INGOT_UNARY_OP(Sin, 7, "Sine.");
INGOT_UNARY_OP(Cos, 7, "Cosine.");
INGOT_UNARY_OP(Tan, 7, "Tangent.");
INGOT_UNARY_OP(Asin, 7, "Arcsine.");
INGOT_UNARY_OP(Acos, 7, "Arccosine.");
INGOT_UNARY_OP(Atan, 7, "Arctangent.");
INGOT_UNARY_OP(Sinh, 9, "Hyperbolic sine.");
INGOT_UNARY_OP(Cosh, 9, "Hyperbolic cosine.");
INGOT_UNARY_OP(Asinh, 9, "Inverse hyperbolic sine.");
INGOT_UNARY_OP(Acosh, 9, "Inverse hyperbolic cosine.");
INGOT_UNARY_OP(Atanh, 9, "Inverse hyperbolic tangent.");
INGOT_UNARY_OP(IsNaN, 9, "True where X is NaN.").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(HardSwish, 14, "X * max(0, min(1, X / 6 + 1/2)).").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(Softplus, 1, "log(1 + e^X).").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(Softsign, 1, "X / (1 + |X|).").tag(OpTag::AutocastFollow);
INGOT_UNARY_OP(Mish, 18, "X * tanh(softplus(X)).").tag(OpTag::AutocastFollow);
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
    .tag(OpTag::AutocastFollow);
INGOT_OP(Elu)
    .versions(1)
    .inputs(1)
    .attr("alpha", 1.0f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("X where X >= 0, alpha * (e^X - 1) elsewhere.")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(Selu)
    .versions(1)
    .inputs(1)
    .attr("alpha", 1.67326319217681884765625f)
    .attr("gamma", 1.05070102214813232421875f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("gamma * (X where X > 0, alpha * (e^X - 1) elsewhere).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(Celu).versions(12).inputs(1).attr("alpha", 1.0f).summary("max(0, X) + min(0, alpha * (e^(X / alpha) - 1)).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(HardSigmoid)
    .versions(1)
    .inputs(1)
    .attr("alpha", 0.2f)
    .attr("beta", 0.5f)
    .optional_attr("consumed_inputs", AttrKind::Ints)
    .summary("max(0, min(1, alpha * X + beta)).")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(ThresholdedRelu).versions(10).inputs(1).attr("alpha", 1.0f).summary("X where X > alpha, else 0.")
    .tag(OpTag::Elementwise)
    .tag(OpTag::AutocastFollow);
INGOT_OP(Shrink)
    .versions(9)
    .inputs(1)
    .attr("bias", 0.0f)
    .attr("lambd", 0.5f)
    .summary("X + bias where X < -lambd, X - bias where X > lambd, else 0.")
    .tag(OpTag::Elementwise);
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
    .tag(OpTag::AutocastFollow);

INGOT_OP(Cast)
    .versions(6)
    .inputs(1)
    .required_attr("to", AttrKind::Int)
    .dtype_attr("to")
    .attr("saturate", 1)
    .summary("Converts to the dtype `to` (numbers, bool, float16/bfloat16, and strings both ways).")
    .tag(OpTag::Elementwise);
INGOT_OP(CastLike).versions(15).inputs(2).attr("saturate", 1).summary("Converts input 0 to the dtype of input 1.");

}  // namespace ingot
