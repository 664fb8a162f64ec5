// Activation functions and Clip. Attribute values are converted to the compute type once, outside
// the loops, so the float32 loops stay pure float arithmetic and vectorize.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernels/elementwise.h"
#include "core/numeric.h"

namespace ingot::cpu {
namespace {

void relu(KernelContext& ctx) {
  // `v < 0 ? 0 : v` rather than max(v, 0) so that NaN passes through.
  unary_kernel<INGOT_FLOAT_TYPES, DType::Int8, DType::Int16, DType::Int32, DType::Int64>(
      ctx, [](auto v) { return v < 0 ? decltype(v)(0) : v; });
}

void leaky_relu(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha");
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v < 0 ? C(alpha) * v : v;
  });
}

void elu(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha");
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v < 0 ? C(alpha) * std::expm1(v) : v;
  });
}

void selu(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha");
  const float gamma = ctx.attr_float("gamma");
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [alpha, gamma](auto v) {
    using C = decltype(v);
    return C(gamma) * (v <= 0 ? C(alpha) * std::expm1(v) : v);
  });
}

void celu(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha");
  INGOT_CHECK(alpha != 0, "attribute alpha: must not be 0");
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v < 0 ? C(alpha) * std::expm1(v / C(alpha)) : v;
  });
}

void hard_sigmoid(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha");
  const float beta = ctx.attr_float("beta");
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [alpha, beta](auto v) {
    using C = decltype(v);
    // max then min (NaN stays NaN, as with the comparisons): the form compilers vectorize.
    return std::min(std::max(C(alpha) * v + C(beta), C(0)), C(1));
  });
}

void hard_swish(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::Float32) {  // the vectorized loop (elementwise.h)
    Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(x.numel(), kElementwiseGrain,
                 [=](int64_t begin, int64_t end) { hard_swish_f32(xp + begin, yp + begin, end - begin); });
    return;
  }
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) {
    using C = decltype(v);
    return v * std::min(std::max(v * C(1.0 / 6.0) + C(0.5), C(0)), C(1));
  });
}

void sigmoid(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) {
    using C = decltype(v);
    return C(1) / (C(1) + exp_of(-v));
  });
}

void tanh(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return tanh_of(v); });
}

void softplus(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return softplus_of(v); });
}

void softsign(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return v / (decltype(v)(1) + std::fabs(v)); });
}

void mish(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return v * tanh_of(softplus_of(v)); });
}

void thresholded_relu(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha");
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [alpha](auto v) {
    using C = decltype(v);
    return v > C(alpha) ? v : C(0);
  });
}

// Shrink accepts every numeric dtype; integers are compared and shifted in double.
void shrink(KernelContext& ctx) {
  const float bias = ctx.attr_float("bias");
  const float lambd = ctx.attr_float("lambd");
  unary_kernel<INGOT_NUMERIC_TYPES>(ctx, [bias, lambd](auto v) {
    using C = decltype(v);
    using D = std::conditional_t<std::is_floating_point_v<C>, C, double>;
    const D x = D(v);
    return from_float<C>(x < -D(lambd) ? x + D(bias) : (x > D(lambd) ? x - D(bias) : D(0)));  // unsigned: saturates
  });
}

// Reads an optional scalar bound input (opset 11+) as the compute type of T.
template <class T>
bool read_bound(const KernelContext& ctx, size_t index, const char* name, compute_t<T>& bound) {
  if (!ctx.has_input(index)) return false;
  const Tensor& t = ctx.input(index);
  INGOT_CHECK(t.dtype() == ctx.input(0).dtype(), "input {} ({}): dtype {} does not match input 0's dtype {}", index,
              name, dtype_name(t.dtype()), dtype_name(ctx.input(0).dtype()));
  INGOT_CHECK(t.numel() == 1, "input {} ({}): expected a scalar, got shape {}", index, name, shape_str(t.shape()));
  bound = compute_t<T>(t.data<T>()[0]);
  return true;
}

void clip(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  dispatch_numeric(x.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    C lo, hi;
    if constexpr (std::is_floating_point_v<C>) {
      lo = -std::numeric_limits<C>::infinity();
      hi = std::numeric_limits<C>::infinity();
    } else {
      lo = std::numeric_limits<C>::lowest();
      hi = std::numeric_limits<C>::max();
    }
    if (ctx.opset() < 11) {
      lo = C(ctx.attr_float("min"));
      hi = C(ctx.attr_float("max"));
    } else {
      read_bound<T>(ctx, 1, "min", lo);
      read_bound<T>(ctx, 2, "max", hi);
    }
    Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
    // Lower bound first, then upper: min > max gives max everywhere, as ONNX specifies; NaN stays.
    map_elements(x.data<T>(), y.data<T>(), x.numel(), [lo, hi](C v) {
      const C low_clipped = v < lo ? lo : v;
      return low_clipped > hi ? hi : low_clipped;
    });
  });
}

}  // namespace

INGOT_CPU_KERNEL(Relu, relu)
    .versions(1)
    .dtypes({INGOT_FLOAT_TYPES, DType::Int8, DType::Int16, DType::Int32, DType::Int64});
INGOT_CPU_KERNEL(LeakyRelu, leaky_relu).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Elu, elu).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Selu, selu).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Celu, celu).versions(12).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(HardSigmoid, hard_sigmoid).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(HardSwish, hard_swish).versions(14).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(HardSwish, hard_swish).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Sigmoid, sigmoid).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Tanh, tanh).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Softplus, softplus).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Softsign, softsign).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Mish, mish).versions(18).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(ThresholdedRelu, thresholded_relu).versions(10).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Shrink, shrink).versions(9).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Clip, clip).versions(1).dtypes({INGOT_NUMERIC_TYPES});

}  // namespace ingot::cpu
