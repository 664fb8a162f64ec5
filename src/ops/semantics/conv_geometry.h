// Backend-neutral geometry of Conv, ConvTranspose and FusedConv: input/weight/bias validation (with
// the kernels' error messages), group checks, pads and output sizes (auto_pad, output_shape and
// output_padding for the transposed case). Used by the CPU and CUDA kernels.
//
// FusedConv's `layout` "NHWC" (written by the channels-last pass for 16-bit GPU convolutions):
// X is [N, spatial..., C], W is [M, kernel..., C/group] and Y (and R) [N, spatial..., M]; the
// geometry itself (channels, windows) is the same as for the channels-first tensors.
#pragma once
#include <ingot/tensor.h>

#include "ops/kernel.h"
#include "ops/semantics/window.h"

namespace ingot::sem {

// Geometry of one (transposed) convolution after validation.
struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  Window win;  // spatial sizes, strides, pads; win.out is the output's spatial size
  bool transposed = false;
  bool channels_last = false;  // FusedConv layout "NHWC"
};

// [N, C, spatial...] <-> [N, spatial..., C] (also W: [M, C/g, k...] <-> [M, k..., C/g]).
Shape channels_first(const Shape& channels_last_shape);
Shape channels_last(const Shape& channels_first_shape);
// The permutations of Transpose that do the same to a tensor of rank `rank`.
Ints to_channels_last_perm(size_t rank);
Ints to_channels_first_perm(size_t rank);

// Validates inputs 0-2 (X, W, optional B) and attributes of Conv/FusedConv.
ConvGeometry conv_geometry(const KernelContext& ctx);
// Validates inputs 0-2 (X, W, optional B) and attributes of ConvTranspose.
ConvGeometry conv_transpose_geometry(const KernelContext& ctx);
// Validates ai.ingot.ConvWeightGrad's inputs (X [N, C, D...], dY [N, M, O...]) and attributes:
// the forward Conv's geometry (out_channels M), whose output size must be dY's.
ConvGeometry conv_weight_grad_geometry(const KernelContext& ctx);
// Its output: [M, C/group, kernel...].
Shape weight_grad_shape(const ConvGeometry& g);
// [N, C_out, spatial out...] ([N, spatial out..., C_out] when channels_last)
Shape conv_output_shape(const ConvGeometry& g);

}  // namespace ingot::sem
