// Unary math, logic and predicate ops.
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels/elementwise.h"

namespace ingot::cpu {
namespace {

#define INGOT_SIGNED_TYPES DType::Int8, DType::Int16, DType::Int32, DType::Int64

// Output 0 (bool) = pred(input 0).
template <DType... Ds, class F>
void predicate_kernel(KernelContext& ctx, F pred) {
  const Tensor& x = ctx.input(0);
  dispatch<Ds...>(x.dtype(), [&]<class T>() {
    Tensor& y = ctx.allocate(0, DType::Bool, x.shape());
    map_elements(x.data<T>(), y.data<bool>(), x.numel(), pred);
  });
}

void abs(KernelContext& ctx) {
  unary_kernel<INGOT_NUMERIC_TYPES>(ctx, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_floating_point_v<C>) {
      return std::fabs(v);
    } else if constexpr (std::is_signed_v<C>) {
      return v < 0 ? wrapping_neg(v) : v;
    } else {
      return v;
    }
  });
}

void neg(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES, INGOT_SIGNED_TYPES>(ctx, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_floating_point_v<C>) {
      return -v;
    } else {
      return wrapping_neg(v);
    }
  });
}

void sign(KernelContext& ctx) {
  unary_kernel<INGOT_NUMERIC_TYPES>(ctx, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_unsigned_v<C>) {
      return C(v > 0 ? 1 : 0);
    } else {
      return v > 0 ? C(1) : (v < 0 ? C(-1) : v);  // keeps 0 and NaN
    }
  });
}

// Integers are computed in double and truncated back (ONNX allows every numeric dtype).
void erf(KernelContext& ctx) {
  unary_kernel<INGOT_NUMERIC_TYPES>(ctx, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_floating_point_v<C>) {
      return std::erf(v);
    } else {
      return C(std::erf(double(v)));
    }
  });
}

void reciprocal(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return decltype(v)(1) / v; });
}
void sqrt(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::sqrt(v); });
}
void exp(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return exp_of(v); });
}
void log(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::log(v); });
}
void ceil(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::ceil(v); });
}
void floor(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::floor(v); });
}
// nearbyint rounds halves to even in the default rounding mode, as ONNX Round requires.
void round(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::nearbyint(v); });
}
void sin(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::sin(v); });
}
void cos(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::cos(v); });
}
void tan(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::tan(v); });
}
void asin(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::asin(v); });
}
void acos(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::acos(v); });
}
void atan(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::atan(v); });
}
void sinh(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::sinh(v); });
}
void cosh(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::cosh(v); });
}
void asinh(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::asinh(v); });
}
void acosh(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::acosh(v); });
}
void atanh(KernelContext& ctx) {
  unary_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return std::atanh(v); });
}

void is_nan_kernel(KernelContext& ctx) {
  predicate_kernel<INGOT_FLOAT_TYPES>(ctx, [](auto v) { return v != v; });
}

void is_inf(KernelContext& ctx) {
  const bool negative = ctx.attr_int("detect_negative") != 0;
  const bool positive = ctx.attr_int("detect_positive") != 0;
  predicate_kernel<INGOT_FLOAT_TYPES>(ctx, [=](auto v) { return std::isinf(v) && (v > 0 ? positive : negative); });
}

void logical_not(KernelContext& ctx) {
  unary_kernel<DType::Bool>(ctx, [](bool v) { return !v; });
}
void bitwise_not(KernelContext& ctx) {
  unary_kernel<INGOT_INT_TYPES>(ctx, [](auto v) { return decltype(v)(~v); });
}

}  // namespace

INGOT_CPU_KERNEL(Abs, abs).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Neg, neg).versions(1).dtypes({INGOT_FLOAT_TYPES, INGOT_SIGNED_TYPES});
INGOT_CPU_KERNEL(Sign, sign).versions(9).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Erf, erf).versions(9).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Reciprocal, reciprocal).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Sqrt, sqrt).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Exp, exp).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Log, log).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Ceil, ceil).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Floor, floor).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Round, round).versions(11).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Sin, sin).versions(7).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Cos, cos).versions(7).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Tan, tan).versions(7).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Asin, asin).versions(7).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Acos, acos).versions(7).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Atan, atan).versions(7).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Sinh, sinh).versions(9).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Cosh, cosh).versions(9).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Asinh, asinh).versions(9).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Acosh, acosh).versions(9).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Atanh, atanh).versions(9).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(IsNaN, is_nan_kernel).versions(9).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(IsInf, is_inf).versions(10).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Not, logical_not).versions(1).dtypes({DType::Bool});
INGOT_CPU_KERNEL(BitwiseNot, bitwise_not).versions(18).dtypes({INGOT_INT_TYPES});

#undef INGOT_SIGNED_TYPES

}  // namespace ingot::cpu
