// The activations models launch most (Relu, Sigmoid, Tanh, Erf, HardSwish, HardSigmoid, LeakyRelu)
// and Clip on the GPU: a module of their own, small enough to load in a millisecond or two at a
// process's first launch (kernels: elementwise.cuh, which says why the elementwise ops are split).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {
namespace {

void leaky_relu(KernelContext& ctx) {
  unary_typed<LeakyReluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")});
}
void hard_sigmoid(KernelContext& ctx) {
  unary_typed<HardSigmoidOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha"), ctx.attr_float("beta")});
}

// Clip: bounds from attributes (opset < 11) or optional scalar inputs read on the host.
void clip(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_device<INGOT_CUDA_NUMERIC_TYPES>(x.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
    if constexpr (std::is_floating_point_v<C>) {
      lo = -std::numeric_limits<C>::infinity();
      hi = std::numeric_limits<C>::infinity();
    }
    if (ctx.opset() < 11) {
      lo = C(ctx.attr_float("min"));
      hi = C(ctx.attr_float("max"));
    } else {
      for (int i : {1, 2}) {
        if (!ctx.has_input(size_t(i))) continue;
        const Tensor& b = ctx.input(size_t(i));
        if (b.numel() != 1) fail("input {} ({}): expected a scalar, got {}", i, i == 1 ? "min" : "max", b.describe());
        if (b.dtype() != x.dtype()) {
          fail("input {} ({}) has dtype {}, input 0 has {}", i, i == 1 ? "min" : "max", dtype_name(b.dtype()),
               dtype_name(x.dtype()));
        }
        C v = C(b.item_double());
        if constexpr (std::is_integral_v<C>) v = C(b.item_int());
        (i == 1 ? lo : hi) = v;
      }
    }
    launch_map1(ptr<const T>(x), ptr<T>(y), x.numel(), Unary<T, T, ClipOp<C>>{{lo, hi}});
  });
}

}  // namespace

INGOT_CUDA_KERNEL(Relu, signed_unary<ReluOp>).versions(1).dtypes({INGOT_CUDA_SIGNED});
INGOT_CUDA_KERNEL(Erf, float_unary<ErfOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Sigmoid, float_unary<SigmoidOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Tanh, float_unary<TanhOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(HardSwish, float_unary<HardSwishOp>).versions(14).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(HardSwish, float_unary<HardSwishOp>).domain(kIngotDomain).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(LeakyRelu, leaky_relu).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(HardSigmoid, hard_sigmoid).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Clip, clip).versions(1).dtypes({INGOT_CUDA_NUMERIC_TYPES}).host_inputs({1, 2});

}  // namespace ingot::cuda
