// Tensor, shape and data-movement ops: reshaping views, layout changes (Transpose, Concat, Slice,
// Pad...), indexing (Gather/Scatter families), constants and generators, and a few ops that sort
// or scan along an axis (TopK, Unique, CumSum).
#include <ingot/ops.h>

#include <algorithm>
#include <numeric>

#include "ops/batching.h"
#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// ---- Gradient rules (ops/gradient.h).
using G = GradBuilder;
using V = GradValue;

// Views and copies that keep every element: the gradient is dy in the input's shape.
void reshape_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.reshape_like(b.dy(), b.x(0)));
}
void identity_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.dy());
}
void transpose_vjp(G& b) {
  if (!b.wants(0)) return;
  const int64_t rank = b.rank(b.x(0));
  std::vector<int64_t> perm = b.has_attr("perm") ? b.attr_ints("perm") : std::vector<int64_t>{};
  if (perm.empty()) {
    for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
  }
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  b.grad(0, b.transpose(b.dy(), inverse));
}
int64_t normalized_axis(G& b, int64_t axis, const V& v) { return axis < 0 ? axis + b.rank(v) : axis; }
V slice(G& b, const V& v, int64_t axis, int64_t begin, int64_t end) {
  return b.call1("Slice", {v, b.int64s({begin}), b.int64s({end}), b.int64s({axis})});
}
void concat_vjp(G& b) {
  const int64_t axis = normalized_axis(b, b.attr_int("axis"), b.y());
  int64_t offset = 0;
  for (size_t i = 0; i < b.num_inputs(); ++i) {
    const int64_t size = b.static_shape(b.x(i))[size_t(axis)];
    if (b.wants(i)) b.grad(i, slice(b, b.dy(), axis, offset, offset + size));
    offset += size;
  }
}
void split_vjp(G& b) {
  if (!b.wants(0)) return;
  std::vector<V> parts;
  for (size_t k = 0; k < b.num_outputs(); ++k) parts.push_back(b.dy(k).defined() ? b.dy(k) : b.zeros_like(b.y(k)));
  b.grad(0, b.call1("Concat", parts, {{"axis", b.attr_int("axis")}}));
}
// Slice with unit steps: dy padded back to the input's extent (zeros where the slice left elements out).
void slice_vjp(G& b) {
  if (!b.wants(0)) return;
  const Shape shape = b.static_shape(b.x(0));
  const int64_t rank = int64_t(shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (b.opset() >= 10) {
    starts = b.int64_values(b.x(1), "starts");
    ends = b.int64_values(b.x(2), "ends");
    if (b.has_input(3)) axes = b.int64_values(b.x(3), "axes");
    if (b.has_input(4)) steps = b.int64_values(b.x(4), "steps");
  } else {
    starts = b.attr_ints("starts");
    ends = b.attr_ints("ends");
    if (b.has_attr("axes")) axes = b.attr_ints("axes");
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (std::any_of(steps.begin(), steps.end(), [](int64_t s) { return s != 1; })) {
    b.grad(0, b.selection_grad());  // a strided or reversed slice
    return;
  }
  std::vector<int64_t> pads(size_t(2 * rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i], dim = shape[size_t(axis)];
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
    const int64_t begin = clamp(starts[i]), end = std::max(begin, clamp(ends[i]));
    pads[size_t(axis)] = begin;
    pads[size_t(axis + rank)] = dim - end;
  }
  b.grad(0, b.call1("Pad", {b.dy(), b.int64s(pads)}));
}
void expand_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.sum_to(b.dy(), b.x(0)));
}
// Tile: dy seen as [r0, d0, r1, d1, ...], summed over the repeats.
void tile_vjp(G& b) {
  if (!b.wants(0)) return;
  const Shape shape = b.static_shape(b.x(0));
  const std::vector<int64_t> repeats = b.int64_values(b.x(1), "repeats");
  std::vector<int64_t> split, axes;
  for (size_t a = 0; a < shape.size(); ++a) {
    axes.push_back(int64_t(split.size()));
    split.push_back(repeats[a]);
    split.push_back(shape[a]);
  }
  b.grad(0, b.reduce_sum(b.reshape(b.dy(), b.int64s(split)), axes, false));
}
// Constant-mode Pad with non-negative pads: the gradient is the window of dy over the input; the
// constant's is the sum of dy over the padding.
void pad_vjp(G& b) {
  if (!b.wants(0) && !b.wants(2)) return;
  if (b.attr("mode", AttrKind::String).s != "constant") {
    if (b.wants(0)) b.grad(0, b.selection_grad());  // reflect/edge/wrap copy input elements outward
    return;
  }
  const Shape shape = b.static_shape(b.x(0));
  const int64_t rank = int64_t(shape.size());
  std::vector<int64_t> pads = b.opset() >= 11 ? b.int64_values(b.x(1), "pads") : b.attr_ints("pads");
  std::vector<int64_t> axes;
  if (b.opset() >= 18 && b.has_input(3)) {
    axes = b.int64_values(b.x(3), "axes");
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  std::vector<int64_t> starts, ends, slice_axes;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i], begin = pads[i];
    if (begin < 0 || pads[i + axes.size()] < 0) b.unsupported("with negative pads (cropping)");
    starts.push_back(begin);
    ends.push_back(begin + shape[size_t(axis)]);
    slice_axes.push_back(axis);
  }
  V window = b.call1("Slice", {b.dy(), b.int64s(starts), b.int64s(ends), b.int64s(slice_axes)});
  if (b.wants(0)) b.grad(0, window);
  if (b.wants(2)) {
    std::vector<int64_t> all;
    for (int64_t a = 0; a < rank; ++a) all.push_back(a);
    V padding = b.sub(b.reduce_sum(b.dy(), all, false), b.reduce_sum(window, all, false));
    b.grad(2, b.reshape_like(padding, b.x(2)));
  }
}
// Dropout: the identity at inference; in training mode the mask output gives the kept elements.
void dropout_vjp(G& b) {
  if (!b.wants(0)) return;
  bool training = false;  // Ingot runs opsets before 12 as inference, whatever is_test says
  if (b.opset() >= 12 && b.has_input(2)) training = b.int64_values(b.x(2), "training_mode").at(0) != 0;
  if (!training) return b.grad(0, b.dy());
  double ratio = b.has_input(1) ? b.double_value(b.x(1), "ratio") : 0.5;
  if (!b.y(1).defined()) b.unsupported("in training mode without its mask output");
  V keep = b.cast_like(b.y(1), b.dy());
  b.grad(0, b.mul(b.mul(b.dy(), keep), b.scalar(1.0 / (1.0 - ratio), b.dy())));
}
// Ingot's training dropout: y = x mask / (1 - ratio), its mask an output.
void ingot_dropout_vjp(G& b) {
  if (!b.wants(0)) return;
  const double ratio = b.attr_float("ratio");
  V keep = b.cast_like(b.y(1), b.dy());
  b.grad(0, b.mul(b.mul(b.dy(), keep), b.scalar(1.0 / (1.0 - ratio), b.dy())));
}
void cum_sum_vjp(G& b) {
  if (!b.wants(0)) return;
  b.grad(0, b.call1("CumSum", {b.dy(), b.x(1)},
                    {{"exclusive", b.attr_int("exclusive")}, {"reverse", int64_t(b.attr_int("reverse") == 0)}}));
}
void gather_elements_vjp(G& b) {
  if (!b.wants(0)) return;
  b.grad(0, b.call1("ScatterElements", {b.zeros_like(b.x(0)), b.x(1), b.dy()},
                    {{"axis", b.attr_int("axis")}, {"reduction", "add"}}));
}
// Gather: every index's slice of dy added into zeros of the data's shape (ScatterElements along the
// axis, with the indices flattened and broadcast over the other axes).
void gather_vjp(G& b) {
  if (!b.wants(0)) return;
  const Shape data = b.static_shape(b.x(0)), indices = b.static_shape(b.x(1));
  const int64_t axis = normalized_axis(b, b.attr_int("axis"), b.x(0));
  int64_t count = 1;
  for (int64_t d : indices) count *= d;
  std::vector<int64_t> updates(data.begin(), data.end()), index_shape(data.size(), 1);
  updates[size_t(axis)] = count;
  index_shape[size_t(axis)] = count;
  V dy = b.reshape(b.dy(), b.int64s(updates));
  V idx = b.call1("Expand", {b.reshape(b.x(1), b.int64s(index_shape)), b.int64s(updates)});
  b.grad(0, b.call1("ScatterElements", {b.zeros_like(b.x(0)), idx, dy}, {{"axis", axis}, {"reduction", "add"}}));
}
// GatherND: dy's slices added back at their indices.
void gather_nd_vjp(G& b) {
  if (!b.wants(0)) return;
  if (b.attr_int("batch_dims") != 0) b.unsupported("with batch_dims other than 0");
  b.grad(0, b.call1("ScatterND", {b.zeros_like(b.x(0)), b.x(1), b.dy()}, {{"reduction", "add"}}));
}
// ScatterND / ScatterElements: replaced positions take no gradient from data (added ones keep
// it), and each update gets dy at the position it went to.
void scatter_vjp(G& b, const char* gather, const Attributes& axis) {
  const std::string reduction = b.attr("reduction", AttrKind::String).s;
  if (reduction != "none" && reduction != "add") b.unsupported("with reduction " + reduction);
  Attributes scatter = axis;
  if (b.wants(0)) {
    b.grad(0, reduction == "add" ? b.dy() : b.call1(b.def().name, {b.dy(), b.x(1), b.zeros_like(b.x(2))}, scatter));
  }
  if (b.wants(2)) b.grad(2, b.call1(gather, {b.dy(), b.x(1)}, axis));
}
void scatter_nd_vjp(G& b) { scatter_vjp(b, "GatherND", {}); }
void scatter_elements_vjp(G& b) { scatter_vjp(b, "GatherElements", {{"axis", b.attr_int("axis")}}); }
// Scatter (opsets 9-10) is ScatterElements without a reduction.
void scatter_legacy_vjp(G& b) {
  const Attributes axis{{"axis", b.attr_int("axis")}};
  if (b.wants(0)) b.grad(0, b.call1("ScatterElements", {b.dy(), b.x(1), b.zeros_like(b.x(2))}, axis));
  if (b.wants(2)) b.grad(2, b.call1("GatherElements", {b.dy(), b.x(1)}, axis));
}
// TopK's values: dy goes back to the elements picked (its Indices, distinct along the axis).
void top_k_vjp(G& b) {
  if (!b.wants(0) || !b.dy(0).defined()) return;
  b.grad(0, b.call1("ScatterElements", {b.zeros_like(b.x(0)), b.y(1), b.dy(0)}, {{"axis", b.attr_int("axis")}}));
}
// Trilu keeps a triangle: a projection, its own adjoint.
void trilu_vjp(G& b) {
  if (!b.wants(0)) return;
  std::vector<V> in{b.dy()};
  if (b.has_input(1)) in.push_back(b.x(1));
  b.grad(0, b.call1("Trilu", in, {{"upper", b.attr_int("upper")}}));
}
// ReverseSequence and Compress copy elements (a permutation, a selection).
void selection_vjp(G& b) {
  if (b.wants(0)) b.grad(0, b.selection_grad());
}
// OneHot: each output element is values[0] (off) or values[1] (on); dvalues sums dy over each.
void one_hot_vjp(G& b) {
  if (!b.wants(2)) return;
  V on = b.call1("OneHot", {b.x(0), b.x(1), b.cast_like(b.int64s({0, 1}), b.x(2))}, {{"axis", b.attr_int("axis")}});
  V on_sum = b.call1("ReduceSum", {b.mul(b.dy(), on)}, {{"keepdims", int64_t(0)}});
  V all = b.call1("ReduceSum", {b.dy()}, {{"keepdims", int64_t(0)}});
  b.grad(2, b.call1("Concat", {b.unsqueeze(b.sub(all, on_sum), {0}), b.unsqueeze(on_sum, {0})}, {{"axis", int64_t(0)}}));
}
void depth_to_space_vjp(G& b) {
  if (!b.wants(0)) return;
  if (b.attr("mode", AttrKind::String).s != "DCR") b.unsupported("in CRD mode");
  b.grad(0, b.call1("SpaceToDepth", {b.dy()}, {{"blocksize", b.attr_int("blocksize")}}));
}
void space_to_depth_vjp(G& b) {
  if (!b.wants(0)) return;
  b.grad(0, b.call1("DepthToSpace", {b.dy()}, {{"blocksize", b.attr_int("blocksize")}, {"mode", "DCR"}}));
}


// ---- Batching rules (ops/batching.h). Batched inputs carry the batch at axis 0; the shape-like
// inputs (shapes, axes, starts, pads, repeats) must be shared by every element, else the node runs
// per element.
using BB = BatchBuilder;

std::vector<int64_t> example_shape(const BB& b, size_t i) {
  const Shape& s = b.x(i).shape();
  return {s.begin() + (b.batched(i) ? 1 : 0), s.end()};
}

// Axes of an example of rank `rank` (negative ones normalized) as axes of the batched tensor.
std::vector<int64_t> shifted(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) a = (a < 0 ? a + rank : a) + 1;
  return axes;
}

bool reshape_batch(BB& b) {
  if (b.any_batched(1) || !b.has_input(1)) return false;  // the attribute form (opset < 5) runs per element
  std::vector<int64_t> shape = b.int64_values(1);
  shape.insert(shape.begin(), b.batch_size());  // a 0 entry still copies the dim at its (shifted) place
  b.output(0, b.run({b.x(0), BB::int64s(shape)})[0], true);
  return true;
}

bool flatten_batch(BB& b) {
  const std::vector<int64_t> s = example_shape(b, 0);
  int64_t axis = b.attr_int("axis");
  if (axis < 0) axis += int64_t(s.size());
  const int64_t outer = std::accumulate(s.begin(), s.begin() + axis, int64_t(1), std::multiplies<>());
  const int64_t inner = std::accumulate(s.begin() + axis, s.end(), int64_t(1), std::multiplies<>());
  b.output(0, BB::reshape(b.x(0), {b.batch_size(), outer, inner}), true);
  return true;
}

// Squeeze and Unsqueeze with axes as an input (opset 13 on); the attribute form runs per element.
bool squeeze_batch(BB& b) {
  if (b.any_batched(1) || b.has_attr("axes")) return false;
  std::vector<int64_t> axes;
  if (b.has_input(1)) {
    axes = shifted(b.int64_values(1), b.example_rank(0));
  } else {
    const std::vector<int64_t> s = example_shape(b, 0);  // every size-1 axis of the example, never the batch
    for (size_t a = 0; a < s.size(); ++a) {
      if (s[a] == 1) axes.push_back(int64_t(a) + 1);
    }
  }
  b.output(0, BB::squeeze(b.x(0), axes), true);
  return true;
}

bool unsqueeze_batch(BB& b) {
  if (b.any_batched(1) || !b.has_input(1)) return false;
  std::vector<int64_t> axes = b.int64_values(1);
  b.output(0, BB::unsqueeze(b.x(0), shifted(axes, b.example_rank(0) + int64_t(axes.size()))), true);
  return true;
}

bool identity_batch(BB& b) {
  b.output(0, b.x(0), true);
  return true;
}

bool transpose_batch(BB& b) {
  const int64_t rank = b.example_rank(0);
  std::vector<int64_t> perm = b.has_attr("perm") ? b.attr_ints("perm") : std::vector<int64_t>{};
  if (perm.empty()) {
    for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
  }
  std::vector<int64_t> batched{0};
  for (int64_t a : perm) batched.push_back(a + 1);
  b.output(0, b.run({b.x(0)}, b.attrs_with("perm", batched))[0], true);
  return true;
}

bool concat_batch(BB& b) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < b.num_inputs(); ++i) in.push_back(b.materialized(i));
  b.output(0, b.run(in, b.attrs_with("axis", b.batched_axis(0, b.attr_int("axis"))))[0], true);
  return true;
}

bool split_batch(BB& b) {
  if (b.any_batched(1)) return false;
  std::vector<Tensor> in{b.x(0)};
  if (b.num_inputs() > 1) in.push_back(b.x(1));
  b.outputs(b.run(in, b.attrs_with("axis", b.batched_axis(0, b.attr_int("axis")))));
  return true;
}

bool slice_batch(BB& b) {
  if (b.any_batched(1) || !b.has_input(1)) return false;  // opset < 10's attributes run per element
  std::vector<int64_t> axes;
  if (b.has_input(3)) {
    axes = b.int64_values(3);
  } else {
    axes.resize(b.x(1).numel());
    std::iota(axes.begin(), axes.end(), 0);
  }
  std::vector<Tensor> in{b.x(0), b.x(1), b.x(2), BB::int64s(shifted(axes, b.example_rank(0)))};
  if (b.has_input(4)) in.push_back(b.x(4));
  b.output(0, b.run(in)[0], true);
  return true;
}

bool expand_batch(BB& b) {
  if (b.any_batched(1)) return false;
  std::vector<int64_t> shape = b.int64_values(1);
  const int64_t rank = std::max<int64_t>(b.example_rank(0), int64_t(shape.size()));
  shape.insert(shape.begin(), size_t(rank) - shape.size(), 1);
  shape.insert(shape.begin(), b.batch_size());
  b.output(0, b.run({b.aligned(0, rank), BB::int64s(shape)})[0], true);
  return true;
}

bool tile_batch(BB& b) {
  if (b.any_batched(1)) return false;
  std::vector<int64_t> repeats = b.int64_values(1);
  repeats.insert(repeats.begin(), 1);
  b.output(0, b.run({b.x(0), BB::int64s(repeats)})[0], true);
  return true;
}

// Pad with pads (and axes, opset 18) as inputs: the batch axis is not padded.
bool pad_batch(BB& b) {
  if (b.any_batched(1) || !b.has_input(1)) return false;
  std::vector<Tensor> in{b.x(0)};
  std::vector<int64_t> pads = b.int64_values(1);
  if (b.has_input(3)) {
    in.push_back(b.x(1));
    in.push_back(b.x(2));
    in.push_back(BB::int64s(shifted(b.int64_values(3), b.example_rank(0))));
  } else {
    const size_t half = pads.size() / 2;
    pads.insert(pads.begin() + int64_t(half), 0);
    pads.insert(pads.begin(), 0);
    in.push_back(BB::int64s(pads));
    if (b.num_inputs() > 2) in.push_back(b.x(2));
  }
  b.output(0, b.run(in)[0], true);
  return true;
}

// Gather: batched data gathers along the shifted axis; batched indices put the batch where the
// indices' axes land (at `axis`), from where it moves to the front.
bool gather_batch(BB& b) {
  if (b.batched(0) && b.batched(1)) return false;
  if (b.batched(0)) {
    b.output(0, b.run({b.x(0), b.x(1)}, b.attrs_with("axis", b.batched_axis(0, b.attr_int("axis"))))[0], true);
    return true;
  }
  int64_t axis = b.attr_int("axis");
  if (axis < 0) axis += b.x(0).rank();
  Tensor y = b.run({b.x(0), b.x(1)})[0];
  std::vector<int64_t> perm{axis};
  for (int64_t a = 0; a < y.rank(); ++a) {
    if (a != axis) perm.push_back(a);
  }
  b.output(0, ops::transpose(y, perm), true);
  return true;
}

// Shape and Size describe one example: host constants shared by every element.
bool shape_batch(BB& b) {
  const std::vector<int64_t> s = example_shape(b, 0);
  const int64_t rank = int64_t(s.size());
  auto clamp = [&](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank); };
  const int64_t start = clamp(b.attr_int("start"));
  const int64_t end = b.has_attr("end") ? clamp(b.attr_int("end")) : rank;
  b.output(0, BB::int64s(std::vector<int64_t>(s.begin() + start, s.begin() + std::max(start, end))), false);
  return true;
}
bool size_batch(BB& b) {
  const std::vector<int64_t> s = example_shape(b, 0);
  b.output(0, Tensor::scalar<int64_t>(std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>())), false);
  return true;
}

bool cum_sum_batch(BB& b) {
  if (b.any_batched(1)) return false;
  const int64_t axis = b.batched_axis(0, b.x(1).to_int64_vector().at(0));
  b.output(0, b.run({b.x(0), Tensor::scalar<int64_t>(axis).cast(b.x(1).dtype())})[0], true);
  return true;
}
}  // namespace

namespace {

// The dtype of the tensor a constant attribute gives.
DType constant_dtype(const Attributes& attrs, size_t) {
  for (const char* name : {"value", "sparse_value"}) {
    if (auto it = attrs.find(name); it != attrs.end() && it->second.kind == AttrKind::Tensor) return it->second.t.dtype();
  }
  if (attrs.count("value_float") || attrs.count("value_floats")) return DType::Float32;
  if (attrs.count("value_int") || attrs.count("value_ints")) return DType::Int64;
  if (attrs.count("value_string") || attrs.count("value_strings")) return DType::String;
  return DType::Undefined;
}
DType constant_of_shape_dtype(const Attributes& attrs, size_t) {
  auto it = attrs.find("value");
  return it != attrs.end() && it->second.kind == AttrKind::Tensor ? it->second.t.dtype() : DType::Float32;
}

}  // namespace

// ---- Views: these return the input's storage under a new shape.
INGOT_OP(Reshape)
    .versions(1)
    .inputs(1, 2)
    .optional_attr("shape", AttrKind::Ints)
    .attr("allowzero", 0)
    .summary(
        "New shape from the `shape` input (attribute before opset 5); 0 copies the input dim unless "
        "allowzero, -1 is inferred. Zero-copy.")
    .tag(OpTag::AutocastFollow)
    .vjp(reshape_vjp)
    .batch(reshape_batch);
INGOT_OP(Flatten).versions(1).inputs(1).attr("axis", 1).summary(
    "2-D view [prod(dims[:axis]), prod(dims[axis:])]. Zero-copy.")
    .tag(OpTag::AutocastFollow)
    .vjp(reshape_vjp)
    .batch(flatten_batch);
INGOT_OP(Squeeze)
    .versions(1)
    .inputs(1, 2)
    .optional_attr("axes", AttrKind::Ints)
    .summary("Removes size-1 axes (`axes` attribute before opset 13, input from it; all when absent). Zero-copy.")
    .tag(OpTag::AutocastFollow)
    .vjp(reshape_vjp)
    .batch(squeeze_batch);
INGOT_OP(Unsqueeze)
    .versions(1)
    .inputs(1, 2)
    .optional_attr("axes", AttrKind::Ints)
    .summary(
        "Inserts size-1 axes at output positions `axes` (attribute before opset 13, input from it). "
        "Zero-copy.")
    .tag(OpTag::AutocastFollow)
    .vjp(reshape_vjp)
    .batch(unsqueeze_batch);
INGOT_OP(Identity).versions(1).inputs(1).summary("Passes its input (tensor, sequence or optional) through.")
    .tag(OpTag::AutocastFollow)
    .vjp(identity_vjp)
    .batch(identity_batch);

// ---- Layout.
INGOT_OP(Transpose)
    .versions(1)
    .inputs(1)
    .optional_attr("perm", AttrKind::Ints)
    .summary("Permutes axes (reverses them when `perm` is absent).")
    .tag(OpTag::AutocastFollow)
    .vjp(transpose_vjp)
    .batch(transpose_batch);
INGOT_OP(Concat).versions(4).inputs(1, -1).required_attr("axis", AttrKind::Int).summary("Joins inputs along `axis`.")
    .tag(OpTag::AutocastFollow)
    .vjp(concat_vjp)
    .batch(concat_batch);
INGOT_OP(Split)
    .versions(2)
    .inputs(1, 2)
    .outputs(1, -1)
    .attr("axis", 0)
    .optional_attr("split", AttrKind::Ints)
    .optional_attr("num_outputs", AttrKind::Int)
    .summary(
        "Splits along `axis` by `split` sizes (attribute before opset 13, input from it), else into "
        "equal parts (num_outputs from opset 18: the last part may be smaller).")
    .tag(OpTag::AutocastFollow)
    .vjp(split_vjp)
    .batch(split_batch);
INGOT_OP(Slice)
    .versions(1)
    .inputs(1, 5)
    .optional_attr("starts", AttrKind::Ints)
    .optional_attr("ends", AttrKind::Ints)
    .optional_attr("axes", AttrKind::Ints)
    .summary(
        "Strided slice (attributes before opset 10; inputs starts, ends, axes, steps from it). Bounds "
        "are clamped; negative steps walk backwards.")
    .tag(OpTag::AutocastFollow)
    .vjp(slice_vjp)
    .batch(slice_batch);
INGOT_OP(Expand).versions(8).inputs(2).summary("Broadcasts the input to the `shape` input (numpy rules).")
    .tag(OpTag::AutocastFollow)
    .vjp(expand_vjp)
    .batch(expand_batch);
INGOT_OP(Tile).versions(6).inputs(2).summary("Repeats the input `repeats[i]` times along each axis i.")
    .tag(OpTag::AutocastFollow)
    .vjp(tile_vjp)
    .batch(tile_batch);
INGOT_OP(Pad)
    .versions(2)
    .inputs(1, 4)
    .attr("mode", "constant")
    .optional_attr("pads", AttrKind::Ints)
    .attr("value", 0.0f)
    .summary(
        "Pads with mode constant/reflect/edge/wrap; pads/value are attributes before opset 11, inputs "
        "(pads, constant_value, axes from 18) from it. Negative pads crop.")
    .tag(OpTag::AutocastFollow)
    .vjp(pad_vjp)
    .batch(pad_batch);
INGOT_OP(DepthToSpace)
    .versions(1)
    .inputs(1)
    .required_attr("blocksize", AttrKind::Int)
    .attr("mode", "DCR")
    .summary("Moves channel blocks into spatial blocks (NCHW); mode DCR or CRD.")
    .tag(OpTag::AutocastFollow)
    .vjp(depth_to_space_vjp);
INGOT_OP(SpaceToDepth)
    .versions(1)
    .inputs(1)
    .required_attr("blocksize", AttrKind::Int)
    .summary("Moves spatial blocks into channels (NCHW); inverse of DepthToSpace DCR.")
    .tag(OpTag::AutocastFollow)
    .vjp(space_to_depth_vjp);
INGOT_OP(Trilu)
    .versions(14)
    .inputs(1, 2)
    .attr("upper", 1)
    .summary("Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes; zeros the rest.")
    .tag(OpTag::AutocastFollow)
    .vjp(trilu_vjp);
INGOT_OP(ReverseSequence)
    .versions(10)
    .inputs(2)
    .attr("batch_axis", 1)
    .attr("time_axis", 0)
    .summary("Reverses the first sequence_lens[b] steps along time_axis for each batch entry b.")
    .vjp(selection_vjp);

// ---- Indexing.
INGOT_OP(Gather).versions(1).inputs(2).attr("axis", 0).summary(
    "Takes entries along `axis` at `indices` (int32/int64, negative counts from the end).")
    .tag(OpTag::AutocastFollow)
    .vjp(gather_vjp)
    .batch(gather_batch);
INGOT_OP(GatherElements)
    .versions(11)
    .inputs(2)
    .attr("axis", 0)
    .summary("out[i][j][k] = data[indices[i][j][k]][j][k] (for axis 0); output has the indices' shape.")
    .tag(OpTag::AutocastFollow)
    .vjp(gather_elements_vjp);
INGOT_OP(GatherND)
    .versions(11)
    .inputs(2)
    .attr("batch_dims", 0)
    .summary("Gathers slices addressed by the last axis of `indices` (after `batch_dims` shared leading axes).")
    .tag(OpTag::AutocastFollow)
    .vjp(gather_nd_vjp);
INGOT_OP(ScatterND)
    .versions(11)
    .inputs(3)
    .attr("reduction", "none")
    .summary("Copy of data with slices at `indices` replaced (or combined: add/mul/max/min) by updates.")
    .tag(OpTag::AutocastFollow)
    .vjp(scatter_nd_vjp);
INGOT_OP(ScatterElements)
    .versions(11)
    .inputs(3)
    .attr("axis", 0)
    .attr("reduction", "none")
    .summary("Copy of data with data[indices[i][j]][j] = updates[i][j] (axis 0), or combined by reduction.")
    .tag(OpTag::AutocastFollow)
    .vjp(scatter_elements_vjp);
INGOT_OP(Scatter).versions(9, 10).inputs(3).attr("axis", 0).summary(
    "Deprecated alias of ScatterElements without reduction.")
    .vjp(scatter_legacy_vjp);
INGOT_OP(OneHot)
    .versions(9)
    .inputs(3)
    .attr("axis", -1)
    .summary(
        "values[1] where the inserted `axis` position equals the index (negative indices count from depth), "
        "else values[0].")
    .vjp(one_hot_vjp);
INGOT_OP(NonZero).versions(9).inputs(1).summary("int64 [rank, count] coordinates of the non-zero elements.")
    .tag(OpTag::AutocastFollow);
INGOT_OP(Compress)
    .versions(9)
    .inputs(2)
    .optional_attr("axis", AttrKind::Int)
    .summary("Keeps the slices along `axis` (of the flattened input when absent) where condition is true.")
    .vjp(selection_vjp);

// ---- Shapes, constants and generators.
INGOT_OP(Shape)
    .versions(1)
    .inputs(1)
    .attr("start", 0)
    .optional_attr("end", AttrKind::Int)
    .summary("int64 dims of the input, dims[start:end] (clamped) from opset 15.")
    .tag(OpTag::AutocastFollow)
    .batch(shape_batch);
INGOT_OP(Size).versions(1).inputs(1).summary("int64 scalar: element count of the input.")
    .tag(OpTag::AutocastFollow)
    .batch(size_batch);
INGOT_OP(ConstantOfShape)
    .no_gradient("its input is a shape")
    .versions(9)
    .inputs(1)
    .optional_attr("value", AttrKind::Tensor)
    .dtype_rule(constant_of_shape_dtype)
    .summary("Tensor of shape `input` filled with the one-element `value` (float32 0 when absent).");
INGOT_OP(Constant)
    .no_gradient("a constant")
    .versions(1)
    .inputs(0, 0)
    .optional_attr("value", AttrKind::Tensor)
    .optional_attr("sparse_value", AttrKind::Tensor)
    .optional_attr("value_float", AttrKind::Float)
    .optional_attr("value_floats", AttrKind::Floats)
    .optional_attr("value_int", AttrKind::Int)
    .optional_attr("value_ints", AttrKind::Ints)
    .optional_attr("value_string", AttrKind::String)
    .optional_attr("value_strings", AttrKind::Strings)
    .dtype_rule(constant_dtype)
    .summary("The tensor given by exactly one of its attributes.");
INGOT_OP(Range).no_gradient("a generated sequence (as PyTorch's arange)").versions(11).inputs(3).summary("start, start + delta, ... while before `limit`.");
INGOT_OP(EyeLike)
    .no_gradient("the input gives only a shape and dtype")
    .versions(9)
    .inputs(1)
    .optional_attr("dtype", AttrKind::Int)
    .dtype_attr("dtype")
    .attr("k", 0)
    .summary("2-D tensor of the input's shape with ones on diagonal k (dtype attribute or the input's).");
INGOT_OP(Dropout)
    .float32_params_from(1)  // ratio
    .versions(1)
    .inputs(1, 3)
    .outputs(1, 2)
    .attr("ratio", 0.5f)
    .attr("is_test", 0)
    .optional_attr("seed", AttrKind::Int)
    .summary(
        "Identity at inference; with training_mode (opset 12+) zeros elements with probability ratio "
        "and scales the rest by 1/(1-ratio), drawing like numpy's seeded RandomState. Optional mask output.")
    .tag(OpTag::AutocastFollow)
    .vjp(dropout_vjp)
    .batch(batching::first_input_only);

// Training-mode dropout for nn::Dropout (include/ingot/nn.h; the seed from input 1 when given, see
// ops/semantics/dropout_args.h): element i is kept when the Philox uniform of (seed, i) is
// >= ratio (ops/semantics/philox.h), the same mask on every backend for one seed, unlike ONNX's
// Dropout, whose seeded stream is numpy's (the CPU kernel reproduces it for imported models).
INGOT_OP(Dropout)
    .domain(kIngotDomain)
    .versions(1)
    .input("data", "T")
    .optional_input("seed", "I")
    .output("output", "T")
    .output("mask", "B")
    .type("T", {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    .type("I", {DType::Int64})
    .type("B", {DType::Bool})
    .attr("ratio", 0.5f)
    .required_attr("seed", AttrKind::Int)
    .summary("x * mask / (1 - ratio) with mask[i] = Philox(seed, i) >= ratio; outputs the bool mask too. Input 1 (an "
             "int64 scalar), when given, is the key and the attribute the stream (compiled training steps).")
    .tag(OpTag::AutocastFollow)
    .vjp(ingot_dropout_vjp)
    .batch(batching::first_input_only);

// ---- Sorting and scans along an axis.
INGOT_OP(TopK)
    .versions(1)
    .inputs(1, 2)
    .outputs(2)
    .optional_attr("k", AttrKind::Int)
    .attr("axis", -1)
    .attr("largest", 1)
    .attr("sorted", 1)
    .summary(
        "The k largest (or smallest) values along `axis` and their int64 indices; ties keep the lower "
        "index first. k is an attribute before opset 10, an input from it.")
    .tag(OpTag::AutocastFollow)
    .vjp(top_k_vjp);
INGOT_OP(Unique)
    .versions(11)
    .inputs(1)
    .outputs(1, 4)
    .optional_attr("axis", AttrKind::Int)
    .attr("sorted", 1)
    .summary(
        "Unique elements (or slices along `axis`), with first-occurrence indices, inverse indices and "
        "counts.");
INGOT_OP(CumSum)
    .versions(11)
    .inputs(2)
    .attr("exclusive", 0)
    .attr("reverse", 0)
    .summary("Cumulative sum along the `axis` input; exclusive and/or reverse.")
    .vjp(cum_sum_vjp)
    .batch(cum_sum_batch);

}  // namespace ingot
