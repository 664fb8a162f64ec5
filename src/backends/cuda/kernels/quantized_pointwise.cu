// The quantized pointwise ops on CUDA, in a module of their own: ai.ingot.QuantizedReduceMean through
// the reductions' engine (reduce.cuh: the channels-last spatial mean of a squeeze-excitation block
// reads 8- or 16-byte vectors of channels, the rows split across blocks) with int32 sums of
// X - X_zero_point, and ai.ingot.QuantizedMul through the elementwise engine (elementwise.cuh: the
// [N, 1, 1, C] gate of a channels-last block by the mid-broadcast kernel, 16 bytes a thread). The
// math is ops/semantics/quantized_args.h's, bit for bit as on the CPU.
#include "backends/cuda/kernels/elementwise.cuh"
#include "backends/cuda/kernels/reduce.cuh"
#include "ops/semantics/quantized_args.h"

namespace ingot::cuda {
namespace {

template <class T>
struct QuantizedMeanOp {
  using Acc = int32_t;
  static constexpr bool kShift = false;
  static constexpr bool kVectorCols = true;
  int32_t zp;
  sem::Requantize rq;
  __device__ static Acc identity() { return 0; }
  __device__ Acc load_acc(T v, Acc) const { return int32_t(v) - zp; }
  __device__ static Acc apply(Acc a, Acc b) { return a + b; }
  __device__ T finish(Acc a, int64_t, Acc) const { return T(rq(a)); }
};

void quantized_reduce_mean(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::QuantizedMeanArgs a = sem::quantized_mean_args(ctx, x);
  Tensor& y = ctx.allocate(0, x.dtype(), a.axes.out_shape);
  dispatch_device<DType::UInt8, DType::Int8>(x.dtype(), [&]<class T>() {
    launch_reduce<QuantizedMeanOp<T>, T>(x, y, a.axes.reduced, QuantizedMeanOp<T>{a.x_zp, a.rq});
  });
}

template <class T>
struct QuantizedMulOp {
  int32_t a_zp, b_zp;
  sem::Requantize rq;
  __device__ T operator()(T a, T b) const { return T(rq((int32_t(a) - a_zp) * (int32_t(b) - b_zp))); }
};

void quantized_mul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const sem::QuantizedMulArgs q = sem::quantized_mul_args(ctx);
  Tensor& y = ctx.allocate(0, a.dtype(), q.out_shape);
  dispatch_device<DType::UInt8, DType::Int8>(a.dtype(), [&]<class T>() {
    launch_map2<T, T, QuantizedMulOp<T>, true>(ptr<const T>(a), a.shape(), ptr<const T>(b), b.shape(), ptr<T>(y),
                                               q.out_shape, QuantizedMulOp<T>{q.a_zp, q.b_zp, q.rq});
  });
}

}  // namespace

INGOT_CUDA_KERNEL(QuantizedReduceMean, quantized_reduce_mean)
    .domain(kIngotDomain)
    .versions(1)
    .types("T", {DType::UInt8, DType::Int8})
    .host_inputs({1, 2, 3, 4});
INGOT_CUDA_KERNEL(QuantizedMul, quantized_mul)
    .domain(kIngotDomain)
    .versions(1)
    .types("T", {DType::UInt8, DType::Int8})
    .host_inputs({1, 2, 4, 5, 6, 7});

}  // namespace ingot::cuda
