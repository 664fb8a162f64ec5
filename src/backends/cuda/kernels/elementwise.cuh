// Elementwise CUDA kernels, shared by the elementwise_*.cu files: one vectorized
// contiguous path (16-byte loads and stores per thread when the pointers allow), repeat and
// mid-axis broadcast paths, and one broadcasting path through Indexer; the arithmetic runs in
// compute_t (float for the 16-bit floats); the op functors of every elementwise op.
//
// Why several files: CUDA loads a module (one .cu file's kernels) at the first launch of any of its
// kernels, at ~16 us per kernel it holds, ~1-1.5 ms per MB of device code (measured on the H200 and
// the H100: the one elementwise.cu of ~4,000 instantiations made a process's first Relu or
// HardSigmoid cost ~70 ms; a 10 MB module of every arithmetic op made MobileNetV3's first Mul cost
// 13-16 ms). So the ops models use most (Add/Sub, Mul/Div, the activations, float<->float casts)
// have small modules of their own, and the rarer ops share the larger ones. Everything here is in
// an anonymous namespace on purpose: each file gets its own kernels (internal linkage), so no two
// modules register a kernel under one host stub.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include <ingot/ops.h>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "core/broadcast.h"

namespace ingot::cuda {

// Cast on the device (elementwise_cast.cu), for kernels that convert an operand (Pow's exponent).
Tensor cast_on_device(const Tensor& x, DType to, int opset);

namespace {

// ---- kernels -------------------------------------------------------------------------------

template <class Out, class In, int V, class F>
__global__ void map1_kernel(const In* __restrict__ a, Out* __restrict__ y, int64_t n, F f) {
  const int64_t nv = n / V;
  for (int64_t i = thread_index(); i < nv; i += grid_stride()) {
    Vec<In, V> x = reinterpret_cast<const Vec<In, V>*>(a)[i];
    Vec<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = f(x.v[k]);
    reinterpret_cast<Vec<Out, V>*>(y)[i] = r;
  }
  for (int64_t i = nv * V + thread_index(); i < n; i += grid_stride()) y[i] = f(a[i]);
}

template <class Out, class In, int V, class F>
__global__ void map2_kernel(const In* __restrict__ a, const In* __restrict__ b, Out* __restrict__ y, int64_t n, F f) {
  const int64_t nv = n / V;
  for (int64_t i = thread_index(); i < nv; i += grid_stride()) {
    Vec<In, V> x = reinterpret_cast<const Vec<In, V>*>(a)[i];
    Vec<In, V> z = reinterpret_cast<const Vec<In, V>*>(b)[i];
    Vec<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = f(x.v[k], z.v[k]);
    reinterpret_cast<Vec<Out, V>*>(y)[i] = r;
  }
  for (int64_t i = nv * V + thread_index(); i < n; i += grid_stride()) y[i] = f(a[i], b[i]);
}

// y = f(a, b) where one operand, `small`, repeats every `inner` elements of y (a scalar: inner 1;
// a trailing-axes broadcast such as a bias or a scale row) and the other, `big`, has y's shape.
// Vectorized over `big` when inner is 1 or a multiple of V; `kSmallFirst`: small is f's first argument.
template <class Out, class In, int V, bool kSmallFirst, class F>
__global__ void map2_repeat_kernel(const In* __restrict__ big, const In* __restrict__ small, Out* __restrict__ y,
                                   int64_t n, int64_t inner, F f) {
  const int64_t nv = n / V;
  for (int64_t i = thread_index(); i < nv; i += grid_stride()) {
    Vec<In, V> x = reinterpret_cast<const Vec<In, V>*>(big)[i];
    const In* s = inner == 1 ? small : small + (i * V) % inner;
    Vec<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const In sk = s[inner == 1 ? 0 : k];
      r.v[k] = kSmallFirst ? f(sk, x.v[k]) : f(x.v[k], sk);
    }
    reinterpret_cast<Vec<Out, V>*>(y)[i] = r;
  }
  for (int64_t i = nv * V + thread_index(); i < n; i += grid_stride()) {
    const In sk = small[i % inner];
    y[i] = kSmallFirst ? f(sk, big[i]) : f(big[i], sk);
  }
}

// y = f(a, b) where `small` is broadcast over a middle range of y's axes: y viewed as [outer, mid,
// inner] and small as [outer, 1, inner] (NHWC's per-image, per-channel scale [N, 1, 1, C] of a
// squeeze-and-excite block). Vectorized over `big` when inner is a multiple of V (a vector then
// shares its image and covers consecutive channels); 32-bit index arithmetic (n < 2^31).
template <class Out, class In, int V, bool kSmallFirst, class F>
__global__ void map2_mid_broadcast_kernel(const In* __restrict__ big, const In* __restrict__ small,
                                          Out* __restrict__ y, uint32_t n, uint32_t mid_inner, uint32_t inner, F f) {
  const uint32_t nv = n / V;
  for (uint32_t i = uint32_t(thread_index()); i < nv; i += uint32_t(grid_stride())) {
    const uint32_t e = i * V;
    const In* s = small + (e / mid_inner) * inner + e % inner;
    Vec<In, V> x = reinterpret_cast<const Vec<In, V>*>(big)[i];
    Vec<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = kSmallFirst ? f(s[k], x.v[k]) : f(x.v[k], s[k]);
    reinterpret_cast<Vec<Out, V>*>(y)[i] = r;
  }
}

template <class Out, class In, class F>
__global__ void map2_broadcast_kernel(const In* __restrict__ a, const In* __restrict__ b, Out* __restrict__ y,
                                      int64_t n, Indexer ia, Indexer ib, F f) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) y[i] = f(a[ia.offset(i)], b[ib.offset(i)]);
}

template <class T>
__global__ void where_kernel(const bool* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ y, int64_t n, Indexer ic, Indexer ia, Indexer ib) {
  for (int64_t i = thread_index(); i < n; i += grid_stride()) y[i] = c[ic.offset(i)] ? a[ia.offset(i)] : b[ib.offset(i)];
}

// ---- launchers -----------------------------------------------------------------------------

// When `small` broadcast to `y` repeats every k elements of y (its shape, leading 1s aside, is
// y's trailing dims), k; else 0.
inline int64_t repeat_period(const Shape& small, const Shape& y) {
  size_t lead = 0;
  while (lead < small.size() && small[lead] == 1) ++lead;
  const size_t rest = small.size() - lead;
  if (rest > y.size()) return 0;
  for (size_t i = 0; i < rest; ++i) {
    if (small[lead + i] != y[y.size() - rest + i]) return 0;
  }
  return std::max<int64_t>(shape_numel(small), 1);
}

template <class Out, class In, bool kSmallFirst, class F>
void launch_repeat(const In* big, const In* small, Out* y, int64_t n, int64_t inner, F f) {
  constexpr int V = 16 / (sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out));
  if (V > 1 && (inner == 1 || inner % V == 0) && aligned16(big) && aligned16(y)) {
    map2_repeat_kernel<Out, In, V, kSmallFirst><<<blocks_for((n + V - 1) / V), kThreads, 0, stream()>>>(big, small, y,
                                                                                                      n, inner, f);
  } else {
    map2_repeat_kernel<Out, In, 1, kSmallFirst><<<blocks_for(n), kThreads, 0, stream()>>>(big, small, y, n, inner, f);
  }
}

// `small` broadcast to `y` as [outer, 1, inner] against y's [outer, mid, inner] (outer, mid > 1:
// the other broadcasts are the repeat path's): small's axes equal y's, then are 1 over a run of y's
// axes, then equal y's again. inner 0 when small is not of that form or y is too large for 32-bit
// indices.
struct MidBroadcast {
  int64_t mid_inner = 0, inner = 0;
};
inline MidBroadcast mid_broadcast(const Shape& small, const Shape& y) {
  const int64_t n = shape_numel(y);
  if (small.size() > y.size() || n >= (int64_t(1) << 31)) return {};
  const size_t lead = y.size() - small.size();
  auto dim = [&](size_t i) { return i < lead ? int64_t(1) : small[i - lead]; };
  size_t i = 0;
  int64_t outer = 1, mid = 1, inner = 1;
  for (; i < y.size() && dim(i) == y[i] && y[i] != 1; ++i) outer *= y[i];
  for (; i < y.size() && dim(i) == 1; ++i) mid *= y[i];
  for (; i < y.size() && dim(i) == y[i]; ++i) inner *= y[i];
  if (i != y.size() || outer <= 1 || mid <= 1) return {};
  return {mid * inner, inner};
}

template <class Out, class In, bool kSmallFirst, class F>
void launch_mid_broadcast(const In* big, const In* small, Out* y, int64_t n, MidBroadcast m, F f) {
  constexpr int V = 16 / (sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out));
  if constexpr (sizeof(In) == 1 && sizeof(Out) == 1) {
    // 8-bit values in 8-byte vectors where 16 do not fit (the quantized gate of MobileNetV3's 72-
    // and 120-channel blocks).
    if (m.inner % 16 != 0 && m.inner % 8 == 0 && aligned16(big) && aligned16(y)) {
      map2_mid_broadcast_kernel<Out, In, 8, kSmallFirst><<<blocks_for(n / 8), kThreads, 0, stream()>>>(
          big, small, y, uint32_t(n), uint32_t(m.mid_inner), uint32_t(m.inner), f);
      return;
    }
  }
  if (V > 1 && m.inner % V == 0 && aligned16(big) && aligned16(y)) {
    map2_mid_broadcast_kernel<Out, In, V, kSmallFirst><<<blocks_for((n + V - 1) / V), kThreads, 0, stream()>>>(
        big, small, y, uint32_t(n), uint32_t(m.mid_inner), uint32_t(m.inner), f);
  } else {
    map2_mid_broadcast_kernel<Out, In, 1, kSmallFirst><<<blocks_for(n), kThreads, 0, stream()>>>(
        big, small, y, uint32_t(n), uint32_t(m.mid_inner), uint32_t(m.inner), f);
  }
}

template <class Out, class In, class F>
void launch_map1(const In* a, Out* y, int64_t n, F f) {
  if (n == 0) return;
  constexpr int V = 16 / (sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out));
  if (V > 1 && aligned16(a) && aligned16(y)) {
    map1_kernel<Out, In, V><<<blocks_for((n + V - 1) / V), kThreads, 0, stream()>>>(a, y, n, f);
  } else {
    map1_kernel<Out, In, 1><<<blocks_for(n), kThreads, 0, stream()>>>(a, y, n, f);
  }
  INGOT_CUDA_LAUNCH_CHECK();
}

// Element types whose broadcasts get the repeat and mid-broadcast kernels: the ones models compute
// in (floats) and index with (int32/int64). Every kernel instantiation costs each process that
// loads its module ~16 us (CUDA loads a module's functions at its first launch; docs/PERFORMANCE.md
// "Cold start (H200)"), so the rarer types broadcast through the general Indexer kernel only.
template <class T>
inline constexpr bool kFastBroadcast = is_float_v<T> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// The repeat or mid-broadcast kernel for y = f(a, b), when the shapes have that form; false otherwise.
// kFast: whether to instantiate them (an op of its own module may, for any type).
template <class Out, class In, class F, bool kFast = kFastBroadcast<In>>
bool launch_fast_broadcast(const In* a, const Shape& a_shape, const In* b, const Shape& b_shape, Out* y,
                           const Shape& y_shape, int64_t n, F f) {
  if constexpr (kFast) {
    if (int64_t k = repeat_period(b_shape, y_shape); k > 0 && shape_numel(a_shape) == n) {
      launch_repeat<Out, In, false>(a, b, y, n, k, f);
      return true;
    }
    if (int64_t k = repeat_period(a_shape, y_shape); k > 0 && shape_numel(b_shape) == n) {
      launch_repeat<Out, In, true>(b, a, y, n, k, f);
      return true;
    }
    if (MidBroadcast m = mid_broadcast(b_shape, y_shape); m.inner > 0 && shape_numel(a_shape) == n) {
      launch_mid_broadcast<Out, In, false>(a, b, y, n, m, f);
      return true;
    }
    if (MidBroadcast m = mid_broadcast(a_shape, y_shape); m.inner > 0 && shape_numel(b_shape) == n) {
      launch_mid_broadcast<Out, In, true>(b, a, y, n, m, f);
      return true;
    }
  }
  return false;
}

// y = f(a, b) with a and b broadcast to y_shape.
template <class Out, class In, class F, bool kFast = kFastBroadcast<In>>
void launch_map2(const In* a, const Shape& a_shape, const In* b, const Shape& b_shape, Out* y, const Shape& y_shape,
                 F f) {
  const int64_t n = shape_numel(y_shape);
  if (n == 0) return;
  if (shape_numel(a_shape) == n && shape_numel(b_shape) == n) {
    constexpr int V = 16 / (sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out));
    if (V > 1 && aligned16(a) && aligned16(b) && aligned16(y)) {
      map2_kernel<Out, In, V><<<blocks_for((n + V - 1) / V), kThreads, 0, stream()>>>(a, b, y, n, f);
    } else {
      map2_kernel<Out, In, 1><<<blocks_for(n), kThreads, 0, stream()>>>(a, b, y, n, f);
    }
  } else if (!launch_fast_broadcast<Out, In, F, kFast>(a, a_shape, b, b_shape, y, y_shape, n, f)) {
    Indexer ia, ib;
    make_indexers({&a_shape, &b_shape}, y_shape, {&ia, &ib});
    map2_broadcast_kernel<Out, In><<<blocks_for(n), kThreads, 0, stream()>>>(a, b, y, n, ia, ib, f);
  }
  INGOT_CUDA_LAUNCH_CHECK();
}

// ---- math on compute types -----------------------------------------------------------------

#define INGOT_MATH1(name, ffn, dfn)                          \
  template <class C>                                         \
  __device__ __forceinline__ C name(C x) {                   \
    if constexpr (std::is_same_v<C, float>) {                \
      return ffn(x);                                         \
    } else {                                                 \
      return C(dfn(double(x)));                              \
    }                                                        \
  }
INGOT_MATH1(m_exp, expf, exp)
INGOT_MATH1(m_expm1, expm1f, expm1)
INGOT_MATH1(m_log, logf, log)
INGOT_MATH1(m_log1p, log1pf, log1p)
INGOT_MATH1(m_sqrt, sqrtf, sqrt)
INGOT_MATH1(m_ceil, ceilf, ceil)
INGOT_MATH1(m_floor, floorf, floor)
INGOT_MATH1(m_rint, rintf, rint)
INGOT_MATH1(m_sin, sinf, sin)
INGOT_MATH1(m_cos, cosf, cos)
INGOT_MATH1(m_tan, tanf, tan)
INGOT_MATH1(m_asin, asinf, asin)
INGOT_MATH1(m_acos, acosf, acos)
INGOT_MATH1(m_atan, atanf, atan)
INGOT_MATH1(m_sinh, sinhf, sinh)
INGOT_MATH1(m_cosh, coshf, cosh)
INGOT_MATH1(m_asinh, asinhf, asinh)
INGOT_MATH1(m_acosh, acoshf, acosh)
INGOT_MATH1(m_atanh, atanhf, atanh)
INGOT_MATH1(m_tanh, tanhf, tanh)
INGOT_MATH1(m_erf, erff, erf)
INGOT_MATH1(m_fabs, fabsf, fabs)
#undef INGOT_MATH1

template <class C>
__device__ __forceinline__ C m_pow(C x, C y) {
  if constexpr (std::is_same_v<C, float>) {
    return powf(x, y);
  } else {
    return C(pow(double(x), double(y)));
  }
}
template <class C>
__device__ __forceinline__ C m_fmod(C x, C y) {
  if constexpr (std::is_same_v<C, float>) {
    return fmodf(x, y);
  } else {
    return C(fmod(double(x), double(y)));
  }
}
template <class C>
__device__ __forceinline__ bool m_isnan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return x != x;
  } else {
    return false;
  }
}

// Wraps an operation on compute types into one on element types: load, compute, store.
template <class Out, class In, class Op>
struct Unary {
  Op op;
  __device__ __forceinline__ Out operator()(In x) const { return store<Out>(op(load(x))); }
};
template <class Out, class In, class Op>
struct Binary {
  Op op;
  __device__ __forceinline__ Out operator()(In x, In y) const { return store<Out>(op(load(x), load(y))); }
};

// ---- unary ops -----------------------------------------------------------------------------

#define INGOT_UNARY_OP(Name, expr)                       \
  struct Name {                                          \
    template <class C>                                   \
    __device__ __forceinline__ C operator()(C x) const { \
      return expr;                                       \
    }                                                    \
  };
INGOT_UNARY_OP(ReluOp, x < C(0) ? C(0) : x)
INGOT_UNARY_OP(NegOp, C(-x))
INGOT_UNARY_OP(ReciprocalOp, C(1) / x)
INGOT_UNARY_OP(SqrtOp, m_sqrt(x))
INGOT_UNARY_OP(ExpOp, m_exp(x))
INGOT_UNARY_OP(LogOp, m_log(x))
INGOT_UNARY_OP(CeilOp, m_ceil(x))
INGOT_UNARY_OP(FloorOp, m_floor(x))
INGOT_UNARY_OP(RoundOp, m_rint(x))
INGOT_UNARY_OP(SinOp, m_sin(x))
INGOT_UNARY_OP(CosOp, m_cos(x))
INGOT_UNARY_OP(TanOp, m_tan(x))
INGOT_UNARY_OP(AsinOp, m_asin(x))
INGOT_UNARY_OP(AcosOp, m_acos(x))
INGOT_UNARY_OP(AtanOp, m_atan(x))
INGOT_UNARY_OP(SinhOp, m_sinh(x))
INGOT_UNARY_OP(CoshOp, m_cosh(x))
INGOT_UNARY_OP(AsinhOp, m_asinh(x))
INGOT_UNARY_OP(AcoshOp, m_acosh(x))
INGOT_UNARY_OP(AtanhOp, m_atanh(x))
INGOT_UNARY_OP(ErfOp, m_erf(x))
INGOT_UNARY_OP(SigmoidOp, x >= C(0) ? C(1) / (C(1) + m_exp(-x)) : m_exp(x) / (C(1) + m_exp(x)))
INGOT_UNARY_OP(TanhOp, m_tanh(x))
INGOT_UNARY_OP(SoftplusOp, x > C(0) ? C(x + m_log1p(m_exp(-x))) : m_log1p(m_exp(x)))
INGOT_UNARY_OP(SoftsignOp, x / (C(1) + m_fabs(x)))
INGOT_UNARY_OP(HardSwishOp, x * (x + C(3) < C(0) ? C(0) : (x + C(3) > C(6) ? C(1) : (x + C(3)) / C(6))))
INGOT_UNARY_OP(MishOp, x * m_tanh(x > C(0) ? C(x + m_log1p(m_exp(-x))) : m_log1p(m_exp(x))))
#undef INGOT_UNARY_OP

struct AbsOp {
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C(0) ? C(-x) : x;
    }
  }
};
struct SignOp {
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return C(x > C(0));
    } else {
      return C((x > C(0)) - (x < C(0)));
    }
  }
};
struct LeakyReluOp {
  float alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x < C(0) ? C(alpha) * x : x;
  }
};
struct EluOp {
  float alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x < C(0) ? C(alpha) * m_expm1(x) : x;
  }
};
struct SeluOp {
  float alpha, gamma;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x <= C(0) ? C(gamma) * (C(alpha) * m_exp(x) - C(alpha)) : C(gamma) * x;
  }
};
struct CeluOp {
  float alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    C neg = C(alpha) * m_expm1(x / C(alpha));
    return (x > C(0) ? x : C(0)) + (neg < C(0) ? neg : C(0));
  }
};
struct HardSigmoidOp {
  float alpha, beta;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    C v = C(alpha) * x + C(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};
struct ThresholdedReluOp {
  float alpha;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x > C(alpha) ? x : C(0);
  }
};
struct ShrinkOp {
  float bias, lambd;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return x < C(-lambd) ? C(x + C(bias)) : (x > C(lambd) ? C(x - C(bias)) : C(0));
  }
};
template <class C>
struct ClipOp {
  C lo, hi;
  __device__ __forceinline__ C operator()(C x) const {
    C low_clipped = x < lo ? lo : x;  // lower bound first: min > max gives max, NaN stays
    return low_clipped > hi ? hi : low_clipped;
  }
};
struct IsNaNOp {
  template <class C>
  __device__ __forceinline__ bool operator()(C x) const {
    return m_isnan(x);
  }
};
struct IsInfOp {
  bool negative, positive;
  template <class C>
  __device__ __forceinline__ bool operator()(C x) const {
    return (positive && x == C(INFINITY)) || (negative && x == C(-INFINITY));
  }
};
struct NotOp {
  __device__ __forceinline__ bool operator()(bool x) const { return !x; }
};
struct BitwiseNotOp {
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return C(~x);
  }
};

// ---- binary ops ----------------------------------------------------------------------------

#define INGOT_BINARY_OP(Name, expr)                           \
  struct Name {                                               \
    template <class C>                                        \
    __device__ __forceinline__ auto operator()(C x, C y) const { \
      return expr;                                            \
    }                                                         \
  };
INGOT_BINARY_OP(AddOp, C(x + y))
INGOT_BINARY_OP(SubOp, C(x - y))
INGOT_BINARY_OP(MulOp, C(x * y))
INGOT_BINARY_OP(DivOp, C(x / y))
INGOT_BINARY_OP(PowOp, m_pow(x, y))
// NaN in either operand propagates (std::max would drop it).
INGOT_BINARY_OP(MaxOp, m_isnan(x) || m_isnan(y) ? C(m_isnan(x) ? x : y) : (x > y ? x : y))
INGOT_BINARY_OP(MinOp, m_isnan(x) || m_isnan(y) ? C(m_isnan(x) ? x : y) : (x < y ? x : y))
INGOT_BINARY_OP(EqualOp, bool(x == y))
INGOT_BINARY_OP(LessOp, bool(x < y))
INGOT_BINARY_OP(LessOrEqualOp, bool(x <= y))
INGOT_BINARY_OP(GreaterOp, bool(x > y))
INGOT_BINARY_OP(GreaterOrEqualOp, bool(x >= y))
INGOT_BINARY_OP(AndOp, bool(x && y))
INGOT_BINARY_OP(OrOp, bool(x || y))
INGOT_BINARY_OP(XorOp, bool(x != y))
INGOT_BINARY_OP(BitAndOp, C(x & y))
INGOT_BINARY_OP(BitOrOp, C(x | y))
INGOT_BINARY_OP(BitXorOp, C(x ^ y))
INGOT_BINARY_OP(PReluOp, C(x < C(0) ? C(y * x) : x))
#undef INGOT_BINARY_OP

struct ScaleOp {
  double s;
  template <class C>
  __device__ __forceinline__ C operator()(C x) const {
    return C(x * C(s));
  }
};
struct FloatModOp {
  bool sign_of_dividend;
  template <class C>
  __device__ __forceinline__ C operator()(C x, C y) const {
    C r = m_fmod(x, y);
    return (!sign_of_dividend && r != C(0) && ((r < C(0)) != (y < C(0)))) ? C(r + y) : r;
  }
};
struct BitShiftOp {
  bool left;
  template <class C>
  __device__ __forceinline__ C operator()(C x, C y) const {
    if (y >= C(sizeof(C) * 8)) return C(0);
    return left ? C(x << y) : C(x >> y);
  }
};

template <class Out, DType... Ds, class Op>
void binary_typed(KernelContext& ctx, Op op, DType out_dtype = DType::Undefined) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) {
    fail("input 1 has dtype {}, input 0 has {}: they must match", dtype_name(b.dtype()), dtype_name(a.dtype()));
  }
  const Shape out_shape = broadcast_shapes({a.shape(), b.shape()});
  Tensor& y = ctx.allocate(0, out_dtype == DType::Undefined ? a.dtype() : out_dtype, out_shape);
  dispatch_device<Ds...>(a.dtype(), [&]<class T>() {
    using O = std::conditional_t<std::is_void_v<Out>, T, Out>;
    launch_map2(ptr<const T>(a), a.shape(), ptr<const T>(b), b.shape(), ptr<O>(y), out_shape, Binary<O, T, Op>{op});
  });
}

// ---- kernel bodies shared by the elementwise_*.cu files --------------------------------------

#define INGOT_CUDA_SIGNED INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::Int16, DType::Int32, DType::Int64

template <class Op>
void arith_numeric(KernelContext& ctx) {
  binary_typed<void, INGOT_CUDA_NUMERIC_TYPES>(ctx, Op{});
}
template <class Op>
void arith_float(KernelContext& ctx) {
  binary_typed<void, INGOT_CUDA_FLOAT_TYPES>(ctx, Op{});
}

// Each unary kernel instantiates only the dtypes it registers (dispatch throws for the rest).
template <class Op, DType... Ds>
void unary_typed(KernelContext& ctx, Op op) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_device<Ds...>(x.dtype(), [&]<class T>() {
    launch_map1(ptr<const T>(x), ptr<T>(y), x.numel(), Unary<T, T, Op>{op});
  });
}
template <class Op>
void float_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_CUDA_FLOAT_TYPES>(ctx, Op{});
}
template <class Op>
void signed_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_CUDA_SIGNED>(ctx, Op{});
}

// Cast's conversion. Matches the CPU kernel: float -> integer saturates and maps NaN to 0;
// anything -> bool is != 0.
template <class D, class S>
struct CastOp {
  __device__ __forceinline__ D operator()(S value) const {
    auto v = load(value);
    using SC = decltype(v);
    if constexpr (std::is_same_v<D, bool>) {
      return v != SC(0);
    } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<SC>) {
      if (v != v) return D(0);
      if (v <= SC(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
      if (v >= SC(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
      return D(v);
    } else if constexpr (std::is_same_v<D, __half> || std::is_same_v<D, __nv_bfloat16>) {
      if constexpr (std::is_same_v<SC, double>) {
        return store<D>(float(v));
      } else {
        return store<D>(v);
      }
    } else {
      return D(v);
    }
  }
};

}  // namespace

// Casts between the floating-point types (elementwise_cast_float.cu: the casts mixed precision
// inserts get a small module of their own); x and y have one shape.
void cast_between_floats(const Tensor& x, Tensor& y);

}  // namespace ingot::cuda
