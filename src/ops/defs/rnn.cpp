// Recurrent layers: LSTM, GRU and RNN (ONNX semantics: gate orders iofc / zrh, optional bias,
// initial state, peepholes and sequence lengths, forward/reverse/bidirectional, layout 0 or 1).
#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// ---- Gradient rules (ops/gradient.h).
using G = GradBuilder;
using V = GradValue;

V slice_axis(G& b, const V& v, int64_t axis, int64_t begin, int64_t end) {
  return b.call1("Slice", {v, b.int64s({begin}), b.int64s({end}), b.int64s({axis})});
}
V pick(G& b, const V& v, int64_t axis, int64_t index) { return b.squeeze(slice_axis(b, v, axis, index, index + 1), {axis}); }
V stack(G& b, const std::vector<V>& parts) {
  std::vector<V> rows;
  for (const V& p : parts) rows.push_back(b.unsqueeze(p, {0}));
  return rows.size() == 1 ? rows[0] : b.call1("Concat", rows, {{"axis", int64_t(0)}});
}
V one_minus(G& b, const V& v) { return b.sub(b.scalar(1.0, v), v); }

// LSTM by backpropagation through time: the forward recomputed step by step (gates i, o, f, c in
// ONNX's order), then walked back. Layout 0, the default activations, no clip, peepholes,
// input_forget or sequence_lens; any direction.
void lstm_vjp(G& b) {
  if (b.attr_int("layout") != 0) b.unsupported("with layout = 1");
  if (b.has_attr("clip")) b.unsupported("with clip");
  if (b.attr_int("input_forget") != 0) b.unsupported("with input_forget");
  if (b.has_attr("activations")) {
    for (size_t k = 0; k < b.attr("activations", AttrKind::Strings).strings.size(); ++k) {
      const std::string& a = b.attr("activations", AttrKind::Strings).strings[k];
      if (a != (k % 3 == 0 ? "Sigmoid" : "Tanh")) b.unsupported("with activations other than Sigmoid, Tanh, Tanh");
    }
  }
  if (b.has_input(4)) b.unsupported("with sequence_lens");
  if (b.has_input(7)) b.unsupported("with peepholes");
  const Shape xs = b.static_shape(b.x(0)), ws = b.static_shape(b.x(1));
  const int64_t steps = xs[0], batch = xs[1], dirs = ws[0], hidden = ws[1] / 4;
  const std::string direction = b.attr("direction", AttrKind::String).s;
  const V zeros = b.emitter().constant(Tensor::zeros(b.dtype(b.x(0)), {batch, hidden}));
  std::vector<V> dx(static_cast<size_t>(steps));
  std::vector<V> dw, dr, db, dh0, dc0;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
    auto time = [&](int64_t k) { return reverse ? steps - 1 - k : k; };
    const V w = pick(b, b.x(1), 0, d), r = pick(b, b.x(2), 0, d);  // [4H, I], [4H, H]
    const V wt = b.transpose(w, {1, 0}), rt = b.transpose(r, {1, 0});
    V bias;
    if (b.has_input(3)) {
      V both = pick(b, b.x(3), 0, d);
      bias = b.add(slice_axis(b, both, 0, 0, 4 * hidden), slice_axis(b, both, 0, 4 * hidden, 8 * hidden));
    }
    std::vector<V> h{b.has_input(5) ? pick(b, b.x(5), 0, d) : zeros}, c{b.has_input(6) ? pick(b, b.x(6), 0, d) : zeros};
    std::vector<V> xt, gi, go, gf, gc, tc;
    for (int64_t k = 0; k < steps; ++k) {
      xt.push_back(pick(b, b.x(0), 0, time(k)));
      V g = b.add(b.matmul(xt.back(), wt), b.matmul(h.back(), rt));
      if (bias.defined()) g = b.add(g, bias);
      gi.push_back(b.call1("Sigmoid", {slice_axis(b, g, 1, 0, hidden)}));
      go.push_back(b.call1("Sigmoid", {slice_axis(b, g, 1, hidden, 2 * hidden)}));
      gf.push_back(b.call1("Sigmoid", {slice_axis(b, g, 1, 2 * hidden, 3 * hidden)}));
      gc.push_back(b.call1("Tanh", {slice_axis(b, g, 1, 3 * hidden, 4 * hidden)}));
      c.push_back(b.add(b.mul(gf.back(), c.back()), b.mul(gi.back(), gc.back())));
      tc.push_back(b.call1("Tanh", {c.back()}));
      h.push_back(b.mul(go.back(), tc.back()));
    }
    V dh_next = b.dy(1).defined() ? pick(b, b.dy(1), 0, d) : zeros;
    V dc_next = b.dy(2).defined() ? pick(b, b.dy(2), 0, d) : zeros;
    V dwd, drd, dbd;
    for (int64_t k = steps - 1; k >= 0; --k) {
      const size_t s = size_t(k);
      V dh = dh_next;
      if (b.dy(0).defined()) dh = b.add(dh, pick(b, pick(b, b.dy(0), 0, time(k)), 0, d));
      V dc = b.add(dc_next, b.mul(b.mul(dh, go[s]), one_minus(b, b.mul(tc[s], tc[s]))));
      V dgi = b.mul(b.mul(dc, gc[s]), b.mul(gi[s], one_minus(b, gi[s])));
      V dgo = b.mul(b.mul(dh, tc[s]), b.mul(go[s], one_minus(b, go[s])));
      V dgf = b.mul(b.mul(dc, c[s]), b.mul(gf[s], one_minus(b, gf[s])));
      V dgc = b.mul(b.mul(dc, gi[s]), one_minus(b, b.mul(gc[s], gc[s])));
      V dg = b.call1("Concat", {dgi, dgo, dgf, dgc}, {{"axis", int64_t(1)}});  // [B, 4H]
      V dgt = b.transpose(dg, {1, 0});
      V step_w = b.matmul(dgt, xt[s]), step_r = b.matmul(dgt, h[s]), step_b = b.reduce_sum(dg, {0}, false);
      dwd = dwd.defined() ? b.add(dwd, step_w) : step_w;
      drd = drd.defined() ? b.add(drd, step_r) : step_r;
      dbd = dbd.defined() ? b.add(dbd, step_b) : step_b;
      V step_x = b.matmul(dg, w);
      V& slot = dx[size_t(time(k))];
      slot = slot.defined() ? b.add(slot, step_x) : step_x;
      dh_next = b.matmul(dg, r);
      dc_next = b.mul(dc, gf[s]);
    }
    dw.push_back(dwd);
    dr.push_back(drd);
    db.push_back(b.call1("Concat", {dbd, dbd}, {{"axis", int64_t(0)}}));  // the input and the recurrent bias
    dh0.push_back(dh_next);
    dc0.push_back(dc_next);
  }
  if (b.wants(0)) b.grad(0, stack(b, dx));
  if (b.wants(1)) b.grad(1, stack(b, dw));
  if (b.wants(2)) b.grad(2, stack(b, dr));
  if (b.wants(3)) b.grad(3, stack(b, db));
  if (b.wants(5)) b.grad(5, stack(b, dh0));
  if (b.wants(6)) b.grad(6, stack(b, dc0));
}

}  // namespace


// Attributes every recurrent op shares. hidden_size has no default: it is taken from R when absent.
#define INGOT_RNN_COMMON_ATTRS                            \
  optional_attr("activation_alpha", AttrKind::Floats)     \
      .optional_attr("activation_beta", AttrKind::Floats) \
      .optional_attr("activations", AttrKind::Strings)    \
      .optional_attr("clip", AttrKind::Float)             \
      .attr("direction", "forward")                       \
      .optional_attr("hidden_size", AttrKind::Int)        \
      .attr("layout", 0)                                  \
      .attr("output_sequence", 0)

// Inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P. Outputs: Y, Y_h, Y_c.
INGOT_OP(LSTM)
    .versions(1)
    .inputs(3, 8)
    .outputs(0, 3)
    .INGOT_RNN_COMMON_ATTRS.attr("input_forget", 0)
    .summary("Long short-term memory layer; activations default to Sigmoid, Tanh, Tanh.")
    .vjp(lstm_vjp);

// Inputs: X, W, R, B, sequence_lens, initial_h. Outputs: Y, Y_h.
INGOT_OP(GRU)
    .versions(1)
    .inputs(3, 6)
    .outputs(0, 2)
    .INGOT_RNN_COMMON_ATTRS.attr("linear_before_reset", 0)
    .summary("Gated recurrent unit layer; activations default to Sigmoid, Tanh.");

INGOT_OP(RNN).versions(1).inputs(3, 6).outputs(0, 2).INGOT_RNN_COMMON_ATTRS.summary(
    "Simple recurrent layer H = f(X*W^T + H*R^T + b); activation defaults to Tanh.");

#undef INGOT_RNN_COMMON_ATTRS

}  // namespace ingot
