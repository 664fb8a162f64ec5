// Sequence ops (ordered lists of tensors) and optional ops (a value that may be absent). At run
// time both are ingot::Value: a sequence Value, or Kind::None for an empty optional.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(SequenceEmpty)
    .versions(11)
    .inputs(0)
    .optional_attr("dtype", AttrKind::Int)
    .summary("An empty sequence (of `dtype` elements, float32 by default).");
INGOT_OP(SequenceConstruct)
    .versions(11)
    .inputs(1, -1)
    .summary("A sequence of the input tensors, which must share a dtype.");
INGOT_OP(SequenceInsert)
    .versions(11)
    .inputs(2, 3)
    .summary("Inserts `tensor` into the sequence before `position` (default: at the end).");
INGOT_OP(SequenceAt).versions(11).inputs(2).summary("The element at `position` (negative counts from the end).");
INGOT_OP(SequenceErase)
    .versions(11)
    .inputs(1, 2)
    .summary("The sequence without the element at `position` (default: the last).");
INGOT_OP(SequenceLength).versions(11).inputs(1).summary("The number of elements (int64 scalar).");
INGOT_OP(ConcatFromSequence)
    .versions(11)
    .inputs(1)
    .required_attr("axis", AttrKind::Int)
    .attr("new_axis", 0)
    .summary("Concatenates the elements along `axis`, or stacks them along a new `axis` when new_axis is 1.");
INGOT_OP(SplitToSequence)
    .versions(11)
    .inputs(1, 2)
    .attr("axis", 0)
    .attr("keepdims", 1)
    .summary(
        "Splits a tensor along `axis` into a sequence: by the sizes in `split` (scalar: equal chunks, "
        "the last may be smaller), else into size-1 pieces (squeezed unless keepdims).");
INGOT_OP(SequenceMap)
    .versions(17)
    .inputs(1, -1)
    .outputs(1, -1)
    .required_attr("body", AttrKind::Graph)
    .summary(
        "Runs `body` once per element of the input sequence (sequence inputs give their i-th element, "
        "tensor inputs are passed whole); each output collects into a sequence.");

// `type` is a TypeProto naming the type of an empty optional; Ingot's runtime values do not need
// it, so the importer may keep or drop it.
INGOT_OP(Optional)
    .versions(15)
    .inputs(0, 1)
    .optional_attr("type", AttrKind::String)
    .summary("An optional holding the input, or an empty optional when the input is omitted.");
INGOT_OP(OptionalHasElement)
    .versions(15)
    .inputs(0, 1)
    .summary("True (bool scalar) when the input optional holds a value.");
INGOT_OP(OptionalGetElement)
    .versions(15)
    .inputs(1)
    .summary("The value inside a non-empty optional (a tensor or sequence passes through).");

}  // namespace ingot
