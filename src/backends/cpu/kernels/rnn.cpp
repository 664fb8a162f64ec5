// CPU kernels for LSTM, GRU and RNN. Per direction: one GEMM projects the inputs of all time steps
// (X * W^T, biases folded in), then each step does one recurrent GEMM (H * R^T; GRU without
// linear_before_reset needs a second one after the reset gate) and an elementwise cell update.
// Layout 1 is handled by strides, not transposes, and sequence_lens by masking rows per step.
// float32/float64 compute natively (sgemm/dgemm); float16/bfloat16 compute in float32.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels/elementwise.h"
#include "backends/cpu/kernels/gemm.h"
#include "core/dispatch.h"
#include "ops/kernel.h"
#include "ops/semantics/rnn_args.h"

namespace ingot {
namespace {

using Cell = sem::RnnCell;
using sem::Activation;
using sem::ActKind;
inline int num_gates(Cell cell) { return sem::rnn_num_gates(cell); }

// ---- activations (parsed by sem::rnn_args, ops/semantics/rnn_args.h) -------------------------------

template <class T>
void tanh_in_place(T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; ++i) x[i] = cpu::fast_tanhf(x[i]);  // vectorizes, unlike std::tanh
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
  }
}

template <class T>
void sigmoid_in_place(T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + cpu::fast_expf(-x[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = T(1) / (T(1) + std::exp(-x[i]));
  }
}

// In place on n values; `clip` > 0 clamps the inputs to [-clip, clip] first.
template <class T>
void activate(const Activation& act, T* x, int64_t n, T clip) {
  if (clip > 0) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], -clip), clip);
  }
  const T alpha = T(act.alpha), beta = T(act.beta);
  switch (act.kind) {
    case ActKind::Sigmoid: sigmoid_in_place(x, n); break;
    case ActKind::Tanh: tanh_in_place(x, n); break;
    case ActKind::Relu:
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], T(0));
      break;
    case ActKind::Affine:
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * x[i] + beta;
      break;
    case ActKind::LeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0 ? x[i] : alpha * x[i];
      break;
    case ActKind::ThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > alpha ? x[i] : T(0);
      break;
    case ActKind::ScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] *= beta;
      tanh_in_place(x, n);
      for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
      break;
    case ActKind::HardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::min(T(1), std::max(T(0), alpha * x[i] + beta));
      break;
    case ActKind::Elu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0 ? x[i] : alpha * (std::exp(x[i]) - T(1));
      break;
    case ActKind::Softsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (T(1) + std::abs(x[i]));
      break;
    case ActKind::Softplus:
      for (int64_t i = 0; i < n; ++i) x[i] = std::log1p(std::exp(x[i]));
      break;
  }
}

// ---- GEMM ---------------------------------------------------------------------------------------

// c[m, n] = a[m, k] * b[n, k]^T; a and b are row-major with k columns.
template <class T>
void gemm_nt(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  cpu::gemm<T>(false, true, m, n, k, 1.0, a, k, b, k, 0.0, c, n);
}

// ---- one direction -----------------------------------------------------------------------------

// Where batch entry b, time step t lives in a strided [.., H] tensor: offset = t*t_stride + b*b_stride.
template <class T>
struct Strided {
  T* data = nullptr;
  int64_t t_stride = 0, b_stride = 0;
  T* row(int64_t t, int64_t b) const { return data + t * t_stride + b * b_stride; }
};

template <class T>
struct Direction {
  Cell cell;
  int64_t seq, batch, input, hidden;
  bool reverse;
  const T* x;                        // [seq*batch, input]; row of (t, b) given by x_row()
  bool batch_major;                  // layout 1: X rows ordered (b, t)
  const T* w;                        // [G*H, input]
  const T* r;                        // [G*H, H]
  const T* bias = nullptr;           // [2*G*H]: Wb then Rb
  const T* peephole = nullptr;       // [3H]: i, o, f
  Strided<const T> h0, c0;           // t_stride unused
  const int64_t* lengths = nullptr;  // [batch]; nullptr: all seq
  const Activation* acts;            // f, g, h
  T clip = 0;
  bool input_forget = false, linear_before_reset = false;
  Strided<T> y, y_h, y_c;  // y_h/y_c: t_stride unused; any may have null data

  int64_t x_row(int64_t t, int64_t b) const { return batch_major ? b * seq + t : t * batch + b; }
};

template <class T>
void run_direction(const Direction<T>& d) {
  const int64_t H = d.hidden, G = num_gates(d.cell), GH = G * H, batch = d.batch;
  // Input projection of every step at once, with the biases that add linearly folded in.
  std::vector<T> xw(size_t(d.seq * batch * GH));
  gemm_nt(d.seq * batch, GH, d.input, d.x, d.w, xw.data());
  std::vector<T> rb_h;  // GRU with linear_before_reset keeps Rb of the h gate apart (it sits inside r * ...)
  if (d.bias) {
    std::vector<T> folded(static_cast<size_t>(GH));
    for (int64_t j = 0; j < GH; ++j) folded[j] = d.bias[j] + d.bias[GH + j];
    if (d.cell == Cell::GRU && d.linear_before_reset) {
      rb_h.assign(d.bias + GH + 2 * H, d.bias + GH + 3 * H);
      for (int64_t j = 2 * H; j < GH; ++j) folded[j] = d.bias[j];
    }
    for (int64_t row = 0; row < d.seq * batch; ++row) {
      T* out = xw.data() + row * GH;
      for (int64_t j = 0; j < GH; ++j) out[j] += folded[j];
    }
  }
  if (d.cell == Cell::GRU && d.linear_before_reset && rb_h.empty()) rb_h.assign(size_t(H), T(0));

  std::vector<T> h(size_t(batch * H), T(0)), c;
  for (int64_t b = 0; d.h0.data && b < batch; ++b) std::copy_n(d.h0.row(0, b), H, h.data() + b * H);
  if (d.cell == Cell::LSTM) {
    c.assign(size_t(batch * H), T(0));
    for (int64_t b = 0; d.c0.data && b < batch; ++b) std::copy_n(d.c0.row(0, b), H, c.data() + b * H);
  }
  int64_t steps = d.seq;
  if (d.lengths) steps = batch ? *std::max_element(d.lengths, d.lengths + batch) : 0;

  // scratch: h(C) for LSTM, r * H_prev for GRU; candidate: GRU's h~ without linear_before_reset.
  std::vector<T> gates(size_t(batch * GH)), scratch(size_t(batch * H)), candidate;
  if (d.cell == Cell::GRU && !d.linear_before_reset) candidate.resize(size_t(batch * H));
  const Activation& f = d.acts[0];
  const Activation& g = d.acts[d.cell == Cell::RNN ? 0 : 1];
  const Activation& hact = d.acts[d.cell == Cell::LSTM ? 2 : 0];
  for (int64_t s = 0; s < steps; ++s) {
    auto active = [&](int64_t b) { return !d.lengths || s < d.lengths[b]; };
    auto time_of = [&](int64_t b) {
      int64_t len = d.lengths ? d.lengths[b] : d.seq;
      return d.reverse ? len - 1 - s : s;
    };
    if (d.cell == Cell::GRU && !d.linear_before_reset) {
      // z and r first (R rows 0..2H), then h~ from (r * H_prev) * Rh^T.
      gemm_nt(batch, 2 * H, H, h.data(), d.r, gates.data());
      for (int64_t b = 0; b < batch; ++b) {
        T* zr = gates.data() + b * 2 * H;
        T* rh = scratch.data() + b * H;
        if (!active(b)) {
          std::fill_n(rh, H, T(0));
          continue;
        }
        const T* xrow = xw.data() + d.x_row(time_of(b), b) * GH;
        for (int64_t j = 0; j < 2 * H; ++j) zr[j] += xrow[j];
        activate(f, zr, 2 * H, d.clip);
        const T* hp = h.data() + b * H;
        for (int64_t j = 0; j < H; ++j) rh[j] = zr[H + j] * hp[j];
      }
      gemm_nt(batch, H, H, scratch.data(), d.r + 2 * H * H, candidate.data());
      for (int64_t b = 0; b < batch; ++b) {
        if (!active(b)) continue;
        int64_t t = time_of(b);
        const T* xh = xw.data() + d.x_row(t, b) * GH + 2 * H;
        T* cand = candidate.data() + b * H;
        for (int64_t j = 0; j < H; ++j) cand[j] += xh[j];
        activate(g, cand, H, d.clip);
        const T* z = gates.data() + b * 2 * H;
        T* hp = h.data() + b * H;
        for (int64_t j = 0; j < H; ++j) hp[j] = (T(1) - z[j]) * cand[j] + z[j] * hp[j];
        if (d.y.data) std::copy_n(hp, H, d.y.row(t, b));
      }
      continue;
    }

    gemm_nt(batch, GH, H, h.data(), d.r, gates.data());
    for (int64_t b = 0; b < batch; ++b) {
      if (!active(b)) continue;
      int64_t t = time_of(b);
      T* gt = gates.data() + b * GH;
      const T* xrow = xw.data() + d.x_row(t, b) * GH;
      T* hp = h.data() + b * H;
      if (d.cell == Cell::RNN) {
        for (int64_t j = 0; j < H; ++j) hp[j] = gt[j] + xrow[j];
        activate(f, hp, H, d.clip);
      } else if (d.cell == Cell::GRU) {  // linear_before_reset: h~ = g(xh + r * (H_prev*Rh^T + Rbh))
        for (int64_t j = 0; j < 2 * H; ++j) gt[j] += xrow[j];
        activate(f, gt, 2 * H, d.clip);
        const T *z = gt, *r = gt + H;
        T* cand = gt + 2 * H;
        for (int64_t j = 0; j < H; ++j) cand[j] = xrow[2 * H + j] + r[j] * (cand[j] + rb_h[j]);
        activate(g, cand, H, d.clip);
        for (int64_t j = 0; j < H; ++j) hp[j] = (T(1) - z[j]) * cand[j] + z[j] * hp[j];
      } else {  // LSTM, gates i, o, f, c
        for (int64_t j = 0; j < GH; ++j) gt[j] += xrow[j];
        T *gi = gt, *go = gt + H, *gf = gt + 2 * H, *gc = gt + 3 * H;
        T* cp = c.data() + b * H;
        if (d.peephole) {
          for (int64_t j = 0; j < H; ++j) gi[j] += d.peephole[j] * cp[j];
          for (int64_t j = 0; j < H; ++j) gf[j] += d.peephole[2 * H + j] * cp[j];
        }
        activate(f, gi, H, d.clip);
        if (d.input_forget) {  // coupled gates, as ONNX Runtime does: f = 1 - i
          for (int64_t j = 0; j < H; ++j) gf[j] = T(1) - gi[j];
        } else {
          activate(f, gf, H, d.clip);
        }
        activate(g, gc, H, d.clip);
        for (int64_t j = 0; j < H; ++j) cp[j] = gf[j] * cp[j] + gi[j] * gc[j];
        if (d.peephole) {
          for (int64_t j = 0; j < H; ++j) go[j] += d.peephole[H + j] * cp[j];
        }
        activate(f, go, H, d.clip);
        T* hc = scratch.data() + b * H;
        std::copy_n(cp, H, hc);
        activate(hact, hc, H, d.clip);
        for (int64_t j = 0; j < H; ++j) hp[j] = go[j] * hc[j];
      }
      if (d.y.data) std::copy_n(hp, H, d.y.row(t, b));
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (d.y_h.data) std::copy_n(h.data() + b * H, H, d.y_h.row(0, b));
    if (d.y_c.data) std::copy_n(c.data() + b * H, H, d.y_c.row(0, b));
  }
}

// ---- kernel ------------------------------------------------------------------------------------

// Shared by LSTM, GRU and RNN; inputs X, W, R, B, sequence_lens, initial_h (, initial_c, P).
void recurrent_kernel(KernelContext& ctx, Cell cell) {
  const sem::RnnArgs args = sem::rnn_args(ctx, cell);
  const Tensor &x = ctx.input(0), &w = ctx.input(1), &r = ctx.input(2);
  const DType dtype = x.dtype();
  const int64_t num_dirs = args.num_dirs, layout = args.layout;
  const int64_t seq = args.seq, batch = args.batch, input = args.input, hidden = args.hidden, GH = args.GH;
  const std::vector<int64_t>& lengths = args.lengths;
  const std::vector<Activation>& acts = args.acts;
  const float clip = args.clip;

  // Outputs Y, Y_h (, Y_c): written in place when the dtype is computed natively.
  const bool native = dtype == DType::Float32 || dtype == DType::Float64;
  const DType compute = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  const size_t num_outputs = args.num_outputs;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < num_outputs; ++i) {
    const Shape shape = args.output_shape(i);
    outputs.push_back(native ? ctx.allocate(i, dtype, shape) : Tensor::empty(compute, shape));
    if (i == 0 && args.padded) std::memset(outputs[0].raw_data(), 0, outputs[0].nbytes());
  }

  dispatch<DType::Float32, DType::Float64>(compute, [&]<class T>() {
    auto data_of = [&](size_t i) -> Tensor { return ctx.has_input(i) ? ctx.input(i).cast(compute) : Tensor(); };
    const Tensor xc = x.cast(compute), wc = w.cast(compute), rc = r.cast(compute), bc = data_of(3), h0 = data_of(5);
    const Tensor c0 = cell == Cell::LSTM ? data_of(6) : Tensor(), pc = cell == Cell::LSTM ? data_of(7) : Tensor();
    auto ptr = [](const Tensor& t) -> T* { return t.defined() ? t.data<T>() : nullptr; };
    // Strides of [.., H] rows: state tensors are [dirs, batch, H] or [batch, dirs, H]; Y is
    // [seq, dirs, batch, H] or [batch, seq, dirs, H].
    const int64_t state_b = layout == 0 ? hidden : num_dirs * hidden;
    auto state_at = [&](const Tensor& t, int64_t dir) {
      return Strided<T>{ptr(t) ? ptr(t) + dir * (layout == 0 ? batch * hidden : hidden) : nullptr, 0, state_b};
    };
    for (int64_t dir = 0; dir < num_dirs; ++dir) {
      Direction<T> d;
      d.cell = cell;
      d.seq = seq, d.batch = batch, d.input = input, d.hidden = hidden;
      d.reverse = args.is_reverse(dir);
      d.x = ptr(xc);
      d.batch_major = layout == 1;
      d.w = ptr(wc) + dir * GH * input;
      d.r = ptr(rc) + dir * GH * hidden;
      d.bias = bc.defined() ? ptr(bc) + dir * 2 * GH : nullptr;
      d.peephole = pc.defined() ? ptr(pc) + dir * 3 * hidden : nullptr;
      Strided<T> h0s = state_at(h0, dir), c0s = state_at(c0, dir);
      d.h0 = {h0s.data, 0, h0s.b_stride};
      d.c0 = {c0s.data, 0, c0s.b_stride};
      d.lengths = lengths.empty() ? nullptr : lengths.data();
      d.acts = acts.data() + dir * int64_t(args.acts_per_direction);
      d.clip = T(clip);
      d.input_forget = args.input_forget;
      d.linear_before_reset = args.linear_before_reset;
      if (num_outputs > 0) {
        T* y = ptr(outputs[0]);
        d.y = layout == 0 ? Strided<T>{y + dir * batch * hidden, num_dirs * batch * hidden, hidden}
                          : Strided<T>{y + dir * hidden, num_dirs * hidden, seq * num_dirs * hidden};
      }
      if (num_outputs > 1) d.y_h = state_at(outputs[1], dir);
      if (num_outputs > 2) d.y_c = state_at(outputs[2], dir);
      run_direction(d);
    }
  });
  if (!native) {
    for (size_t i = 0; i < num_outputs; ++i) ctx.set_output(i, outputs[i].cast(dtype));
  }
}

void lstm_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::LSTM); }
void gru_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::GRU); }
void rnn_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::RNN); }

}  // namespace

INGOT_CPU_KERNEL(LSTM, lstm_kernel).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(GRU, gru_kernel).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(RNN, rnn_kernel).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
