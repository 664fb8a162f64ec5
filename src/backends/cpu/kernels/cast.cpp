// Cast and CastLike: every pair of numeric/bool dtypes, float16/bfloat16, and strings both ways.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "backends/cpu/kernels/elementwise.h"

namespace ingot::cpu {
namespace {

#define INGOT_CASTABLE_TYPES INGOT_NUMERIC_TYPES, DType::Bool

// One element of S as D. Floats to integers saturate and NaN becomes 0: C++ leaves those
// conversions undefined and ONNX does not specify them, so pick the safe behaviour.
template <class D, class S>
D convert(S value) {
  using SC = compute_t<S>;
  const SC v = SC(value);
  if constexpr (std::is_same_v<D, bool>) {
    return v != SC(0);
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(float(v));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<SC>) {
    if (v != v) return D(0);
    if (v <= SC(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (v >= SC(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return D(v);
  } else {
    return D(v);
  }
}

template <class S>
void cast_numeric(const Tensor& x, Tensor& y) {
  const S* in = x.data<S>();
  dispatch<INGOT_CASTABLE_TYPES>(y.dtype(), [&]<class D>() {
    D* out = y.data<D>();
    parallel_for(x.numel(), kElementwiseGrain, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = convert<D>(in[i]);
    });
  });
}

// Float32 -> bfloat16 by dropping the low 16 bits (ONNX's reference before opset 19); NaN stays NaN.
void truncate_to_bfloat16(const Tensor& x, Tensor& y) {
  const float* in = x.data<float>();
  BFloat16* out = y.data<BFloat16>();
  parallel_for(x.numel(), kElementwiseGrain, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t bits = std::bit_cast<uint32_t>(in[i]);
      const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
      out[i] = BFloat16::from_bits(uint16_t(nan ? (bits >> 16) | 0x40u : bits >> 16));
    }
  });
}

template <class T>
std::string number_to_string(T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "True" : "False";  // numpy's spelling, which ONNX's reference uses
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return fmt::format("{}", float(value));
  } else {
    return fmt::format("{}", value);  // shortest text that reads back to the same value
  }
}

template <class D>
D parse_number(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool>) {
    D value{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && ptr == text.data() + text.size()) return value;
  }
  // strtod accepts decimal and exponent forms, "NaN", "INF", "-inf" and "+INF".
  const double value = std::strtod(begin, &end);
  INGOT_CHECK(end != begin && *end == '\0', "input 0: cannot parse '{}' as {}", text, dtype_name(dtype_of<D>()));
  return convert<D>(value);
}

void check_cast_target(DType to) {
  switch (to) {
    case DType::Float32:
    case DType::Float64:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64:
    case DType::Bool:
    case DType::String: return;
    default: fail("attribute to: dtype code {} is not supported", int(to));
  }
}

void cast(KernelContext& ctx) {
  const DType to = DType(ctx.attr_int("to"));
  check_cast_target(to);
  ctx.set_output(0, cast_tensor(ctx.input(0), to, ctx.opset()));
}

void cast_like(KernelContext& ctx) { ctx.set_output(0, cast_tensor(ctx.input(0), ctx.input(1).dtype(), ctx.opset())); }

}  // namespace

Tensor cast_tensor(const Tensor& x, DType to, int opset) {
  if (x.dtype() == to) return x;
  Tensor y = Tensor::empty(to, x.shape());
  if (x.dtype() == DType::String) {
    const std::string* in = x.data<std::string>();
    dispatch<INGOT_CASTABLE_TYPES>(to, [&]<class D>() {
      D* out = y.data<D>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = parse_number<D>(in[i]);
    });
  } else if (to == DType::String) {
    std::string* out = y.data<std::string>();
    dispatch<INGOT_CASTABLE_TYPES>(x.dtype(), [&]<class S>() {
      const S* in = x.data<S>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = number_to_string(in[i]);
    });
  } else if (to == DType::BFloat16 && opset < 19) {
    truncate_to_bfloat16(x.dtype() == DType::Float32 ? x : cast_tensor(x, DType::Float32, opset), y);
  } else {
    dispatch<INGOT_CASTABLE_TYPES>(x.dtype(), [&]<class S>() { cast_numeric<S>(x, y); });
  }
  return y;
}

INGOT_CPU_KERNEL(Cast, cast).versions(6).dtypes({INGOT_ALL_TYPES});
INGOT_CPU_KERNEL(CastLike, cast_like).versions(15).dtypes({INGOT_ALL_TYPES});

#undef INGOT_CASTABLE_TYPES

}  // namespace ingot::cpu
