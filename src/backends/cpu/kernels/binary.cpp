// Broadcasting binary ops (arithmetic, comparison, logic, bit ops), PRelu, Where and the
// variadic folds Max/Min/Sum/Mean.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernels/elementwise.h"
#include "core/dispatch.h"
#include "core/numeric.h"
#include "ops/kernel.h"

namespace ingot::cpu {
namespace {

void check_same_dtype(const Tensor& a, const Tensor& b, int index_b = 1) {
  INGOT_CHECK(a.dtype() == b.dtype(), "input {}: dtype {} does not match input 0's dtype {}", index_b,
              dtype_name(b.dtype()), dtype_name(a.dtype()));
}

// B's shape as it broadcasts against A. Before opset 7, broadcasting needed `broadcast` = 1 and
// `axis` aligned B's first dimension with A's axis `axis` (numpy aligns trailing dimensions).
Shape effective_b_shape(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7 || ctx.attr_int("broadcast") == 0 || !ctx.has_attr("axis")) return b.shape();
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), a.rank(), "attribute axis");
  INGOT_CHECK(axis + b.rank() <= a.rank(), "input 1 (B): shape {} does not fit input 0 (A) shape {} at axis {}",
              shape_str(b.shape()), shape_str(a.shape()), axis);
  Shape shape = b.shape();
  shape.resize(size_t(a.rank() - axis), 1);
  return shape;
}

// Runs out = f(a, b) for the two inputs of `ctx`, which must share a dtype in Ds; TO is the
// output element type (void: the input type). `swapped` computes f(b, a) instead, which lets
// Greater reuse Less's instantiations (compile time matters: each one is several loops).
template <class TO, DType... Ds, class F>
void binary_kernel(KernelContext& ctx, F f, bool swapped = false) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  check_same_dtype(a, b);
  const Shape b_shape = effective_b_shape(ctx, a, b);
  const Shape out_shape = broadcast_shapes({a.shape(), b_shape});
  dispatch<Ds...>(a.dtype(), [&]<class T>() {
    using Out = std::conditional_t<std::is_void_v<TO>, T, TO>;
    Tensor& y = ctx.allocate(0, dtype_of<Out>(), out_shape);
    if (swapped) {
      broadcast_binary(b.data<T>(), b_shape, a.data<T>(), a.shape(), y.data<Out>(), out_shape, f);
    } else {
      broadcast_binary(a.data<T>(), a.shape(), b.data<T>(), b_shape, y.data<Out>(), out_shape, f);
    }
  });
}

// Integer Div and Mod fail on a zero divisor instead of trapping.
void check_no_zero_divisor(const Tensor& b, const char* op) {
  if (!is_integral(b.dtype())) return;
  dispatch_int(b.dtype(), [&]<class T>() {
    const T* p = b.data<T>();
    INGOT_CHECK(std::find(p, p + b.numel(), T(0)) == p + b.numel(), "input 1 (B): integer {} by zero", op);
  });
}

void add(KernelContext& ctx) {
  binary_kernel<void, INGOT_NUMERIC_TYPES>(ctx, [](auto x, auto y) { return wrapping_add(x, y); });
}
void sub(KernelContext& ctx) {
  binary_kernel<void, INGOT_NUMERIC_TYPES>(ctx, [](auto x, auto y) { return wrapping_sub(x, y); });
}
void mul(KernelContext& ctx) {
  binary_kernel<void, INGOT_NUMERIC_TYPES>(ctx, [](auto x, auto y) { return wrapping_mul(x, y); });
}

void div(KernelContext& ctx) {
  check_no_zero_divisor(ctx.input(1), "division");
  binary_kernel<void, INGOT_NUMERIC_TYPES>(ctx, [](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
      return y == C(-1) ? wrapping_neg(x) : C(x / y);  // INT_MIN / -1 would trap
    } else {
      return C(x / y);  // C++ integer division truncates toward zero, as ONNX specifies
    }
  });
}

// fmod = 1: the sign of the dividend (C fmod); fmod = 0: the sign of the divisor (numpy.mod,
// Python %). One instantiation serves both: Mod does not vectorize anyway.
void mod(KernelContext& ctx) {
  check_no_zero_divisor(ctx.input(1), "modulo");
  const bool sign_of_dividend = ctx.attr_int("fmod") != 0;
  binary_kernel<void, INGOT_NUMERIC_TYPES>(ctx, [sign_of_dividend](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_unsigned_v<C>) {
      return C(x % y);
    } else {
      C r;
      if constexpr (std::is_floating_point_v<C>) {
        r = std::fmod(x, y);
      } else {
        r = y == C(-1) ? C(0) : C(x % y);  // INT_MIN % -1 would trap
      }
      return (!sign_of_dividend && r != 0 && ((r < 0) != (y < 0))) ? C(r + y) : r;
    }
  });
}

// Integer power by squaring with wrap-around; negative exponents give the integer part of 1/x^-e.
template <class C>
C integer_pow(C base, C exponent) {
  if constexpr (std::is_signed_v<C>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<std::common_type_t<C, unsigned>>;
  U result = 1, b = U(base);
  for (auto e = exponent; e > 0; e /= 2) {
    if (e & 1) result *= b;
    b *= b;
  }
  return C(result);
}

void pow(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Shape b_shape = effective_b_shape(ctx, a, b);
  const Shape out_shape = broadcast_shapes({a.shape(), b_shape});
  auto pow_fn = [](auto x, auto y) {
    using CX = decltype(x);
    if constexpr (std::is_integral_v<CX> && std::is_same_v<CX, decltype(y)>) {
      return integer_pow(x, y);
    } else {
      return from_float<CX>(std::pow(x, y));
    }
  };
  dispatch_numeric(a.dtype(), [&]<class T>() {
    Tensor& y = ctx.allocate(0, a.dtype(), out_shape);
    if (b.dtype() == a.dtype()) {
      broadcast_binary(a.data<T>(), a.shape(), b.data<T>(), b_shape, y.data<T>(), out_shape, pow_fn);
    } else {
      // Mixed dtypes (opset 12+): one instantiation per base dtype, exponent read as double.
      INGOT_CHECK(b.dtype() != DType::String && b.dtype() != DType::Bool, "input 1 (Y): dtype {} is not numeric",
                  dtype_name(b.dtype()));
      const Tensor exponent = cast_tensor(b, DType::Float64, ctx.opset());
      broadcast_binary(a.data<T>(), a.shape(), exponent.data<double>(), b_shape, y.data<T>(), out_shape, pow_fn);
    }
  });
}

void bit_shift(KernelContext& ctx) {
  const std::string& direction = ctx.attr_string("direction");
  INGOT_CHECK(direction == "LEFT" || direction == "RIGHT", "attribute direction: expected LEFT or RIGHT, got '{}'",
              direction);
  const bool left = direction == "LEFT";
  // Shifting by the bit width or more is undefined in C++; ONNX means "all bits shifted out".
  binary_kernel<void, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64>(ctx, [left](auto x, auto n) {
    using C = decltype(x);
    constexpr C bits = C(std::numeric_limits<C>::digits);
    return n >= bits ? C(0) : (left ? C(x << n) : C(x >> n));
  });
}

void bitwise_and(KernelContext& ctx) {
  binary_kernel<void, INGOT_INT_TYPES>(ctx, [](auto x, auto y) { return x & y; });
}
void bitwise_or(KernelContext& ctx) {
  binary_kernel<void, INGOT_INT_TYPES>(ctx, [](auto x, auto y) { return x | y; });
}
void bitwise_xor(KernelContext& ctx) {
  binary_kernel<void, INGOT_INT_TYPES>(ctx, [](auto x, auto y) { return x ^ y; });
}
void logical_and(KernelContext& ctx) {
  binary_kernel<void, DType::Bool>(ctx, [](bool x, bool y) { return x && y; });
}
void logical_or(KernelContext& ctx) {
  binary_kernel<void, DType::Bool>(ctx, [](bool x, bool y) { return x || y; });
}
void logical_xor(KernelContext& ctx) {
  binary_kernel<void, DType::Bool>(ctx, [](bool x, bool y) { return x != y; });
}

struct LessOp {
  template <class C>
  bool operator()(C x, C y) const {
    return x < y;
  }
};
struct LessOrEqualOp {
  template <class C>
  bool operator()(C x, C y) const {
    return x <= y;
  }
};

void equal(KernelContext& ctx) {
  binary_kernel<bool, INGOT_ALL_TYPES>(ctx, [](const auto& x, const auto& y) { return x == y; });
}
void less(KernelContext& ctx) { binary_kernel<bool, INGOT_NUMERIC_TYPES, DType::Bool>(ctx, LessOp{}); }
void less_or_equal(KernelContext& ctx) { binary_kernel<bool, INGOT_NUMERIC_TYPES, DType::Bool>(ctx, LessOrEqualOp{}); }
// a > b is b < a, a >= b is b <= a.
void greater(KernelContext& ctx) { binary_kernel<bool, INGOT_NUMERIC_TYPES, DType::Bool>(ctx, LessOp{}, true); }
void greater_or_equal(KernelContext& ctx) {
  binary_kernel<bool, INGOT_NUMERIC_TYPES, DType::Bool>(ctx, LessOrEqualOp{}, true);
}

void prelu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor slope = ctx.input(1);
  check_same_dtype(x, slope);
  // Before opset 7 a 1-D slope of size C applied per channel (axis 1), not numpy-style.
  if (ctx.opset() < 7 && slope.rank() == 1 && x.rank() > 2 && slope.dim(0) == x.dim(1) && slope.dim(0) != 1) {
    Shape per_channel(size_t(x.rank() - 1), 1);
    per_channel[0] = slope.dim(0);
    slope = slope.reshape(per_channel);
  }
  const Shape out_shape = broadcast_shapes({x.shape(), slope.shape()});
  INGOT_CHECK(out_shape == x.shape(), "input 1 (slope): shape {} does not broadcast to input 0 (X) shape {}",
              shape_str(slope.shape()), shape_str(x.shape()));
  dispatch_numeric(x.dtype(), [&]<class T>() {
    Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
    broadcast_binary(x.data<T>(), x.shape(), slope.data<T>(), slope.shape(), y.data<T>(), out_shape,
                     [](auto v, auto s) { return v < 0 ? decltype(v)(s * v) : v; });
  });
}

void where(KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  INGOT_CHECK(cond.dtype() == DType::Bool, "input 0 (condition): expected bool, got {}", dtype_name(cond.dtype()));
  INGOT_CHECK(x.dtype() == y.dtype(), "input 2 (Y): dtype {} does not match input 1 (X) dtype {}",
              dtype_name(y.dtype()), dtype_name(x.dtype()));
  const Shape out_shape = broadcast_shapes({cond.shape(), x.shape(), y.shape()});
  Tensor& out = ctx.allocate(0, x.dtype(), out_shape);
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  // Where only moves elements, so one instantiation per element size serves every dtype.
  dispatch_by_size(x.dtype(), [&]<class T>() {
    const bool* c = cond.data<bool>();
    const T* px = static_cast<const T*>(x.raw_data());
    const T* py = static_cast<const T*>(y.raw_data());
    T* po = static_cast<T*>(out.raw_data());
    if (cond.numel() == n && x.numel() == n && y.numel() == n) {
      parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = c[i] ? px[i] : py[i];
      });
      return;
    }
    const BroadcastIterator it(out_shape, {cond.shape(), x.shape(), y.shape()});
    const int64_t inner = it.inner();
    const int64_t sc = it.inner_stride(0), sx = it.inner_stride(1), sy = it.inner_stride(2);
    const int64_t row_grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1));
    parallel_for(it.outer(), row_grain, [&](int64_t row_begin, int64_t row_end) {
      int64_t off[3];
      for (int64_t row = row_begin; row < row_end; ++row) {
        it.offsets(row, off);
        T* o = po + row * inner;
        for (int64_t j = 0; j < inner; ++j) o[j] = c[off[0] + j * sc] ? px[off[1] + j * sx] : py[off[2] + j * sy];
      }
    });
  });
}

// Max/Min/Sum/Mean: out = in0 op in1, then out = out op in_k; each step broadcasts to the final
// shape, so no intermediate tensors are needed.
template <DType... Ds, class F>
void variadic_fold(KernelContext& ctx, F f, bool mean) {
  const size_t count = ctx.num_inputs();
  INGOT_CHECK(count >= 1, "expected at least one input");
  std::vector<Shape> shapes;
  for (size_t k = 0; k < count; ++k) {
    INGOT_CHECK(ctx.has_input(k), "input {} is missing", k);
    check_same_dtype(ctx.input(0), ctx.input(k), int(k));
    shapes.push_back(ctx.input(k).shape());
  }
  const Shape out_shape = broadcast_shapes(shapes);
  const DType dt = ctx.input(0).dtype();
  dispatch<Ds...>(dt, [&]<class T>() {
    Tensor& y = ctx.allocate(0, dt, out_shape);
    T* out = y.data<T>();
    const Tensor& first = ctx.input(0);
    if (count == 1) {
      std::copy_n(first.data<T>(), first.numel(), out);
      return;
    }
    broadcast_binary(first.data<T>(), first.shape(), ctx.input(1).data<T>(), shapes[1], out, out_shape, f);
    for (size_t k = 2; k < count; ++k) {
      broadcast_binary(static_cast<const T*>(out), out_shape, ctx.input(k).data<T>(), shapes[k], out, out_shape, f);
    }
    if (mean) {
      using C = compute_t<T>;
      const C divisor = C(count);
      map_elements(out, out, y.numel(), [divisor](C v) { return v / divisor; });
    }
  });
}

// NaN wins in either position; for integers is_nan folds away and this is a plain max/min.
void max(KernelContext& ctx) {
  variadic_fold<INGOT_NUMERIC_TYPES>(
      ctx, [](auto a, auto b) { return (a > b || is_nan(a)) ? a : b; }, false);
}
void min(KernelContext& ctx) {
  variadic_fold<INGOT_NUMERIC_TYPES>(
      ctx, [](auto a, auto b) { return (a < b || is_nan(a)) ? a : b; }, false);
}
void sum(KernelContext& ctx) {
  variadic_fold<INGOT_NUMERIC_TYPES>(
      ctx, [](auto a, auto b) { return wrapping_add(a, b); }, false);
}
void mean(KernelContext& ctx) {
  variadic_fold<INGOT_FLOAT_TYPES>(
      ctx, [](auto a, auto b) { return a + b; }, true);
}

}  // namespace

INGOT_CPU_KERNEL(Add, add).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Sub, sub).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Mul, mul).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Div, div).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Mod, mod).versions(10).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Pow, pow).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(BitShift, bit_shift).versions(11).dtypes({DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64});
INGOT_CPU_KERNEL(BitwiseAnd, bitwise_and).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CPU_KERNEL(BitwiseOr, bitwise_or).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CPU_KERNEL(BitwiseXor, bitwise_xor).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CPU_KERNEL(And, logical_and).versions(1).dtypes({DType::Bool});
INGOT_CPU_KERNEL(Or, logical_or).versions(1).dtypes({DType::Bool});
INGOT_CPU_KERNEL(Xor, logical_xor).versions(1).dtypes({DType::Bool});
INGOT_CPU_KERNEL(Equal, equal).versions(1).dtypes({INGOT_ALL_TYPES});
INGOT_CPU_KERNEL(Greater, greater).versions(1).dtypes({INGOT_NUMERIC_TYPES, DType::Bool});
INGOT_CPU_KERNEL(GreaterOrEqual, greater_or_equal).versions(12).dtypes({INGOT_NUMERIC_TYPES, DType::Bool});
INGOT_CPU_KERNEL(Less, less).versions(1).dtypes({INGOT_NUMERIC_TYPES, DType::Bool});
INGOT_CPU_KERNEL(LessOrEqual, less_or_equal).versions(12).dtypes({INGOT_NUMERIC_TYPES, DType::Bool});
INGOT_CPU_KERNEL(PRelu, prelu).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Where, where).versions(9).dtypes({DType::Bool});
INGOT_CPU_KERNEL(Max, max).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Min, min).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Sum, sum).versions(1).dtypes({INGOT_NUMERIC_TYPES});
INGOT_CPU_KERNEL(Mean, mean).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot::cpu
