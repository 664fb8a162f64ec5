// Quantization operators: linear (de)quantization with a scale and zero point, per tensor or per
// axis, and the integer / quantized-linear forms of MatMul and Conv.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(QuantizeLinear)
    .versions(10)
    .inputs(2, 3)
    .attr("axis", 1)
    .attr("saturate", 1)
    .attr("block_size", 0)
    .attr("output_dtype", 0)
    .summary("y = saturate(round_half_even(x / y_scale) + y_zero_point); per-axis when y_scale is 1-D.");

INGOT_OP(DequantizeLinear)
    .versions(10)
    .inputs(2, 3)
    .attr("axis", 1)
    .attr("block_size", 0)
    .summary("y = (x - x_zero_point) * x_scale; per-axis when x_scale is 1-D.");

INGOT_OP(DynamicQuantizeLinear)
    .versions(11)
    .inputs(1)
    .outputs(3)
    .summary("Quantizes float x to uint8 with a scale and zero point computed from min(x, 0)..max(x, 0).");

INGOT_OP(MatMulInteger)
    .versions(10)
    .inputs(2, 4)
    .summary("Integer matmul of (A - a_zero_point) and (B - b_zero_point) with int32 accumulation.");

INGOT_OP(QLinearMatMul)
    .versions(10)
    .inputs(8)
    .summary("Quantized matmul: dequantizes a and b, multiplies, requantizes to y_scale / y_zero_point.");

INGOT_OP(ConvInteger)
    .versions(10)
    .inputs(2, 4)
    .conv_attrs()
    .summary("Integer convolution of (x - x_zero_point) and (w - w_zero_point) with int32 accumulation.");

INGOT_OP(QLinearConv)
    .versions(10)
    .inputs(8, 9)
    .conv_attrs()
    .summary("Quantized convolution with an optional int32 bias, requantized to y_scale / y_zero_point.");

}  // namespace ingot
