// Ops that order or scan along an axis: TopK, Unique, CumSum.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "backends/cpu/kernels/tensor_copy.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot::cpu {
namespace {

// float16/bfloat16 are compared and summed in float.
template <class T>
using Compute = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Strict order for TopK: NaN ranks above every number, so the sort always sees a strict weak order.
template <class K>
bool ranks_above(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

void top_k(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "axis");
  int64_t k = ctx.opset() < 10 ? ctx.attr_int("k") : read_scalar_int(ctx.input(1), "input 1 (K)");
  int64_t dim = x.shape()[size_t(axis)];
  if (k < 0 || k > dim) fail("K = {} is out of range for axis {} of size {}", k, axis, dim);
  bool largest = ctx.attr_int("largest") != 0;
  Shape out_shape = x.shape();
  out_shape[size_t(axis)] = k;
  int64_t outer = shape_numel(x.shape(), 0, size_t(axis)), inner = shape_numel(x.shape(), size_t(axis) + 1, x.shape().size());
  Tensor& values = ctx.allocate(0, x.dtype(), out_shape);
  Tensor& indices = ctx.allocate(1, DType::Int64, out_shape);
  if (values.numel() == 0) return;
  dispatch_numeric(x.dtype(), [&]<class T>() {
    using K = Compute<T>;
    const T* in = x.data<T>();
    T* out = values.data<T>();
    int64_t* out_idx = indices.data<int64_t>();
    parallel_for(outer * inner, std::max<int64_t>(1, (1 << 12) / dim), [&](int64_t b, int64_t e) {
      std::vector<K> line(static_cast<size_t>(dim));
      std::vector<int64_t> order(static_cast<size_t>(dim));
      for (int64_t row = b; row < e; ++row) {
        int64_t o = row / inner, i = row % inner;
        const T* src = in + o * dim * inner + i;
        for (int64_t j = 0; j < dim; ++j) line[size_t(j)] = K(src[j * inner]);
        std::iota(order.begin(), order.end(), 0);
        // Ties keep the lower index first (sorted output is required to be deterministic).
        auto first = [&](int64_t a, int64_t c) {
          K va = line[size_t(a)], vc = line[size_t(c)];
          if (largest ? ranks_above(va, vc) : ranks_above(vc, va)) return true;
          if (largest ? ranks_above(vc, va) : ranks_above(va, vc)) return false;
          return a < c;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), first);
        T* dst = out + o * k * inner + i;
        int64_t* dst_idx = out_idx + o * k * inner + i;
        for (int64_t j = 0; j < k; ++j) {
          dst[j * inner] = src[order[size_t(j)] * inner];
          dst_idx[j * inner] = order[size_t(j)];
        }
      }
    });
  });
}
INGOT_CPU_KERNEL(TopK, top_k).versions(1);

void unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool by_axis = ctx.has_attr("axis");
  Tensor data = by_axis ? x : x.reshape({x.numel()});
  int64_t axis = by_axis ? normalize_axis(ctx.attr_int("axis"), x.rank(), "axis") : 0;
  int64_t dim = data.shape()[size_t(axis)];
  int64_t outer = shape_numel(data.shape(), 0, size_t(axis));
  int64_t inner = shape_numel(data.shape(), size_t(axis) + 1, data.shape().size());
  bool sorted = ctx.attr_int("sorted") != 0;

  // Slices along the axis, ordered by content (lexicographically) then by position.
  std::vector<int64_t> order(static_cast<size_t>(dim));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> group_of(static_cast<size_t>(dim));  // inverse index, in sorted-group numbering
  std::vector<int64_t> group_first, group_count;
  dispatch_all(x.dtype(), [&]<class T>() {
    const T* p = data.data<T>();
    auto compare = [&](int64_t a, int64_t b) {  // <0, 0, >0 like strcmp
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T& va = p[(o * dim + a) * inner + i];
          const T& vb = p[(o * dim + b) * inner + i];
          if (va < vb) return -1;
          if (vb < va) return 1;
        }
      }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    for (size_t j = 0; j < order.size(); ++j) {
      if (j == 0 || compare(order[j - 1], order[j]) != 0) {
        group_first.push_back(order[j]);
        group_count.push_back(0);
      }
      group_of[size_t(order[j])] = int64_t(group_first.size()) - 1;
      ++group_count.back();
    }
  });

  // Output order of the groups: by content when sorted, else by first occurrence.
  size_t groups = group_first.size();
  std::vector<int64_t> out_order(groups), rank_of(groups);
  std::iota(out_order.begin(), out_order.end(), 0);
  if (!sorted) {
    std::sort(out_order.begin(), out_order.end(),
              [&](int64_t a, int64_t b) { return group_first[size_t(a)] < group_first[size_t(b)]; });
  }
  for (size_t g = 0; g < groups; ++g) rank_of[size_t(out_order[g])] = int64_t(g);

  Shape y_shape = data.shape();
  y_shape[size_t(axis)] = int64_t(groups);
  Tensor& y = ctx.allocate(0, x.dtype(), y_shape);
  DType dt = x.dtype();
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t g = 0; g < groups; ++g) {
      int64_t from = (o * dim + group_first[size_t(out_order[g])]) * inner;
      int64_t to = (o * int64_t(groups) + int64_t(g)) * inner;
      copy_strided(dt, elem_ptr(y.raw_data(), dt, to), {1}, elem_ptr(data.raw_data(), dt, from), {1}, {inner});
    }
  }
  if (ctx.num_outputs() > 1) {
    int64_t* first = ctx.allocate(1, DType::Int64, {int64_t(groups)}).data<int64_t>();
    for (size_t g = 0; g < groups; ++g) first[g] = group_first[size_t(out_order[g])];
  }
  if (ctx.num_outputs() > 2) {
    int64_t* inverse = ctx.allocate(2, DType::Int64, {dim}).data<int64_t>();
    for (int64_t j = 0; j < dim; ++j) inverse[j] = rank_of[size_t(group_of[size_t(j)])];
  }
  if (ctx.num_outputs() > 3) {
    int64_t* counts = ctx.allocate(3, DType::Int64, {int64_t(groups)}).data<int64_t>();
    for (size_t g = 0; g < groups; ++g) counts[g] = group_count[size_t(out_order[g])];
  }
}
INGOT_CPU_KERNEL(Unique, unique).versions(11);

void cum_sum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(read_scalar_int(ctx.input(1), "input 1 (axis)"), x.rank(), "input 1 (axis)");
  bool exclusive = ctx.attr_int("exclusive") != 0, reverse = ctx.attr_int("reverse") != 0;
  int64_t dim = x.shape()[size_t(axis)];
  int64_t outer = shape_numel(x.shape(), 0, size_t(axis)), inner = shape_numel(x.shape(), size_t(axis) + 1, x.shape().size());
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  dispatch_numeric(x.dtype(), [&]<class T>() {
    using A = Compute<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallel_for(outer, std::max<int64_t>(1, (1 << 14) / (dim * inner)), [&](int64_t b, int64_t e) {
      std::vector<A> acc(static_cast<size_t>(inner));
      for (int64_t o = b; o < e; ++o) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t step = 0; step < dim; ++step) {
          int64_t j = reverse ? dim - 1 - step : step;
          const T* src = in + (o * dim + j) * inner;
          T* dst = out + (o * dim + j) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            A before = acc[size_t(i)];
            acc[size_t(i)] = A(before + A(src[i]));
            dst[i] = T(exclusive ? before : acc[size_t(i)]);
          }
        }
      }
    });
  });
}
INGOT_CPU_KERNEL(CumSum, cum_sum).versions(11);

}  // namespace
}  // namespace ingot::cpu
