// Reductions (ReduceX, ArgMax/ArgMin), losses, Einsum and Det.
#include "ops/op_def.h"

namespace ingot {

// ReduceX: `axes` is an attribute before opset 13 (ReduceSum) / 18 (the others) and an optional
// second input from then on; noop_with_empty_axes arrived together with the axes input.
#define INGOT_REDUCE_OP(name, axes_input_since, text)                                              \
  INGOT_OP(name)                                                                                   \
      .versions(1)                                                                                 \
      .inputs(1, 2)                                                                                \
      .optional_attr("axes", AttrKind::Ints)                                                       \
      .attr("keepdims", 1)                                                                         \
      .attr("noop_with_empty_axes", 0)                                                             \
      .summary(text " over `axes` (all axes when empty; attribute before opset " #axes_input_since \
                    ", input from it).")

INGOT_REDUCE_OP(ReduceSum, 13, "Sum");
INGOT_REDUCE_OP(ReduceMean, 18, "Arithmetic mean");
INGOT_REDUCE_OP(ReduceMax, 18, "Maximum (NaN propagates)");
INGOT_REDUCE_OP(ReduceMin, 18, "Minimum (NaN propagates)");
INGOT_REDUCE_OP(ReduceProd, 18, "Product");
INGOT_REDUCE_OP(ReduceL1, 18, "Sum of absolute values");
INGOT_REDUCE_OP(ReduceL2, 18, "Euclidean norm");
INGOT_REDUCE_OP(ReduceLogSum, 18, "Log of the sum");
INGOT_REDUCE_OP(ReduceLogSumExp, 18, "Log of the sum of exponentials");
INGOT_REDUCE_OP(ReduceSumSquare, 18, "Sum of squares");
#undef INGOT_REDUCE_OP

INGOT_OP(ArgMax)
    .versions(1)
    .inputs(1)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .attr("select_last_index", 0)
    .summary("Index (int64) of the largest element along `axis`; the first NaN counts as largest.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(ArgMin)
    .versions(1)
    .inputs(1)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .attr("select_last_index", 0)
    .summary("Index (int64) of the smallest element along `axis`; the first NaN counts as smallest.")
    .tag(OpTag::AutocastFollow);

INGOT_OP(NegativeLogLikelihoodLoss)
    .versions(12)
    .inputs(2, 3)
    .optional_attr("ignore_index", AttrKind::Int)
    .attr("reduction", "mean")
    .summary("-input[n, target[n, d...], d...] * weight[target], reduced by none/sum/mean (weighted).");
INGOT_OP(SoftmaxCrossEntropyLoss)
    .versions(12)
    .inputs(2, 3)
    .outputs(1, 2)
    .optional_attr("ignore_index", AttrKind::Int)
    .attr("reduction", "mean")
    .summary("NegativeLogLikelihoodLoss of LogSoftmax(scores, axis 1); optional second output log_prob.");

INGOT_OP(Einsum)
    .versions(12)
    .inputs(1, -1)
    .required_attr("equation", AttrKind::String)
    .summary("Einstein summation (explicit/implicit output, diagonals, broadcasting '...').");

INGOT_OP(Det).versions(11).inputs(1).summary("Determinant of square matrices [..., M, M] -> [...].");

}  // namespace ingot
