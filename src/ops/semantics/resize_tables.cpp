#include "ops/semantics/resize_tables.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ingot::sem {
namespace {

using Mode = ResizeMode;

Mode parse_mode(const std::string& m) {
  if (m == "nearest") return Mode::Nearest;
  if (m == "linear" || m == "bilinear" || m == "trilinear") return Mode::Linear;
  if (m == "cubic" || m == "bicubic") return Mode::Cubic;
  fail("attribute 'mode': unknown value '{}' (expected nearest, linear or cubic)", m);
}

double source_coordinate(const ResizeParams& p, size_t axis, int64_t x, int64_t in_len) {
  const double scale = p.scales[axis], out_width = p.out_width[axis];
  const std::string& m = p.coordinate_mode;
  if (m == "half_pixel") return (double(x) + 0.5) / scale - 0.5;
  if (m == "asymmetric") return double(x) / scale;
  if (m == "pytorch_half_pixel") return out_width == 1 ? -0.5 : (double(x) + 0.5) / scale - 0.5;
  if (m == "tf_half_pixel_for_nn") return (double(x) + 0.5) / scale;
  if (m == "align_corners") return out_width == 1 ? 0.0 : double(x) * double(in_len - 1) / (out_width - 1);
  if (m == "tf_crop_and_resize") {
    const size_t rank = p.out_shape.size();
    const double start = p.roi[axis], end = p.roi[axis + rank];
    const double offset = start * double(in_len - 1);
    if (out_width == 1) return (end - start) * double(in_len - 1) / 2 + offset;
    return double(x) * (end - start) * double(in_len - 1) / (out_width - 1) + offset;
  }
  fail("attribute 'coordinate_transformation_mode': unknown value '{}'", m);
}

int64_t nearest_index(const std::string& mode, double x) {
  const double fl = std::floor(x);
  const double frac = x - fl;
  if (mode == "floor") return int64_t(fl);
  if (mode == "ceil") return int64_t(std::ceil(x));
  if (mode == "round_prefer_ceil") return int64_t(frac >= 0.5 ? fl + 1 : fl);
  if (mode == "round_prefer_floor") return int64_t(frac > 0.5 ? fl + 1 : fl);
  fail("attribute 'nearest_mode': unknown value '{}'", mode);
}

// Output shape and per-axis scales from a scales vector (output = floor(input * scale)).
void from_scales(ResizeParams& p, const Shape& in, const std::vector<double>& scales) {
  if (scales.size() != in.size()) fail("scales: expected {} values (rank of X), got {}", in.size(), scales.size());
  p.scales = scales;
  p.out_shape.clear();
  p.out_width.clear();
  for (size_t d = 0; d < in.size(); ++d) {
    if (!(scales[d] > 0)) fail("scales: values must be positive, got {}", scales[d]);
    p.out_width.push_back(scales[d] * double(in[d]));
    p.out_shape.push_back(int64_t(std::floor(scales[d] * double(in[d]))));
  }
}

void from_sizes(ResizeParams& p, const Shape& in, const Shape& sizes) {
  if (sizes.size() != in.size())
    fail("input 3 (sizes): expected {} values (rank of X), got {}", in.size(), sizes.size());
  p.out_shape = sizes;
  p.scales.clear();
  p.out_width.clear();
  for (size_t d = 0; d < in.size(); ++d) {
    if (sizes[d] < 0) fail("input 3 (sizes): values must be >= 0, got {}", shape_str(sizes));
    p.scales.push_back(in[d] > 0 ? double(sizes[d]) / double(in[d]) : 1.0);
    p.out_width.push_back(double(sizes[d]));
  }
}

std::vector<double> doubles_of(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.item_double(i);
  return v;
}

// Expands per-`axes` values (opset 18) to all axes, with `fill` elsewhere.
template <class V>
std::vector<V> expand_axes(const KernelContext& ctx, std::vector<V> values, size_t rank, V fill) {
  if (!ctx.has_attr("axes")) return values;
  const Ints& axes = ctx.attr_ints("axes");
  if (values.size() != axes.size())
    fail("expected {} values (one per entry of 'axes'), got {}", axes.size(), values.size());
  std::vector<V> full(rank, fill);
  for (size_t i = 0; i < axes.size(); ++i) full[size_t(normalize_axis(axes[i], int64_t(rank), "axes"))] = values[i];
  return full;
}

}  // namespace

AxisTaps axis_taps(const ResizeParams& p, size_t axis, int64_t in_len) {
  const int64_t out_len = p.out_shape[axis];
  AxisTaps t;
  t.n = p.mode == Mode::Nearest ? 1 : p.mode == Mode::Linear ? 2 : 4;
  t.idx.assign(size_t(out_len * t.n), 0);
  t.w.assign(size_t(out_len * t.n), 0.0);
  t.outside.assign(size_t(out_len), 0);
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in_len - 1); };
  bool identity = out_len == in_len;
  for (int64_t j = 0; j < out_len; ++j) {
    const double x = source_coordinate(p, axis, j, in_len);
    int64_t* idx = &t.idx[size_t(j * t.n)];
    double* w = &t.w[size_t(j * t.n)];
    if (p.coordinate_mode == "tf_crop_and_resize" && (x < 0 || x > double(in_len - 1))) {
      t.outside[size_t(j)] = 1;
      identity = false;
      continue;
    }
    const double x0 = std::floor(x), r = x - x0;
    if (p.mode == Mode::Nearest) {
      idx[0] = clamp(nearest_index(p.nearest_mode, x));
      w[0] = 1;
    } else if (p.mode == Mode::Linear) {
      idx[0] = clamp(int64_t(x0));
      idx[1] = clamp(int64_t(x0) + 1);
      w[0] = 1 - r;
      w[1] = r;
    } else {
      const double a = p.cubic_a, s = 1 - r;
      w[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
      w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
      w[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
      w[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
      double total = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t raw = int64_t(x0) - 1 + k;
        if (p.exclude_outside && (raw < 0 || raw >= in_len)) w[k] = 0;
        total += w[k];
        idx[k] = clamp(raw);
      }
      if (p.exclude_outside && total != 0) {
        for (int k = 0; k < 4; ++k) w[k] /= total;
      }
    }
    for (int k = 0; k < t.n; ++k) {
      if (w[k] != 0 && (idx[k] != j || w[k] != 1)) identity = false;
    }
  }
  t.identity = identity;
  return t;
}

ResizeParams resize_params(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t rank = size_t(x.rank());
  ResizeParams p;
  p.mode = parse_mode(ctx.attr_string("mode"));
  if (ctx.opset() < 11) {
    // Opset 10: (X, scales) with Upsample's semantics.
    p.coordinate_mode = "asymmetric";
    p.nearest_mode = "floor";
    if (!ctx.has_input(1)) fail("input 1 (scales) is required at opset {}", ctx.opset());
    from_scales(p, x.shape(), doubles_of(ctx.input(1)));
    return p;
  }
  if (ctx.attr_int("antialias") != 0) fail("attribute 'antialias': only 0 is supported");
  if (ctx.attr_string("keep_aspect_ratio_policy") != "stretch") {
    fail("attribute 'keep_aspect_ratio_policy': only 'stretch' is supported, got '{}'",
         ctx.attr_string("keep_aspect_ratio_policy"));
  }
  p.coordinate_mode = ctx.attr_string("coordinate_transformation_mode");
  p.nearest_mode = ctx.attr_string("nearest_mode");
  p.cubic_a = ctx.attr_float("cubic_coeff_a");
  p.exclude_outside = ctx.attr_int("exclude_outside") != 0;
  p.extrapolation_value = ctx.attr_float("extrapolation_value");
  const bool has_scales = ctx.has_input(2) && ctx.input(2).numel() > 0;
  const bool has_sizes = ctx.has_input(3) && ctx.input(3).numel() > 0;
  if (has_scales == has_sizes) fail("exactly one of input 2 (scales) and input 3 (sizes) must be given");
  if (has_scales) {
    from_scales(p, x.shape(), expand_axes<double>(ctx, doubles_of(ctx.input(2)), rank, 1.0));
  } else {
    Shape sizes = expand_axes<int64_t>(ctx, ctx.input(3).to_int64_vector(), rank, -1);
    for (size_t d = 0; d < rank; ++d) {
      if (sizes[d] == -1) sizes[d] = x.dim(int64_t(d));
    }
    from_sizes(p, x.shape(), sizes);
  }
  if (p.coordinate_mode == "tf_crop_and_resize") {
    if (!ctx.has_input(1)) fail("input 1 (roi) is required for tf_crop_and_resize");
    std::vector<double> roi = doubles_of(ctx.input(1));
    if (ctx.has_attr("axes")) {
      const size_t n = roi.size() / 2;
      std::vector<double> starts = expand_axes<double>(ctx, {roi.begin(), roi.begin() + n}, rank, 0.0);
      std::vector<double> ends = expand_axes<double>(ctx, {roi.begin() + n, roi.end()}, rank, 1.0);
      roi = starts;
      roi.insert(roi.end(), ends.begin(), ends.end());
    }
    if (roi.size() != 2 * rank) fail("input 1 (roi): expected {} values, got {}", 2 * rank, roi.size());
    p.roi = roi;
  }
  return p;
}

ResizeParams upsample_params(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ResizeParams p;
  p.mode = parse_mode(ctx.attr_string("mode"));
  if (p.mode == Mode::Cubic) fail("attribute 'mode': Upsample supports nearest and linear, got cubic");
  p.coordinate_mode = "asymmetric";
  p.nearest_mode = "floor";
  std::vector<double> scales;
  if (ctx.opset() < 9) {
    if (!ctx.has_attr("scales")) fail("attribute 'scales' is required at opset {}", ctx.opset());
    const Floats& s = ctx.attr_floats("scales");
    scales.assign(s.begin(), s.end());
  } else {
    if (!ctx.has_input(1)) fail("input 1 (scales) is required at opset {}", ctx.opset());
    scales = doubles_of(ctx.input(1));
  }
  from_scales(p, x.shape(), scales);
  return p;
}

}  // namespace ingot::sem
