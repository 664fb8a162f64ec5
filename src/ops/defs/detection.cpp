// Detection and sampling operators: non-maximum suppression, RoiAlign and GridSample.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(NonMaxSuppression)
    .versions(10)
    .inputs(2, 5)
    .attr("center_point_box", 0)
    .summary("Per batch and class, greedily selects boxes by score, dropping those overlapping a kept box.");

// Opset 10 always used output_half_pixel; opset 16 added the attribute with half_pixel as default.
INGOT_OP(RoiAlign)
    .versions(10)
    .inputs(3)
    .attr("coordinate_transformation_mode", "half_pixel")
    .attr("mode", "avg")
    .attr("output_height", 1)
    .attr("output_width", 1)
    .attr("sampling_ratio", 0)
    .attr("spatial_scale", 1.0f)
    .summary("Pools each region of interest of X [N,C,H,W] to [output_height, output_width] by bilinear sampling.");

// Opset 20 renamed bilinear/bicubic to linear/cubic; both spellings are accepted (2-D only).
INGOT_OP(GridSample)
    .versions(16)
    .inputs(2)
    .attr("align_corners", 0)
    .attr("mode", "bilinear")
    .attr("padding_mode", "zeros")
    .summary("Samples X [N,C,H,W] at the normalized locations of grid [N,Ho,Wo,2].");

}  // namespace ingot
