// CUDA kernels for LSTM, GRU and RNN, mirroring src/backends/cpu/kernels/rnn.cpp step for step.
// Per direction: one GEMM projects the inputs of all time steps (X * W^T), then each step does one
// recurrent GEMM (H * R^T; GRU without linear_before_reset needs a second one after the reset
// gate) and one fused pointwise kernel (biases, peepholes, activations with clip, sequence_lens
// masking, the state update and the write of Y). Layout 1 is handled by strides, not transposes.
// The state and the GEMMs run in the compute type (float32, float64 for float64): 16-bit inputs
// are converted once, as the CPU kernel does; biases, peepholes and initial states are read in
// their own dtype and Y, Y_h, Y_c are written in it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "ops/semantics/rnn_args.h"

namespace ingot::cuda {
namespace {

using Cell = sem::RnnCell;
using sem::Activation;
using sem::ActKind;

// Activations are parsed on the host by sem::rnn_args (ops/semantics/rnn_args.h), as on the CPU.

// ---- device math --------------------------------------------------------------------------------

// One activation of one value; `clip` > 0 clamps the input to [-clip, clip] first (as the CPU).
template <class A>
__device__ __forceinline__ A activate(const Activation& act, A x, A clip) {
  if (clip > 0) x = x < -clip ? -clip : (x > clip ? clip : x);
  const A alpha = A(act.alpha), beta = A(act.beta);
  switch (act.kind) {
    case ActKind::Sigmoid: return A(1) / (A(1) + exp_of(-x));
    case ActKind::Tanh: return tanh_of(x);
    case ActKind::Relu: return x < A(0) ? A(0) : x;  // std::max(x, 0): NaN stays NaN
    case ActKind::Affine: return alpha * x + beta;
    case ActKind::LeakyRelu: return x >= 0 ? x : alpha * x;
    case ActKind::ThresholdedRelu: return x > alpha ? x : A(0);
    case ActKind::ScaledTanh: return alpha * tanh_of(x * beta);
    case ActKind::HardSigmoid: {
      A v = alpha * x + beta;
      v = v > A(0) ? v : A(0);
      return v < A(1) ? v : A(1);
    }
    case ActKind::Elu: return x >= 0 ? x : alpha * (exp_of(x) - A(1));
    case ActKind::Softsign: return x / (A(1) + (x < 0 ? -x : x));
    case ActKind::Softplus: return log1p_of(exp_of(x));
  }
  return x;
}

// ---- pointwise kernels --------------------------------------------------------------------------

// What one step's pointwise kernel needs. T: the tensors' element type; A: the compute type.
template <class T, class A>
struct StepArgs {
  int64_t seq, batch, H, GH, s;
  bool reverse, batch_major, input_forget;
  const A* xw;                       // [seq*batch, GH]: X * W^T, rows in X's order
  const T* bias;                     // [2*GH] (Wb then Rb) or nullptr
  const T* peephole;                 // [3H] (i, o, f) or nullptr
  const int64_t* lengths;            // [batch] or nullptr
  A* gates;                          // [batch, GH]: H * R^T
  A* h;                              // [batch, H]
  A* c;                              // [batch, H] (LSTM)
  A* scratch;                        // [batch, H]: GRU's r * H_prev
  const A* cand;                     // [batch, H]: GRU's (r * H_prev) * Rh^T
  T* y;                              // Y slice of this direction or nullptr
  int64_t y_t, y_b;                  // strides of Y per time step and batch entry
  Activation f, g, hact;
  A clip;

  __device__ __forceinline__ bool active(int64_t b) const { return !lengths || s < lengths[b]; }
  __device__ __forceinline__ int64_t time_of(int64_t b) const {
    const int64_t len = lengths ? lengths[b] : seq;
    return reverse ? len - 1 - s : s;
  }
  __device__ __forceinline__ const A* x_row(int64_t t, int64_t b) const {
    return xw + (batch_major ? b * seq + t : t * batch + b) * GH;
  }
  // Wb + Rb of gate column j, folded as the CPU folds them (in the compute type).
  __device__ __forceinline__ A folded(int64_t j) const {
    return bias ? A(load(bias[j])) + A(load(bias[GH + j])) : A(0);
  }
  __device__ __forceinline__ void write_y(int64_t t, int64_t b, int64_t j, A v) const {
    if (y) y[t * y_t + b * y_b + j] = store<T>(v);
  }
};

template <class T, class A>
__global__ void lstm_step_kernel(StepArgs<T, A> a) {
  const int64_t n = a.batch * a.H, H = a.H;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t b = e / H, j = e - b * H;
    if (!a.active(b)) continue;
    const int64_t t = a.time_of(b);
    const A* xr = a.x_row(t, b);
    const A* gt = a.gates + b * a.GH;
    A gi = gt[j] + (xr[j] + a.folded(j));
    A go = gt[H + j] + (xr[H + j] + a.folded(H + j));
    A gf = gt[2 * H + j] + (xr[2 * H + j] + a.folded(2 * H + j));
    A gc = gt[3 * H + j] + (xr[3 * H + j] + a.folded(3 * H + j));
    A cp = a.c[e];
    if (a.peephole) {
      gi += A(load(a.peephole[j])) * cp;
      gf += A(load(a.peephole[2 * H + j])) * cp;
    }
    gi = activate(a.f, gi, a.clip);
    gf = a.input_forget ? A(1) - gi : activate(a.f, gf, a.clip);
    gc = activate(a.g, gc, a.clip);
    cp = gf * cp + gi * gc;
    a.c[e] = cp;
    if (a.peephole) go += A(load(a.peephole[H + j])) * cp;
    go = activate(a.f, go, a.clip);
    const A hv = go * activate(a.hact, cp, a.clip);
    a.h[e] = hv;
    a.write_y(t, b, j, hv);
  }
}

template <class T, class A>
__global__ void rnn_step_kernel(StepArgs<T, A> a) {
  const int64_t n = a.batch * a.H, H = a.H;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t b = e / H, j = e - b * H;
    if (!a.active(b)) continue;
    const int64_t t = a.time_of(b);
    const A* xr = a.x_row(t, b);
    const A hv = activate(a.f, a.gates[b * a.GH + j] + (xr[j] + a.folded(j)), a.clip);
    a.h[e] = hv;
    a.write_y(t, b, j, hv);
  }
}

// GRU with linear_before_reset: h~ = g(xh + Wbh + r * (H_prev * Rh^T + Rbh)).
template <class T, class A>
__global__ void gru_lbr_step_kernel(StepArgs<T, A> a) {
  const int64_t n = a.batch * a.H, H = a.H;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t b = e / H, j = e - b * H;
    if (!a.active(b)) continue;
    const int64_t t = a.time_of(b);
    const A* xr = a.x_row(t, b);
    const A* gt = a.gates + b * a.GH;
    const A z = activate(a.f, gt[j] + (xr[j] + a.folded(j)), a.clip);
    const A r = activate(a.f, gt[H + j] + (xr[H + j] + a.folded(H + j)), a.clip);
    const A wbh = a.bias ? A(load(a.bias[2 * H + j])) : A(0);
    const A rbh = a.bias ? A(load(a.bias[a.GH + 2 * H + j])) : A(0);
    A cand = (xr[2 * H + j] + wbh) + r * (gt[2 * H + j] + rbh);
    cand = activate(a.g, cand, a.clip);
    const A hv = (A(1) - z) * cand + z * a.h[e];
    a.h[e] = hv;
    a.write_y(t, b, j, hv);
  }
}

// GRU without linear_before_reset, before the second GEMM: z into gates[.., 0:H], r * H_prev
// into scratch (zeros for finished rows, so the GEMM reads defined values).
template <class T, class A>
__global__ void gru_gates_kernel(StepArgs<T, A> a) {
  const int64_t n = a.batch * a.H, H = a.H;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t b = e / H, j = e - b * H;
    if (!a.active(b)) {
      a.scratch[e] = A(0);
      continue;
    }
    const A* xr = a.x_row(a.time_of(b), b);
    A* gt = a.gates + b * a.GH;
    const A z = activate(a.f, gt[j] + (xr[j] + a.folded(j)), a.clip);
    const A r = activate(a.f, gt[H + j] + (xr[H + j] + a.folded(H + j)), a.clip);
    gt[j] = z;
    a.scratch[e] = r * a.h[e];
  }
}

// ... and after it: h~ = g(xh + Wbh + Rbh + (r * H_prev) * Rh^T), H = (1 - z) h~ + z H_prev.
template <class T, class A>
__global__ void gru_update_kernel(StepArgs<T, A> a) {
  const int64_t n = a.batch * a.H, H = a.H;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t b = e / H, j = e - b * H;
    if (!a.active(b)) continue;
    const int64_t t = a.time_of(b);
    const A* xr = a.x_row(t, b);
    const A cand = activate(a.g, a.cand[e] + (xr[2 * H + j] + a.folded(2 * H + j)), a.clip);
    const A z = a.gates[b * a.GH + j];
    const A hv = (A(1) - z) * cand + z * a.h[e];
    a.h[e] = hv;
    a.write_y(t, b, j, hv);
  }
}

// dst[b*dst_b + j] = src[b*src_b + j] for b < batch, j < H, converting element types.
template <class Out, class In>
__global__ void copy_rows_kernel(Out* __restrict__ dst, int64_t dst_b, const In* __restrict__ src, int64_t src_b,
                                 int64_t batch, int64_t H) {
  const int64_t n = batch * H;
  for (int64_t e = thread_index(); e < n; e += grid_stride()) {
    const int64_t b = e / H, j = e - b * H;
    dst[b * dst_b + j] = store<Out>(load(src[b * src_b + j]));
  }
}

template <class Out, class In>
void copy_rows(Out* dst, int64_t dst_b, const In* src, int64_t src_b, int64_t batch, int64_t H) {
  if (batch * H == 0) return;
  copy_rows_kernel<Out, In><<<blocks_for(batch * H), kThreads, 0, stream()>>>(dst, dst_b, src, src_b, batch, H);
  INGOT_CUDA_LAUNCH_CHECK();
}

template <class Out, class In>
__global__ void convert_kernel(Out* __restrict__ dst, const In* __restrict__ src, int64_t n) {
  for (int64_t e = thread_index(); e < n; e += grid_stride()) dst[e] = store<Out>(load(src[e]));
}

// ---- GEMM ---------------------------------------------------------------------------------------

// c[m, n] (row stride ldc) = a[m, k] * b[n, k]^T; a and b row-major with k columns.
void gemm_nt(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, int64_t ldc,
             size_t elem) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty product: zeros (rows of n values at stride ldc)
    INGOT_CUDA_CHECK(cudaMemset2DAsync(c, size_t(ldc) * elem, 0, size_t(n) * elem, size_t(m), stream()));
    return;
  }
  GemmArgs g;
  g.dtype = dtype;
  g.trans_a = false;
  g.trans_b = true;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.lda = k;
  g.b = b, g.ldb = k;
  g.c = c, g.ldc = ldc;
  gemm(g);
}

// ---- kernel -------------------------------------------------------------------------------------

void recurrent_kernel(KernelContext& ctx, Cell cell) {
  const sem::RnnArgs args = sem::rnn_args(ctx, cell);
  const Tensor &x = ctx.input(0), &w = ctx.input(1), &r = ctx.input(2);
  const DType dtype = x.dtype();
  const int64_t num_dirs = args.num_dirs, layout = args.layout;
  const int64_t seq = args.seq, batch = args.batch, input = args.input, hidden = args.hidden, GH = args.GH;
  const std::vector<int64_t>& lengths = args.lengths;
  const std::vector<Activation>& acts = args.acts;
  const float clip = args.clip;
  const bool linear_before_reset = args.linear_before_reset;

  const Device device = ctx.device();
  const size_t num_outputs = args.num_outputs;
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < num_outputs; ++i) {
    outputs.push_back(ctx.allocate(i, dtype, args.output_shape(i)));
    if (i == 0 && args.padded && outputs[0].nbytes() > 0) {
      INGOT_CUDA_CHECK(cudaMemsetAsync(outputs[0].raw_data(), 0, outputs[0].nbytes(), stream()));
    }
  }
  if (batch == 0) return;  // every output is empty

  Tensor lengths_dev;
  if (!lengths.empty()) lengths_dev = Tensor::from_vector<int64_t>(lengths, {batch}).to(device);
  const int64_t* lengths_ptr = lengths.empty() ? nullptr : lengths_dev.data<int64_t>();
  int64_t steps = seq;
  if (!lengths.empty()) steps = *std::max_element(lengths.begin(), lengths.end());

  dispatch_device<DType::Float32, DType::Float16, DType::BFloat16, DType::Float64>(dtype, [&]<class T>() {
    using A = compute_t<T>;
    const DType adt = std::is_same_v<A, double> ? DType::Float64 : DType::Float32;
    const size_t aelem = sizeof(A);
    // X, W and R in the compute type (16-bit inputs are converted once, as on the CPU).
    auto as_compute = [&](const Tensor& t) -> Tensor {
      if (t.dtype() == adt) return t;
      Tensor out = Tensor::empty(adt, t.shape(), device);
      const int64_t n = t.numel();
      if (n > 0) {
        convert_kernel<A, T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<A>(out), ptr<const T>(t), n);
        INGOT_CUDA_LAUNCH_CHECK();
      }
      return out;
    };
    const Tensor xc = as_compute(x), wc = as_compute(w), rc = as_compute(r);
    auto tptr = [&](size_t i) -> const T* { return ctx.has_input(i) ? ptr<const T>(ctx.input(i)) : nullptr; };
    const T* bias = tptr(3);
    const T* h0 = tptr(5);
    const T* c0 = cell == Cell::LSTM ? tptr(6) : nullptr;
    const T* peep = cell == Cell::LSTM ? tptr(7) : nullptr;

    // State rows: [dirs, batch, H] (layout 0) or [batch, dirs, H] (layout 1).
    const int64_t state_b = layout == 0 ? hidden : num_dirs * hidden;
    const int64_t state_dir = layout == 0 ? batch * hidden : hidden;

    Tensor xw = Tensor::empty(adt, {seq * batch, GH}, device);
    Tensor gates = Tensor::empty(adt, {batch, GH}, device);
    Tensor h = Tensor::empty(adt, {batch, hidden}, device);
    Tensor c, scratch, cand;
    if (cell == Cell::LSTM) c = Tensor::empty(adt, {batch, hidden}, device);
    if (cell == Cell::GRU && !linear_before_reset) {
      scratch = Tensor::empty(adt, {batch, hidden}, device);
      cand = Tensor::empty(adt, {batch, hidden}, device);
    }
    const unsigned blocks = blocks_for(batch * hidden);

    for (int64_t dir = 0; dir < num_dirs; ++dir) {
      const A* w_dir = ptr<const A>(wc) + dir * GH * input;
      const A* r_dir = ptr<const A>(rc) + dir * GH * hidden;
      // Input projection of every step at once (rows in X's order).
      gemm_nt(adt, seq * batch, GH, input, ptr<const A>(xc), w_dir, ptr<A>(xw), GH, aelem);
      // Initial state.
      if (h0) {
        copy_rows(ptr<A>(h), hidden, h0 + dir * state_dir, state_b, batch, hidden);
      } else {
        INGOT_CUDA_CHECK(cudaMemsetAsync(h.raw_data(), 0, h.nbytes(), stream()));
      }
      if (cell == Cell::LSTM) {
        if (c0) {
          copy_rows(ptr<A>(c), hidden, c0 + dir * state_dir, state_b, batch, hidden);
        } else {
          INGOT_CUDA_CHECK(cudaMemsetAsync(c.raw_data(), 0, c.nbytes(), stream()));
        }
      }

      StepArgs<T, A> a{};
      a.seq = seq, a.batch = batch, a.H = hidden, a.GH = GH;
      a.reverse = args.is_reverse(dir);
      a.batch_major = layout == 1;
      a.input_forget = args.input_forget;
      a.xw = ptr<const A>(xw);
      a.bias = bias ? bias + dir * 2 * GH : nullptr;
      a.peephole = peep ? peep + dir * 3 * hidden : nullptr;
      a.lengths = lengths_ptr;
      a.gates = ptr<A>(gates);
      a.h = ptr<A>(h);
      a.c = c.defined() ? ptr<A>(c) : nullptr;
      a.scratch = scratch.defined() ? ptr<A>(scratch) : nullptr;
      a.cand = cand.defined() ? ptr<const A>(cand) : nullptr;
      if (num_outputs > 0 && outputs[0].numel() > 0) {
        T* y = ptr<T>(outputs[0]);
        if (layout == 0) {
          a.y = y + dir * batch * hidden, a.y_t = num_dirs * batch * hidden, a.y_b = hidden;
        } else {
          a.y = y + dir * hidden, a.y_t = num_dirs * hidden, a.y_b = seq * num_dirs * hidden;
        }
      }
      const Activation* da = acts.data() + dir * int64_t(args.acts_per_direction);
      a.f = da[0];
      a.g = da[cell == Cell::RNN ? 0 : 1];
      a.hact = da[cell == Cell::LSTM ? 2 : 0];
      a.clip = A(clip);

      for (int64_t s = 0; s < steps; ++s) {
        a.s = s;
        if (cell == Cell::GRU && !linear_before_reset) {
          gemm_nt(adt, batch, 2 * hidden, hidden, ptr<const A>(h), r_dir, ptr<A>(gates), GH, aelem);
          gru_gates_kernel<T, A><<<blocks, kThreads, 0, stream()>>>(a);
          INGOT_CUDA_LAUNCH_CHECK();
          gemm_nt(adt, batch, hidden, hidden, ptr<const A>(scratch), r_dir + 2 * hidden * hidden, ptr<A>(cand), hidden,
                  aelem);
          gru_update_kernel<T, A><<<blocks, kThreads, 0, stream()>>>(a);
          INGOT_CUDA_LAUNCH_CHECK();
          continue;
        }
        gemm_nt(adt, batch, GH, hidden, ptr<const A>(h), r_dir, ptr<A>(gates), GH, aelem);
        if (cell == Cell::LSTM) {
          lstm_step_kernel<T, A><<<blocks, kThreads, 0, stream()>>>(a);
        } else if (cell == Cell::GRU) {
          gru_lbr_step_kernel<T, A><<<blocks, kThreads, 0, stream()>>>(a);
        } else {
          rnn_step_kernel<T, A><<<blocks, kThreads, 0, stream()>>>(a);
        }
        INGOT_CUDA_LAUNCH_CHECK();
      }
      if (num_outputs > 1) copy_rows(ptr<T>(outputs[1]) + dir * state_dir, state_b, ptr<const A>(h), hidden, batch, hidden);
      if (num_outputs > 2) copy_rows(ptr<T>(outputs[2]) + dir * state_dir, state_b, ptr<const A>(c), hidden, batch, hidden);
    }
  });
}

void lstm_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::LSTM); }
void gru_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::GRU); }
void rnn_kernel(KernelContext& ctx) { recurrent_kernel(ctx, Cell::RNN); }

}  // namespace

INGOT_CUDA_KERNEL(LSTM, lstm_kernel).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES}).host_inputs({4});
INGOT_CUDA_KERNEL(GRU, gru_kernel).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES}).host_inputs({4});
INGOT_CUDA_KERNEL(RNN, rnn_kernel).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES}).host_inputs({4});

}  // namespace ingot::cuda
