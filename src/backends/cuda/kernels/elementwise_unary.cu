// Unary math, the rarer activations, IsNaN/IsInf, Not and BitwiseNot on the GPU (kernels:
// elementwise.cuh; the common activations and Clip: elementwise_activations.cu).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {
namespace {

template <class Op>
void int_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_INT_TYPES>(ctx, Op{});
}
template <class Op>
void numeric_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_CUDA_NUMERIC_TYPES>(ctx, Op{});
}

void elu(KernelContext& ctx) { unary_typed<EluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")}); }
void selu(KernelContext& ctx) {
  unary_typed<SeluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha"), ctx.attr_float("gamma")});
}
void celu(KernelContext& ctx) { unary_typed<CeluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")}); }
void thresholded_relu(KernelContext& ctx) {
  unary_typed<ThresholdedReluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")});
}
void shrink(KernelContext& ctx) {
  unary_typed<ShrinkOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("bias"), ctx.attr_float("lambd")});
}
void is_nan(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, DType::Bool, x.shape());
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    launch_map1(ptr<const T>(x), ptr<bool>(y), x.numel(), Unary<bool, T, IsNaNOp>{});
  });
}
void is_inf(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, DType::Bool, x.shape());
  IsInfOp op{ctx.attr_int("detect_negative") != 0, ctx.attr_int("detect_positive") != 0};
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    launch_map1(ptr<const T>(x), ptr<bool>(y), x.numel(), Unary<bool, T, IsInfOp>{op});
  });
}
void logical_not(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, DType::Bool, x.shape());
  launch_map1(ptr<const bool>(x), ptr<bool>(y), x.numel(), NotOp{});
}

}  // namespace

INGOT_CUDA_KERNEL(Abs, numeric_unary<AbsOp>).versions(1).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Neg, signed_unary<NegOp>).versions(1).dtypes({INGOT_CUDA_SIGNED});
INGOT_CUDA_KERNEL(Sign, numeric_unary<SignOp>).versions(9).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Reciprocal, float_unary<ReciprocalOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Sqrt, float_unary<SqrtOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Exp, float_unary<ExpOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Log, float_unary<LogOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Ceil, float_unary<CeilOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Floor, float_unary<FloorOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Round, float_unary<RoundOp>).versions(11).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Sin, float_unary<SinOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Cos, float_unary<CosOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Tan, float_unary<TanOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Asin, float_unary<AsinOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Acos, float_unary<AcosOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Atan, float_unary<AtanOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Sinh, float_unary<SinhOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Cosh, float_unary<CoshOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Asinh, float_unary<AsinhOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Acosh, float_unary<AcoshOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Atanh, float_unary<AtanhOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Softplus, float_unary<SoftplusOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Softsign, float_unary<SoftsignOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Mish, float_unary<MishOp>).versions(18).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Elu, elu).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Selu, selu).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Celu, celu).versions(12).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(ThresholdedRelu, thresholded_relu).versions(10).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Shrink, shrink).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(IsNaN, is_nan).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(IsInf, is_inf).versions(10).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Not, logical_not).versions(1).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(BitwiseNot, int_unary<BitwiseNotOp>).versions(18).dtypes({INGOT_INT_TYPES});

}  // namespace ingot::cuda
