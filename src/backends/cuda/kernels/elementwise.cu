// Elementwise CUDA kernels: unary math and activations, binary arithmetic/comparison/logic with
// numpy broadcasting, Where, Clip and Cast. One vectorized contiguous path (16-byte loads and
// stores per thread when the pointers allow) and one broadcasting path through Indexer; the
// arithmetic runs in compute_t (float for the 16-bit floats).
#include <cmath>
#include <cstdint>
#include <limits>

#include <ingot/ops.h>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "core/broadcast.h"

namespace ingot::cuda {
namespace {

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

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

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// When `small` broadcast to `y` repeats every k elements of y (its shape, leading 1s aside, is
// y's trailing dims), k; else 0.
int64_t repeat_period(const Shape& small, const Shape& y) {
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
MidBroadcast mid_broadcast(const Shape& small, const Shape& y) {
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

// y = f(a, b) with a and b broadcast to y_shape.
template <class Out, class In, class F>
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
  } else if (int64_t k = repeat_period(b_shape, y_shape); k > 0 && shape_numel(a_shape) == n) {
    launch_repeat<Out, In, false>(a, b, y, n, k, f);
  } else if (int64_t k = repeat_period(a_shape, y_shape); k > 0 && shape_numel(b_shape) == n) {
    launch_repeat<Out, In, true>(b, a, y, n, k, f);
  } else if (MidBroadcast m = mid_broadcast(b_shape, y_shape); m.inner > 0 && shape_numel(a_shape) == n) {
    launch_mid_broadcast<Out, In, false>(a, b, y, n, m, f);
  } else if (MidBroadcast m = mid_broadcast(a_shape, y_shape); m.inner > 0 && shape_numel(b_shape) == n) {
    launch_mid_broadcast<Out, In, true>(b, a, y, n, m, f);
  } else {
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
#define INGOT_SIGNED_NUMERIC INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::Int16, DType::Int32, DType::Int64
template <class Op>
void signed_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_SIGNED_NUMERIC>(ctx, Op{});
}
template <class Op>
void int_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_INT_TYPES>(ctx, Op{});
}
template <class Op>
void numeric_unary(KernelContext& ctx) {
  unary_typed<Op, INGOT_CUDA_NUMERIC_TYPES>(ctx, Op{});
}

void leaky_relu(KernelContext& ctx) {
  unary_typed<LeakyReluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")});
}
void elu(KernelContext& ctx) { unary_typed<EluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")}); }
void selu(KernelContext& ctx) {
  unary_typed<SeluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha"), ctx.attr_float("gamma")});
}
void celu(KernelContext& ctx) { unary_typed<CeluOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha")}); }
void hard_sigmoid(KernelContext& ctx) {
  unary_typed<HardSigmoidOp, INGOT_CUDA_FLOAT_TYPES>(ctx, {ctx.attr_float("alpha"), ctx.attr_float("beta")});
}
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

template <class Op>
void arith_numeric(KernelContext& ctx) {
  binary_typed<void, INGOT_CUDA_NUMERIC_TYPES>(ctx, Op{});
}
template <class Op>
void arith_float(KernelContext& ctx) {
  binary_typed<void, INGOT_CUDA_FLOAT_TYPES>(ctx, Op{});
}
template <class Op>
void compare(KernelContext& ctx) {
  binary_typed<bool, INGOT_CUDA_NUMERIC_TYPES, DType::Bool>(ctx, Op{}, DType::Bool);
}
template <class Op>
void logical(KernelContext& ctx) {
  binary_typed<bool, DType::Bool>(ctx, Op{}, DType::Bool);
}
template <class Op>
void bitwise(KernelContext& ctx) {
  binary_typed<void, INGOT_INT_TYPES>(ctx, Op{});
}

void mod(KernelContext& ctx) {
  if (ctx.attr_int("fmod") == 0 && is_floating(ctx.input(0).dtype())) {
    fail("attribute fmod: must be 1 for floating-point inputs");
  }
  binary_typed<void, INGOT_CUDA_FLOAT_TYPES>(ctx, FloatModOp{ctx.attr_int("fmod") != 0});
}
void bit_shift(KernelContext& ctx) {
  binary_typed<void, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64>(
      ctx, BitShiftOp{ctx.attr_string("direction") == "LEFT"});
}

Tensor cast_on_device(const Tensor& x, DType to, int opset);

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

// ---- Where ---------------------------------------------------------------------------------

void where(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& a = ctx.input(1);
  const Tensor& b = ctx.input(2);
  if (c.dtype() != DType::Bool) fail("input 0 (condition) must be bool, got {}", dtype_name(c.dtype()));
  if (a.dtype() != b.dtype()) {
    fail("input 2 (Y) has dtype {}, input 1 (X) has {}", dtype_name(b.dtype()), dtype_name(a.dtype()));
  }
  const Shape out_shape = broadcast_shapes({c.shape(), a.shape(), b.shape()});
  Tensor& y = ctx.allocate(0, a.dtype(), out_shape);
  const int64_t n = y.numel();
  if (n == 0) return;
  Indexer ic, ia, ib;
  make_indexers({&c.shape(), &a.shape(), &b.shape()}, out_shape, {&ic, &ia, &ib});
  dispatch_by_size(a.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>) {
      fail("string tensors live on the CPU only");
    } else {
      where_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const bool>(c), ptr<const T>(a), ptr<const T>(b),
                                                               ptr<T>(y), n, ic, ia, ib);
      INGOT_CUDA_LAUNCH_CHECK();
    }
  });
}

// ---- Cast ----------------------------------------------------------------------------------

// Matches the CPU kernel: float -> integer saturates and maps NaN to 0; anything -> bool is != 0.
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

// Float32 -> bfloat16 by dropping the low 16 bits (ONNX's reference before opset 19).
struct TruncateBF16 {
  __device__ __forceinline__ __nv_bfloat16 operator()(float x) const {
    uint32_t bits = __float_as_uint(x);
    bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    return __ushort_as_bfloat16(uint16_t(nan ? (bits >> 16) | 0x40u : bits >> 16));
  }
};

#define INGOT_CUDA_CAST_TYPES INGOT_CUDA_NUMERIC_TYPES, DType::Bool

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
  dispatch_device<INGOT_CUDA_CAST_TYPES>(x.dtype(), [&]<class S>() {
    dispatch_device<INGOT_CUDA_CAST_TYPES>(to, [&]<class D>() {
      launch_map1(ptr<const S>(x), ptr<D>(y), x.numel(), CastOp<D, S>{});
    });
  });
  return y;
}

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

#define INGOT_CUDA_SIGNED INGOT_CUDA_FLOAT_TYPES, DType::Int8, DType::Int16, DType::Int32, DType::Int64
INGOT_CUDA_KERNEL(Relu, signed_unary<ReluOp>).versions(1).dtypes({INGOT_CUDA_SIGNED});
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
INGOT_CUDA_KERNEL(Erf, float_unary<ErfOp>).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Sigmoid, float_unary<SigmoidOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Tanh, float_unary<TanhOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Softplus, float_unary<SoftplusOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Softsign, float_unary<SoftsignOp>).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(HardSwish, float_unary<HardSwishOp>).versions(14).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(HardSwish, float_unary<HardSwishOp>).domain(kIngotDomain).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Mish, float_unary<MishOp>).versions(18).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(LeakyRelu, leaky_relu).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Elu, elu).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Selu, selu).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Celu, celu).versions(12).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(HardSigmoid, hard_sigmoid).versions(1).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(ThresholdedRelu, thresholded_relu).versions(10).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Shrink, shrink).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(IsNaN, is_nan).versions(9).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(IsInf, is_inf).versions(10).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Not, logical_not).versions(1).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(BitwiseNot, int_unary<BitwiseNotOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(Clip, clip).versions(1).dtypes({INGOT_CUDA_NUMERIC_TYPES}).host_inputs({1, 2});

INGOT_CUDA_KERNEL(Add, arith_numeric<AddOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Sub, arith_numeric<SubOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Mul, arith_numeric<MulOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES});
// Integer division by zero is an error on the CPU; checking it here would need the data on the
// host, so integer Div and Mod stay on the CPU.
INGOT_CUDA_KERNEL(Div, arith_float<DivOp>).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Mod, mod).versions(10).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Pow, pow).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(PRelu, prelu).versions(7).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Equal, compare<EqualOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(Less, compare<LessOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(LessOrEqual, compare<LessOrEqualOp>).versions(12).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(Greater, compare<GreaterOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(GreaterOrEqual, compare<GreaterOrEqualOp>)
    .versions(12)
    .dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(And, logical<AndOp>).versions(7).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(Or, logical<OrOp>).versions(7).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(Xor, logical<XorOp>).versions(7).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(BitwiseAnd, bitwise<BitAndOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(BitwiseOr, bitwise<BitOrOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(BitwiseXor, bitwise<BitXorOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(BitShift, bit_shift).versions(11).dtypes({DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64});
INGOT_CUDA_KERNEL(Sum, sum).versions(8).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Mean, mean).versions(8).dtypes(float_dtypes());
INGOT_CUDA_KERNEL(Max, max).versions(8).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Min, min).versions(8).dtypes({INGOT_CUDA_NUMERIC_TYPES});
INGOT_CUDA_KERNEL(Where, where).versions(9).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(Cast, cast).versions(6).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(CastLike, cast_like).versions(15).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool}).host_inputs({1});

}  // namespace ingot::cuda
