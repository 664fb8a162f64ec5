// Neural-network operators: convolution, pooling, matrix products, normalization, softmax and
// resizing. Spatial attributes (kernel_shape, strides, pads, dilations) that ONNX leaves without a
// default are optional here; kernels derive them from the weight/input shape when absent.
#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include <ingot/ops.h>

#include "core/flags.h"
#include "ops/batching.h"
#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// ---- Gradient rules (ops/gradient.h).
using G = GradBuilder;
using V = GradValue;

// The permutation swapping the last two axes of a rank-r value.
std::vector<int64_t> swap_last_two(int64_t r) {
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < r; ++a) perm.push_back(a);
  std::swap(perm[size_t(r - 2)], perm[size_t(r - 1)]);
  return perm;
}

// MatMul with numpy semantics: 1-D operands become matrices ([k] -> [1, k] for A, [k, 1] for B), the
// products run batched, and the batch axes A or B was broadcast along are summed away.
void matmul_vjp(G& b) {
  const V &a = b.x(0), &w = b.x(1);
  const bool a_vector = b.rank(a) == 1, w_vector = b.rank(w) == 1;
  // A batch of rows times one matrix (a Linear over a sequence: [..., M, K] x [K, N]): the rows
  // flattened into one GEMM each way, dW = A^T dY over all of them (no transposed copy of A, no
  // per-batch products summed afterwards) and dA = dY W^T.
  if (b.rank(a) >= 3 && b.rank(w) == 2 && b.emitter().onnx_opset() >= 11) {  // Gemm's C optional from 11
    if (const std::optional<Shape> ws = b.emitter().shape(w)) {
      V g = b.reshape(b.dy(), b.int64s({-1, (*ws)[1]}));
      if (b.wants(0)) b.grad(0, b.reshape_like(b.call1("Gemm", {g, w}, {{"transB", int64_t(1)}}), a));
      if (b.wants(1)) b.grad(1, b.call1("Gemm", {b.reshape(a, b.int64s({-1, (*ws)[0]})), g}, {{"transA", int64_t(1)}}));
      return;
    }
  }
  V a2 = a_vector ? b.unsqueeze(a, {0}) : a;
  V w2 = w_vector ? b.unsqueeze(w, {1}) : w;
  V g = b.dy();
  if (a_vector) g = b.unsqueeze(g, {b.rank(g) - (w_vector ? 0 : 1)});
  if (w_vector) g = b.unsqueeze(g, {b.rank(g)});
  if (b.wants(0)) b.grad(0, b.reshape_like(b.sum_to(b.matmul(g, b.transpose_last_two(w2)), a2), a));
  if (b.wants(1)) b.grad(1, b.reshape_like(b.sum_to(b.matmul(b.transpose_last_two(a2), g), w2), w));
}

// Y = alpha A' B' + beta C with A' = transA ? A^T : A (and B' likewise).
void gemm_vjp(G& b) {
  if (b.opset() < 7 && b.attr_int("broadcast") != 0) b.unsupported("with opset 1-6's `broadcast` attribute");
  const bool ta = b.attr_int("transA") != 0, tb = b.attr_int("transB") != 0;
  const V &a = b.x(0), &w = b.x(1), &g = b.dy();
  const double alpha = b.attr_float("alpha"), beta = b.attr_float("beta");
  // Each gradient one Gemm whose trans flags read the operands as stored (no transposed copies):
  // with A' = op(A), B' = op(B), dA' = alpha g B'^T and dB' = alpha A'^T g.
  auto gemm = [&](const V& x, bool tx, const V& y, bool ty) {
    if (b.emitter().onnx_opset() < 11) {  // Gemm's C is optional from 11: transposes and MatMul before
      auto t = [&](const V& v, bool yes) { return yes ? b.transpose(v, {1, 0}) : v; };
      V p = b.matmul(t(x, tx), t(y, ty));
      return alpha != 1.0 ? b.mul(p, b.scalar(alpha, p)) : p;
    }
    Attributes at{{"transA", int64_t(tx)}, {"transB", int64_t(ty)}};
    if (alpha != 1.0) at["alpha"] = float(alpha);
    return b.call1("Gemm", {x, y}, at);
  };
  if (b.wants(0)) b.grad(0, ta ? gemm(w, tb, g, true) : gemm(g, false, w, !tb));
  if (b.wants(1)) b.grad(1, tb ? gemm(g, true, a, ta) : gemm(a, !ta, g, false));
  if (b.wants(2)) b.grad(2, b.sum_to(beta == 1.0 ? b.dy() : b.mul(b.dy(), b.scalar(beta, b.dy())), b.x(2)));
}

// The axes Softmax/LogSoftmax normalize over: `axis` from opset 13; before it every axis from `axis`
// on (the input coerced to 2-D).
// `axis` (negative from the end), with coerce_2d every axis after it too.
std::vector<int64_t> axes_from(int64_t rank, int64_t axis, bool coerce_2d) {
  if (axis < 0) axis += rank;
  std::vector<int64_t> axes{axis};
  for (int64_t a = axis + 1; coerce_2d && a < rank; ++a) axes.push_back(a);
  return axes;
}
// Softmax's `axis` with its opset's default, and whether the opset coerces to 2-D.
std::pair<int64_t, bool> softmax_axis(G& b) {
  const bool coerce = b.opset() < 13;
  return {b.has_attr("axis") ? b.attr_int("axis") : (coerce ? 1 : -1), coerce};
}
std::vector<int64_t> softmax_axes(G& b) {
  const auto [axis, coerce] = softmax_axis(b);
  return axes_from(b.rank(b.x(0)), axis, coerce);
}
// dX = Y (dY - sum(dY Y)) over Softmax's axes: one fused ai.ingot.SoftmaxGrad.
void softmax_vjp(G& b) {
  if (!b.wants(0)) return;
  const V& y = b.y();
  const V dy = b.dtype(b.dy()) == b.dtype(y) ? b.dy() : b.cast_like(b.dy(), y);
  const auto [axis, coerce] = softmax_axis(b);
  b.grad(0, b.call1("SoftmaxGrad", {dy, y}, {{"axis", axis}, {"coerce_2d", int64_t(coerce)}}, kIngotDomain));
}

// SoftmaxGrad (dY, Y) -> Y (dY - s), s = sum(dY Y) over its axes. Linear in dY with a symmetric
// Jacobian (diag(Y) - Y Y^T), so dY's gradient for a cotangent u is SoftmaxGrad(u, Y); Y's is
// dY (u - sum(u Y)) - u s.
void softmax_grad_vjp(G& b) {
  const V &dy = b.x(0), &y = b.x(1), &u = b.dy();
  if (b.wants(0)) b.grad(0, b.call1("SoftmaxGrad", {u, y}, b.attrs(), kIngotDomain));
  if (b.wants(1)) {
    const std::vector<int64_t> axes = axes_from(b.rank(y), b.attr_int("axis"), b.attr_int("coerce_2d") != 0);
    V uy = b.reduce_sum(b.mul(u, y), axes, true), s = b.reduce_sum(b.mul(dy, y), axes, true);
    b.grad(1, b.sub(b.mul(dy, b.sub(u, uy)), b.mul(u, s)));
  }
}
void log_softmax_vjp(G& b) {
  if (!b.wants(0)) return;
  V total = b.reduce_sum(b.dy(), softmax_axes(b), true);
  b.grad(0, b.sub(b.dy(), b.mul(b.call1("Exp", {b.y()}), total)));
}

std::vector<int64_t> spatial_axes(G& b, const V& v) {
  std::vector<int64_t> axes;
  for (int64_t a = 2; a < b.rank(v); ++a) axes.push_back(a);
  return axes;
}
void global_average_pool_vjp(G& b) {
  if (!b.wants(0)) return;
  Shape s = b.static_shape(b.x(0));
  int64_t count = 1;
  for (size_t a = 2; a < s.size(); ++a) count *= s[a];
  b.grad(0, b.div(b.expand_like(b.dy(), b.x(0)), b.scalar(double(count), b.dy())));
}
void global_max_pool_vjp(G& b) {
  if (!b.wants(0)) return;
  V hit = b.equal_mask(b.x(0), b.expand_like(b.y(), b.x(0)), b.x(0));
  V count = b.expand_like(b.reduce_sum(hit, spatial_axes(b, b.x(0)), true), b.x(0));
  b.grad(0, b.mul(b.expand_like(b.dy(), b.x(0)), b.div(hit, count)));
}

// Conv's explicit geometry for the shapes at hand (auto_pad resolved).
struct ConvGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins, then ends
};
// `kernel`: the window (a pool's kernel_shape); empty: the weight's spatial dims (Conv).
ConvGeometry conv_geometry(G& b, std::vector<int64_t> kernel = {}) {
  Shape xs = b.static_shape(b.x(0));
  const size_t n = xs.size() - 2;
  ConvGeometry c;
  if (kernel.empty()) {
    Shape ws = b.static_shape(b.x(1));
    kernel.assign(ws.begin() + 2, ws.end());
  }
  c.kernel = std::move(kernel);
  c.strides = b.has_attr("strides") ? b.attr_ints("strides") : std::vector<int64_t>(n, 1);
  c.dilations = b.has_attr("dilations") ? b.attr_ints("dilations") : std::vector<int64_t>(n, 1);
  c.pads = b.has_attr("pads") ? b.attr_ints("pads") : std::vector<int64_t>(2 * n, 0);
  const std::string& auto_pad = b.attr("auto_pad", AttrKind::String).s;
  if (auto_pad == "VALID") c.pads.assign(2 * n, 0);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t out = (xs[2 + i] + c.strides[i] - 1) / c.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * c.strides[i] + (c.kernel[i] - 1) * c.dilations[i] + 1 - xs[2 + i]);
      int64_t small = total / 2;
      c.pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      c.pads[n + i] = total - c.pads[i];
    }
  }
  return c;
}
// A convolution's weight gradient as a convolution: `data` ([N, C, ...] with batch and channels
// swapped) correlated with `taps` (likewise), the forward's strides as dilations and dilations as
// strides, cut to the kernel's size and swapped back (Conv: data X, taps dy; ConvTranspose: data dy,
// taps X).
V correlate_for_weight(G& b, const V& data, const V& taps, const std::vector<int64_t>& strides,
                       const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                       const std::vector<int64_t>& kernel) {
  const size_t n = kernel.size();
  std::vector<int64_t> swap{1, 0}, starts(n, 0), axes;
  for (size_t i = 0; i < n; ++i) {
    swap.push_back(int64_t(2 + i));
    axes.push_back(int64_t(2 + i));
  }
  V w = b.call1("Conv", {b.transpose(data, swap), b.transpose(taps, swap)},
                {{"strides", dilations}, {"dilations", strides}, {"pads", pads}});
  w = b.call1("Slice", {w, b.int64s(starts), b.int64s(kernel), b.int64s(axes)});
  return b.transpose(w, swap);
}
// correlate_for_weight group by group: the channels of `data` and `taps` that group j connects, the
// per-group weights stacked along axis 0 (a depthwise layer makes one per channel).
V grouped_weight_grad(G& b, const V& data, const V& taps, int64_t groups, const std::vector<int64_t>& strides,
                      const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                      const std::vector<int64_t>& kernel) {
  if (groups == 1) return correlate_for_weight(b, data, taps, strides, dilations, pads, kernel);
  const int64_t data_per = b.static_shape(data)[1] / groups, taps_per = b.static_shape(taps)[1] / groups;
  std::vector<V> parts;
  for (int64_t j = 0; j < groups; ++j) {
    auto channels = [&](const V& v, int64_t per) {
      return b.call1("Slice", {v, b.int64s({j * per}), b.int64s({(j + 1) * per}), b.int64s({1})});
    };
    parts.push_back(correlate_for_weight(b, channels(data, data_per), channels(taps, taps_per), strides, dilations,
                                         pads, kernel));
  }
  return b.call1("Concat", parts, {{"axis", int64_t(0)}});
}
// The output_padding that makes the data gradient (a ConvTranspose of dy [N, M, O...]) X's spatial
// size back: what the forward's floor division dropped.
std::vector<int64_t> data_grad_output_padding(const ConvGeometry& c, const Shape& xs, const Shape& gs) {
  const size_t n = xs.size() - 2;
  std::vector<int64_t> output_padding;
  for (size_t i = 0; i < n; ++i) {
    int64_t natural = c.strides[i] * (gs[2 + i] - 1) + (c.kernel[i] - 1) * c.dilations[i] + 1 - c.pads[i] - c.pads[n + i];
    output_padding.push_back(xs[2 + i] - natural);
  }
  return output_padding;
}
// A per-channel bias's gradient: dy summed over the batch and spatial axes.
V bias_grad(G& b) {
  std::vector<int64_t> axes{0};
  for (int64_t a = 2; a < b.rank(b.dy()); ++a) axes.push_back(a);
  return b.reduce_sum(b.dy(), axes, false);
}
// A convolution's weight gradient from `data` (the forward's input) and `taps` (its output's
// gradient): one ConvWeightGrad (cuDNN's backward-filter, oneDNN's backward-weights). For 16-bit
// tensors INGOT_CONV_WGRAD_16BIT chooses (an A/B switch): 1 (default) ConvWeightGrad in 16 bits, 2
// widened to float32 (`widen` 1: TF32 on CUDA), 0 the correlation of transposed tensors. On the H200
// (ResNet-50 bf16 step at batch 128, docs/TRAINING.md): 229, 238 and 542 ms.
V weight_grad(G& b, const V& data, const V& taps, int64_t groups, const std::vector<int64_t>& strides,
              const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads, const std::vector<int64_t>& kernel) {
  const DType dt = b.dtype(data);
  const bool low = dt == DType::Float16 || dt == DType::BFloat16;
  static const int64_t mode = flags::integer("INGOT_CONV_WGRAD_16BIT");
  if (low && mode == 0) return grouped_weight_grad(b, data, taps, groups, strides, dilations, pads, kernel);
  Attributes attrs{{"kernel_shape", kernel}, {"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"group", groups}};
  if (low && mode == 2) attrs["widen"] = int64_t(1);
  return b.call1("ConvWeightGrad", {data, taps}, attrs, kIngotDomain);
}

// dX is the transposed convolution of dy with W (grouped like the forward); dW weight_grad's.
void conv_vjp(G& b) {
  const int64_t groups = b.attr_int("group");
  const ConvGeometry c = conv_geometry(b);
  const Shape xs = b.static_shape(b.x(0)), gs = b.static_shape(b.dy());
  if (b.wants(0)) {
    const std::vector<int64_t> output_padding = data_grad_output_padding(c, xs, gs);
    // W [M, C/g, k...] is ConvTranspose's weight layout [C_in, C_out/g, k...] for the same groups.
    b.grad(0, b.call1("ConvTranspose", {b.dy(), b.x(1)},
                      {{"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads},
                       {"output_padding", output_padding}, {"group", groups}}));
  }
  if (b.wants(1)) {
    b.grad(1, weight_grad(b, b.x(0), b.dy(), groups, c.strides, c.dilations, c.pads, c.kernel));
  }
  if (b.wants(2)) b.grad(2, bias_grad(b));
}

// ConvWeightGrad(X, dy) is bilinear: for a cotangent G of the weight's shape, X's gradient is the
// data gradient of a Conv with weight G (a ConvTranspose of dy), dy's the Conv of X with G.
void conv_weight_grad_vjp(G& b) {
  const int64_t groups = b.attr_int("group");
  const ConvGeometry c = conv_geometry(b, b.attr_ints("kernel_shape"));
  const Shape xs = b.static_shape(b.x(0)), gs = b.static_shape(b.x(1));
  if (b.wants(0)) {
    const std::vector<int64_t> output_padding = data_grad_output_padding(c, xs, gs);
    b.grad(0, b.call1("ConvTranspose", {b.x(1), b.dy()},
                      {{"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads},
                       {"output_padding", output_padding}, {"group", groups}}));
  }
  if (b.wants(1)) {
    b.grad(1, b.call1("Conv", {b.x(0), b.dy()},
                      {{"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads}, {"group", groups}}));
  }
}

// ConvTranspose, the adjoint of Conv: dX is the convolution of dy with W (same strides, pads and
// dilations); dW the weight gradient of that convolution (weight_grad of dy and X).
void conv_transpose_vjp(G& b) {
  const int64_t groups = b.attr_int("group");
  if (b.has_attr("output_shape") || b.attr("auto_pad", AttrKind::String).s != "NOTSET")
    b.unsupported("with output_shape or auto_pad (give pads and output_padding)");
  const Shape xs = b.static_shape(b.x(0)), ws = b.static_shape(b.x(1));
  const size_t n = xs.size() - 2;
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  std::vector<int64_t> strides = b.has_attr("strides") ? b.attr_ints("strides") : std::vector<int64_t>(n, 1);
  std::vector<int64_t> dilations = b.has_attr("dilations") ? b.attr_ints("dilations") : std::vector<int64_t>(n, 1);
  std::vector<int64_t> pads = b.has_attr("pads") ? b.attr_ints("pads") : std::vector<int64_t>(2 * n, 0);
  if (b.wants(0)) {
    b.grad(0, b.call1("Conv", {b.dy(), b.x(1)},
                      {{"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"group", groups}}));
  }
  // X = Conv(Y, W) with the same geometry, so dW is that Conv's weight gradient: data dy, taps X.
  if (b.wants(1)) b.grad(1, weight_grad(b, b.dy(), b.x(0), groups, strides, dilations, pads, kernel));
  if (b.wants(2)) b.grad(2, bias_grad(b));
}

// LayerNormalization over axes [axis, rank); dscale and dB sum over the leading axes.
// Normalization over `axes` with a scale that broadcasts to x: x^ = (x - mean) r (r = 1 / sqrt(var +
// eps)); for y = x^ scale + bias and g = dy scale (given), dx = r (g - mean(g) - x^ mean(g x^)).
struct Normalized {
  V xhat, dx;
};
Normalized normalized_backward(G& b, const V& x, const std::vector<int64_t>& axes, const V& g) {
  V mean = b.reduce_mean(x, axes, true);
  V centered = b.sub(x, mean);
  V var = b.reduce_mean(b.mul(centered, centered), axes, true);
  V r = b.call1("Reciprocal", {b.call1("Sqrt", {b.add(var, b.scalar(b.attr_float("epsilon"), var))})});
  Normalized n{b.mul(centered, r), {}};
  if (b.wants(0)) {
    V mean_g = b.reduce_mean(g, axes, true);
    V mean_gx = b.reduce_mean(b.mul(g, n.xhat), axes, true);
    n.dx = b.mul(r, b.sub(b.sub(g, mean_g), b.mul(n.xhat, mean_gx)));
  }
  return n;
}

void layer_norm_vjp(G& b) {
  if (b.dy(1).defined() || b.dy(2).defined()) b.unsupported("through its Mean and InvStdDev outputs");
  const int64_t rank = b.rank(b.x(0));
  int64_t axis = b.attr_int("axis");
  if (axis < 0) axis += rank;
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  Normalized n = normalized_backward(b, b.x(0), axes, b.mul(b.dy(), b.x(1)));
  if (b.wants(0)) b.grad(0, n.dx);
  if (b.wants(1)) b.grad(1, b.sum_to(b.mul(b.dy(), n.xhat), b.x(1)));
  if (b.wants(2)) b.grad(2, b.sum_to(b.dy(), b.x(2)));
}

// InstanceNormalization: each (n, c) plane normalized over the spatial axes, then per-channel scale
// and bias.
void instance_norm_vjp(G& b) {
  const int64_t rank = b.rank(b.x(0));
  std::vector<int64_t> spatial, reduce{0}, channel_axes;
  for (int64_t a = 2; a < rank; ++a) {
    spatial.push_back(a);
    reduce.push_back(a);
    channel_axes.push_back(a - 1);
  }
  Normalized n = normalized_backward(b, b.x(0), spatial, b.mul(b.dy(), b.unsqueeze(b.x(1), channel_axes)));
  if (b.wants(0)) b.grad(0, n.dx);
  if (b.wants(1)) b.grad(1, b.reduce_sum(b.mul(b.dy(), n.xhat), reduce, false));
  if (b.wants(2)) b.grad(2, b.reduce_sum(b.dy(), reduce, false));
}

// GroupNormalization: x [N, C, ...] normalized over each group of C / num_groups channels (as
// [N, G, rest]); scale and bias per channel (opset 21) or per group (opset 18).
void group_norm_vjp(G& b) {
  const Shape xs = b.static_shape(b.x(0));
  const int64_t rank = int64_t(xs.size()), groups = b.attr_int("num_groups"), channels = xs.at(1);
  if (groups <= 0 || channels % groups != 0) b.unsupported("with num_groups not dividing the channels");
  const bool per_group = b.static_shape(b.x(1)) == Shape{groups} && groups != channels;
  auto to_channels = [&](const V& v) {  // a per-group [G] vector as per-channel [C]
    if (!per_group) return v;
    V grid = b.call1("Expand", {b.unsqueeze(v, {1}), b.int64s({groups, channels / groups})});
    return b.reshape(grid, b.int64s({channels}));
  };
  std::vector<int64_t> spatial, reduce{0};
  for (int64_t a = 2; a < rank; ++a) {
    spatial.push_back(a - 1);
    reduce.push_back(a);
  }
  V scale = b.unsqueeze(to_channels(b.x(1)), spatial);  // [C, 1, ...]
  const V grouped_shape = b.int64s({xs[0], groups, -1});
  const V x_shape = b.int64s(std::vector<int64_t>(xs.begin(), xs.end()));
  Normalized n = normalized_backward(b, b.reshape(b.x(0), grouped_shape), {2},
                                     b.reshape(b.mul(b.dy(), scale), grouped_shape));
  if (b.wants(0)) b.grad(0, b.reshape(n.dx, x_shape));
  auto per_param = [&](const V& per_channel) {  // [C] -> the parameter's shape
    if (!per_group) return per_channel;
    return b.reduce_sum(b.reshape(per_channel, b.int64s({groups, channels / groups})), {1}, false);
  };
  if (b.wants(1)) b.grad(1, per_param(b.reduce_sum(b.mul(b.dy(), b.reshape(n.xhat, x_shape)), reduce, false)));
  if (b.wants(2)) b.grad(2, per_param(b.reduce_sum(b.dy(), reduce, false)));
}

// BatchNormalization in inference form (the statistics are inputs): per channel, y = (x - mean) * r *
// scale + B with r = 1 / sqrt(var + eps).
// In training mode (opset 14's training_mode, or the extra outputs before) x is normalized with the
// batch's own statistics, over N and the spatial axes: the normalized backward; the running
// statistics it also outputs are state, not differentiated.
void batch_norm_vjp(G& b) {
  if (b.opset() < 9 && b.attr_int("spatial") == 0) b.unsupported("with spatial = 0");
  const V& x = b.x(0);
  const int64_t rank = b.rank(x);
  std::vector<int64_t> channel_axes;  // [C] -> [C, 1, ...]
  for (int64_t a = 1; a + 1 < rank; ++a) channel_axes.push_back(a);
  auto per_channel = [&](const V& v) { return channel_axes.empty() ? v : b.unsqueeze(v, channel_axes); };
  const bool training = b.opset() >= 14 ? b.attr_int("training_mode") != 0 : b.num_outputs() > 1;
  if (training) {
    for (size_t k = 1; k < b.num_outputs(); ++k) {
      if (b.dy(k).defined()) b.unsupported("through its running statistics");
    }
    // One fused node (two passes over X and dY) for dX, dscale and dbias.
    std::vector<V> g = b.call("BatchNormGrad", {b.dy(), x, b.x(1)}, {{"epsilon", b.attr_float("epsilon")}}, 3, kIngotDomain);
    for (size_t i = 0; i < 3; ++i) {
      if (b.wants(i)) b.grad(i, b.dtype(g[i]) == b.dtype(b.x(i)) ? g[i] : b.cast_like(g[i], b.x(i)));
    }
    return;  // the input statistics do not reach Y
  }
  V var_eps = b.add(b.x(4), b.scalar(b.attr_float("epsilon"), b.x(4)));
  V r = b.call1("Reciprocal", {b.call1("Sqrt", {var_eps})});
  V centered = b.sub(x, per_channel(b.x(3)));
  V xhat = b.mul(centered, per_channel(r));
  std::vector<int64_t> reduce{0};
  for (int64_t a = 2; a < rank; ++a) reduce.push_back(a);
  if (b.wants(0)) b.grad(0, b.mul(b.dy(), per_channel(b.mul(b.x(1), r))));
  if (b.wants(1)) b.grad(1, b.reduce_sum(b.mul(b.dy(), xhat), reduce, false));
  if (b.wants(2)) b.grad(2, b.reduce_sum(b.dy(), reduce, false));
  V dsum = b.reduce_sum(b.dy(), reduce, false);
  if (b.wants(3)) b.grad(3, b.neg(b.mul(dsum, b.mul(b.x(1), r))));
  if (b.wants(4)) {
    V dxhat_x = b.reduce_sum(b.mul(b.dy(), centered), reduce, false);  // sum dy (x - mean)
    V r3 = b.mul(r, b.mul(r, r));
    b.grad(4, b.mul(b.mul(dxhat_x, b.x(1)), b.mul(r3, b.scalar(-0.5, r3))));
  }
}

// BatchNormGrad (dY, X, scale) -> (dX, dscale, dbias), per channel over the M elements of N and the
// spatial axes, x^ = (x - mean) r, r = 1 / sqrt(var + eps), P(v) = v - mean(v) - x^ mean(v x^):
// dX = scale r P(dY), dscale = sum(dY x^), dbias = sum(dY). Its own gradient (second order, and jvp
// through batch norm) for cotangents u, a, c of the three outputs: P is self-adjoint, so dY's is
// BatchNormGrad(u, X, scale)'s dX + a x^ + c; scale's sum(u r P(dY)); X's, with w = scale u,
// g1 = mean(dY), g2 = mean(dY x^), W1 = sum(w (dY - g1)), W2 = sum(w x^):
//   r^2 (-x^ W1 / M + 3 x^ g2 W2 / M - (W2 / M)(dY - g1) - g2 (w - mean(w))) + a r P(dY).
void batch_norm_grad_vjp(G& b) {
  const V &dy = b.x(0), &x = b.x(1), &scale = b.x(2);
  const int64_t rank = b.rank(x);
  std::vector<int64_t> axes{0}, channel_axes;
  for (int64_t a = 2; a < rank; ++a) axes.push_back(a);
  for (int64_t a = 1; a + 1 < rank; ++a) channel_axes.push_back(a);
  auto per_channel = [&](const V& v) {  // [C] -> [C, 1...] in X's dtype
    return b.unsqueeze(b.dtype(v) == b.dtype(x) ? v : b.cast_like(v, x), channel_axes);
  };
  const Attributes eps{{"epsilon", b.attr_float("epsilon")}};
  const V u = b.dy(0), a = b.dy(1), c = b.dy(2);
  V ones = b.add(b.zeros_like(scale), b.scalar(1.0, scale));
  V mean = b.reduce_mean(x, axes, true), centered = b.sub(x, mean);
  V r = b.call1("Reciprocal", {b.call1("Sqrt", {b.add(b.reduce_mean(b.mul(centered, centered), axes, true), b.scalar(b.attr_float("epsilon"), x))})});
  V xhat = b.mul(centered, r);
  // r P(dY), which the scale and X gradients share: BatchNormGrad's dX for a scale of ones.
  V rp;
  if ((b.wants(1) && a.defined()) || (b.wants(2) && u.defined()))
    rp = b.call("BatchNormGrad", {dy, x, ones}, eps, 1, kIngotDomain).at(0);
  if (b.wants(0)) {
    V g;
    if (u.defined()) g = b.call("BatchNormGrad", {u, x, scale}, eps, 1, kIngotDomain).at(0);
    if (a.defined()) g = g.defined() ? b.add(g, b.mul(xhat, per_channel(a))) : b.mul(xhat, per_channel(a));
    if (c.defined()) g = g.defined() ? b.add(g, per_channel(c)) : b.add(b.zeros_like(x), per_channel(c));
    if (g.defined()) b.grad(0, g);
  }
  if (b.wants(2) && u.defined()) {
    V gs = b.reduce_sum(b.mul(u, rp), axes, false);
    b.grad(2, b.dtype(gs) == b.dtype(scale) ? gs : b.cast_like(gs, scale));
  }
  if (b.wants(1)) {
    V g;
    if (u.defined()) {
      const double count = [&] {
        const Shape s = b.static_shape(x);
        int64_t m = s[0];
        for (size_t i = 2; i < s.size(); ++i) m *= s[i];
        return double(m);
      }();
      V inv_m = b.scalar(1.0 / count, x);
      V w = b.mul(u, per_channel(scale));
      V g1 = b.reduce_mean(dy, axes, true), g2 = b.reduce_mean(b.mul(dy, xhat), axes, true);
      V dyc = b.sub(dy, g1);
      V w1 = b.mul(b.reduce_sum(b.mul(w, dyc), axes, true), inv_m), w2 = b.mul(b.reduce_sum(b.mul(w, xhat), axes, true), inv_m);
      V t = b.sub(b.mul(xhat, b.sub(b.mul(b.scalar(3.0, x), b.mul(g2, w2)), w1)), b.mul(w2, dyc));
      t = b.sub(t, b.mul(g2, b.sub(w, b.reduce_mean(w, axes, true))));
      g = b.mul(b.mul(r, r), t);
    }
    if (a.defined()) {
      V ga = b.mul(rp, per_channel(a));
      g = g.defined() ? b.add(g, ga) : ga;
    }
    if (g.defined()) b.grad(1, g);
  }
}

// The transposed window sum: every dy element added back over the input positions of its window
// (a ConvTranspose of each channel with a kernel of ones), cut or padded to the input's size.
V window_transpose(G& b, const ConvGeometry& c, const V& dy) {
  const Shape xs = b.static_shape(b.x(0)), gs = b.static_shape(dy);
  const size_t n = xs.size() - 2;
  std::vector<int64_t> planes{xs[0] * xs[1], 1}, kernel_shape{1, 1}, output_padding;
  for (size_t i = 0; i < n; ++i) {
    planes.push_back(gs[2 + i]);
    kernel_shape.push_back(c.kernel[i]);
    int64_t natural = c.strides[i] * (gs[2 + i] - 1) + (c.kernel[i] - 1) * c.dilations[i] + 1 - c.pads[i] - c.pads[n + i];
    output_padding.push_back(xs[2 + i] - natural);
  }
  for (int64_t pad : output_padding) {
    if (pad < 0) b.unsupported("with ceil_mode windows that reach past the padding");
  }
  Tensor ones = Tensor::scalar<double>(1.0).cast(b.dtype(dy));
  int64_t count = 1;
  for (int64_t k : c.kernel) count *= k;
  Tensor kernel = Tensor::empty(b.dtype(dy), kernel_shape);
  for (int64_t i = 0; i < count; ++i) std::memcpy(static_cast<char*>(kernel.raw_data()) + i * dtype_size(kernel.dtype()), ones.raw_data(), dtype_size(kernel.dtype()));
  V summed = b.call1("ConvTranspose", {b.reshape(dy, b.int64s(planes)), b.emitter().constant(kernel)},
                     {{"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads}, {"output_padding", output_padding}});
  return b.reshape_like(summed, b.x(0));
}

// MaxPool: dy goes to the element each window picked (its Indices: flat offsets into X).
void max_pool_vjp(G& b) {
  if (!b.wants(0)) return;
  if (b.attr_int("storage_order") != 0) b.unsupported("with storage_order = 1");
  V indices = b.y(1).defined() ? b.y(1) : b.call("MaxPool", {b.x(0)}, b.attrs(), 2).at(1);
  V flat = b.int64s({-1});
  V g = b.call1("ScatterElements", {b.reshape(b.zeros_like(b.x(0)), flat), b.reshape(indices, flat), b.reshape(b.dy(), flat)},
                {{"axis", int64_t(0)}, {"reduction", "add"}});
  b.grad(0, b.reshape_like(g, b.x(0)));
}

// AveragePool: each dy element divided by its window's count, then summed back over the window.
void average_pool_vjp(G& b) {
  if (!b.wants(0)) return;
  const ConvGeometry c = conv_geometry(b, b.attr_ints("kernel_shape"));
  int64_t window = 1;
  for (int64_t k : c.kernel) window *= k;
  V share;
  if (b.attr_int("count_include_pad") != 0) {
    share = b.div(b.dy(), b.scalar(double(window), b.dy()));
  } else {
    // The count of real (unpadded) elements per window: a pool of ones that counts padding, times the window.
    Attributes with_pad = b.attrs();
    with_pad["count_include_pad"] = int64_t(1);
    V ones = b.add(b.zeros_like(b.x(0)), b.scalar(1.0, b.x(0)));
    V fraction = b.call1("AveragePool", {ones}, with_pad);
    share = b.div(b.dy(), b.mul(fraction, b.scalar(double(window), fraction)));
  }
  b.grad(0, window_transpose(b, c, share));
}


// LpPool: y = (sum over the window of |x|^p)^(1/p), so dx = |x|^(p-1) sign(x) times the transposed
// window sum of dy y^(1-p) (zero where a window is all zeros and y = 0).
V lp_share(G& b, int64_t p) {
  V share = b.mul(b.dy(), b.call1("Pow", {b.y(), b.scalar(double(1 - p), b.y())}));
  V zero = b.call1("Equal", {b.y(), b.scalar(0.0, b.y())});
  return b.call1("Where", {zero, b.zeros_like(share), share});
}
V lp_factor(G& b, int64_t p) {  // |x|^(p-1) sign(x)
  const V& x = b.x(0);
  if (p == 1) return b.call1("Sign", {x});
  if (p == 2) return x;
  return b.mul(b.call1("Pow", {b.call1("Abs", {x}), b.scalar(double(p - 1), x)}), b.call1("Sign", {x}));
}
void lp_pool_vjp(G& b) {
  if (!b.wants(0)) return;
  const int64_t p = b.attr_int("p");
  if (p < 1) b.unsupported("with p < 1");
  const ConvGeometry c = conv_geometry(b, b.attr_ints("kernel_shape"));
  b.grad(0, b.mul(window_transpose(b, c, lp_share(b, p)), lp_factor(b, p)));
}
void global_lp_pool_vjp(G& b) {
  if (!b.wants(0)) return;
  const int64_t p = b.attr_int("p");
  if (p < 1) b.unsupported("with p < 1");
  b.grad(0, b.mul(lp_share(b, p), lp_factor(b, p)));  // [N, C, 1, ...] broadcasts over the plane
}

// MaxUnpool puts each element of X somewhere in zeros: a selection.
void max_unpool_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.selection_grad());
}

// LRN: y = x d^-beta with d = bias + alpha / size * S and S_c the sum of x^2 over the channel window
// [c - lo, c + hi] (lo = (size - 1) / 2, hi = size - 1 - lo). Then
//   dx_k = dy_k d_k^-beta - 2 alpha beta / size * x_k * sum over the c whose window holds k of
//          dy_c x_c d_c^(-beta-1),
// and the c whose window holds k are [k - hi, k + lo]: the same window sum with lo and hi swapped.
// Window sums run as AveragePool over the channels of x viewed as [N, 1, C, rest].
void lrn_vjp(G& b) {
  if (!b.wants(0)) return;
  const V& x = b.x(0);
  const Shape xs = b.static_shape(x);
  const int64_t size = b.attr_int("size"), lo = (size - 1) / 2, hi = size - 1 - lo;
  const double alpha = b.attr_float("alpha"), beta = b.attr_float("beta"), bias = b.attr_float("bias");
  int64_t rest = 1;
  for (size_t a = 2; a < xs.size(); ++a) rest *= xs[a];
  const V planes = b.int64s({xs.at(0), 1, xs.at(1), rest});
  auto window_sum = [&](const V& v, int64_t before, int64_t after) {
    V mean = b.call1("AveragePool", {b.reshape(v, planes)},
                     {{"kernel_shape", Ints{size, 1}}, {"pads", Ints{before, 0, after, 0}}, {"count_include_pad", int64_t(1)}});
    return b.reshape_like(b.mul(mean, b.scalar(double(size), mean)), x);
  };
  V d = b.add(b.mul(window_sum(b.mul(x, x), lo, hi), b.scalar(alpha / double(size), x)), b.scalar(bias, x));
  V d_beta = b.call1("Pow", {d, b.scalar(-beta, d)});  // d^-beta
  V inner = b.div(b.mul(b.mul(b.dy(), x), d_beta), d);  // dy x d^(-beta-1)
  V spread = b.mul(b.mul(window_sum(inner, hi, lo), x), b.scalar(2.0 * alpha * beta / double(size), x));
  b.grad(0, b.sub(b.mul(b.dy(), d_beta), spread));
}

// MeanVarianceNormalization: y = c / (s + 1e-9) over `axes`, c = x - mean, s = sqrt(mean(c^2)) (ONNX's
// function body). With D = s + 1e-9: dx = (dy - mean(dy)) / D - c mean(dy c) / (D^2 s).
void mvn_vjp(G& b) {
  if (!b.wants(0)) return;
  const int64_t rank = b.rank(b.x(0));
  std::vector<int64_t> axes;
  for (int64_t a : b.attr_ints("axes")) axes.push_back(a < 0 ? a + rank : a);
  std::sort(axes.begin(), axes.end());
  const V& g = b.dy();
  V c = b.sub(b.x(0), b.reduce_mean(b.x(0), axes, true));
  V s = b.call1("Sqrt", {b.reduce_mean(b.mul(c, c), axes, true)});
  V d = b.add(s, b.scalar(1e-9, s));
  V first = b.div(b.sub(g, b.reduce_mean(g, axes, true)), d);
  V second = b.div(b.mul(c, b.reduce_mean(b.mul(g, c), axes, true)), b.mul(b.mul(d, d), s));
  b.grad(0, b.sub(first, second));
}

// Hardmax is piecewise constant: zero almost everywhere.
void hardmax_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.zeros_like(b.x(0)));
}


// Resize is separable: along each axis a it changes, y = M_a x with M_a [m_a, n_a] that axis's
// interpolation weights (nearest: a 0/1 selection; linear and cubic: weights; antialias included).
// M_a is Resize itself applied to an identity (the n_a basis vectors of axis a laid along a second
// axis whose scale stays 1), with the forward's coordinate mode, scale and roi on axis a; dx is dy
// contracted with each M_a^T in turn. (tf_crop_and_resize's extrapolated values are constants:
// extrapolation_value 0 in the basis leaves them out.)
void resize_vjp(G& b) {
  if (!b.wants(0)) return;
  const Shape xs = b.static_shape(b.x(0)), ys = b.static_shape(b.y());
  const int64_t rank = int64_t(xs.size());
  // The forward's inputs: (X, scales) at opset 10, (X, roi, scales, sizes) from 11; `axes` from 18.
  const size_t scales_input = b.opset() >= 11 ? 2 : 1;
  std::vector<int64_t> axes;
  if (b.has_attr("axes")) {
    for (int64_t a : b.attr_ints("axes")) axes.push_back(a < 0 ? a + rank : a);
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  std::vector<double> scale(size_t(rank), 1.0), roi;
  bool from_scales = false;
  if (b.has_input(scales_input)) {
    std::optional<Tensor> t = b.emitter().value(b.x(scales_input));
    if (!t) b.unsupported("with scales that are not constant");
    if (t->numel() > 0) {
      from_scales = true;
      std::vector<double> v = t->cast(DType::Float64).to_vector<double>();
      for (size_t k = 0; k < axes.size(); ++k) scale[size_t(axes[k])] = v.at(k);
    }
  }
  if (!from_scales && b.attr("keep_aspect_ratio_policy", AttrKind::String).s != "stretch")
    b.unsupported("with keep_aspect_ratio_policy other than stretch");
  const bool crop = b.attr("coordinate_transformation_mode", AttrKind::String).s == "tf_crop_and_resize";
  if (crop && b.has_input(1)) {
    std::optional<Tensor> t = b.emitter().value(b.x(1));
    if (!t) b.unsupported("with a roi that is not constant");
    roi = t->cast(DType::Float64).to_vector<double>();
  }
  if (rank < 2) b.unsupported("of a rank-1 input");
  Attributes attrs = b.attrs();
  attrs.erase("axes");
  attrs["keep_aspect_ratio_policy"] = std::string("stretch");
  attrs["extrapolation_value"] = 0.0f;
  GradValue g = b.dy();
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t n = xs[size_t(a)], m = ys[size_t(a)];
    if (n == m && scale[size_t(a)] == 1.0 && !crop) continue;
    const int64_t c = a == 0 ? 1 : 0;  // the carrier axis of the basis vectors
    Shape basis_shape(size_t(rank), 1);
    basis_shape[size_t(a)] = n;
    basis_shape[size_t(c)] = n;
    Tensor basis = Tensor::zeros(DType::Float64, basis_shape);
    for (int64_t j = 0; j < n; ++j) basis.span<double>()[size_t(j * (n + 1))] = 1.0;
    std::vector<GradValue> in{b.emitter().constant(basis.cast(b.dtype(b.x(0))))};
    if (b.opset() >= 11) {
      std::vector<double> r;
      for (int64_t k = 0; k < rank; ++k) r.push_back(0.0);
      for (int64_t k = 0; k < rank; ++k) r.push_back(1.0);
      for (size_t k = 0; k < axes.size() && !roi.empty(); ++k) {
        r[size_t(axes[k])] = roi.at(k);
        r[size_t(rank + axes[k])] = roi.at(k + axes.size());
      }
      in.push_back(b.emitter().constant(Tensor::from_vector<float>(std::vector<float>(r.begin(), r.end()), {2 * rank})));
    }
    if (from_scales) {
      std::vector<float> sc(size_t(rank), 1.0f);
      sc[size_t(a)] = float(scale[size_t(a)]);
      in.push_back(b.emitter().constant(Tensor::from_vector<float>(sc, {rank})));
    } else {
      std::vector<int64_t> sizes(basis_shape.begin(), basis_shape.end());
      sizes[size_t(a)] = m;
      in.push_back(GradValue{});
      in.push_back(b.int64s(sizes));
    }
    GradValue weights = b.call("Resize", in, attrs).at(0);  // [.., m at a, n at c, ..]: M_a or its transpose
    GradValue matrix = b.reshape(weights, b.int64s(a < c ? std::vector<int64_t>{m, n} : std::vector<int64_t>{n, m}));
    if (c < a) matrix = b.transpose_last_two(matrix);
    // g's axis a (size m) contracted with M_a: move it last, multiply by M_a [m, n], move it back.
    std::vector<int64_t> perm;
    for (int64_t k = 0; k < rank; ++k) {
      if (k != a) perm.push_back(k);
    }
    perm.push_back(a);
    std::vector<int64_t> back(static_cast<size_t>(rank));
    for (int64_t k = 0; k < rank; ++k) back[size_t(perm[size_t(k)])] = k;
    g = b.transpose(b.matmul(b.transpose(g, perm), matrix), back);
  }
  b.grad(0, g);
}

// Upsample is Resize with asymmetric coordinates (nearest rounding down) and constant scales: its
// gradient is Resize's, in the form of the emitter's opset (from 10).
void upsample_vjp(G& b) {
  if (!b.wants(0)) return;
  std::vector<float> scales;
  if (b.opset() < 9) {
    for (float v : b.attr("scales", AttrKind::Floats).floats) scales.push_back(v);
  } else {
    std::optional<Tensor> t = b.emitter().value(b.x(1));
    if (!t) b.unsupported("with scales that are not constant");
    scales = t->cast(DType::Float32).to_vector<float>();
  }
  const int opset = b.emitter().onnx_opset();
  if (opset < 10) b.unsupported("in a graph of opset " + std::to_string(opset) + " (its gradient is a Resize, opset 10)");
  V scale = b.emitter().constant(Tensor::from_vector<float>(scales, {int64_t(scales.size())}));
  std::vector<V> in{b.x(0)};
  if (opset >= 11) in.push_back(V{});  // roi
  in.push_back(scale);
  Attributes attrs{{"mode", b.attr("mode", AttrKind::String).s}};
  if (opset >= 11) {
    attrs["coordinate_transformation_mode"] = std::string("asymmetric");
    attrs["nearest_mode"] = std::string("floor");
  }
  b.grad(0, b.vjp_of("Resize", in, attrs, {b.y()}, {b.dy()}).at(0));
}

// ---- Batching rules (ops/batching.h). Batched inputs carry the batch at axis 0.

// MatMul: vectors become matrices as in the product itself, each batched operand gets size-1 axes
// after the batch so that its example axes line up with the other's, and MatMul's own batch
// broadcasting does the rest; the vectors' axes are dropped again.
bool matmul_batch(BatchBuilder& b) {
  const bool a_vector = b.example_rank(0) == 1, w_vector = b.example_rank(1) == 1;
  Tensor a = b.x(0), w = b.x(1);
  if (a_vector) a = BatchBuilder::unsqueeze(a, {b.batched(0) ? 1 : 0});
  if (w_vector) w = BatchBuilder::unsqueeze(w, {int64_t(w.rank())});
  const int64_t ra = a.rank() - b.batched(0), rw = w.rank() - b.batched(1), rank = std::max(ra, rw);
  if (b.batched(0)) a = BatchBuilder::line_up(a, ra, rank);
  if (b.batched(1)) w = BatchBuilder::line_up(w, rw, rank);
  Tensor y = b.call1("MatMul", {a, w});
  if (w_vector) y = BatchBuilder::squeeze(y, {y.rank() - 1});
  if (a_vector) y = BatchBuilder::squeeze(y, {y.rank() - (w_vector ? 1 : 2)});
  b.output(0, y, true);
  return true;
}

// Gemm on batched operands: the same product through batched MatMul, scaled, plus beta C.
bool gemm_batch(BatchBuilder& b) {
  Tensor a = b.x(0), w = b.x(1);
  auto swap = [](const Tensor& t) { return ops::transpose(t, swap_last_two(t.rank())); };
  if (b.attr_int("transA")) a = swap(a);
  if (b.attr_int("transB")) w = swap(w);
  Tensor y = b.call1("MatMul", {a, w});
  const float alpha = b.attr(("alpha"), AttrKind::Float).f, beta = b.attr("beta", AttrKind::Float).f;
  if (alpha != 1) y = b.call1("Mul", {y, Tensor::scalar<double>(alpha).cast(y.dtype())});
  if (b.has_input(2) && beta != 0) {
    Tensor c = b.batched(2) ? b.aligned(2, 2) : b.x(2);
    if (beta != 1) c = b.call1("Mul", {c, Tensor::scalar<double>(beta).cast(c.dtype())});
    y = b.call1("Add", {y, c});
  }
  b.output(0, y, true);
  return true;
}

// MaxPool's Indices are offsets into the whole input, so folding the batch would change them.
bool max_pool_batch(BatchBuilder& b) { return b.num_outputs() == 1 && batching::fold_batch(b); }

// BatchNormalization's statistics span N: only inference mode (running statistics) folds.
bool batch_norm_batch(BatchBuilder& b) {
  return b.num_outputs() == 1 && b.attr_int("training_mode") == 0 && batching::fold_batch(b);
}

// Softmax's default axis depends on the opset (1 before 13, then -1).
bool softmax_batch(BatchBuilder& b) {
  if (b.any_batched(1)) return false;
  const int64_t axis = b.has_attr("axis") ? b.attr_int("axis") : b.opset() >= 13 ? -1 : 1;
  b.outputs(b.run({b.x(0)}, b.attrs_with("axis", b.batched_axis(0, axis))));
  return true;
}

// LayerNormalization normalizes [axis, rank): a shifted axis keeps the same trailing axes; scale and
// bias broadcast over them unbatched.
bool layer_norm_batch(BatchBuilder& b) {
  if (b.any_batched(1)) return false;
  std::vector<Tensor> in;
  for (size_t i = 0; i < b.num_inputs(); ++i) in.push_back(b.x(i));
  b.outputs(b.run(in, b.attrs_with("axis", b.batched_axis(0, b.attr_int("axis")))));
  return true;
}

}  // namespace


INGOT_OP(Conv).versions(1).inputs(2, 3).conv_attrs().summary(
    "N-D convolution of X [N,C,D...] with W [M,C/group,k...] plus optional bias B [M].")
    .tag(OpTag::AutocastLowPrecision)
    .vjp(conv_vjp)
    .batch(batching::fold_batch);

// The weight gradient of Conv (its rule above): dW [M, C/group, k...] = the correlation of X [N, C,
// D...] with dY [N, M, O...], summed over the batch, for the forward's kernel_shape (required),
// strides, dilations, pads and group. A backward-filter primitive on each backend; `widen` 1 computes
// 16-bit tensors in float32 (TF32 tensor cores on CUDA; the CPU accumulates 16-bit in float32 anyway).
INGOT_OP(ConvWeightGrad)
    .domain(kIngotDomain)
    .versions(1)
    .input("X", "T")
    .input("dY", "T")
    .output("dW", "T")
    .type("T", {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    .conv_attrs()
    .attr("widen", 0)
    .summary("Conv's weight gradient dW [M, C/group, k...] from X [N, C, D...] and dY [N, M, O...] (kernel_shape "
             "required; strides, dilations, pads and group the forward's).")
    .vjp(conv_weight_grad_vjp);

INGOT_OP(ConvTranspose)
    .versions(1)
    .inputs(2, 3)
    .conv_attrs()
    .optional_attr("output_padding", AttrKind::Ints)
    .optional_attr("output_shape", AttrKind::Ints)
    .summary("Transposed convolution of X [N,C,D...] with W [C,M/group,k...] plus optional bias B [M].")
    .tag(OpTag::AutocastLowPrecision)
    .vjp(conv_transpose_vjp)
    .batch(batching::fold_batch);

INGOT_OP(MaxPool)
    .versions(1)
    .inputs(1)
    .outputs(1, 2)
    .pool_attrs()
    .attr("storage_order", 0)
    .summary("Max over sliding windows; optional Indices output (flat offsets into X).")
    .tag(OpTag::AutocastFollow)
    .vjp(max_pool_vjp)
    .batch(max_pool_batch);

// Written by the channels-last pass (CPU targets) for a 2-D MaxPool of a channels-last value: ONNX's
// MaxPool without Indices; `layout` "NHWC" puts channels last in X and Y ([N, H, W, C]), so an int8
// network's pools run between its channels-last convolutions without a transpose on either side.
INGOT_OP(MaxPool)
    .domain(kIngotDomain)
    .versions(1)
    .inputs(1)
    .outputs(1)
    .pool_attrs()
    .attr("layout", "NCHW")
    .summary("ONNX's MaxPool (no Indices); layout 'NHWC' puts channels last in X and Y (2-D windows).")
    .no_gradient("written by the channels-last pass for inference graphs");

INGOT_OP(AveragePool)
    .versions(1)
    .inputs(1)
    .pool_attrs()
    .attr("count_include_pad", 0)
    .summary("Mean over sliding windows (padding counted only with count_include_pad).")
    .tag(OpTag::AutocastFollow)
    .vjp(average_pool_vjp)
    .batch(batching::fold_batch);

INGOT_OP(LpPool)
    .versions(2)
    .inputs(1)
    .attr("auto_pad", "NOTSET")
    .attr("ceil_mode", 0)
    .optional_attr("dilations", AttrKind::Ints)
    .required_attr("kernel_shape", AttrKind::Ints)
    .attr("p", 2)
    .optional_attr("pads", AttrKind::Ints)
    .optional_attr("strides", AttrKind::Ints)
    .summary("p-norm over sliding windows.")
    .vjp(lp_pool_vjp);

INGOT_OP(GlobalAveragePool).versions(1).inputs(1).summary("Mean over all spatial axes (kept as size 1).")
    .tag(OpTag::AutocastFollow)
    .vjp(global_average_pool_vjp)
    .batch(batching::fold_batch);
INGOT_OP(GlobalMaxPool).versions(1).inputs(1).summary("Max over all spatial axes (kept as size 1).")
    .tag(OpTag::AutocastFollow)
    .vjp(global_max_pool_vjp)
    .batch(batching::fold_batch);
INGOT_OP(GlobalLpPool).versions(2).inputs(1).attr("p", 2).summary("p-norm over all spatial axes.")
    .vjp(global_lp_pool_vjp);

INGOT_OP(MaxUnpool)
    .versions(9)
    .inputs(2, 3)
    .required_attr("kernel_shape", AttrKind::Ints)
    .optional_attr("pads", AttrKind::Ints)
    .optional_attr("strides", AttrKind::Ints)
    .summary("Scatters X to the positions in I (MaxPool's Indices) in a zero tensor.")
    .vjp(max_unpool_vjp);

INGOT_OP(MatMul).versions(1).inputs(2).summary("Matrix product with numpy batch broadcasting and 1-D operands.")
    .tag(OpTag::AutocastLowPrecision)
    .vjp(matmul_vjp)
    .batch(matmul_batch);

INGOT_OP(Gemm)
    .versions(1)
    .inputs(2, 3)
    .attr("alpha", 1.0f)
    .attr("beta", 1.0f)
    .attr("broadcast", 0)
    .attr("transA", 0)
    .attr("transB", 0)
    .summary("alpha * A' * B' + beta * C (C unidirectionally broadcast to [M,N]).")
    .tag(OpTag::AutocastLowPrecision)
    .vjp(gemm_vjp)
    .batch(gemm_batch);

INGOT_OP(BatchNormalization)
    .versions(6)
    .inputs(5)
    .outputs(1, 5)
    .attr("epsilon", 1e-5f)
    .attr("is_test", 0)
    .attr("momentum", 0.9f)
    .attr("spatial", 1)
    .attr("training_mode", 0)
    .summary("Per-channel normalization; training_mode (opset 14+) also outputs running mean/var.")
    .vjp(batch_norm_vjp)
    .batch(batch_norm_batch);

// BatchNormalization's training-mode backward, fused (its rule above): per channel over N and the
// spatial axes of X [N, C, ...], with X's batch statistics, dX = scale r (dY - mean(dY) - x^ mean(dY
// x^)), dscale = sum(dY x^), dbias = sum(dY) (x^ = (x - mean) r, r = 1 / sqrt(var + epsilon)).
INGOT_OP(BatchNormGrad)
    .domain(kIngotDomain)
    .versions(1)
    .input("dY", "T")
    .input("X", "T")
    .input("scale", "U")
    .output("dX", "T")
    .optional_output("dscale", "U")
    .optional_output("dbias", "U")
    .type("T", {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    .type("U", {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    .attr("epsilon", 1e-5f)
    .summary("BatchNormalization's training-mode backward: dX, dscale and dbias from dY, X [N, C, ...] and scale [C], "
             "with X's batch statistics (two passes over X and dY).")
    .vjp(batch_norm_grad_vjp);

INGOT_OP(InstanceNormalization)
    .versions(6)
    .inputs(3)
    .attr("epsilon", 1e-5f)
    .summary("Normalizes each (n, c) plane, then per-channel scale and bias.")
    .vjp(instance_norm_vjp)
    .batch(batching::fold_batch);

INGOT_OP(LayerNormalization)
    .versions(17)
    .inputs(2, 3)
    .outputs(1, 3)
    .attr("axis", -1)
    .attr("epsilon", 1e-5f)
    .attr("stash_type", 1)
    .summary("Normalizes over axes [axis, rank); optional Mean and InvStdDev outputs.")
    .tag(OpTag::Float32Inside)
    .vjp(layer_norm_vjp)
    .batch(layer_norm_batch);

INGOT_OP(GroupNormalization)
    .versions(18)
    .inputs(3)
    .attr("epsilon", 1e-5f)
    .required_attr("num_groups", AttrKind::Int)
    .attr("stash_type", 1)
    .summary("Normalizes channel groups; scale/bias per group (opset 18) or per channel (opset 21).")
    .vjp(group_norm_vjp)
    .batch(batching::fold_batch);

INGOT_OP(LRN)
    .versions(1)
    .inputs(1)
    .attr("alpha", 1e-4f)
    .attr("beta", 0.75f)
    .attr("bias", 1.0f)
    .required_attr("size", AttrKind::Int)
    .summary("Local response normalization across channels.")
    .batch(batching::fold_batch)
    .vjp(lrn_vjp);

INGOT_OP(MeanVarianceNormalization)
    .versions(9)
    .inputs(1)
    .attr("axes", Ints{0, 2, 3})
    .summary("(X - mean) / (std + 1e-9) over `axes`.")
    .vjp(mvn_vjp);

// The default axis changed with opset 13 (1 -> -1), so it is computed by the kernel.
#define INGOT_SOFTMAX_OP(name, text)                                                                      \
  INGOT_OP(name)                                                                                          \
      .versions(1)                                                                                        \
      .inputs(1)                                                                                          \
      .optional_attr("axis", AttrKind::Int)                                                               \
      .summary(text                                                                                       \
               " Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 on it works " \
               "along the single axis `axis` (default -1).")
INGOT_SOFTMAX_OP(Softmax, "exp(x) / sum(exp(x)).").tag(OpTag::Float32Inside)
    .vjp(softmax_vjp)
    .batch(softmax_batch);
INGOT_SOFTMAX_OP(LogSoftmax, "log(softmax(x)).").tag(OpTag::Float32Inside)
    .vjp(log_softmax_vjp)
    .batch(softmax_batch);
INGOT_SOFTMAX_OP(Hardmax, "One-hot of the first maximum.").batch(softmax_batch)
    .vjp(hardmax_vjp);
#undef INGOT_SOFTMAX_OP

// Softmax's backward (its rule above), fused: dX = Y (dY - sum(dY Y)) along `axis`, or with
// coerce_2d over the axes from `axis` on (Softmax before opset 13).
INGOT_OP(SoftmaxGrad)
    .domain(kIngotDomain)
    .versions(1)
    .input("dY", "T")
    .input("Y", "T")
    .output("dX", "T")
    .type("T", {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    .attr("axis", -1)
    .attr("coerce_2d", 0)
    .summary("Softmax's backward: Y (dY - sum(dY Y)) along `axis` (coerce_2d: over the axes from `axis` on).")
    .tag(OpTag::Float32Inside)
    .vjp(softmax_grad_vjp);

INGOT_OP(Resize)
    .float32_params_from(1)  // roi, scales
    .versions(10)
    .inputs(1, 4)
    .attr("antialias", 0)
    .optional_attr("axes", AttrKind::Ints)
    .attr("coordinate_transformation_mode", "half_pixel")
    .attr("cubic_coeff_a", -0.75f)
    .attr("exclude_outside", 0)
    .attr("extrapolation_value", 0.0f)
    .attr("keep_aspect_ratio_policy", "stretch")
    .attr("mode", "nearest")
    .attr("nearest_mode", "round_prefer_floor")
    .summary("Nearest/linear/cubic resampling; inputs (X, scales) at opset 10, (X, roi, scales, sizes) from 11.")
    .tag(OpTag::AutocastFollow)
    .vjp(resize_vjp);

INGOT_OP(Upsample)
    .float32_params_from(1)  // scales
    .versions(7, 9)
    .inputs(1, 2)
    .attr("mode", "nearest")
    .optional_attr("scales", AttrKind::Floats)
    .summary("Resize with asymmetric coordinates; scales are an attribute at opset 7, an input at 9.")
    .tag(OpTag::AutocastFollow)
    .vjp(upsample_vjp);

}  // namespace ingot
