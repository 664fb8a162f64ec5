// Cast and CastLike on the GPU (kernels: elementwise.cuh; the casts between floating-point types:
// elementwise_cast_float.cu).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {
namespace {

// ---- Cast ----------------------------------------------------------------------------------

// Float32 -> bfloat16 by dropping the low 16 bits (ONNX's reference before opset 19).
struct TruncateBF16 {
  __device__ __forceinline__ __nv_bfloat16 operator()(float x) const {
    uint32_t bits = __float_as_uint(x);
    bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    return __ushort_as_bfloat16(uint16_t(nan ? (bits >> 16) | 0x40u : bits >> 16));
  }
};

#define INGOT_CUDA_CAST_TYPES INGOT_CUDA_NUMERIC_TYPES, DType::Bool

}  // namespace

Tensor cast_on_device(const Tensor& x, DType to, int opset) {
  if (x.dtype() == to) return x;
  if (x.dtype() == DType::String || to == DType::String) fail("string tensors live on the CPU only");
  Tensor y = Tensor::empty(to, x.shape(), x.device());
  if (to == DType::BFloat16 && opset < 19 && x.dtype() == DType::Float32) {
    launch_map1(ptr<const float>(x), ptr<__nv_bfloat16>(y), x.numel(), TruncateBF16{});
    return y;
  }
  if (to == DType::BFloat16 && opset < 19) {
    return cast_on_device(cast_on_device(x, DType::Float32, opset), to, opset);
  }
  if (is_floating(x.dtype()) && is_floating(to)) {
    cast_between_floats(x, y);
    return y;
  }
  dispatch_device<INGOT_CUDA_CAST_TYPES>(x.dtype(), [&]<class S>() {
    dispatch_device<INGOT_CUDA_CAST_TYPES>(to, [&]<class D>() {
      if constexpr (is_float_v<S> && is_float_v<D>) {
        fail("internal: {} -> {} belongs to cast_between_floats", dtype_name(x.dtype()), dtype_name(to));
      } else {  // float<->float pairs are not instantiated here: their kernels live in their own module
        launch_map1(ptr<const S>(x), ptr<D>(y), x.numel(), CastOp<D, S>{});
      }
    });
  });
  return y;
}

namespace {

// Numbers -> strings is text formatting: done by the CPU kernel, the result is a host tensor.
Tensor cast_to_string(const Tensor& x) {
  return ops::call("Cast", {x.to(Device::cpu())}, {{"to", int64_t(DType::String)}}, 1).at(0);
}

void cast(KernelContext& ctx) {
  const DType to = DType(ctx.attr_int("to"));
  ctx.set_output(0, to == DType::String ? cast_to_string(ctx.input(0)) : cast_on_device(ctx.input(0), to, ctx.opset()));
}
void cast_like(KernelContext& ctx) {
  const DType to = ctx.input(1).dtype();
  ctx.set_output(0, to == DType::String ? cast_to_string(ctx.input(0)) : cast_on_device(ctx.input(0), to, ctx.opset()));
}

}  // namespace

INGOT_CUDA_KERNEL(Cast, cast).versions(6).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(CastLike, cast_like).versions(15).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool}).host_inputs({1});

}  // namespace ingot::cuda
