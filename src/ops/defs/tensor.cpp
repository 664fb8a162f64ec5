// Tensor, shape and data-movement ops: reshaping views, layout changes (Transpose, Concat, Slice,
// Pad...), indexing (Gather/Scatter families), constants and generators, and a few ops that sort
// or scan along an axis (TopK, Unique, CumSum).
#include "ops/op_def.h"

namespace ingot {
namespace {

// The dtype of the tensor a constant attribute gives.
DType constant_dtype(const Attributes& attrs, size_t) {
  for (const char* name : {"value", "sparse_value"}) {
    if (auto it = attrs.find(name); it != attrs.end() && it->second.kind == AttrKind::Tensor) return it->second.t.dtype();
  }
  if (attrs.count("value_float") || attrs.count("value_floats")) return DType::Float32;
  if (attrs.count("value_int") || attrs.count("value_ints")) return DType::Int64;
  if (attrs.count("value_string") || attrs.count("value_strings")) return DType::String;
  return DType::Undefined;
}
DType constant_of_shape_dtype(const Attributes& attrs, size_t) {
  auto it = attrs.find("value");
  return it != attrs.end() && it->second.kind == AttrKind::Tensor ? it->second.t.dtype() : DType::Float32;
}

}  // namespace

// ---- Views: these return the input's storage under a new shape.
INGOT_OP(Reshape)
    .versions(1)
    .inputs(1, 2)
    .optional_attr("shape", AttrKind::Ints)
    .attr("allowzero", 0)
    .summary(
        "New shape from the `shape` input (attribute before opset 5); 0 copies the input dim unless "
        "allowzero, -1 is inferred. Zero-copy.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Flatten).versions(1).inputs(1).attr("axis", 1).summary(
    "2-D view [prod(dims[:axis]), prod(dims[axis:])]. Zero-copy.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Squeeze)
    .versions(1)
    .inputs(1, 2)
    .optional_attr("axes", AttrKind::Ints)
    .summary("Removes size-1 axes (`axes` attribute before opset 13, input from it; all when absent). Zero-copy.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Unsqueeze)
    .versions(1)
    .inputs(1, 2)
    .optional_attr("axes", AttrKind::Ints)
    .summary(
        "Inserts size-1 axes at output positions `axes` (attribute before opset 13, input from it). "
        "Zero-copy.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Identity).versions(1).inputs(1).summary("Passes its input (tensor, sequence or optional) through.")
    .tag(OpTag::AutocastFollow);

// ---- Layout.
INGOT_OP(Transpose)
    .versions(1)
    .inputs(1)
    .optional_attr("perm", AttrKind::Ints)
    .summary("Permutes axes (reverses them when `perm` is absent).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Concat).versions(4).inputs(1, -1).required_attr("axis", AttrKind::Int).summary("Joins inputs along `axis`.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Split)
    .versions(2)
    .inputs(1, 2)
    .outputs(1, -1)
    .attr("axis", 0)
    .optional_attr("split", AttrKind::Ints)
    .optional_attr("num_outputs", AttrKind::Int)
    .summary(
        "Splits along `axis` by `split` sizes (attribute before opset 13, input from it), else into "
        "equal parts (num_outputs from opset 18: the last part may be smaller).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Slice)
    .versions(1)
    .inputs(1, 5)
    .optional_attr("starts", AttrKind::Ints)
    .optional_attr("ends", AttrKind::Ints)
    .optional_attr("axes", AttrKind::Ints)
    .summary(
        "Strided slice (attributes before opset 10; inputs starts, ends, axes, steps from it). Bounds "
        "are clamped; negative steps walk backwards.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Expand).versions(8).inputs(2).summary("Broadcasts the input to the `shape` input (numpy rules).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Tile).versions(6).inputs(2).summary("Repeats the input `repeats[i]` times along each axis i.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Pad)
    .versions(2)
    .inputs(1, 4)
    .attr("mode", "constant")
    .optional_attr("pads", AttrKind::Ints)
    .attr("value", 0.0f)
    .summary(
        "Pads with mode constant/reflect/edge/wrap; pads/value are attributes before opset 11, inputs "
        "(pads, constant_value, axes from 18) from it. Negative pads crop.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(DepthToSpace)
    .versions(1)
    .inputs(1)
    .required_attr("blocksize", AttrKind::Int)
    .attr("mode", "DCR")
    .summary("Moves channel blocks into spatial blocks (NCHW); mode DCR or CRD.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(SpaceToDepth)
    .versions(1)
    .inputs(1)
    .required_attr("blocksize", AttrKind::Int)
    .summary("Moves spatial blocks into channels (NCHW); inverse of DepthToSpace DCR.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Trilu)
    .versions(14)
    .inputs(1, 2)
    .attr("upper", 1)
    .summary("Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes; zeros the rest.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(ReverseSequence)
    .versions(10)
    .inputs(2)
    .attr("batch_axis", 1)
    .attr("time_axis", 0)
    .summary("Reverses the first sequence_lens[b] steps along time_axis for each batch entry b.");

// ---- Indexing.
INGOT_OP(Gather).versions(1).inputs(2).attr("axis", 0).summary(
    "Takes entries along `axis` at `indices` (int32/int64, negative counts from the end).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(GatherElements)
    .versions(11)
    .inputs(2)
    .attr("axis", 0)
    .summary("out[i][j][k] = data[indices[i][j][k]][j][k] (for axis 0); output has the indices' shape.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(GatherND)
    .versions(11)
    .inputs(2)
    .attr("batch_dims", 0)
    .summary("Gathers slices addressed by the last axis of `indices` (after `batch_dims` shared leading axes).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(ScatterND)
    .versions(11)
    .inputs(3)
    .attr("reduction", "none")
    .summary("Copy of data with slices at `indices` replaced (or combined: add/mul/max/min) by updates.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(ScatterElements)
    .versions(11)
    .inputs(3)
    .attr("axis", 0)
    .attr("reduction", "none")
    .summary("Copy of data with data[indices[i][j]][j] = updates[i][j] (axis 0), or combined by reduction.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Scatter).versions(9, 10).inputs(3).attr("axis", 0).summary(
    "Deprecated alias of ScatterElements without reduction.");
INGOT_OP(OneHot)
    .versions(9)
    .inputs(3)
    .attr("axis", -1)
    .summary(
        "values[1] where the inserted `axis` position equals the index (negative indices count from depth), "
        "else values[0].");
INGOT_OP(NonZero).versions(9).inputs(1).summary("int64 [rank, count] coordinates of the non-zero elements.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Compress)
    .versions(9)
    .inputs(2)
    .optional_attr("axis", AttrKind::Int)
    .summary("Keeps the slices along `axis` (of the flattened input when absent) where condition is true.");

// ---- Shapes, constants and generators.
INGOT_OP(Shape)
    .versions(1)
    .inputs(1)
    .attr("start", 0)
    .optional_attr("end", AttrKind::Int)
    .summary("int64 dims of the input, dims[start:end] (clamped) from opset 15.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Size).versions(1).inputs(1).summary("int64 scalar: element count of the input.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(ConstantOfShape)
    .versions(9)
    .inputs(1)
    .optional_attr("value", AttrKind::Tensor)
    .dtype_rule(constant_of_shape_dtype)
    .summary("Tensor of shape `input` filled with the one-element `value` (float32 0 when absent).");
INGOT_OP(Constant)
    .versions(1)
    .inputs(0, 0)
    .optional_attr("value", AttrKind::Tensor)
    .optional_attr("sparse_value", AttrKind::Tensor)
    .optional_attr("value_float", AttrKind::Float)
    .optional_attr("value_floats", AttrKind::Floats)
    .optional_attr("value_int", AttrKind::Int)
    .optional_attr("value_ints", AttrKind::Ints)
    .optional_attr("value_string", AttrKind::String)
    .optional_attr("value_strings", AttrKind::Strings)
    .dtype_rule(constant_dtype)
    .summary("The tensor given by exactly one of its attributes.");
INGOT_OP(Range).versions(11).inputs(3).summary("start, start + delta, ... while before `limit`.");
INGOT_OP(EyeLike)
    .versions(9)
    .inputs(1)
    .optional_attr("dtype", AttrKind::Int)
    .dtype_attr("dtype")
    .attr("k", 0)
    .summary("2-D tensor of the input's shape with ones on diagonal k (dtype attribute or the input's).");
INGOT_OP(Dropout)
    .versions(1)
    .inputs(1, 3)
    .outputs(1, 2)
    .attr("ratio", 0.5f)
    .attr("is_test", 0)
    .optional_attr("seed", AttrKind::Int)
    .summary(
        "Identity at inference; with training_mode (opset 12+) zeros elements with probability ratio "
        "and scales the rest by 1/(1-ratio), drawing like numpy's seeded RandomState. Optional mask output.")
    .tag(OpTag::AutocastFollow);

// ---- Sorting and scans along an axis.
INGOT_OP(TopK)
    .versions(1)
    .inputs(1, 2)
    .outputs(2)
    .optional_attr("k", AttrKind::Int)
    .attr("axis", -1)
    .attr("largest", 1)
    .attr("sorted", 1)
    .summary(
        "The k largest (or smallest) values along `axis` and their int64 indices; ties keep the lower "
        "index first. k is an attribute before opset 10, an input from it.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Unique)
    .versions(11)
    .inputs(1)
    .outputs(1, 4)
    .optional_attr("axis", AttrKind::Int)
    .attr("sorted", 1)
    .summary(
        "Unique elements (or slices along `axis`), with first-occurrence indices, inverse indices and "
        "counts.");
INGOT_OP(CumSum)
    .versions(11)
    .inputs(2)
    .attr("exclusive", 0)
    .attr("reverse", 0)
    .summary("Cumulative sum along the `axis` input; exclusive and/or reverse.");

}  // namespace ingot
