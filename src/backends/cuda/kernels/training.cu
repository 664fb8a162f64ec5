// Training kernels on CUDA: Ingot's fused optimizer steps (ai.ingot.SGDStep, AdamStep: semantics in
// ops/defs/training.cpp, arguments in ops/semantics/optimizer_args.h), GradScaler's unscale and
// inf/NaN check (ai.ingot.UnscaleGrads) and Philox dropout (ai.ingot.Dropout,
// ops/semantics/philox.h: the CPU kernel's mask bit for bit).
//
// An optimizer step is multi-tensor, as PyTorch's foreach/fused paths: one launch updates up to
// kPerLaunch tensors of one dtype, blockIdx.y choosing the tensor and a grid-stride loop over its
// elements, every pointer passed in the kernel's parameters (no table to upload, so the step can be
// captured in a CUDA graph). Hyperparameters and the step count stay on the device and are read
// there, so a captured step (optim::CompiledStep) replays with every step's values; so does
// Dropout's seed input. Parameters compute in float (double for float64).
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

// Inputs 0 (hyperparameters) and 1 (step count) of an optimizer node, read on the device by every
// thread (a captured step replays with each step's values: learning-rate schedules, Adam's bias
// correction). The optimizer classes check the values on the host before they are uploaded.
struct DeviceHyper {
  const void* values;
  const void* step;
  bool values_f64, step_f64;
  __device__ double operator[](int k) const {
    return values_f64 ? static_cast<const double*>(values)[k] : double(static_cast<const float*>(values)[k]);
  }
  __device__ double count() const {
    return step_f64 ? *static_cast<const double*>(step) : double(*static_cast<const float*>(step));
  }
};

struct SgdFlags {
  float sign;
  bool nesterov;
};
struct AdamFlags {
  float sign;
  bool decoupled, amsgrad;
};

// SGD: hyperparameters (lr, momentum, dampening, weight_decay). A node without a momentum buffer
// whose momentum turns out nonzero cannot apply it: its parameters become NaN rather than take a
// silently different step (the optimizer classes always pass a buffer when momentum is set).
template <class T>
__global__ void sgd_kernel(TensorList<T> l, DeviceHyper h, SgdFlags f) {
  using A = acc_of<compute_t<T>>;
  const A lr = A(h[0]), momentum = A(h[1]), keep = A(1 - h[2]), decay = A(h[3]);
  const bool first = h.count() == 1;
  const int t = blockIdx.y;
  const int64_t n = l.n[t];
  const bool has_buffer = l.in[2][t] != nullptr;
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    const A p = A(load(l.in[0][t][i]));
    A d = A(f.sign) * A(load(l.in[1][t][i])) + decay * p;
    if (momentum != A(0)) {
      if (!has_buffer) {
        l.out[0][t][i] = store<T>(A(NAN));
        continue;
      }
      const A buf = first ? d : momentum * A(load(l.in[2][t][i])) + keep * d;
      l.out[2][t][i] = store<T>(buf);
      d = f.nesterov ? d + momentum * buf : buf;
    }
    l.out[0][t][i] = store<T>(p - lr * d);
  }
}

// Adam/AdamW: hyperparameters (lr, beta1, beta2, eps, weight_decay).
template <class T>
__global__ void adam_kernel(TensorList<T> l, DeviceHyper h, AdamFlags f) {
  using A = acc_of<compute_t<T>>;
  const double lr = h[0], beta1 = h[1], beta2 = h[2], decay = h[4], step = h.count();
  const A b1 = A(beta1), b2 = A(beta2), eps = A(h[3]), wd = A(decay), shrink = A(1 - lr * decay);
  const A step_size = A(lr / (1 - pow(beta1, step))), root2 = A(sqrt(1 - pow(beta2, step)));
  const int t = blockIdx.y;
  const int64_t n = l.n[t];
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    A p = A(load(l.in[0][t][i]));
    A g = A(f.sign) * A(load(l.in[1][t][i]));
    if (f.decoupled) {
      p *= shrink;
    } else {
      g += wd * p;
    }
    const A m = b1 * A(load(l.in[2][t][i])) + (A(1) - b1) * g;
    const A v = b2 * A(load(l.in[3][t][i])) + (A(1) - b2) * g * g;
    A used = v;
    if (f.amsgrad) {
      used = max(A(load(l.in[4][t][i])), v);
      l.out[4][t][i] = store<T>(used);
    }
    l.out[2][t][i] = store<T>(m);
    l.out[3][t][i] = store<T>(v);
    l.out[0][t][i] = store<T>(p - step_size * m / (sqrt(used) / root2 + eps));
  }
}

DeviceHyper device_hyper(const KernelContext& ctx, const sem::OptimizerArgs& a) {
  INGOT_CHECK(!a.host_values, "inputs 0 and 1 (hyperparameters, step): the CUDA kernel reads them on the device");
  const Tensor &h = ctx.input(0), &s = ctx.input(1);
  for (const Tensor* t : {&h, &s}) {
    INGOT_CHECK(t->dtype() == DType::Float32 || t->dtype() == DType::Float64,
                "input {} ({}): expected float32 or float64, got {}", t == &h ? 0 : 1, t == &h ? "hyperparameters" : "step",
                t->describe());
  }
  return {h.raw_data(), s.raw_data(), h.dtype() == DType::Float64, s.dtype() == DType::Float64};
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
  const DeviceHyper h = device_hyper(ctx, a);
  const SgdFlags f{ctx.attr_int("maximize") != 0 ? -1.0f : 1.0f, ctx.attr_int("nesterov") != 0};
  for_each_launch(ctx, a, [&]<class T>(const TensorList<T>& l, dim3 grid) {
    sgd_kernel<T><<<grid, kThreads, 0, stream()>>>(l, h, f);
  });
}

void adam_step(KernelContext& ctx) {
  const bool amsgrad = ctx.attr_int("amsgrad") != 0;
  const sem::OptimizerArgs a = sem::optimizer_args(ctx, 5, amsgrad ? 5 : 4);
  const DeviceHyper h = device_hyper(ctx, a);
  const AdamFlags f{ctx.attr_int("maximize") != 0 ? -1.0f : 1.0f, ctx.attr_int("decoupled_weight_decay") != 0, amsgrad};
  for_each_launch(ctx, a, [&]<class T>(const TensorList<T>& l, dim3 grid) {
    adam_kernel<T><<<grid, kThreads, 0, stream()>>>(l, h, f);
  });
}

template <class T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, bool* __restrict__ mask, int64_t n,
                               const int64_t* seed_input, uint64_t seed_attr, float ratio, float scale) {
  using A = compute_t<T>;
  // ops/semantics/dropout_args.h: with input 1 the attribute is the stream.
  const uint64_t seed = seed_input ? uint64_t(*seed_input) : seed_attr, stream = seed_input ? seed_attr : 0;
  for (int64_t i = thread_index(); i < n; i += grid_stride()) {
    const bool keep = sem::dropout_keeps(seed, stream, uint64_t(i), ratio);
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
  const Tensor* seed = sem::dropout_seed_input(ctx);  // on the device
  const uint64_t seed_attr = uint64_t(ctx.attr_int("seed"));
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    dropout_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), ptr<bool>(mask), n,
                                                                seed ? ptr<const int64_t>(*seed) : nullptr, seed_attr,
                                                                ratio, 1.0f / (1.0f - ratio));
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
INGOT_CUDA_KERNEL(SGDStep, sgd_step).domain(kIngotDomain).versions(1).dtypes({DType::Float32, DType::Float64});
INGOT_CUDA_KERNEL(AdamStep, adam_step).domain(kIngotDomain).versions(1).dtypes({DType::Float32, DType::Float64});
INGOT_CUDA_KERNEL(Dropout, ingot_dropout).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot::cuda
