// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on CUDA (layout and formula:
// ops/semantics/loss_args.h). One thread per (n, d) position computes its log-softmax over the C
// classes (cross-entropy; written out when log_prob is asked for) and its weighted loss; sum and mean
// fold the N * D losses and weights in one block. A class index outside [0, C) that is not
// ignore_index makes the loss NaN (a device cannot raise the CPU's error without waiting for it).
#include <cmath>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "ops/semantics/loss_args.h"

namespace ingot::cuda {
namespace {

template <class T, class L, bool kSoftmax>
__global__ void loss_positions_kernel(const T* __restrict__ x, const L* __restrict__ target, const T* __restrict__ weight,
                                      T* __restrict__ log_prob, acc_of<compute_t<T>>* __restrict__ loss,
                                      acc_of<compute_t<T>>* __restrict__ weights, int64_t n, int64_t c, int64_t d,
                                      bool has_ignore, int64_t ignore) {
  using A = acc_of<compute_t<T>>;
  for (int64_t i = thread_index(); i < n * d; i += grid_stride()) {
    const int64_t b = i / d, k = i % d;
    const T* row = x + b * c * d + k;  // class j at row[j * d]
    A lse = 0;
    if constexpr (kSoftmax) {
      A m = -INFINITY;
      for (int64_t j = 0; j < c; ++j) m = max(m, A(load(row[j * d])));
      A s = 0;
      for (int64_t j = 0; j < c; ++j) s += exp_of(A(load(row[j * d])) - m);
      lse = m + log_of(s);
      if (log_prob) {
        for (int64_t j = 0; j < c; ++j) log_prob[b * c * d + j * d + k] = store<T>(A(load(row[j * d])) - lse);
      }
    }
    const int64_t label = int64_t(target[i]);
    if (has_ignore && label == ignore) {
      loss[i] = 0;
      weights[i] = 0;
      continue;
    }
    if (label < 0 || label >= c) {
      loss[i] = A(NAN);
      weights[i] = 1;
      continue;
    }
    const A w = weight ? A(load(weight[label])) : A(1);
    loss[i] = -w * (A(load(row[label * d])) - lse);
    weights[i] = w;
  }
}

template <class T, class A>
__global__ void loss_reduce_kernel(const A* __restrict__ loss, const A* __restrict__ weights, int64_t count, bool mean,
                                   T* __restrict__ out) {
  __shared__ A buf[32];
  A l = 0, w = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    l += loss[i];
    w += weights[i];
  }
  l = block_sum(l, buf);
  w = block_sum(w, buf);
  if (threadIdx.x == 0) out[0] = store<T>(mean ? l / w : l);  // mean over nothing counted: 0 / 0 = NaN, as ONNX's
}

template <class T, class A>
__global__ void loss_copy_kernel(const A* __restrict__ loss, int64_t count, T* __restrict__ out) {
  for (int64_t i = thread_index(); i < count; i += grid_stride()) out[i] = store<T>(loss[i]);
}

template <bool kSoftmax>
void loss_kernel(KernelContext& ctx) {
  const sem::LossArgs l = sem::loss_args(ctx, kSoftmax ? "scores" : "input");
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  const int64_t count = l.n * l.d;
  Tensor* log_prob = nullptr;
  if (kSoftmax && ctx.num_outputs() > 1) log_prob = &ctx.allocate(1, x.dtype(), x.shape());
  Tensor& out = l.reduction == "none" ? ctx.allocate(0, x.dtype(), target.shape()) : ctx.allocate(0, x.dtype(), {});
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<compute_t<T>>;
    Tensor scratch = Tensor::empty(DType::UInt8, {int64_t(2 * std::max<int64_t>(count, 1) * sizeof(A))}, x.device());
    A* loss = ptr<A>(scratch);
    A* weights = loss + std::max<int64_t>(count, 1);
    const T* w = ctx.has_input(2) ? ptr<const T>(ctx.input(2)) : nullptr;
    auto positions = [&]<class L>() {
      loss_positions_kernel<T, L, kSoftmax><<<blocks_for(count), kThreads, 0, stream()>>>(
          ptr<const T>(x), ptr<const L>(target), w, log_prob ? ptr<T>(*log_prob) : nullptr, loss, weights, l.n, l.c,
          l.d, l.ignore_index.has_value(), l.ignore_index.value_or(0));
    };
    if (count > 0) {
      if (target.dtype() == DType::Int64) positions.template operator()<int64_t>();
      else positions.template operator()<int32_t>();
      INGOT_CUDA_LAUNCH_CHECK();
    }
    if (l.reduction == "none") {
      if (count == 0) return;
      loss_copy_kernel<T, A><<<blocks_for(count), kThreads, 0, stream()>>>(loss, count, ptr<T>(out));
    } else {
      loss_reduce_kernel<T, A><<<1, 1024, 0, stream()>>>(loss, weights, count, l.reduction == "mean", ptr<T>(out));
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

INGOT_CUDA_KERNEL(NegativeLogLikelihoodLoss, loss_kernel<false>).versions(12).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(SoftmaxCrossEntropyLoss, loss_kernel<true>).versions(12).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace
}  // namespace ingot::cuda
