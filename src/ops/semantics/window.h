// Backend-neutral geometry of sliding-window ops (convolution, pooling): spatial attribute parsing
// with ONNX's defaults and auto_pad rules, output sizes and pads. Used by the CPU and CUDA kernels.
#pragma once
#include <ingot/tensor.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

// The optional ints attribute `name` with `n` entries, or `n` copies of `fill` when absent.
inline Ints ints_attr_or(const KernelContext& ctx, std::string_view name, size_t n, int64_t fill) {
  if (!ctx.has_attr(name)) return Ints(n, fill);
  const Ints& v = ctx.attr_ints(name);
  if (v.empty()) return Ints(n, fill);
  if (v.size() != n) fail("attribute '{}': expected {} values, got {}", name, n, v.size());
  return v;
}

// Resolved geometry of a sliding-window op over `nd` spatial axes.
struct Window {
  Ints kernel, strides, dilations, pad_begin, pad_end;
  Ints in, out;  // spatial input and output sizes
  int64_t extent(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

// Reads strides/dilations/pads/auto_pad for a convolution or pooling over input spatial sizes `in`
// with window `kernel`, and computes the output sizes (floor, or ceil for ceil_mode pooling).
inline Window resolve_window(const KernelContext& ctx, const Ints& in, const Ints& kernel, bool ceil_mode = false) {
  const size_t nd = in.size();
  Window w;
  w.kernel = kernel;
  w.in = in;
  w.strides = ints_attr_or(ctx, "strides", nd, 1);
  w.dilations = ints_attr_or(ctx, "dilations", nd, 1);
  for (size_t i = 0; i < nd; ++i) {
    if (w.kernel[i] < 1) fail("kernel_shape: values must be positive, got {}", shape_str(w.kernel));
    if (w.strides[i] < 1) fail("attribute 'strides': values must be positive, got {}", shape_str(w.strides));
    if (w.dilations[i] < 1) fail("attribute 'dilations': values must be positive, got {}", shape_str(w.dilations));
  }
  const std::string& auto_pad = ctx.attr_string("auto_pad");
  w.pad_begin.assign(nd, 0);
  w.pad_end.assign(nd, 0);
  w.out.assign(nd, 0);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + w.extent(i) - in[i]);
      int64_t small = total / 2;
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pad_end[i] = total - w.pad_begin[i];
      w.out[i] = out;
    }
    return w;
  }
  if (auto_pad == "VALID") {
    // no padding
  } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
    Ints pads = ints_attr_or(ctx, "pads", 2 * nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      w.pad_begin[i] = pads[i];
      w.pad_end[i] = pads[i + nd];
      if (pads[i] < 0 || pads[i + nd] < 0) fail("attribute 'pads': values must be >= 0, got {}", shape_str(pads));
    }
  } else {
    fail("attribute 'auto_pad': unknown value '{}'", auto_pad);
  }
  for (size_t i = 0; i < nd; ++i) {
    int64_t span = in[i] + w.pad_begin[i] + w.pad_end[i] - w.extent(i);
    if (span < 0) {
      fail("window {} (dilated extent {}) is larger than the padded input {} on spatial axis {}", w.kernel[i],
           w.extent(i), in[i] + w.pad_begin[i] + w.pad_end[i], i);
    }
    int64_t out = (ceil_mode ? (span + w.strides[i] - 1) / w.strides[i] : span / w.strides[i]) + 1;
    // A ceil-mode window must start inside the input or the begin padding (PyTorch and ONNX agree).
    if (ceil_mode && (out - 1) * w.strides[i] >= in[i] + w.pad_begin[i]) --out;
    w.out[i] = out;
  }
  return w;
}

// Pads the spatial description to exactly 3 axes (leading size-1 axes) so loops can be written once.
inline Window to_3d(Window w) {
  while (w.in.size() < 3) {
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    w.pad_begin.insert(w.pad_begin.begin(), 0);
    w.pad_end.insert(w.pad_end.begin(), 0);
    w.in.insert(w.in.begin(), 1);
    w.out.insert(w.out.begin(), 1);
  }
  return w;
}

inline Ints spatial_dims(const Shape& s) { return Ints(s.begin() + 2, s.end()); }

// Validates X and kernel_shape of a pooling op (MaxPool, AveragePool, LpPool) and resolves its window
// (ceil_mode where the op has it).
inline Window pool_window(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 3) fail("input 0 (X): expected rank >= 3 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  if (x.rank() > 5) fail("input 0 (X): at most 3 spatial axes are supported, got {}", x.rank() - 2);
  const Ints& kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != size_t(x.rank() - 2)) {
    fail("attribute 'kernel_shape' {} does not match the {} spatial axes of X {}", shape_str(kernel), x.rank() - 2,
         shape_str(x.shape()));
  }
  const bool ceil_mode = ctx.def().find_attr("ceil_mode") && ctx.attr_int("ceil_mode") != 0;
  return resolve_window(ctx, spatial_dims(x.shape()), kernel, ceil_mode);
}

}  // namespace ingot::sem
