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

// Written by fuse_qdq (src/passes/fuse_qdq.cpp) from DequantizeLinear -> Conv [-> Add(residual)]
// [-> activation] [-> QuantizeLinear] and from ONNX's QLinearConv; the math and its arguments are
// ops/semantics/quantized_args.h's. Inputs 0-8 are QLinearConv's (X, X_scale, X_zero_point, W,
// W_scale, W_zero_point, Y_scale, Y_zero_point, int32 B), then an optional residual R with its
// scale and zero point (R float32 when those are absent). Y is 8-bit (`output_dtype` uint8 or int8,
// with Y_scale and Y_zero_point) or float32 (`output_dtype` float32: a dequantized result). Layout
// "NHWC" (the channels-last pass, CPU targets) puts channels last in X, R and Y, W as [M, k..., C/g].
// `epilogue` (both ops; fuse-quantized-epilogue writes it): a FusedElementwise program over x0, the
// real value after the residual and activation, applied before the output quantization: a chain
// of unary ops and constant steps (ops/semantics/quantized_args.h).
INGOT_OP(QuantizedConv)
    .domain(kIngotDomain)
    .versions(1)
    .input("X", "T1")
    .input("X_scale", "TF")
    .input("X_zero_point", "T1")
    .input("W", "T2")
    .input("W_scale", "TF")
    .input("W_zero_point", "T2")
    .optional_input("Y_scale", "TF")
    .optional_input("Y_zero_point", "T3")
    .optional_input("B", "TB")
    .optional_input("R", "TR")
    .optional_input("R_scale", "TF")
    .optional_input("R_zero_point", "TR")
    .output("Y", "T3")
    .type("T1", {DType::UInt8, DType::Int8})
    .type("T2", {DType::UInt8, DType::Int8})
    .type("T3", {DType::UInt8, DType::Int8, DType::Float32})
    .type("TR", {DType::UInt8, DType::Int8, DType::Float32})
    .type("TF", {DType::Float32})
    .type("TB", {DType::Int32})
    .attr("activation", "")
    .attr("epilogue", "")
    .attr("output_dtype", int64_t(DType::UInt8))
    .attr("layout", "NCHW")
    .dtype_attr("output_dtype")
    .conv_attrs()
    .summary("Integer convolution with dequantize -> Conv [+ residual] [-> activation] [-> quantize] in one kernel "
             "(activation '', 'Relu', 'HardSwish' or 'Sigmoid'; per-channel W_scale).")
    .no_gradient("an inference op over integer tensors");

// Written by fuse_qdq from DequantizeLinear -> MatMul/Gemm with a constant weight [-> Add(bias)]
// [-> Relu] [-> QuantizeLinear], and from ONNX's QLinearMatMul with a constant 2-D B. Inputs 0-7 are
// QLinearMatMul's (A [..., K], A_scale, A_zero_point, B [K, N], B_scale ([1] or [N]), B_zero_point,
// Y_scale, Y_zero_point), then an int32 bias of N elements in A_scale * B_scale units, or (input 9)
// a float32 one added to the real result (dynamic quantization: A_scale and A_zero_point come from a
// DynamicQuantizeLinear per call, so no int32 bias can be fixed ahead).
INGOT_OP(QuantizedMatMul)
    .domain(kIngotDomain)
    .versions(1)
    .input("A", "T1")
    .input("A_scale", "TF")
    .input("A_zero_point", "T1")
    .input("B", "T2")
    .input("B_scale", "TF")
    .input("B_zero_point", "T2")
    .optional_input("Y_scale", "TF")
    .optional_input("Y_zero_point", "T3")
    .optional_input("bias", "TB")
    .optional_input("float_bias", "TF")
    .output("Y", "T3")
    .type("T1", {DType::UInt8, DType::Int8})
    .type("T2", {DType::UInt8, DType::Int8})
    .type("T3", {DType::UInt8, DType::Int8, DType::Float32})
    .type("TF", {DType::Float32})
    .type("TB", {DType::Int32})
    .attr("activation", "")
    .attr("epilogue", "")
    .attr("output_dtype", int64_t(DType::UInt8))
    .dtype_attr("output_dtype")
    .summary("Integer matrix product with dequantize -> MatMul [+ bias] [-> activation] [-> quantize] in one kernel "
             "(per-column B_scale).")
    .no_gradient("an inference op over integer tensors");

// Written by fuse-qdq-pointwise (src/passes/fuse_qdq.cpp) after the layout step from
// DequantizeLinear -> ReduceMean | GlobalAveragePool -> QuantizeLinear with per-tensor parameters
// (the squeeze-excitation and classifier-head means of int8 CNNs). The math is
// ops/semantics/quantized_args.h's: the int32 sum of X - X_zero_point, requantized once.
INGOT_OP(QuantizedReduceMean)
    .domain(kIngotDomain)
    .versions(1)
    .input("X", "T")
    .input("X_scale", "TF")
    .input("X_zero_point", "T")
    .input("Y_scale", "TF")
    .input("Y_zero_point", "T")
    .output("Y", "T")
    .type("T", {DType::UInt8, DType::Int8})
    .type("TF", {DType::Float32})
    .optional_attr("axes", AttrKind::Ints)
    .attr("keepdims", 1)
    .summary("Integer mean over `axes` (all when absent): dequantize -> ReduceMean -> quantize in one kernel.")
    .no_gradient("an inference op over integer tensors");

// Written by fuse-qdq-pointwise from DequantizeLinear, DequantizeLinear -> Mul -> QuantizeLinear
// (the squeeze-excitation gate's product); inputs as ONNX Runtime's com.microsoft QLinearMul.
INGOT_OP(QuantizedMul)
    .domain(kIngotDomain)
    .versions(1)
    .input("A", "T")
    .input("A_scale", "TF")
    .input("A_zero_point", "T")
    .input("B", "T")
    .input("B_scale", "TF")
    .input("B_zero_point", "T")
    .input("C_scale", "TF")
    .input("C_zero_point", "T")
    .output("C", "T")
    .type("T", {DType::UInt8, DType::Int8})
    .type("TF", {DType::Float32})
    .summary("Integer product with numpy broadcasting: dequantize -> Mul -> quantize in one kernel.")
    .no_gradient("an inference op over integer tensors");

}  // namespace ingot
