// Backend-neutral semantics of Resize (opset 10+, no antialias) and Upsample (opset 7, 9): attribute
// and input parsing with the kernels' error messages, output shapes and scales, and per-axis tables
// of source taps (index, weight) computed with ONNX's coordinate transformation and rounding rules.
// Used by the CPU and CUDA kernels so both resample identically.
#pragma once
#include <ingot/tensor.h>

#include <string>
#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

enum class ResizeMode { Nearest, Linear, Cubic };

struct ResizeParams {
  ResizeMode mode = ResizeMode::Nearest;
  std::string coordinate_mode;  // coordinate_transformation_mode
  std::string nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  Shape out_shape;
  std::vector<double> scales;     // per axis, output/input
  std::vector<double> out_width;  // per axis: the (possibly fractional) output length ONNX uses
  std::vector<double> roi;        // starts then ends; empty unless tf_crop_and_resize
};

// Source taps of one axis: for output j, taps idx[j*n + t] with weight w[j*n + t]; `outside[j]`
// marks tf_crop_and_resize positions that take the extrapolation value.
struct AxisTaps {
  int n = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<char> outside;
  bool identity = false;
};

// The taps of `axis` (input length `in_len`) for every output position.
AxisTaps axis_taps(const ResizeParams& p, size_t axis, int64_t in_len);

// Resize's parameters (mode, coordinate rules, output shape, scales, roi) from the node's attributes
// and inputs 1-3, validated.
ResizeParams resize_params(const KernelContext& ctx);
// Upsample's parameters (scales from the attribute before opset 9, else from input 1), validated.
ResizeParams upsample_params(const KernelContext& ctx);

}  // namespace ingot::sem
