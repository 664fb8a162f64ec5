// ReduceX and ArgMax/ArgMin on the CPU.
//
// Every reduction is planned the same way: size-1 axes are dropped, neighbouring axes that are
// both reduced or both kept are merged, and the result is walked as
//   output[o, i] = reduce over r of x[outer_offset[o] + reduced_offset[r] + i]
// where `i` runs over the innermost kept block (contiguous, so the accumulation vectorizes) or,
// when the innermost block is itself reduced, the contiguous run is folded into 16
// independent partial accumulators (which g++ vectorizes without -ffast-math, and which also
// makes float sums more accurate than one serial accumulator).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/numeric.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/reduce_axes.h"

namespace ingot {
namespace {

using sem::ReduceAxes;

// The walk described at the top of the file. Offsets are in elements.
struct ReducePlan {
  std::vector<int64_t> outer_offsets;    // one per output row
  std::vector<int64_t> reduced_offsets;  // one per reduced position outside the contiguous run
  int64_t inner = 1;                     // contiguous kept block (output row length); 1 when the last block is reduced
  int64_t contiguous = 1;                // contiguous reduced run; 1 when the last block is kept
  int64_t count = 1;                     // elements folded into each output
};

// Row-major offsets of every index of `dims` (sizes with strides), in order.
std::vector<int64_t> offsets_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<int64_t> offsets{0};
  for (size_t d = 0; d < sizes.size(); ++d) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * size_t(sizes[d]));
    for (int64_t base : offsets)
      for (int64_t k = 0; k < sizes[d]; ++k) next.push_back(base + k * strides[d]);
    offsets.swap(next);
  }
  return offsets;
}

// Requires every dimension of x to be positive.
ReducePlan make_plan(const Shape& shape, const std::vector<bool>& reduced) {
  // Merge neighbouring axes of the same kind, skipping size-1 axes.
  std::vector<int64_t> sizes, strides;
  std::vector<bool> kinds;
  int64_t stride = 1;
  std::vector<int64_t> all_strides(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    all_strides[d] = stride;
    stride *= shape[d];
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!kinds.empty() && kinds.back() == reduced[d]) {
      sizes.back() *= shape[d];
      strides.back() = all_strides[d];
    } else {
      sizes.push_back(shape[d]);
      strides.push_back(all_strides[d]);
      kinds.push_back(reduced[d]);
    }
  }
  ReducePlan plan;
  if (!kinds.empty()) {
    if (kinds.back())
      plan.contiguous = sizes.back();
    else
      plan.inner = sizes.back();
    sizes.pop_back();
    strides.pop_back();
    const bool last_reduced = kinds.back();
    kinds.pop_back();
    std::vector<int64_t> kept_sizes, kept_strides, red_sizes, red_strides;
    for (size_t k = 0; k < kinds.size(); ++k) {
      (kinds[k] ? red_sizes : kept_sizes).push_back(sizes[k]);
      (kinds[k] ? red_strides : kept_strides).push_back(strides[k]);
    }
    plan.outer_offsets = offsets_of(kept_sizes, kept_strides);
    plan.reduced_offsets = offsets_of(red_sizes, red_strides);
    plan.count = int64_t(plan.reduced_offsets.size()) * (last_reduced ? plan.contiguous : 1);
  } else {
    plan.outer_offsets = {0};
    plan.reduced_offsets = {0};
  }
  return plan;
}

// Accumulator type: float for the 16- and 32-bit floats, double for double; 64-bit integers for
// integer sums and products (wrapping like the input type once cast back); double where the
// result is irrational (L2, LogSum, LogSumExp).
template <class T, bool needs_real>
using AccOf = std::conditional_t<
    std::is_same_v<T, double>, double,
    std::conditional_t<
        !std::is_integral_v<T>, float,
        std::conditional_t<needs_real, double, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>>;

template <class A>
inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return false;
}

// Each reduction: `load` maps an input element (and its output index, used by LogSumExp for its
// shift) to the accumulator type, `combine` folds, `finish` produces the output value.
template <class T>
struct SumOp {
  using Acc = AccOf<T, false>;
  static Acc identity() { return Acc(0); }
  Acc load(T v, int64_t) const { return Acc(v); }
  static Acc combine(Acc a, Acc b) { return wrapping_add(a, b); }  // integers wrap, as numpy's
  T finish(Acc a, int64_t) const { return T(a); }
};

template <class T>
struct MeanOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  int64_t count = 1;
  T finish(Acc a, int64_t) const {
    if constexpr (std::is_integral_v<Acc>)
      return count == 0 ? T(0) : T(a / Acc(count));
    else
      return T(a / Acc(count));  // 0/0 = NaN for an empty reduction, as numpy
  }
};

template <class T>
struct SumSquareOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  Acc load(T v, int64_t) const { return wrapping_mul(Acc(v), Acc(v)); }
};

template <class T>
struct L1Op : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  Acc load(T v, int64_t) const {
    Acc a = Acc(v);
    if constexpr (std::is_unsigned_v<Acc>)
      return a;
    else
      return a < Acc(0) ? wrapping_neg(a) : a;
  }
};

template <class T>
struct L2Op {
  using Acc = AccOf<T, true>;
  static Acc identity() { return Acc(0); }
  Acc load(T v, int64_t) const { return wrapping_mul(Acc(v), Acc(v)); }
  static Acc combine(Acc a, Acc b) { return a + b; }
  T finish(Acc a, int64_t) const {
    return T(std::sqrt(a));  // integers truncate, as numpy's astype
  }
};

template <class T>
struct LogSumOp : L2Op<T> {
  using Acc = typename L2Op<T>::Acc;
  Acc load(T v, int64_t) const { return Acc(v); }
  T finish(Acc a, int64_t) const { return from_float<T>(std::log(a)); }
};

// log(sum(exp(x - shift))) + shift, with shift = the per-output maximum (computed by a first
// pass) so that exp never overflows.
template <class T>
struct LogSumExpOp : L2Op<T> {
  using Acc = typename L2Op<T>::Acc;
  const Acc* shift = nullptr;
  Acc load(T v, int64_t out) const { return std::exp(Acc(v) - shift[out]); }
  T finish(Acc a, int64_t out) const {
    // An all -inf (or empty) slice has shift -inf: the result is -inf, not NaN.
    if (std::isinf(shift[out])) return from_float<T>(shift[out]);
    return from_float<T>(std::log(a) + shift[out]);
  }
};

template <class T>
struct ProdOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  static Acc identity() { return Acc(1); }
  static Acc combine(Acc a, Acc b) { return wrapping_mul(a, b); }
};

// Max/Min keep the input type's range; NaN is sticky (once an accumulator is NaN it stays NaN).
template <class T, class AccT>
struct MaxOpBase {
  using Acc = AccT;
  static Acc identity() {
    if constexpr (std::numeric_limits<Acc>::has_infinity)
      return -std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::lowest();
  }
  Acc load(T v, int64_t) const { return Acc(v); }
  static Acc combine(Acc a, Acc b) { return ((b > a) | is_nan(b)) ? b : a; }
  T finish(Acc a, int64_t) const { return T(a); }
};
template <class T>
using MaxOp = MaxOpBase<T, std::conditional_t<std::is_integral_v<T>, T, AccOf<T, false>>>;

template <class T, class AccT>
struct MinOpBase {
  using Acc = AccT;
  static Acc identity() {
    if constexpr (std::numeric_limits<Acc>::has_infinity)
      return std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::max();
  }
  Acc load(T v, int64_t) const { return Acc(v); }
  static Acc combine(Acc a, Acc b) { return ((b < a) | is_nan(b)) ? b : a; }
  T finish(Acc a, int64_t) const { return T(a); }
};
template <class T>
using MinOp = MinOpBase<T, std::conditional_t<std::is_integral_v<T>, T, AccOf<T, false>>>;

// Runs the plan with op, writing op.finish(...) into out (any type F: T, or an accumulator for
// LogSumExp's first pass through `finish_raw`).
template <class T, class Op, class Out, class Finish>
void run_plan(const T* x, Out* out, const ReducePlan& plan, const Op& op, Finish finish) {
  using Acc = typename Op::Acc;
  const int64_t outer = int64_t(plan.outer_offsets.size());
  const int64_t* outer_off = plan.outer_offsets.data();
  const int64_t* red_off = plan.reduced_offsets.data();
  const int64_t num_red = int64_t(plan.reduced_offsets.size());
  const int64_t work_per_row = std::max<int64_t>(1, plan.count * plan.inner);
  if (plan.inner == 1) {
    // The innermost block is reduced: fold each contiguous run into 16 partial accumulators.
    const int64_t run = plan.contiguous;
    parallel_for(outer, std::max<int64_t>(1, (1 << 14) / work_per_row), [&](int64_t ob, int64_t oe) {
      constexpr int kLanes = 16;
      for (int64_t o = ob; o < oe; ++o) {
        Acc lanes[kLanes];
        for (auto& l : lanes) l = Op::identity();
        Acc tail = Op::identity();
        for (int64_t r = 0; r < num_red; ++r) {
          const T* p = x + outer_off[o] + red_off[r];
          int64_t j = 0;
          for (; j + kLanes <= run; j += kLanes)
            for (int k = 0; k < kLanes; ++k) lanes[k] = Op::combine(lanes[k], op.load(p[j + k], o));
          for (; j < run; ++j) tail = Op::combine(tail, op.load(p[j], o));
        }
        for (int k = 0; k < kLanes; ++k) tail = Op::combine(tail, lanes[k]);
        out[o] = finish(tail, o);
      }
    });
    return;
  }
  // The innermost block is kept: accumulate whole rows of `inner` outputs, in blocks so the
  // accumulators stay in L1 and there is parallel work even when outer == 1.
  constexpr int64_t kBlock = 2048;
  const int64_t inner = plan.inner;
  const int64_t blocks_per_row = (inner + kBlock - 1) / kBlock;
  const int64_t work_per_block = std::max<int64_t>(1, num_red * std::min(inner, kBlock));
  const int64_t items = outer * blocks_per_row;
  // Few output blocks over a long reduction (a squeeze-excitation block's mean over H and W of a
  // channels-last [1, H, W, C]: one block, so one thread): the reduced range is cut into chunks
  // too, summed in parallel and combined in chunk order. The cut depends on the shape alone, so the
  // result is the same for any thread count.
  const int64_t chunks = items < 16 && num_red >= 256 ? std::min<int64_t>(16, num_red / 128) : 1;
  if (chunks > 1) {
    const int64_t width = std::min(inner, kBlock);
    std::vector<Acc> partial(size_t(items * chunks * width));
    parallel_for(items * chunks, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, work_per_block / chunks)),
                 [&](int64_t wb, int64_t we) {
                   for (int64_t w = wb; w < we; ++w) {
                     const int64_t item = w / chunks, chunk = w % chunks;
                     const int64_t o = item / blocks_per_row, i0 = (item % blocks_per_row) * kBlock;
                     const int64_t len = std::min(kBlock, inner - i0), out0 = o * inner + i0;
                     Acc* acc = partial.data() + w * width;
                     for (int64_t i = 0; i < len; ++i) acc[i] = Op::identity();
                     for (int64_t r = chunk * num_red / chunks; r < (chunk + 1) * num_red / chunks; ++r) {
                       const T* p = x + outer_off[o] + red_off[r] + i0;
                       for (int64_t i = 0; i < len; ++i) acc[i] = Op::combine(acc[i], op.load(p[i], out0 + i));
                     }
                   }
                 });
    for (int64_t item = 0; item < items; ++item) {
      const int64_t o = item / blocks_per_row, i0 = (item % blocks_per_row) * kBlock;
      const int64_t len = std::min(kBlock, inner - i0), out0 = o * inner + i0;
      const Acc* first = partial.data() + item * chunks * width;
      for (int64_t i = 0; i < len; ++i) {
        Acc a = first[i];
        for (int64_t c = 1; c < chunks; ++c) a = Op::combine(a, first[c * width + i]);
        out[out0 + i] = finish(a, out0 + i);
      }
    }
    return;
  }
  parallel_for(outer * blocks_per_row, std::max<int64_t>(1, (1 << 14) / work_per_block), [&](int64_t wb, int64_t we) {
    Acc acc[kBlock];
    for (int64_t w = wb; w < we; ++w) {
      const int64_t o = w / blocks_per_row;
      const int64_t i0 = (w % blocks_per_row) * kBlock;
      const int64_t len = std::min(kBlock, inner - i0);
      const int64_t out0 = o * inner + i0;
      for (int64_t i = 0; i < len; ++i) acc[i] = Op::identity();
      for (int64_t r = 0; r < num_red; ++r) {
        const T* p = x + outer_off[o] + red_off[r] + i0;
        for (int64_t i = 0; i < len; ++i) acc[i] = Op::combine(acc[i], op.load(p[i], out0 + i));
      }
      for (int64_t i = 0; i < len; ++i) out[out0 + i] = finish(acc[i], out0 + i);
    }
  });
}

template <class T, class Op>
void reduce_with(const Tensor& x, Tensor& y, const std::vector<bool>& reduced, Op op) {
  T* out = y.data<T>();
  const int64_t out_numel = y.numel();
  if (out_numel == 0) return;
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) count *= x.shape()[d];
  if constexpr (requires { op.count; }) op.count = count;
  if (count == 0) {
    // Reducing over an empty axis: every output is the identity's result (sum 0, max -inf...).
    const T v = op.finish(Op::identity(), 0);
    std::fill(out, out + out_numel, v);
    return;
  }
  const ReducePlan plan = make_plan(x.shape(), reduced);
  run_plan(x.data<T>(), out, plan, op, [&](typename Op::Acc a, int64_t o) { return op.finish(a, o); });
}

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

template <class T>
void reduce_typed(ReduceKind kind, const Tensor& x, Tensor& y, const std::vector<bool>& reduced) {
  switch (kind) {
    case ReduceKind::Sum: return reduce_with<T>(x, y, reduced, SumOp<T>{});
    case ReduceKind::Mean: return reduce_with<T>(x, y, reduced, MeanOp<T>{});
    case ReduceKind::Max: return reduce_with<T>(x, y, reduced, MaxOp<T>{});
    case ReduceKind::Min: return reduce_with<T>(x, y, reduced, MinOp<T>{});
    case ReduceKind::Prod: return reduce_with<T>(x, y, reduced, ProdOp<T>{});
    case ReduceKind::L1: return reduce_with<T>(x, y, reduced, L1Op<T>{});
    case ReduceKind::L2: return reduce_with<T>(x, y, reduced, L2Op<T>{});
    case ReduceKind::LogSum: return reduce_with<T>(x, y, reduced, LogSumOp<T>{});
    case ReduceKind::SumSquare: return reduce_with<T>(x, y, reduced, SumSquareOp<T>{});
    case ReduceKind::LogSumExp: {
      using Acc = typename LogSumExpOp<T>::Acc;
      std::vector<Acc> shift(size_t(y.numel()), -std::numeric_limits<Acc>::infinity());
      int64_t count = 1;
      for (size_t d = 0; d < reduced.size(); ++d)
        if (reduced[d]) count *= x.shape()[d];
      if (count > 0 && y.numel() > 0) {
        const ReducePlan plan = make_plan(x.shape(), reduced);
        MaxOpBase<T, Acc> max_op;
        run_plan(x.data<T>(), shift.data(), plan, max_op, [](Acc a, int64_t) { return a; });
      }
      LogSumExpOp<T> op;
      op.shift = shift.data();
      return reduce_with<T>(x, y, reduced, op);
    }
  }
}

template <ReduceKind kind>
void reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ReduceAxes axes = sem::resolve_reduce_axes(ctx, x);
  if (axes.identity) {
    ctx.set_output(0, x);
    return;
  }
  Tensor& y = ctx.allocate(0, x.dtype(), axes.out_shape);
  auto body = [&]<class T>() { reduce_typed<T>(kind, x, y, axes.reduced); };
  // Max/Min are defined for the 8-bit integers too (opset 12+); the others for the types ONNX
  // lists (floats and 32/64-bit integers).
  if constexpr (kind == ReduceKind::Max || kind == ReduceKind::Min)
    dispatch<INGOT_NUMERIC_TYPES>(x.dtype(), body);
  else
    dispatch<INGOT_FLOAT_TYPES, DType::Int32, DType::Int64, DType::UInt32, DType::UInt64>(x.dtype(), body);
}

INGOT_CPU_KERNEL(ReduceSum, reduce_kernel<ReduceKind::Sum>).versions(1);
INGOT_CPU_KERNEL(ReduceMean, reduce_kernel<ReduceKind::Mean>).versions(1);
INGOT_CPU_KERNEL(ReduceMax, reduce_kernel<ReduceKind::Max>).versions(1);
INGOT_CPU_KERNEL(ReduceMin, reduce_kernel<ReduceKind::Min>).versions(1);
INGOT_CPU_KERNEL(ReduceProd, reduce_kernel<ReduceKind::Prod>).versions(1);
INGOT_CPU_KERNEL(ReduceL1, reduce_kernel<ReduceKind::L1>).versions(1);
INGOT_CPU_KERNEL(ReduceL2, reduce_kernel<ReduceKind::L2>).versions(1);
INGOT_CPU_KERNEL(ReduceLogSum, reduce_kernel<ReduceKind::LogSum>).versions(1);
INGOT_CPU_KERNEL(ReduceLogSumExp, reduce_kernel<ReduceKind::LogSumExp>).versions(1);
INGOT_CPU_KERNEL(ReduceSumSquare, reduce_kernel<ReduceKind::SumSquare>).versions(1);

// ArgMax/ArgMin as [outer, axis, inner]; the inner loop runs over contiguous elements.
// NaN counts as the extreme value (numpy's convention): the first NaN wins, or the last one with
// select_last_index.
template <bool is_max>
void arg_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::ArgAxis a = sem::resolve_arg_axis(ctx, x);
  const int64_t axis = a.axis, n = a.n, outer = a.outer, inner = a.inner;
  const bool last = a.last;
  const Shape& out_shape = a.out_shape;
  Tensor& y = ctx.allocate(0, DType::Int64, out_shape);
  if (y.numel() == 0) return;
  INGOT_CHECK(n > 0, "input 0: cannot take Arg{} over axis {} of size 0 (shape {})", is_max ? "Max" : "Min", axis,
              shape_str(x.shape()));
  int64_t* out = y.data<int64_t>();
  dispatch_numeric(x.dtype(), [&]<class T>() {
    using V = std::conditional_t<std::is_integral_v<T> || std::is_same_v<T, double>, T, float>;
    const T* in = x.data<T>();
    parallel_for(outer, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, n * inner)), [&](int64_t ob, int64_t oe) {
      std::vector<V> best(static_cast<size_t>(inner));
      for (int64_t o = ob; o < oe; ++o) {
        const T* base = in + o * n * inner;
        int64_t* idx = out + o * inner;
        for (int64_t i = 0; i < inner; ++i) {
          best[size_t(i)] = V(base[i]);
          idx[i] = 0;
        }
        for (int64_t k = 1; k < n; ++k) {
          const T* row = base + k * inner;
          for (int64_t i = 0; i < inner; ++i) {
            const V v = V(row[i]);
            const V b = best[size_t(i)];
            const bool better_or_equal = is_max ? v >= b : v <= b;
            const bool better = is_max ? v > b : v < b;
            const bool take = last ? (is_nan(v) || better_or_equal) : (better || (is_nan(v) && !is_nan(b)));
            if (take) {
              best[size_t(i)] = v;
              idx[i] = k;
            }
          }
        }
      }
    });
  });
}

INGOT_CPU_KERNEL(ArgMax, arg_kernel<true>).versions(1);
INGOT_CPU_KERNEL(ArgMin, arg_kernel<false>).versions(1);

}  // namespace
}  // namespace ingot
