// Resize (opset 10, 11-13, 18 without antialias) and Upsample (opset 7, 9).
// Each axis gets a table of source taps (index, weight) per output position, computed once with
// ONNX's coordinate transformation and rounding rules. Nearest mode is then a pure N-D gather
// (one row index table per axis; output rows that repeat a source row are copied); linear and
// cubic apply the 1-D filters one axis at a time, which equals the N-D tensor-product filter.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/resize_tables.h"

namespace ingot {
namespace {

using Mode = sem::ResizeMode;
using sem::AxisTaps;
using sem::ResizeParams;
using sem::axis_taps;

// Nearest: y[o0, o1, ...] = x[idx0[o0], idx1[o1], ...] (or the extrapolation value).
template <class T>
void gather_nearest(const ResizeParams& p, const std::vector<AxisTaps>& taps, const Shape& in_shape, const T* x, T* y) {
  const size_t rank = in_shape.size();
  const int64_t out_w = p.out_shape[rank - 1];
  const int64_t rows = shape_numel(p.out_shape) / std::max<int64_t>(out_w, 1);
  std::vector<int64_t> in_strides(rank, 1);
  for (int64_t d = int64_t(rank) - 2; d >= 0; --d)
    in_strides[size_t(d)] = in_strides[size_t(d) + 1] * in_shape[size_t(d) + 1];
  const AxisTaps& last = taps[rank - 1];
  // Bool takes extrapolation_value != 0; strings have no numeric fill and take the empty string.
  T fill{};
  if constexpr (!std::is_same_v<T, std::string>) fill = T(p.extrapolation_value);
  parallel_for(rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(out_w, 1)), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(rank, 0);
    for (int64_t row = begin; row < end; ++row) {
      T* dst = y + row * out_w;
      // A row whose source equals the previous row's (integer upsampling) is a copy of it.
      int64_t rem = row;
      for (int64_t d = int64_t(rank) - 2; d >= 0; --d) {
        index[size_t(d)] = rem % p.out_shape[size_t(d)];
        rem /= p.out_shape[size_t(d)];
      }
      bool outside = false;
      int64_t base = 0;
      for (size_t d = 0; d + 1 < rank; ++d) {
        const size_t j = size_t(index[d]);
        outside |= taps[d].outside[j] != 0;
        base += taps[d].idx[j] * in_strides[d];
      }
      if (outside) {
        std::fill(dst, dst + out_w, fill);
        continue;
      }
      // A row whose source row is the same as that of the row one position back along an outer
      // axis (integer upsampling: the previous row, or along the axis before it the whole previous
      // plane of rows, as in a channels-last image) is a copy of that row, when this thread wrote it.
      bool copied = false;
      int64_t back = 1;  // rows one position back along axis d
      for (int64_t d = int64_t(rank) - 2; d >= 0 && d >= int64_t(rank) - 3 && !copied; --d) {
        const AxisTaps& a = taps[size_t(d)];
        const size_t j = size_t(index[size_t(d)]);
        if (j > 0 && row - back >= begin && a.idx[j] == a.idx[j - 1] && !a.outside[j - 1]) {
          std::copy_n(dst - back * out_w, out_w, dst);  // std::copy: T may be std::string
          copied = true;
        }
        back *= p.out_shape[size_t(d)];
      }
      if (copied) continue;
      const T* src = x + base;
      if (last.identity) {  // the last axis kept as it is (a channels-last image's channels)
        std::copy_n(src, out_w, dst);
        continue;
      }
      for (int64_t j = 0; j < out_w; ++j) dst[j] = last.outside[size_t(j)] ? fill : src[last.idx[size_t(j)]];
    }
  });
}

// One separable pass along `axis` of a buffer of shape `shape` (in compute type A).
template <class A>
void filter_axis(const AxisTaps& t, const Shape& shape, size_t axis, int64_t out_len, double fill, const A* src,
                 A* dst) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t in_len = shape[axis];
  parallel_for(outer * out_len, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(inner * t.n, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const int64_t o = r / out_len, j = r % out_len;
                   A* out = dst + r * inner;
                   if (t.outside[size_t(j)]) {
                     std::fill(out, out + inner, A(fill));
                     continue;
                   }
                   std::fill(out, out + inner, A(0));
                   for (int k = 0; k < t.n; ++k) {
                     const A w = A(t.w[size_t(j * t.n + k)]);
                     if (w == 0) continue;
                     const A* in = src + (o * in_len + t.idx[size_t(j * t.n + k)]) * inner;
                     for (int64_t i = 0; i < inner; ++i) out[i] += w * in[i];
                   }
                 }
               });
}

template <class T>
void interpolate(const ResizeParams& p, const std::vector<AxisTaps>& taps, const Tensor& x, Tensor& y) {
  using A = sem::acc_t<T>;
  const T* xp = x.data<T>();
  Shape shape = x.shape();
  std::vector<A> cur(xp, xp + x.numel()), next;
  for (size_t axis = shape.size(); axis-- > 0;) {
    if (taps[axis].identity) continue;
    Shape out = shape;
    out[axis] = p.out_shape[axis];
    next.assign(size_t(shape_numel(out)), A(0));
    filter_axis<A>(taps[axis], shape, axis, out[axis], p.extrapolation_value, cur.data(), next.data());
    cur.swap(next);
    shape = out;
  }
  T* yp = y.data<T>();
  for (size_t i = 0; i < cur.size(); ++i) yp[i] = T(cur[i]);
}

void run_resize(KernelContext& ctx, ResizeParams& p) {
  const Tensor& x = ctx.input(0);
  const size_t rank = size_t(x.rank());
  if (rank == 0) fail("input 0 (X): expected rank >= 1, got a scalar");
  Tensor& y = ctx.allocate(0, x.dtype(), p.out_shape);
  if (y.numel() == 0) return;
  if (x.numel() == 0)
    fail("Resize: cannot resample an empty input {} to {}", shape_str(x.shape()), shape_str(p.out_shape));
  std::vector<AxisTaps> taps;
  for (size_t d = 0; d < rank; ++d) taps.push_back(axis_taps(p, d, x.dim(int64_t(d))));
  if (p.mode == Mode::Nearest) {
    // Nearest only moves values, so it serves every dtype ONNX allows (bool and string included).
    dispatch_all(x.dtype(), [&]<class T>() { gather_nearest<T>(p, taps, x.shape(), x.data<T>(), y.data<T>()); });
  } else {
    if (x.dtype() == DType::Bool || x.dtype() == DType::String)
      fail("input 0 (X): linear and cubic modes need a numeric input, got {} (use mode 'nearest')",
           dtype_name(x.dtype()));
    dispatch_numeric(x.dtype(), [&]<class T>() { interpolate<T>(p, taps, x, y); });
  }
}

void resize(KernelContext& ctx) {
  ResizeParams p = sem::resize_params(ctx);
  run_resize(ctx, p);
}

void upsample(KernelContext& ctx) {
  ResizeParams p = sem::upsample_params(ctx);
  run_resize(ctx, p);
}

}  // namespace

INGOT_CPU_KERNEL(Resize, resize).versions(10).dtypes({INGOT_ALL_TYPES});
INGOT_CPU_KERNEL(Upsample, upsample).versions(7, 9).dtypes({INGOT_ALL_TYPES});

}  // namespace ingot
