// Arithmetic with numpy broadcasting: Mod, Pow, PRelu and the variadic Sum, Mean, Max, Min on the
// GPU (kernels: elementwise.cuh; Add/Sub and Mul/Div have modules of their own).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {
namespace {

void mod(KernelContext& ctx) {
  if (ctx.attr_int("fmod") == 0 && is_floating(ctx.input(0).dtype())) {
    fail("attribute fmod: must be 1 for floating-point inputs");
  }
  binary_typed<void, INGOT_CUDA_FLOAT_TYPES>(ctx, FloatModOp{ctx.attr_int("fmod") != 0});
}

// Pow: the exponent may have another dtype; it is converted to the base's first.
void pow(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  Tensor b = ctx.input(1);
  if (b.dtype() != a.dtype()) b = cast_on_device(b, a.dtype(), 21);
  const Shape out_shape = broadcast_shapes({a.shape(), b.shape()});
  Tensor& y = ctx.allocate(0, a.dtype(), out_shape);
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(a.dtype(), [&]<class T>() {
    launch_map2(ptr<const T>(a), a.shape(), ptr<const T>(b), b.shape(), ptr<T>(y), out_shape, Binary<T, T, PowOp>{});
  });
}

// PRelu: slope broadcasts to X (unidirectionally).
void prelu(KernelContext& ctx) { binary_typed<void, INGOT_CUDA_FLOAT_TYPES>(ctx, PReluOp{}); }

// Sum/Max/Min/Mean over any number of inputs, folded pairwise into the output.
template <class Op>
void variadic(KernelContext& ctx, bool mean) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape());
  if (shapes.empty()) fail("at least one input is required");
  const Shape out_shape = broadcast_shapes(shapes);
  const Tensor& first = ctx.input(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype() != first.dtype()) {
      fail("input {} has dtype {}, input 0 has {}", i, dtype_name(ctx.input(i).dtype()), dtype_name(first.dtype()));
    }
  }
  Tensor& y = ctx.allocate(0, first.dtype(), out_shape);
  dispatch_device<INGOT_CUDA_NUMERIC_TYPES>(first.dtype(), [&]<class T>() {
    if (ctx.num_inputs() == 1) {
      launch_map2(ptr<const T>(first), first.shape(), ptr<const T>(first), first.shape(), ptr<T>(y), out_shape,
                  Binary<T, T, MaxOp>{});  // max(x, x) = x: a copy that also broadcasts
    } else {
      const Tensor& second = ctx.input(1);
      launch_map2(ptr<const T>(first), first.shape(), ptr<const T>(second), second.shape(), ptr<T>(y), out_shape,
                  Binary<T, T, Op>{});
      for (size_t i = 2; i < ctx.num_inputs(); ++i) {
        const Tensor& next = ctx.input(i);
        launch_map2(ptr<const T>(y), out_shape, ptr<const T>(next), next.shape(), ptr<T>(y), out_shape,
                    Binary<T, T, Op>{});
      }
    }
    if (mean) {
      if constexpr (is_float_v<T>) {
        launch_map1(ptr<const T>(y), ptr<T>(y), y.numel(), Unary<T, T, ScaleOp>{{1.0 / double(ctx.num_inputs())}});
      } else {
        fail("Mean takes floating-point inputs only");
      }
    }
  });
}
void sum(KernelContext& ctx) { variadic<AddOp>(ctx, false); }
void mean(KernelContext& ctx) { variadic<AddOp>(ctx, true); }
void max(KernelContext& ctx) { variadic<MaxOp>(ctx, false); }
void min(KernelContext& ctx) { variadic<MinOp>(ctx, false); }

}  // namespace

// Integer Mod by zero is an error on the CPU; checking it here would need the data on the host, so
// integer Mod stays on the CPU.
INGOT_CUDA_KERNEL(Mod, mod).versions(10).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Pow, pow).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(PRelu, prelu).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Sum, sum).versions(8).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Mean, mean).versions(8).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Max, max).versions(8).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Min, min).versions(8).dtypes({INGOT_CUDA_NUMERIC_TYPES});

}  // namespace ingot::cuda
