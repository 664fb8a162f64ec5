// Backend-neutral geometry of Conv, ConvTranspose and FusedConv: input/weight/bias validation (with
// the kernels' error messages), group checks, pads and output sizes (auto_pad, output_shape and
// output_padding for the transposed case). Used by the CPU and CUDA kernels.
#pragma once
#include <ingot/tensor.h>

#include "ops/kernel.h"
#include "ops/semantics/window.h"

namespace ingot::nn {

// Geometry of one (transposed) convolution after validation.
struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  Window win;  // spatial sizes, strides, pads; win.out is the output's spatial size
  bool transposed = false;
};

// Validates inputs 0-2 (X, W, optional B) and attributes of Conv/FusedConv.
ConvGeometry conv_geometry(const KernelContext& ctx);
// Validates inputs 0-2 (X, W, optional B) and attributes of ConvTranspose.
ConvGeometry conv_transpose_geometry(const KernelContext& ctx);
// [N, C_out, spatial out...]
Shape conv_output_shape(const ConvGeometry& g);

}  // namespace ingot::nn
