// Int8 depthwise 3x3 convolutions (stride 1, channels last) on AVX-512 VNNI + VBMI (qdepthwise.cpp).
#pragma once
#include "ops/semantics/quantized_args.h"

namespace ingot::cpu {

// Computes QuantizedConv into `y` (allocated) when the layer is one this kernel takes: channels last,
// depthwise 3x3, stride 1, padding 1, at most 56 channels, int8 weights at zero point 0, an 8-bit
// output without residual, at most a Relu; and the CPU has AVX-512 VNNI and VBMI. False otherwise.
bool int8_depthwise_3x3(const sem::QConvGeometry& g, const sem::QuantizedProductArgs& a, Tensor& y);

}  // namespace ingot::cpu
