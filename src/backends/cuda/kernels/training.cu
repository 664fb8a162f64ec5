// Training kernels on CUDA: Ingot's fused optimizer steps (ai.ingot.SGDStep, AdamStep: semantics in
// ops/defs/training.cpp, arguments in ops/semantics/optimizer_args.h), GradScaler's unscale and
// inf/NaN check (ai.ingot.UnscaleGrads) and Philox dropout (ai.ingot.Dropout,
// ops/semantics/philox.h: the CPU kernel's mask bit for bit).
//
// An optimizer step is multi-tensor, as PyTorch's foreach/fused paths: one launch updates up to
// kPerLaunch tensors of one dtype, blockIdx.y choosing the tensor and a grid-stride loop over its
// elements, every pointer passed in the kernel's parameters (no table to upload, so the step can be
// captured in a CUDA graph). Hyperparameters are kernel arguments read on the host: a captured step
// replays the values it was captured with. Parameters compute in float (double for float64).
#include <cmath>
#include <vector>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "ops/semantics/optimizer_args.h"
#include "ops/semantics/dropout_args.h"
#include "ops/semantics/philox.h"

namespace ingot::cuda {
namespace {

constexpr int kPerLaunch = 24;
constexpr int kSlots = 5;  // param, grad, then at most three states

template <class T>
struct TensorList {
  const T* in[kSlots][kPerLaunch];
  T* out[kSlots][kPerLaunch];  // out[1] unused
  int64_t n[kPerLaunch];
};

struct SgdScalars {
  float lr, momentum, keep, decay, sign;
  bool first, nesterov;
};
struct AdamScalars {
  float beta1, beta2, eps, step_size, root2, shrink, decay, sign;
  bool decoupled, amsgrad;
};

template <class T>
__global__ void sgd_kernel(TensorList<T> l, SgdScalars s) {
  using A = acc_of<compute_t<T>>;
  const int t = blockIdx.y;
  const int64_t n = l.n[t];
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    const A p = A(load(l.in[0][t][i]));
    A d = A(s.sign) * A(load(l.in[1][t][i])) + A(s.decay) * p;
    if (s.momentum != 0.0f) {
      const A buf = s.first ? d : A(s.momentum) * A(load(l.in[2][t][i])) + A(s.keep) * d;
      l.out[2][t][i] = store<T>(buf);
      d = s.nesterov ? d + A(s.momentum) * buf : buf;
    }
    l.out[0][t][i] = store<T>(p - A(s.lr) * d);
  }
}

template <class T>
__global__ void adam_kernel(TensorList<T> l, AdamScalars s) {
  using A = acc_of<compute_t<T>>;
  const int t = blockIdx.y;
  const int64_t n = l.n[t];
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    A p = A(load(l.in[0][t][i]));
    A g = A(s.sign) * A(load(l.in[1][t][i]));
    if (s.decoupled) {
      p *= A(s.shrink);
    } else {
      g += A(s.decay) * p;
    }
    const A m = A(s.beta1) * A(load(l.in[2][t][i])) + (A(1) - A(s.beta1)) * g;
    const A v = A(s.beta2) * A(load(l.in[3][t][i])) + (A(1) - A(s.beta2)) * g * g;
    A used = v;
    if (s.amsgrad) {
      used = max(A(load(l.in[4][t][i])), v);
      l.out[4][t][i] = store<T>(used);
    }
    l.out[2][t][i] = store<T>(m);
    l.out[3][t][i] = store<T>(v);
    l.out[0][t][i] = store<T>(p - A(s.step_size) * m / (sqrt(used) / A(s.root2) + A(s.eps)));
  }
}

// Fills the lists (parameters of one dtype at a time, kPerLaunch per launch) and launches `launch`
// for each; outputs are the inputs themselves (in_place) or fresh tensors.
template <class Launch>
void for_each_launch(KernelContext& ctx, const sem::OptimizerArgs& a, Launch launch) {
  std::vector<size_t> order;
  for (size_t i = 0; i < a.count; ++i) order.push_back(i);
  size_t next = 0;
  while (next < order.size()) {
    const DType dt = ctx.input(a.input(order[next], 0)).dtype();
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(dt, [&]<class T>() {
      TensorList<T> l{};
      int count = 0;
      int64_t largest = 0;
      while (next < order.size() && count < kPerLaunch && ctx.input(a.input(order[next], 0)).dtype() == dt) {
        const size_t i = order[next++];
        l.n[count] = ctx.input(a.input(i, 0)).numel();
        largest = std::max(largest, l.n[count]);
        for (size_t j = 0; j < a.group && j < size_t(kSlots); ++j) {
          if (!ctx.has_input(a.input(i, j))) continue;
          const Tensor& in = ctx.input(a.input(i, j));
          l.in[j][count] = ptr<const T>(in);
          if (j == 1) continue;
          if (a.in_place) {
            ctx.set_output(a.output(i, j), in);
            l.out[j][count] = ptr<T>(in);
          } else {
            l.out[j][count] = ptr<T>(ctx.allocate(a.output(i, j), in.dtype(), in.shape()));
          }
        }
        ++count;
      }
      if (largest == 0) return;
      const unsigned blocks = std::max(1u, blocks_for(largest) / unsigned(count));
      launch(l, dim3(blocks, unsigned(count)));
      INGOT_CUDA_LAUNCH_CHECK();
    });
  }
}

void sgd_step(KernelContext& ctx) {
  const sem::OptimizerArgs a = sem::optimizer_args(ctx, 4, 3, 2);
  const double momentum = a.hyper[1], dampening = a.hyper[2];
  const bool nesterov = ctx.attr_int("nesterov") != 0;
  INGOT_CHECK(!nesterov || (momentum > 0 && dampening == 0), "nesterov needs momentum > 0 and dampening 0");
  for (size_t i = 0; i < a.count; ++i) {
    INGOT_CHECK(momentum == 0 || ctx.has_input(a.input(i, 2)), "input {}: momentum {} needs parameter {}'s buffer",
                a.input(i, 2), momentum, i);
  }
  const SgdScalars s{float(a.hyper[0]), float(momentum), float(1 - dampening), float(a.hyper[3]),
                     ctx.attr_int("maximize") != 0 ? -1.0f : 1.0f, a.step == 1, nesterov};
  for_each_launch(ctx, a, [&]<class T>(const TensorList<T>& l, dim3 grid) {
    sgd_kernel<T><<<grid, kThreads, 0, stream()>>>(l, s);
  });
}

void adam_step(KernelContext& ctx) {
  const bool amsgrad = ctx.attr_int("amsgrad") != 0;
  const sem::OptimizerArgs a = sem::optimizer_args(ctx, 5, amsgrad ? 5 : 4);
  const double lr = a.hyper[0], beta1 = a.hyper[1], beta2 = a.hyper[2], decay = a.hyper[4];
  const double correction1 = 1 - std::pow(beta1, a.step), correction2 = 1 - std::pow(beta2, a.step);
  const AdamScalars s{float(beta1), float(beta2), float(a.hyper[3]), float(lr / correction1), float(std::sqrt(correction2)),
                      float(1 - lr * decay), float(decay), ctx.attr_int("maximize") != 0 ? -1.0f : 1.0f,
                      ctx.attr_int("decoupled_weight_decay") != 0, amsgrad};
  for_each_launch(ctx, a, [&]<class T>(const TensorList<T>& l, dim3 grid) {
    adam_kernel<T><<<grid, kThreads, 0, stream()>>>(l, s);
  });
}

template <class T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, bool* __restrict__ mask, int64_t n,
                               uint64_t seed, float ratio, float scale) {
  using A = compute_t<T>;
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    const bool keep = sem::dropout_keeps(seed, uint64_t(i), ratio);
    mask[i] = keep;
    y[i] = keep ? store<T>(A(load(x[i])) * A(scale)) : store<T>(A(0));
  }
}

void ingot_dropout(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const float ratio = ctx.attr_float("ratio");
  INGOT_CHECK(ratio >= 0.0f && ratio < 1.0f, "attribute ratio: must be in [0, 1), got {}", ratio);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  Tensor& mask = ctx.allocate(1, DType::Bool, x.shape());
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    dropout_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), ptr<bool>(mask), n,
                                                                sem::dropout_seed(ctx), ratio, 1.0f / (1.0f - ratio));
  });
  INGOT_CUDA_LAUNCH_CHECK();
}

// GradScaler's unscale: grads *= inv_scale in place over up to kPerLaunch tensors per launch, and
// found_inf[0] = 1 where an element is inf or NaN (set, never cleared: it starts at 0).
template <class T>
__global__ void unscale_kernel(TensorList<T> l, float inv_scale, float* found) {
  using A = acc_of<compute_t<T>>;
  const int t = blockIdx.y;
  const int64_t n = l.n[t];
  bool bad = false;
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    const A v = A(load(l.out[0][t][i]));
    bad |= !isfinite(v);
    l.out[0][t][i] = store<T>(v * A(inv_scale));
  }
  if (bad) *found = 1.0f;
}

void unscale_grads(KernelContext& ctx) {
  const float inv_scale = float(sem::unscale_args(ctx));
  Tensor& found = ctx.allocate(0, DType::Float32, {1});
  INGOT_CUDA_CHECK(cudaMemsetAsync(found.raw_data(), 0, sizeof(float), stream()));
  size_t next = 1;
  while (next < ctx.num_inputs()) {
    const DType dt = ctx.input(next).dtype();
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(dt, [&]<class T>() {
      TensorList<T> l{};
      int count = 0;
      int64_t largest = 0;
      while (next < ctx.num_inputs() && count < kPerLaunch && ctx.input(next).dtype() == dt) {
        const Tensor& g = ctx.input(next);
        ctx.set_output(next, g);
        l.out[0][count] = ptr<T>(g);
        l.n[count] = g.numel();
        largest = std::max(largest, g.numel());
        ++count;
        ++next;
      }
      if (largest == 0) return;
      const unsigned blocks = std::max(1u, blocks_for(largest) / unsigned(count));
      unscale_kernel<T><<<dim3(blocks, unsigned(count)), kThreads, 0, stream()>>>(l, inv_scale, ptr<float>(found));
      INGOT_CUDA_LAUNCH_CHECK();
    });
  }
}

}  // namespace

INGOT_CUDA_KERNEL(UnscaleGrads, unscale_grads).domain(kIngotDomain).versions(1).host_inputs({0}).dtypes({DType::Float32, DType::Float64});
INGOT_CUDA_KERNEL(SGDStep, sgd_step).domain(kIngotDomain).versions(1).host_inputs({0, 1}).dtypes({DType::Float32, DType::Float64});
INGOT_CUDA_KERNEL(AdamStep, adam_step).domain(kIngotDomain).versions(1).host_inputs({0, 1}).dtypes({DType::Float32, DType::Float64});
INGOT_CUDA_KERNEL(Dropout, ingot_dropout).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES}).host_inputs({1});

}  // namespace ingot::cuda
