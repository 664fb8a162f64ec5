// Loops shared by the elementwise CPU kernels (unary.cpp, binary.cpp, activation.cpp, cast.cpp).
// Every loop is a plain loop over raw pointers so g++ -O3 vectorizes it; float16/bfloat16 are
// loaded as float, computed in float and rounded back on store.
#pragma once
#include <ingot/tensor.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/half_convert.h"
#include "core/numeric.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot::cpu {

// Elements per parallel task: large enough that scheduling costs nothing next to the loop.
inline constexpr int64_t kElementwiseGrain = 1 << 14;

// The type arithmetic is done in: float for the 16-bit floats, the element type otherwise.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <class C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return x != x;
  } else {
    return false;
  }
}

template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// 16-bit float tensors are computed in float32 chunks of this many elements: one vectorized
// conversion in, the float loop, one vectorized conversion out (core/half_convert.h).
inline constexpr int64_t kHalfChunk = 512;

// dst[i] = compute_t<T>(src[i]) for i < n.
template <class T>
void load_compute(const T* src, compute_t<T>* dst, int64_t n) {
  if constexpr (is_16bit_float_v<T>) {
    to_float(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}
// dst[i] = T(src[i]) for i < n.
template <class T, class C>
void store_result(const C* src, T* dst, int64_t n) {
  if constexpr (is_16bit_float_v<T> && std::is_same_v<C, float>) {
    from_float(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  }
}

// y[i] = x[i] * clamp(x[i] / 6 + 1/2, 0, 1) (HardSwish) for n floats; x may be y. Two loops per
// chunk: GCC 12 leaves the one-loop clamp-then-multiply scalar (8x slower). NaN in, NaN out.
inline void hard_swish_f32(const float* x, float* y, int64_t n) {
  float t[kHalfChunk];
  for (int64_t i = 0; i < n; i += kHalfChunk) {
    const int64_t len = std::min(kHalfChunk, n - i);
    for (int64_t j = 0; j < len; ++j) t[j] = std::min(std::max(x[i + j] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    for (int64_t j = 0; j < len; ++j) y[i + j] = x[i + j] * t[j];
  }
}

// y[i] = f(x[i]) for same-sized contiguous tensors; TI/TO are element types.
template <class TI, class TO, class F>
void map_elements(const TI* x, TO* y, int64_t n, F f) {
  if constexpr (is_16bit_float_v<TI> || is_16bit_float_v<TO>) {
    using CI = compute_t<TI>;
    using R = decltype(f(CI{}));
    parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
      CI in[kHalfChunk];
      R out[kHalfChunk];
      for (int64_t i = begin; i < end; i += kHalfChunk) {
        const int64_t len = std::min(kHalfChunk, end - i);
        load_compute(x + i, in, len);
        for (int64_t j = 0; j < len; ++j) out[j] = f(in[j]);
        store_result(out, y + i, len);
      }
    });
  } else {
    parallel_for(n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] = TO(f(compute_t<TI>(x[i])));
    });
  }
}

// Output 0 = f(input 0), same dtype and shape, for the input dtypes Ds.
template <DType... Ds, class F>
void unary_kernel(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  dispatch<Ds...>(x.dtype(), [&]<class T>() {
    Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
    map_elements(x.data<T>(), y.data<T>(), x.numel(), f);
  });
}

// po[j] = f(pa[j * sa], pb[j * sb]) for j < len, where each stride is 0 (broadcast) or 1; one
// loop per stride pair so that each vectorizes.
template <class TA, class TB, class TO, class F>
void binary_run(const TA* pa, int64_t sa, const TB* pb, int64_t sb, TO* po, int64_t len, F& f) {
  using CA = compute_t<TA>;
  using CB = compute_t<TB>;
  if constexpr (is_16bit_float_v<TA> || is_16bit_float_v<TB> || is_16bit_float_v<TO>) {
    using R = decltype(f(CA{}, CB{}));
    CA a[kHalfChunk];
    CB b[kHalfChunk];
    R out[kHalfChunk];
    if (sa == 0) std::fill_n(a, kHalfChunk, CA(pa[0]));
    if (sb == 0) std::fill_n(b, kHalfChunk, CB(pb[0]));
    for (int64_t j = 0; j < len; j += kHalfChunk) {
      const int64_t n = std::min(kHalfChunk, len - j);
      if (sa == 1) load_compute(pa + j, a, n);
      if (sb == 1) load_compute(pb + j, b, n);
      for (int64_t k = 0; k < n; ++k) out[k] = f(a[k], b[k]);
      store_result(out, po + j, n);
    }
    return;
  }
  if (sa == 1 && sb == 1) {
    for (int64_t j = 0; j < len; ++j) po[j] = TO(f(CA(pa[j]), CB(pb[j])));
  } else if (sa == 1) {
    const CB bv = CB(pb[0]);
    for (int64_t j = 0; j < len; ++j) po[j] = TO(f(CA(pa[j]), bv));
  } else if (sb == 1) {
    const CA av = CA(pa[0]);
    for (int64_t j = 0; j < len; ++j) po[j] = TO(f(av, CB(pb[j])));
  } else {
    const TO v = TO(f(CA(pa[0]), CB(pb[0])));
    for (int64_t j = 0; j < len; ++j) po[j] = v;
  }
}

// out = f(a, b) with numpy broadcasting of a and b to `out_shape`. The output may alias an input
// whose shape equals out_shape (the variadic folds rely on that). BroadcastIterator merges axes
// into one contiguous inner run (the whole tensor when shapes match, so equal shapes and
// tensor-with-scalar take the vectorized loops directly); the work is split by element count, so
// a single long row is still spread over threads.
template <class TA, class TB, class TO, class F>
void broadcast_binary(const TA* a, const Shape& a_shape, const TB* b, const Shape& b_shape, TO* out,
                      const Shape& out_shape, F f) {
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  const BroadcastIterator it(out_shape, {a_shape, b_shape});
  const int64_t inner = it.inner();
  const int64_t sa = it.inner_stride(0), sb = it.inner_stride(1);
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    int64_t offsets[2];
    for (int64_t pos = begin; pos < end;) {
      const int64_t row = pos / inner, col = pos % inner;
      const int64_t len = std::min(inner - col, end - pos);
      it.offsets(row, offsets);
      binary_run(a + offsets[0] + col * sa, sa, b + offsets[1] + col * sb, sb, out + pos, len, f);
      pos += len;
    }
  });
}

// exp for float32 that vectorizes (Cephes' expf polynomial, about 1 ulp): the models spend real
// time in Sigmoid/Tanh/Exp on large tensors and glibc's scalar expf does not vectorize.
// Overflow gives +inf, underflow goes through denormals to 0, NaN propagates.
//
// The range clamp and the NaN fix-up are done on the bit patterns with integer min/or: float
// selects there let g++ (with its default -ftrapping-math) thread the clamped constant through
// the polynomial, which turns the loop into branches and stops vectorization.
inline float fast_expf(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  // |x| <= 104 (negative) or 89 (positive) keeps 2^n below in range.
  const uint32_t limit = (bits >> 31) ? std::bit_cast<uint32_t>(104.0f) : std::bit_cast<uint32_t>(89.0f);
  const float clamped = std::bit_cast<float>(std::min(abs_bits, limit) | (bits & 0x80000000u));
  // n = round(x / ln 2) by the 1.5 * 2^23 trick, which also leaves n in the low mantissa bits.
  constexpr float kShifter = 12582912.0f;
  const float shifted = clamped * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  float r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^n as 2^(n/2) * 2^(n - n/2): each half stays a normal float for n in [-150, 129], so
  // results can overflow to inf or underflow gracefully.
  const int32_t n_int = int32_t(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kShifter));
  const int32_t half_n = n_int >> 1;
  const float scale1 = std::bit_cast<float>(uint32_t(half_n + 127) << 23);
  const float scale2 = std::bit_cast<float>(uint32_t(n_int - half_n + 127) << 23);
  // A NaN input was clamped like a large number; OR-ing in a quiet-NaN pattern restores it.
  const uint32_t nan_bits = abs_bits > 0x7f800000u ? 0x7fc00000u : 0u;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * scale1 * scale2) | nan_bits);
}

// tanh for float32 from fast_expf; a short Taylor series near 0 avoids the cancellation in
// (1 - e) / (1 + e) there. The branch is picked on the bit patterns (see fast_expf for why).
inline float fast_tanhf(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  const float ax = std::bit_cast<float>(abs_bits);
  const float e = fast_expf(-2.0f * ax);
  const float large = (1.0f - e) / (1.0f + e);
  const float x2 = ax * ax;
  const float small =
      ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
  const uint32_t use_small = 0u - uint32_t(abs_bits < std::bit_cast<uint32_t>(0.25f));  // all ones or zero
  const uint32_t magnitude =
      (std::bit_cast<uint32_t>(small) & use_small) | (std::bit_cast<uint32_t>(large) & ~use_small);
  return std::bit_cast<float>(magnitude | (bits & 0x80000000u));
}

// exp/tanh in the compute type, the fast versions for float.
template <class C>
C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return fast_expf(x);
  } else {
    return std::exp(x);
  }
}
template <class C>
C tanh_of(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return fast_tanhf(x);
  } else {
    return std::tanh(x);
  }
}

// log(1 + e^v) written as max(v, 0) + log1p(e^-|v|) so large |v| neither overflows nor loses digits.
template <class C>
C softplus_of(C v) {
  return (v > 0 ? v : C(0)) + std::log1p(exp_of(-std::fabs(v)));
}

// Tensor conversion shared by Cast, CastLike and Pow's mixed-dtype exponent (cast.cpp).
// `opset` selects the float -> bfloat16 rounding (truncation before opset 19, nearest-even after).
Tensor cast_tensor(const Tensor& x, DType to, int opset);

}  // namespace ingot::cpu
