// Neural-network operators: convolution, pooling, matrix products, normalization, softmax and
// resizing. Spatial attributes (kernel_shape, strides, pads, dilations) that ONNX leaves without a
// default are optional here; kernels derive them from the weight/input shape when absent.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(Conv).versions(1).inputs(2, 3).conv_attrs().summary(
    "N-D convolution of X [N,C,D...] with W [M,C/group,k...] plus optional bias B [M].")
    .tag(OpTag::AutocastLowPrecision);

INGOT_OP(ConvTranspose)
    .versions(1)
    .inputs(2, 3)
    .conv_attrs()
    .optional_attr("output_padding", AttrKind::Ints)
    .optional_attr("output_shape", AttrKind::Ints)
    .summary("Transposed convolution of X [N,C,D...] with W [C,M/group,k...] plus optional bias B [M].")
    .tag(OpTag::AutocastLowPrecision);

INGOT_OP(MaxPool)
    .versions(1)
    .inputs(1)
    .outputs(1, 2)
    .attr("auto_pad", "NOTSET")
    .attr("ceil_mode", 0)
    .optional_attr("dilations", AttrKind::Ints)
    .required_attr("kernel_shape", AttrKind::Ints)
    .optional_attr("pads", AttrKind::Ints)
    .attr("storage_order", 0)
    .optional_attr("strides", AttrKind::Ints)
    .summary("Max over sliding windows; optional Indices output (flat offsets into X).")
    .tag(OpTag::AutocastFollow);

INGOT_OP(AveragePool)
    .versions(1)
    .inputs(1)
    .attr("auto_pad", "NOTSET")
    .attr("ceil_mode", 0)
    .attr("count_include_pad", 0)
    .optional_attr("dilations", AttrKind::Ints)
    .required_attr("kernel_shape", AttrKind::Ints)
    .optional_attr("pads", AttrKind::Ints)
    .optional_attr("strides", AttrKind::Ints)
    .summary("Mean over sliding windows (padding counted only with count_include_pad).")
    .tag(OpTag::AutocastFollow);

INGOT_OP(LpPool)
    .versions(2)
    .inputs(1)
    .attr("auto_pad", "NOTSET")
    .attr("ceil_mode", 0)
    .optional_attr("dilations", AttrKind::Ints)
    .required_attr("kernel_shape", AttrKind::Ints)
    .attr("p", 2)
    .optional_attr("pads", AttrKind::Ints)
    .optional_attr("strides", AttrKind::Ints)
    .summary("p-norm over sliding windows.");

INGOT_OP(GlobalAveragePool).versions(1).inputs(1).summary("Mean over all spatial axes (kept as size 1).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(GlobalMaxPool).versions(1).inputs(1).summary("Max over all spatial axes (kept as size 1).")
    .tag(OpTag::AutocastFollow);
INGOT_OP(GlobalLpPool).versions(2).inputs(1).attr("p", 2).summary("p-norm over all spatial axes.");

INGOT_OP(MaxUnpool)
    .versions(9)
    .inputs(2, 3)
    .required_attr("kernel_shape", AttrKind::Ints)
    .optional_attr("pads", AttrKind::Ints)
    .optional_attr("strides", AttrKind::Ints)
    .summary("Scatters X to the positions in I (MaxPool's Indices) in a zero tensor.");

INGOT_OP(MatMul).versions(1).inputs(2).summary("Matrix product with numpy batch broadcasting and 1-D operands.")
    .tag(OpTag::AutocastLowPrecision);

INGOT_OP(Gemm)
    .versions(1)
    .inputs(2, 3)
    .attr("alpha", 1.0f)
    .attr("beta", 1.0f)
    .attr("broadcast", 0)
    .attr("transA", 0)
    .attr("transB", 0)
    .summary("alpha * A' * B' + beta * C (C unidirectionally broadcast to [M,N]).")
    .tag(OpTag::AutocastLowPrecision);

INGOT_OP(BatchNormalization)
    .versions(6)
    .inputs(5)
    .outputs(1, 5)
    .attr("epsilon", 1e-5f)
    .attr("is_test", 0)
    .attr("momentum", 0.9f)
    .attr("spatial", 1)
    .attr("training_mode", 0)
    .summary("Per-channel normalization; training_mode (opset 14+) also outputs running mean/var.");

INGOT_OP(InstanceNormalization)
    .versions(6)
    .inputs(3)
    .attr("epsilon", 1e-5f)
    .summary("Normalizes each (n, c) plane, then per-channel scale and bias.");

INGOT_OP(LayerNormalization)
    .versions(17)
    .inputs(2, 3)
    .outputs(1, 3)
    .attr("axis", -1)
    .attr("epsilon", 1e-5f)
    .attr("stash_type", 1)
    .summary("Normalizes over axes [axis, rank); optional Mean and InvStdDev outputs.")
    .tag(OpTag::Float32Inside);

INGOT_OP(GroupNormalization)
    .versions(18)
    .inputs(3)
    .attr("epsilon", 1e-5f)
    .required_attr("num_groups", AttrKind::Int)
    .attr("stash_type", 1)
    .summary("Normalizes channel groups; scale/bias per group (opset 18) or per channel (opset 21).");

INGOT_OP(LRN)
    .versions(1)
    .inputs(1)
    .attr("alpha", 1e-4f)
    .attr("beta", 0.75f)
    .attr("bias", 1.0f)
    .required_attr("size", AttrKind::Int)
    .summary("Local response normalization across channels.");

INGOT_OP(MeanVarianceNormalization)
    .versions(9)
    .inputs(1)
    .attr("axes", Ints{0, 2, 3})
    .summary("(X - mean) / (std + 1e-9) over `axes`.");

// The default axis changed with opset 13 (1 -> -1), so it is computed by the kernel.
#define INGOT_SOFTMAX_OP(name, text)                                                                      \
  INGOT_OP(name)                                                                                          \
      .versions(1)                                                                                        \
      .inputs(1)                                                                                          \
      .optional_attr("axis", AttrKind::Int)                                                               \
      .summary(text                                                                                       \
               " Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 on it works " \
               "along the single axis `axis` (default -1).")
INGOT_SOFTMAX_OP(Softmax, "exp(x) / sum(exp(x)).").tag(OpTag::Float32Inside);
INGOT_SOFTMAX_OP(LogSoftmax, "log(softmax(x)).").tag(OpTag::Float32Inside);
INGOT_SOFTMAX_OP(Hardmax, "One-hot of the first maximum.");
#undef INGOT_SOFTMAX_OP

INGOT_OP(Resize)
    .versions(10)
    .inputs(1, 4)
    .attr("antialias", 0)
    .optional_attr("axes", AttrKind::Ints)
    .attr("coordinate_transformation_mode", "half_pixel")
    .attr("cubic_coeff_a", -0.75f)
    .attr("exclude_outside", 0)
    .attr("extrapolation_value", 0.0f)
    .attr("keep_aspect_ratio_policy", "stretch")
    .attr("mode", "nearest")
    .attr("nearest_mode", "round_prefer_floor")
    .summary("Nearest/linear/cubic resampling; inputs (X, scales) at opset 10, (X, roi, scales, sizes) from 11.")
    .tag(OpTag::AutocastFollow);

INGOT_OP(Upsample)
    .versions(7, 9)
    .inputs(1, 2)
    .attr("mode", "nearest")
    .optional_attr("scales", AttrKind::Floats)
    .summary("Resize with asymmetric coordinates; scales are an attribute at opset 7, an input at 9.")
    .tag(OpTag::AutocastFollow);

}  // namespace ingot
