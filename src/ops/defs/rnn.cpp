// Recurrent layers: LSTM, GRU and RNN (ONNX semantics: gate orders iofc / zrh, optional bias,
// initial state, peepholes and sequence lengths, forward/reverse/bidirectional, layout 0 or 1).
#include <string>
#include <vector>

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

// What the recurrent rules cover: layout 0, the default activations (per direction), no clip, no
// sequence_lens.
void check_recurrence(G& b, const std::vector<std::string>& defaults) {
  if (b.attr_int("layout") != 0) b.unsupported("with layout = 1");
  if (b.has_attr("clip")) b.unsupported("with clip");
  if (b.has_attr("activations")) {
    const auto& given = b.attr("activations", AttrKind::Strings).strings;
    for (size_t k = 0; k < given.size(); ++k) {
      if (given[k] != defaults[k % defaults.size()]) b.unsupported("with activations other than the defaults");
    }
  }
  if (b.has_input(4)) b.unsupported("with sequence_lens");
}
// Whether direction d of the op walks time backwards.
bool reversed(G& b, int64_t d) {
  const std::string& direction = b.attr("direction", AttrKind::String).s;
  return direction == "reverse" || (direction == "bidirectional" && d == 1);
}
V accumulate(G& b, const V& sum, const V& term) { return sum.defined() ? b.add(sum, term) : term; }

// A recurrent op's sizes (X [T, B, I], W [dirs, gates * H, I]) and a zero state [B, H].
struct Recurrence {
  int64_t steps, batch, dirs, hidden;
  V zeros;
};
Recurrence recurrence(G& b, int64_t gates) {
  const Shape xs = b.static_shape(b.x(0)), ws = b.static_shape(b.x(1));
  Recurrence r{xs[0], xs[1], ws[0], ws[1] / gates, {}};
  r.zeros = b.emitter().constant(Tensor::zeros(b.dtype(b.x(0)), {r.batch, r.hidden}));
  return r;
}

// The gradients of a recurrent op, one entry per direction (time steps for X), stacked into the
// op's layouts: X [T, B, I], W, R, B and the initial states [dirs, ...].
struct RecurrentGrads {
  explicit RecurrentGrads(int64_t steps) : x(static_cast<size_t>(steps)) {}
  std::vector<V> x, w, r, bias, h0, c0;
  void state(G& b) const {
    const std::vector<std::pair<size_t, const std::vector<V>*>> inputs = {{0, &x}, {1, &w}, {2, &r}, {3, &bias}, {5, &h0}, {6, &c0}};
    for (const auto& [i, parts] : inputs) {
      if (b.wants(i) && !parts->empty()) b.grad(i, stack(b, *parts));
    }
  }
};

// LSTM by backpropagation through time: the forward recomputed step by step (gates i, o, f, c in
// ONNX's order), then walked back. Layout 0, the default activations, no clip, peepholes,
// input_forget or sequence_lens; any direction.
void lstm_vjp(G& b) {
  check_recurrence(b, {"Sigmoid", "Tanh", "Tanh"});
  if (b.attr_int("input_forget") != 0) b.unsupported("with input_forget");
  if (b.has_input(7)) b.unsupported("with peepholes");
  const Recurrence rec = recurrence(b, 4);
  const int64_t steps = rec.steps, dirs = rec.dirs, hidden = rec.hidden;
  const V& zeros = rec.zeros;
  RecurrentGrads out(steps);
  std::vector<V>& dx = out.x;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = reversed(b, d);
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
      V dc = b.add(dc_next, b.mul(b.mul(dh, go[s]), b.one_minus(b.mul(tc[s], tc[s]))));
      V dgi = b.mul(b.mul(dc, gc[s]), b.mul(gi[s], b.one_minus(gi[s])));
      V dgo = b.mul(b.mul(dh, tc[s]), b.mul(go[s], b.one_minus(go[s])));
      V dgf = b.mul(b.mul(dc, c[s]), b.mul(gf[s], b.one_minus(gf[s])));
      V dgc = b.mul(b.mul(dc, gi[s]), b.one_minus(b.mul(gc[s], gc[s])));
      V dg = b.call1("Concat", {dgi, dgo, dgf, dgc}, {{"axis", int64_t(1)}});  // [B, 4H]
      V dgt = b.transpose(dg, {1, 0});
      V step_w = b.matmul(dgt, xt[s]), step_r = b.matmul(dgt, h[s]), step_b = b.reduce_sum(dg, {0}, false);
      dwd = accumulate(b, dwd, step_w);
      drd = accumulate(b, drd, step_r);
      dbd = accumulate(b, dbd, step_b);
      V& slot = dx[size_t(time(k))];
      slot = accumulate(b, slot, b.matmul(dg, w));
      dh_next = b.matmul(dg, r);
      dc_next = b.mul(dc, gf[s]);
    }
    out.w.push_back(dwd);
    out.r.push_back(drd);
    out.bias.push_back(b.call1("Concat", {dbd, dbd}, {{"axis", int64_t(0)}}));  // the input and the recurrent bias
    out.h0.push_back(dh_next);
    out.c0.push_back(dc_next);
  }
  out.state(b);
}


// The forward pass of one direction of RNN or GRU, recomputed for its backward: per processed step
// k (time index time(k)) the input x, the state h[k] before and h[k + 1] after, and the gates.
struct Walk {
  std::vector<V> x, h, z, r, hh, s;  // s: GRU with linear_before_reset, h R_h^T + Rb_h
};

// RNN: h' = tanh(x W^T + h R^T + Wb + Rb), by backpropagation through time.
void rnn_vjp(G& b) {
  check_recurrence(b, {"Tanh"});
  const Recurrence rec = recurrence(b, 1);
  const int64_t steps = rec.steps, dirs = rec.dirs, hidden = rec.hidden;
  const V& zeros = rec.zeros;
  RecurrentGrads out(steps);
  std::vector<V>& dx = out.x;
  for (int64_t d = 0; d < dirs; ++d) {
    auto time = [&](int64_t k) { return reversed(b, d) ? steps - 1 - k : k; };
    const V w = pick(b, b.x(1), 0, d), r = pick(b, b.x(2), 0, d);
    V bias;
    if (b.has_input(3)) {
      V both = pick(b, b.x(3), 0, d);
      bias = b.add(slice_axis(b, both, 0, 0, hidden), slice_axis(b, both, 0, hidden, 2 * hidden));
    }
    Walk f;
    f.h.push_back(b.has_input(5) ? pick(b, b.x(5), 0, d) : zeros);
    for (int64_t k = 0; k < steps; ++k) {
      f.x.push_back(pick(b, b.x(0), 0, time(k)));
      V a = b.add(b.matmul(f.x.back(), b.transpose(w, {1, 0})), b.matmul(f.h.back(), b.transpose(r, {1, 0})));
      if (bias.defined()) a = b.add(a, bias);
      f.h.push_back(b.call1("Tanh", {a}));
    }
    V dh_next = b.dy(1).defined() ? pick(b, b.dy(1), 0, d) : zeros, dwd, drd, dbd;
    for (int64_t k = steps - 1; k >= 0; --k) {
      const size_t s = size_t(k);
      V dh = dh_next;
      if (b.dy(0).defined()) dh = b.add(dh, pick(b, pick(b, b.dy(0), 0, time(k)), 0, d));
      V da = b.mul(dh, b.one_minus(b.mul(f.h[s + 1], f.h[s + 1])));
      V dat = b.transpose(da, {1, 0});
      dwd = accumulate(b, dwd, b.matmul(dat, f.x[s]));
      drd = accumulate(b, drd, b.matmul(dat, f.h[s]));
      dbd = accumulate(b, dbd, b.reduce_sum(da, {0}, false));
      V& slot = dx[size_t(time(k))];
      slot = accumulate(b, slot, b.matmul(da, w));
      dh_next = b.matmul(da, r);
    }
    out.w.push_back(dwd);
    out.r.push_back(drd);
    out.bias.push_back(b.call1("Concat", {dbd, dbd}, {{"axis", int64_t(0)}}));
    out.h0.push_back(dh_next);
  }
  out.state(b);
}

// GRU (gates z, r, h in ONNX's order): h' = (1 - z) h^ + z h, with h^ = tanh(x W_h^T + (r h) R_h^T + Rb_h +
// Wb_h), or with linear_before_reset tanh(x W_h^T + Wb_h + r (h R_h^T + Rb_h)); by backpropagation
// through time.
void gru_vjp(G& b) {
  check_recurrence(b, {"Sigmoid", "Tanh"});
  const bool lbr = b.attr_int("linear_before_reset") != 0;
  const Recurrence rec = recurrence(b, 3);
  const int64_t steps = rec.steps, dirs = rec.dirs, hidden = rec.hidden;
  const V& zeros = rec.zeros;
  RecurrentGrads out(steps);
  std::vector<V>& dx = out.x;
  for (int64_t d = 0; d < dirs; ++d) {
    auto time = [&](int64_t k) { return reversed(b, d) ? steps - 1 - k : k; };
    const V w = pick(b, b.x(1), 0, d), r = pick(b, b.x(2), 0, d);  // [3H, I], [3H, H]
    auto rows = [&](const V& v, int64_t gate) { return slice_axis(b, v, 0, gate * hidden, (gate + 1) * hidden); };
    const V wz = rows(w, 0), wr = rows(w, 1), wh = rows(w, 2), rz = rows(r, 0), rr = rows(r, 1), rh = rows(r, 2);
    V wb[3], rb[3];
    if (b.has_input(3)) {
      V both = pick(b, b.x(3), 0, d);
      for (int64_t g = 0; g < 3; ++g) {
        wb[g] = slice_axis(b, both, 0, g * hidden, (g + 1) * hidden);
        rb[g] = slice_axis(b, both, 0, (3 + g) * hidden, (4 + g) * hidden);
      }
    }
    auto affine = [&](const V& v, const V& m, const V& bias) {
      V y = b.matmul(v, b.transpose(m, {1, 0}));
      return bias.defined() ? b.add(y, bias) : y;
    };
    auto both_bias = [&](int g) { return wb[g].defined() ? b.add(wb[g], rb[g]) : V{}; };
    Walk f;
    f.h.push_back(b.has_input(5) ? pick(b, b.x(5), 0, d) : zeros);
    for (int64_t k = 0; k < steps; ++k) {
      const V x = pick(b, b.x(0), 0, time(k)), h = f.h.back();
      f.x.push_back(x);
      f.z.push_back(b.call1("Sigmoid", {b.add(affine(x, wz, both_bias(0)), b.matmul(h, b.transpose(rz, {1, 0})))}));
      f.r.push_back(b.call1("Sigmoid", {b.add(affine(x, wr, both_bias(1)), b.matmul(h, b.transpose(rr, {1, 0})))}));
      V pre;
      if (lbr) {
        f.s.push_back(affine(h, rh, rb[2]));
        pre = b.add(affine(x, wh, wb[2]), b.mul(f.r.back(), f.s.back()));
      } else {
        pre = b.add(affine(x, wh, wb[2]), affine(b.mul(f.r.back(), h), rh, rb[2]));
      }
      f.hh.push_back(b.call1("Tanh", {pre}));
      f.h.push_back(b.add(b.mul(b.one_minus(f.z.back()), f.hh.back()), b.mul(f.z.back(), h)));
    }
    V dh_next = b.dy(1).defined() ? pick(b, b.dy(1), 0, d) : zeros;
    V dwg[3], drg[3], dwb[3], drb[3];
    auto add_to = [&](V& sum, const V& term) { sum = accumulate(b, sum, term); };
    auto outer = [&](const V& da, const V& v) { return b.matmul(b.transpose(da, {1, 0}), v); };
    for (int64_t k = steps - 1; k >= 0; --k) {
      const size_t s = size_t(k);
      const V &h = f.h[s], &z = f.z[s], &rg = f.r[s], &hh = f.hh[s], &x = f.x[s];
      V dh = dh_next;
      if (b.dy(0).defined()) dh = b.add(dh, pick(b, pick(b, b.dy(0), 0, time(k)), 0, d));
      V dz = b.mul(dh, b.sub(h, hh));
      V dh_prev = b.mul(dh, z);
      V da_h = b.mul(b.mul(dh, b.one_minus(z)), b.one_minus(b.mul(hh, hh)));
      add_to(dwg[2], outer(da_h, x));
      add_to(dwb[2], b.reduce_sum(da_h, {0}, false));
      V dr_gate;
      if (lbr) {
        V ds = b.mul(da_h, rg);
        dr_gate = b.mul(da_h, f.s[s]);
        add_to(drg[2], outer(ds, h));
        add_to(drb[2], b.reduce_sum(ds, {0}, false));
        dh_prev = b.add(dh_prev, b.matmul(ds, rh));
      } else {
        V drh = b.matmul(da_h, rh);  // d(r h)
        dr_gate = b.mul(drh, h);
        add_to(drg[2], outer(da_h, b.mul(rg, h)));
        add_to(drb[2], b.reduce_sum(da_h, {0}, false));
        dh_prev = b.add(dh_prev, b.mul(drh, rg));
      }
      V da_z = b.mul(dz, b.mul(z, b.one_minus(z)));
      V da_r = b.mul(dr_gate, b.mul(rg, b.one_minus(rg)));
      add_to(dwg[0], outer(da_z, x));
      add_to(dwg[1], outer(da_r, x));
      add_to(drg[0], outer(da_z, h));
      add_to(drg[1], outer(da_r, h));
      for (int g = 0; g < 2; ++g) {
        V sum = b.reduce_sum(g == 0 ? da_z : da_r, {0}, false);
        add_to(dwb[g], sum);
        add_to(drb[g], sum);
      }
      V& slot = dx[size_t(time(k))];
      slot = accumulate(b, slot, b.add(b.add(b.matmul(da_z, wz), b.matmul(da_r, wr)), b.matmul(da_h, wh)));
      dh_next = b.add(dh_prev, b.add(b.matmul(da_z, rz), b.matmul(da_r, rr)));
    }
    auto cat = [&](std::vector<V> parts) { return b.call1("Concat", parts, {{"axis", int64_t(0)}}); };
    out.w.push_back(cat({dwg[0], dwg[1], dwg[2]}));
    out.r.push_back(cat({drg[0], drg[1], drg[2]}));
    out.bias.push_back(cat({dwb[0], dwb[1], dwb[2], drb[0], drb[1], drb[2]}));
    out.h0.push_back(dh_next);
  }
  out.state(b);
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
    .summary("Gated recurrent unit layer; activations default to Sigmoid, Tanh.")
    .vjp(gru_vjp);

INGOT_OP(RNN).versions(1).inputs(3, 6).outputs(0, 2).INGOT_RNN_COMMON_ATTRS.summary(
    "Simple recurrent layer H = f(X*W^T + H*R^T + b); activation defaults to Tanh.")
    .vjp(rnn_vjp);

#undef INGOT_RNN_COMMON_ATTRS

}  // namespace ingot
