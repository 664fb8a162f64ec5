// The quantized pointwise ops: ai.ingot.QuantizedReduceMean and ai.ingot.QuantizedMul (what
// fuse-qdq-pointwise folds DequantizeLinear -> ReduceMean | GlobalAveragePool | Mul -> QuantizeLinear
// into; the math, bit for bit as on CUDA, is ops/semantics/quantized_args.h's). Memory-bound loops
// over 8-bit values with int32 sums.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/quantized_args.h"

namespace ingot {
namespace {

constexpr int64_t kPointwiseGrain = 1 << 14;  // elements per parallel task

// x viewed as [outer, count, inner] with the reduced axes in the middle (size-1 axes ignored), when
// they are contiguous: a channels-last spatial mean [N, H*W, C], a channels-first one [N*C, H*W, 1].
struct MiddleView {
  int64_t outer = 1, count = 1, inner = 1;
};
std::optional<MiddleView> middle_view(const Shape& shape, const std::vector<bool>& reduced) {
  MiddleView v;
  int phase = 0;  // 0: before the reduced run, 1: in it, 2: after it
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (reduced[d]) {
      if (phase == 2) return std::nullopt;
      phase = 1;
      v.count *= shape[d];
    } else {
      if (phase == 1) phase = 2;
      (phase == 0 ? v.outer : v.inner) *= shape[d];
    }
  }
  return v;
}

template <class T>
void mean_rows(const T* x, T* y, const MiddleView& v, const sem::QuantizedMeanArgs& a) {
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(1, v.count * v.inner));
  parallel_for(v.outer, grain, [&](int64_t o0, int64_t o1) {
    std::vector<int32_t> acc(size_t(v.inner));
    for (int64_t o = o0; o < o1; ++o) {
      std::fill(acc.begin(), acc.end(), 0);
      const T* row = x + o * v.count * v.inner;
      if (v.inner == 1) {
        int32_t s = 0;
        for (int64_t r = 0; r < v.count; ++r) s += int32_t(row[r]);
        acc[0] = s;
      } else {
        for (int64_t r = 0; r < v.count; ++r) {
          const T* px = row + r * v.inner;
          for (int64_t i = 0; i < v.inner; ++i) acc[size_t(i)] += int32_t(px[i]);
        }
      }
      const int32_t offset = int32_t(v.count) * a.x_zp;
      for (int64_t i = 0; i < v.inner; ++i) y[o * v.inner + i] = T(a.rq(acc[size_t(i)] - offset));
    }
  });
}

// Any other set of axes: each input row added into the output elements it maps to.
template <class T>
void mean_any(const Tensor& x, const T* xp, T* y, int64_t out_n, const sem::QuantizedMeanArgs& a) {
  Shape kept = x.shape();
  for (size_t d = 0; d < kept.size(); ++d) {
    if (a.axes.reduced[d]) kept[d] = 1;
  }
  std::vector<int32_t> acc(size_t(out_n), 0);
  BroadcastIterator it(x.shape(), {x.shape(), kept});
  const int64_t sx = it.inner_stride(0), sy = it.inner_stride(1);
  int64_t off[2];
  for (int64_t row = 0; row < it.outer(); ++row) {
    it.offsets(row, off);
    for (int64_t i = 0; i < it.inner(); ++i) acc[size_t(off[1] + i * sy)] += int32_t(xp[off[0] + i * sx]) - a.x_zp;
  }
  for (int64_t o = 0; o < out_n; ++o) y[o] = T(a.rq(acc[size_t(o)]));
}

void quantized_reduce_mean(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::QuantizedMeanArgs a = sem::quantized_mean_args(ctx, x);
  Tensor& y = ctx.allocate(0, x.dtype(), a.axes.out_shape);
  dispatch<DType::UInt8, DType::Int8>(x.dtype(), [&]<class T>() {
    if (auto v = middle_view(x.shape(), a.axes.reduced)) {
      mean_rows(x.data<T>(), y.data<T>(), *v, a);
    } else {
      mean_any(x, x.data<T>(), y.data<T>(), y.numel(), a);
    }
  });
}

void quantized_mul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const sem::QuantizedMulArgs q = sem::quantized_mul_args(ctx);
  Tensor& y = ctx.allocate(0, a.dtype(), q.out_shape);
  if (y.numel() == 0) return;
  dispatch<DType::UInt8, DType::Int8>(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y.data<T>();
    BroadcastIterator it(q.out_shape, {a.shape(), b.shape()});
    const int64_t inner = it.inner(), sa = it.inner_stride(0), sb = it.inner_stride(1);
    parallel_for(it.outer(), std::max<int64_t>(1, kPointwiseGrain / inner), [&](int64_t r0, int64_t r1) {
      int64_t off[2];
      for (int64_t row = r0; row < r1; ++row) {
        it.offsets(row, off);
        const T* ra = pa + off[0];
        const T* rb = pb + off[1];
        T* ry = py + row * inner;
        for (int64_t i = 0; i < inner; ++i)
          ry[i] = T(q.rq((int32_t(ra[i * sa]) - q.a_zp) * (int32_t(rb[i * sb]) - q.b_zp)));
      }
    });
  });
}

}  // namespace

INGOT_CPU_KERNEL(QuantizedReduceMean, quantized_reduce_mean)
    .domain(kIngotDomain)
    .versions(1)
    .types("T", {DType::UInt8, DType::Int8});
INGOT_CPU_KERNEL(QuantizedMul, quantized_mul).domain(kIngotDomain).versions(1).types("T", {DType::UInt8, DType::Int8});

}  // namespace ingot
