// Detection and sampling operators: non-maximum suppression, RoiAlign and GridSample.
#include <string>
#include <vector>

#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

using G = GradBuilder;
using V = GradValue;

// RoiAlign (avg) is linear in X, one matrix per region: y[r, c] = A_r x[batch_r, c] (bilinear
// samples averaged per bin). A_r comes from RoiAlign itself run on an identity basis (X [1, HW, H, W]
// whose channel k is pixel k alone, every region on batch 0); dX gathers A_r^T dy[r] into each
// region's batch entry. The regions' coordinates get no gradient (as torchvision's roi_align).
void roi_align_vjp(G& b) {
  if (!b.wants(0)) return;
  if (b.attr("mode", AttrKind::String).s != "avg") b.unsupported("in max mode");
  const Shape xs = b.static_shape(b.x(0)), ys = b.static_shape(b.y());
  const int64_t n = xs.at(0), c = xs.at(1), h = xs.at(2), w = xs.at(3), regions = ys.at(0), bins = ys.at(2) * ys.at(3);
  const int64_t pixels = h * w;
  if (pixels > 4096) b.unsupported("on a feature map of more than 4096 pixels (its identity basis would be too large)");
  Tensor basis = Tensor::zeros(DType::Float64, {1, pixels, h, w});
  for (int64_t k = 0; k < pixels; ++k) basis.span<double>()[size_t(k * pixels + k)] = 1.0;
  V batch = b.call1("Cast", {b.x(2)}, {{"to", int64_t(DType::Int64)}});
  V zero_batch = b.call1("Mul", {batch, b.emitter().constant(Tensor::scalar<int64_t>(0))});
  V a = b.call1("RoiAlign", {b.emitter().constant(basis.cast(b.dtype(b.x(0)))), b.x(1), zero_batch}, b.attrs());
  a = b.reshape(a, b.int64s({regions, pixels, bins}));                           // [R, HW, bins]
  V g = b.matmul(b.reshape(b.dy(), b.int64s({regions, c, bins})), b.transpose(a, {0, 2, 1}));  // [R, C, HW]
  V where = b.call1("Expand", {b.unsqueeze(batch, {1}), b.int64s({regions, c * pixels})});
  V zeros = b.emitter().constant(Tensor::zeros(b.dtype(b.x(0)), {n, c * pixels}));
  V dx = b.call1("ScatterElements", {zeros, where, b.reshape(g, b.int64s({regions, c * pixels}))},
                 {{"axis", int64_t(0)}, {"reduction", "add"}});
  b.grad(0, b.reshape_like(dx, b.x(0)));
}

// GridSample (2-D). Nearest is a selection (dX by selection_grad; the grid gets zero). Bilinear:
// each output is sum over its 4 taps of wy wx X[tap] (taps outside the image resolved by the padding
// mode, zero with zeros padding), so dX scatters dy wy wx to the taps, and the grid's gradient is
// the interpolation's slope times the unnormalization's scale times the slope of the coordinate fit
// (1 inside; 0 where border clamps; +-1 where reflection mirrors), as the kernel computes it
// (backends/cpu/kernels/detection.cpp).
void grid_sample_vjp(G& b) {
  const std::string mode = b.attr("mode", AttrKind::String).s, padding = b.attr("padding_mode", AttrKind::String).s;
  if (mode == "nearest") {
    if (b.wants(0)) b.grad(0, b.selection_grad());
    if (b.wants(1)) b.grad(1, b.zeros_like(b.x(1)));
    return;
  }
  if (mode != "bilinear" && mode != "linear") b.unsupported("in " + mode + " mode");
  const Shape xs = b.static_shape(b.x(0)), gs = b.static_shape(b.x(1));
  if (xs.size() != 4) b.unsupported("of a " + std::to_string(xs.size() - 2) + "-D image");
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], points = gs[1] * gs[2];
  const bool align = b.attr_int("align_corners") != 0;
  const V& grid = b.x(1);
  auto k = [&](double v) { return b.scalar(v, grid); };
  auto coordinate = [&](int64_t axis) { return b.reshape(b.call1("Gather", {grid, b.int64s({axis})}, {{"axis", int64_t(3)}}), b.int64s({n, points})); };
  struct Axis {
    V f, slope, base, t;  // fitted coordinate, d fit / d grid, floor, fraction
    int64_t size;
  };
  auto fit_axis = [&](int64_t axis, int64_t size) {
    Axis a;
    a.size = size;
    const double scale = align ? double(size - 1) / 2 : double(size) / 2;
    V f = b.add(b.mul(coordinate(axis), k(scale)), k(align ? double(size - 1) / 2 : (double(size) - 1) / 2));
    const double lo = align ? 0.0 : -0.5, hi = align ? double(size - 1) : double(size) - 0.5;
    V inside = b.call1("And", {b.call1("GreaterOrEqual", {f, k(lo)}), b.call1("LessOrEqual", {f, k(hi)})});
    V one = b.add(b.zeros_like(f), k(1.0)), zero = b.zeros_like(f);
    if (padding == "border") {
      a.f = b.call1("Where", {inside, f, b.call1("Clip", {f, k(0.0), k(double(size - 1))})});
      a.slope = b.call1("Where", {inside, one, zero});
    } else if (padding == "reflection") {
      // Mirroring into [lo, hi] is periodic with period 2R: m = (f - lo) mod 2R, folded at R.
      const double range = hi - lo;
      V d = b.sub(f, k(lo));
      V m = b.sub(d, b.mul(b.call1("Floor", {b.div(d, k(2 * range))}), k(2 * range)));
      V rising = b.call1("LessOrEqual", {m, k(range)});
      V mirrored = b.add(b.call1("Where", {rising, m, b.sub(k(2 * range), m)}), k(lo));
      a.f = range > 0 ? b.call1("Where", {inside, f, mirrored}) : b.add(zero, k(lo));
      a.slope = range > 0 ? b.call1("Where", {b.call1("Or", {inside, rising}), one, b.neg(one)}) : zero;
    } else {
      a.f = b.call1("Where", {inside, f, b.call1("Clip", {f, k(-4.0), k(double(size) + 3)})});
      a.slope = b.call1("Where", {b.call1("Equal", {a.f, f}), one, zero});
    }
    a.slope = b.mul(a.slope, k(scale));
    a.base = b.call1("Floor", {a.f});
    a.t = b.sub(a.f, a.base);
    return a;
  };
  const Axis ax = fit_axis(0, w), ay = fit_axis(1, h);
  // A tap's pixel index along an axis (resolved by the padding) and whether it lies in the image.
  auto tap = [&](const Axis& a, int64_t offset, V& valid) {
    V i = offset ? b.add(a.base, k(1.0)) : a.base;
    const double top = double(a.size - 1);
    valid = b.call1("And", {b.call1("GreaterOrEqual", {i, k(0.0)}), b.call1("LessOrEqual", {i, k(top)})});
    if (padding == "reflection") {
      const double lo = align ? 0.0 : -0.5, range = (align ? top : double(a.size) - 0.5) - lo;
      if (range > 0) {
        V d = b.sub(i, k(lo));
        V m = b.sub(d, b.mul(b.call1("Floor", {b.div(d, k(2 * range))}), k(2 * range)));
        V r = b.add(b.call1("Where", {b.call1("LessOrEqual", {m, k(range)}), m, b.sub(k(2 * range), m)}), k(lo));
        V in_range = b.call1("And", {b.call1("GreaterOrEqual", {i, k(lo)}), b.call1("LessOrEqual", {i, k(lo + range)})});
        i = b.call1("Where", {in_range, i, r});
      }
    }
    V index = b.call1("Cast", {b.call1("Clip", {i, k(0.0), k(top)})}, {{"to", int64_t(DType::Int64)}});
    if (padding != "zeros") valid = b.call1("Equal", {index, index});  // every tap reads a pixel
    return index;
  };
  V vx[2], vy[2], ix[2], iy[2];
  for (int o = 0; o < 2; ++o) {
    ix[o] = tap(ax, o, vx[o]);
    iy[o] = tap(ay, o, vy[o]);
  }
  V wx[2] = {b.sub(k(1.0), ax.t), ax.t}, wy[2] = {b.sub(k(1.0), ay.t), ay.t};
  V dy = b.reshape(b.dy(), b.int64s({n, c, points}));
  V x_flat = b.reshape(b.x(0), b.int64s({n, c, h * w}));
  const V spread = b.int64s({n, c, points});
  std::vector<V> indices, updates;
  V value[2][2];
  for (int r = 0; r < 2; ++r) {
    for (int q = 0; q < 2; ++q) {
      V valid = b.cast_like(b.call1("And", {vy[r], vx[q]}), grid);
      V flat = b.call1("Expand", {b.unsqueeze(b.add(b.mul(iy[r], b.int64s({w})), ix[q]), {1}), spread});
      if (b.wants(0)) {
        indices.push_back(flat);
        updates.push_back(b.mul(dy, b.unsqueeze(b.mul(b.mul(wy[r], wx[q]), valid), {1})));
      }
      if (b.wants(1)) value[r][q] = b.mul(b.call1("GatherElements", {x_flat, flat}, {{"axis", int64_t(2)}}), b.unsqueeze(valid, {1}));
    }
  }
  if (b.wants(0)) {
    V zeros = b.zeros_like(x_flat);
    V dx = b.call1("ScatterElements", {zeros, b.call1("Concat", indices, {{"axis", int64_t(2)}}),
                                        b.call1("Concat", updates, {{"axis", int64_t(2)}})},
                   {{"axis", int64_t(2)}, {"reduction", "add"}});
    b.grad(0, b.reshape_like(dx, b.x(0)));
  }
  if (b.wants(1)) {
    auto channel_sum = [&](const V& v) { return b.reduce_sum(b.mul(dy, v), {1}, false); };  // [N, P]
    V slope_x = b.add(b.mul(b.unsqueeze(wy[0], {1}), b.sub(value[0][1], value[0][0])),
                      b.mul(b.unsqueeze(wy[1], {1}), b.sub(value[1][1], value[1][0])));
    V slope_y = b.add(b.mul(b.unsqueeze(wx[0], {1}), b.sub(value[1][0], value[0][0])),
                      b.mul(b.unsqueeze(wx[1], {1}), b.sub(value[1][1], value[0][1])));
    V gx = b.mul(channel_sum(slope_x), ax.slope), gy = b.mul(channel_sum(slope_y), ay.slope);
    V both = b.call1("Concat", {b.unsqueeze(gx, {2}), b.unsqueeze(gy, {2})}, {{"axis", int64_t(2)}});
    b.grad(1, b.reshape_like(both, grid));
  }
}

}  // namespace

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
    .summary("Pools each region of interest of X [N,C,H,W] to [output_height, output_width] by bilinear sampling.")
    .vjp(roi_align_vjp);

// Opset 20 renamed bilinear/bicubic to linear/cubic; both spellings are accepted (2-D only).
INGOT_OP(GridSample)
    .versions(16)
    .inputs(2)
    .attr("align_corners", 0)
    .attr("mode", "bilinear")
    .attr("padding_mode", "zeros")
    .summary("Samples X [N,C,H,W] at the normalized locations of grid [N,Ho,Wo,2].")
    .vjp(grid_sample_vjp);

}  // namespace ingot
