#include "ops/semantics/conv_geometry.h"

#include <ingot/ops.h>

#include <algorithm>
#include <string>

#include "ops/semantics/fused_conv_args.h"

namespace ingot::sem {
namespace {

void check_inputs(const KernelContext& ctx, const char* op) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() < 3) fail("input 0 (X): expected rank >= 3 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  if (w.rank() != x.rank()) {
    fail("input 1 (W): expected rank {} like X {}, got {}", x.rank(), shape_str(x.shape()), shape_str(w.shape()));
  }
  if (w.dtype() != x.dtype())
    fail("input 1 (W): expected {} like X, got {}", dtype_name(x.dtype()), dtype_name(w.dtype()));
  if (x.rank() > 5) fail("{}: at most 3 spatial axes are supported, got {}", op, x.rank() - 2);
}

// `w_shape`: channels-first ([M or C, ..., k...]).
Ints kernel_from_weights(const KernelContext& ctx, const Shape& w_shape) {
  Ints kernel = spatial_dims(w_shape);
  if (ctx.has_attr("kernel_shape") && !ctx.attr_ints("kernel_shape").empty() &&
      ctx.attr_ints("kernel_shape") != kernel) {
    fail("attribute 'kernel_shape' {} does not match W's spatial shape {}", shape_str(ctx.attr_ints("kernel_shape")),
         shape_str(kernel));
  }
  return kernel;
}

void check_bias(const KernelContext& ctx, int64_t channels, DType dtype) {
  if (!ctx.has_input(2)) return;
  const Tensor& b = ctx.input(2);
  if (b.rank() != 1 || b.dim(0) != channels) {
    fail("input 2 (B): expected shape [{}], got {}", channels, shape_str(b.shape()));
  }
  if (b.dtype() != dtype) fail("input 2 (B): expected {}, got {}", dtype_name(dtype), dtype_name(b.dtype()));
}

}  // namespace

ConvGeometry conv_geometry(const KernelContext& ctx) {
  check_inputs(ctx, "Conv");
  const bool nhwc = ctx.has_attr("layout") && ctx.attr_string("layout") == "NHWC";
  if (ctx.has_attr("layout") && !nhwc && ctx.attr_string("layout") != "NCHW") {
    fail("attribute 'layout': expected 'NCHW' or 'NHWC', got '{}'", ctx.attr_string("layout"));
  }
  // Channels-first views of the shapes: the checks and windows below are layout-free.
  const Shape xs = nhwc ? channels_first(ctx.input(0).shape()) : ctx.input(0).shape();
  const Shape ws = nhwc ? channels_first(ctx.input(1).shape()) : ctx.input(1).shape();
  const char* layout = nhwc ? " (NHWC)" : "";
  ConvGeometry g;
  g.channels_last = nhwc;
  g.batch = xs[0];
  g.in_channels = xs[1];
  g.out_channels = ws[0];
  g.group = ctx.attr_int("group");
  if (g.group < 1) fail("attribute 'group': expected >= 1, got {}", g.group);
  if (g.in_channels != ws[1] * g.group) {
    fail("input 1 (W){} {}: expects {} input channels ({} per group x group {}), X {} has {}", layout,
         shape_str(ctx.input(1).shape()), ws[1] * g.group, ws[1], g.group, shape_str(ctx.input(0).shape()),
         g.in_channels);
  }
  if (g.out_channels % g.group != 0) {
    fail("input 1 (W) {}: output channels {} are not divisible by group {}", shape_str(ctx.input(1).shape()),
         g.out_channels, g.group);
  }
  check_bias(ctx, g.out_channels, ctx.input(0).dtype());
  g.win = resolve_window(ctx, spatial_dims(xs), kernel_from_weights(ctx, ws));
  return g;
}

ConvGeometry conv_weight_grad_geometry(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& dy = ctx.input(1);
  if (x.rank() < 3 || x.rank() > 5)
    fail("input 0 (X): expected [N, C, spatial...] with 1 to 3 spatial axes, got {}", shape_str(x.shape()));
  if (dy.rank() != x.rank() || dy.dim(0) != x.dim(0))
    fail("input 1 (dY): expected rank {} and batch {} like X {}, got {}", x.rank(), x.dim(0), shape_str(x.shape()),
         shape_str(dy.shape()));
  if (dy.dtype() != x.dtype()) fail("input 1 (dY): expected {} like X, got {}", dtype_name(x.dtype()), dtype_name(dy.dtype()));
  if (!ctx.has_attr("kernel_shape") || ctx.attr_ints("kernel_shape").size() != size_t(x.rank() - 2))
    fail("attribute 'kernel_shape': required, with {} values", x.rank() - 2);
  ConvGeometry g;
  g.batch = x.dim(0);
  g.in_channels = x.dim(1);
  g.out_channels = dy.dim(1);
  g.group = ctx.attr_int("group");
  if (g.group < 1 || g.in_channels % g.group || g.out_channels % g.group)
    fail("attribute 'group' {}: must divide X's {} and dY's {} channels", g.group, g.in_channels, g.out_channels);
  g.win = resolve_window(ctx, spatial_dims(x.shape()), ctx.attr_ints("kernel_shape"));
  if (g.win.out != spatial_dims(dy.shape()))
    fail("input 1 (dY) {}: the convolution of X {} makes spatial size {}", shape_str(dy.shape()), shape_str(x.shape()),
         shape_str(g.win.out));
  return g;
}

Shape weight_grad_shape(const ConvGeometry& g) {
  Shape s{g.out_channels, g.in_channels / g.group};
  s.insert(s.end(), g.win.kernel.begin(), g.win.kernel.end());
  return s;
}

ConvGeometry conv_transpose_geometry(const KernelContext& ctx) {
  check_inputs(ctx, "ConvTranspose");
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const size_t nd = size_t(x.rank() - 2);
  ConvGeometry g;
  g.transposed = true;
  g.batch = x.dim(0);
  g.in_channels = x.dim(1);
  g.group = ctx.attr_int("group");
  if (g.group < 1) fail("attribute 'group': expected >= 1, got {}", g.group);
  if (w.dim(0) != g.in_channels) {
    fail("input 1 (W) {}: expects {} input channels, X {} has {}", shape_str(w.shape()), w.dim(0), shape_str(x.shape()),
         g.in_channels);
  }
  if (g.in_channels % g.group != 0) fail("X has {} channels, not divisible by group {}", g.in_channels, g.group);
  g.out_channels = w.dim(1) * g.group;
  check_bias(ctx, g.out_channels, x.dtype());

  Window& win = g.win;
  win.in = spatial_dims(x.shape());
  win.kernel = kernel_from_weights(ctx, w.shape());
  win.strides = ints_attr_or(ctx, "strides", nd, 1);
  win.dilations = ints_attr_or(ctx, "dilations", nd, 1);
  Ints output_padding = ints_attr_or(ctx, "output_padding", nd, 0);
  win.pad_begin.assign(nd, 0);
  win.pad_end.assign(nd, 0);
  win.out.assign(nd, 0);
  for (size_t i = 0; i < nd; ++i) {
    if (win.strides[i] < 1 || win.dilations[i] < 1) fail("attributes 'strides' and 'dilations' must be positive");
  }
  const std::string& auto_pad = ctx.attr_string("auto_pad");
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID" && !auto_pad.empty()) {
    fail("attribute 'auto_pad': unknown value '{}'", auto_pad);
  }
  // The full (unpadded) output of each axis; pads crop it and output_padding extends it.
  auto full = [&](size_t i) { return win.strides[i] * (win.in[i] - 1) + output_padding[i] + win.extent(i); };
  bool has_output_shape = ctx.has_attr("output_shape") && !ctx.attr_ints("output_shape").empty();
  if (has_output_shape || same) {
    Ints out(nd);
    if (has_output_shape) {
      const Ints& os = ctx.attr_ints("output_shape");
      if (os.size() != nd && os.size() != nd + 2) {
        fail("attribute 'output_shape': expected {} values, got {}", nd, os.size());
      }
      std::copy(os.end() - nd, os.end(), out.begin());
    } else {
      for (size_t i = 0; i < nd; ++i) out[i] = win.in[i] * win.strides[i];
    }
    for (size_t i = 0; i < nd; ++i) {
      int64_t total = full(i) - out[i];
      // The odd pad goes to the end except for SAME_LOWER; a negative total (output_shape larger
      // than the full output) extends the end (matches the ONNX 1.12 test data).
      int64_t half = total / 2;
      win.pad_begin[i] = auto_pad == "SAME_LOWER" ? total - half : half;
      win.pad_end[i] = total - win.pad_begin[i];
      win.out[i] = out[i];
    }
  } else {
    Ints pads = auto_pad == "VALID" ? Ints(2 * nd, 0) : ints_attr_or(ctx, "pads", 2 * nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      win.pad_begin[i] = pads[i];
      win.pad_end[i] = pads[i + nd];
      win.out[i] = full(i) - pads[i] - pads[i + nd];
    }
  }
  for (size_t i = 0; i < nd; ++i) {
    if (win.out[i] < 0) fail("ConvTranspose: output spatial axis {} would have negative size {}", i, win.out[i]);
  }
  return g;
}

Shape conv_output_shape(const ConvGeometry& g) {
  Shape s{g.batch, g.out_channels};
  s.insert(s.end(), g.win.out.begin(), g.win.out.end());
  return g.channels_last ? channels_last(s) : s;
}

void fused_conv_by_transposes(const KernelContext& ctx, Tensor& y) {
  const size_t rank = ctx.input(0).rank();
  const Ints first = to_channels_first_perm(rank);
  Attributes attrs = ctx.attrs();
  attrs["layout"] = Attribute(std::string("NCHW"));
  std::vector<Tensor> in{ops::transpose(ctx.input(0), first), ops::transpose(ctx.input(1), first),
                         ctx.has_input(2) ? ctx.input(2) : Tensor()};
  if (ctx.has_input(3)) in.push_back(ops::transpose(ctx.input(3), first));
  Tensor first_y = ops::call("FusedConv", in, attrs, 1, kIngotDomain).at(0);
  copy_tensor(ops::transpose(first_y, to_channels_last_perm(rank)), y);
}

Shape channels_first(const Shape& s) {
  if (s.size() < 3) return s;
  Shape r{s[0], s.back()};
  r.insert(r.end(), s.begin() + 1, s.end() - 1);
  return r;
}

Shape channels_last(const Shape& s) {
  if (s.size() < 3) return s;
  Shape r{s[0]};
  r.insert(r.end(), s.begin() + 2, s.end());
  r.push_back(s[1]);
  return r;
}

Ints to_channels_last_perm(size_t rank) {
  Ints p{0};
  for (size_t i = 2; i < rank; ++i) p.push_back(int64_t(i));
  p.push_back(1);
  return p;
}

Ints to_channels_first_perm(size_t rank) {
  Ints p{0, int64_t(rank) - 1};
  for (size_t i = 1; i + 1 < rank; ++i) p.push_back(int64_t(i));
  return p;
}

}  // namespace ingot::sem
