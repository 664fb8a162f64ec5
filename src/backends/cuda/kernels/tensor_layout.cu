// CUDA layout ops and generators: Transpose, Concat, Split, Slice, Expand, Tile, Pad,
// DepthToSpace, SpaceToDepth, Trilu, Constant, ConstantOfShape, Range, EyeLike, CumSum.
// Data movement dispatches on element size (1/2/4/8 bytes), so one instantiation serves every
// dtype of that size; the CPU kernels in backends/cpu/kernels/tensor_layout.cpp and
// tensor_shape.cpp are the semantic reference (same validation, same messages). Results that are
// one dense block of the input (Split, Slice) are zero-copy views, as on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "core/broadcast.h"
#include "ops/semantics/layout_args.h"

namespace ingot::cuda {
namespace {

using Strides = std::vector<int64_t>;

// ---- Helpers -----------------------------------------------------------------------------------

// Every dtype moved by size: floats, integers and bool.
std::vector<DType> data_dtypes() { return {INGOT_CUDA_NUMERIC_TYPES, DType::Bool}; }

// The bits of a one-element host tensor as the size type T.
template <class T>
T host_bits(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  T v;
  std::memcpy(&v, h.raw_data(), sizeof(T));
  return v;
}

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= shape[k];
  }
  return s;
}

void* elem_ptr(void* base, DType dt, int64_t offset) {
  return static_cast<char*>(base) + offset * int64_t(dtype_size(dt));
}

using sem::read_ints;
using sem::read_scalar_int;

void copy_async(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  INGOT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream()));
}

// ---- Strided copy ------------------------------------------------------------------------------
// dst[sum(i_k * dst_strides[k])] = src[sum(i_k * src_strides[k])] for every index i of a shape, the
// device counterpart of cpu::copy_strided: source strides may be 0 (broadcast) or negative.

constexpr int kMaxCopyRank = 16;  // Tile doubles the rank

template <class I>
struct CopyParams {
  int rank = 0;
  I shape[kMaxCopyRank];
  I dst[kMaxCopyRank];
  I src[kMaxCopyRank];
};

template <class T, class I>
__global__ void strided_copy_kernel(T* __restrict__ dst, const T* __restrict__ src, CopyParams<I> p, I n) {
  for (I linear = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); linear < n; linear += I(gridDim.x) * I(blockDim.x)) {
    I rem = linear, d = 0, s = 0;
#pragma unroll
    for (int k = kMaxCopyRank - 1; k >= 0; --k) {
      if (k < p.rank) {
        I q = rem / p.shape[k];
        I idx = rem - q * p.shape[k];
        d += idx * p.dst[k];
        s += idx * p.src[k];
        rem = q;
      }
    }
    dst[d] = src[s];
  }
}

// Batched 2-D transpose through shared memory: axis `a` is unit-stride in the source, axis `b`
// (the last) unit-stride in the destination; the other axes are walked per tile.
constexpr int kTile = 32, kTileRows = 8;

struct TileParams {
  int outer_rank = 0;
  int64_t outer_shape[kMaxCopyRank];
  int64_t outer_dst[kMaxCopyRank];
  int64_t outer_src[kMaxCopyRank];
  int64_t na, nb, da, sb, tiles_a, tiles_b, total;
};

template <class T>
__global__ void tiled_transpose_kernel(T* __restrict__ dst, const T* __restrict__ src, TileParams p) {
  __shared__ T tile[kTile][kTile + 1];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  for (int64_t t = blockIdx.x; t < p.total; t += gridDim.x) {
    int64_t per_outer = p.tiles_a * p.tiles_b;
    int64_t o = t / per_outer, rem = t - o * per_outer;
    int64_t a0 = (rem / p.tiles_b) * kTile, b0 = (rem % p.tiles_b) * kTile;
    int64_t dbase = 0, sbase = 0;
    for (int k = p.outer_rank - 1; k >= 0; --k) {
      int64_t q = o / p.outer_shape[k];
      int64_t idx = o - q * p.outer_shape[k];
      dbase += idx * p.outer_dst[k];
      sbase += idx * p.outer_src[k];
      o = q;
    }
    // Read: threads along a (contiguous in the source).
    for (int j = ty; j < kTile; j += kTileRows) {
      int64_t ia = a0 + tx, ib = b0 + j;
      if (ia < p.na && ib < p.nb) tile[j][tx] = src[sbase + ia + ib * p.sb];
    }
    __syncthreads();
    // Write: threads along b (contiguous in the destination).
    for (int j = ty; j < kTile; j += kTileRows) {
      int64_t ia = a0 + j, ib = b0 + tx;
      if (ia < p.na && ib < p.nb) dst[dbase + ia * p.da + ib] = tile[tx][j];
    }
    __syncthreads();
  }
}

// The same transpose when the destination's unit-stride axis b is short (fewer than 16: an image's
// 3 channels moved last, NCHW -> NHWC), where a 32 x 32 tile would leave most of its threads idle
// (ResNet-50's input, [32, 3, 224, 224] int8: 30 us through the generic strided copy). A thread
// takes one position along a and writes its nb destination elements, which are contiguous: reads
// and writes both coalesce across neighbouring threads. Grid: x along a, y the outer positions.
template <class T>
__global__ void narrow_transpose_kernel(T* __restrict__ dst, const T* __restrict__ src, TileParams p) {
  const int64_t ia = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ia >= p.na) return;
  int64_t o = blockIdx.y, dbase = 0, sbase = 0;
  for (int k = p.outer_rank - 1; k >= 0; --k) {
    const int64_t q = o / p.outer_shape[k], idx = o - q * p.outer_shape[k];
    dbase += idx * p.outer_dst[k];
    sbase += idx * p.outer_src[k];
    o = q;
  }
  T* d = dst + dbase + ia * p.da;
  const T* s = src + sbase + ia;
  for (int64_t b = 0; b < p.nb; ++b) d[b] = s[b * p.sb];
}

struct Layout {
  Shape shape;
  Strides dst, src;
};

// Drops size-1 axes and merges neighbours contiguous with each other on both sides.
Layout simplify(const Shape& shape, const Strides& dst, const Strides& src) {
  Layout l;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!l.shape.empty() && l.dst.back() == dst[k] * shape[k] && l.src.back() == src[k] * shape[k]) {
      l.shape.back() *= shape[k];
      l.dst.back() = dst[k];
      l.src.back() = src[k];
    } else {
      l.shape.push_back(shape[k]);
      l.dst.push_back(dst[k]);
      l.src.push_back(src[k]);
    }
  }
  return l;
}

template <class T, class I>
void launch_strided(T* dst, const T* src, const Layout& l, int64_t n) {
  CopyParams<I> p;
  p.rank = int(l.shape.size());
  for (size_t k = 0; k < l.shape.size(); ++k) {
    p.shape[k] = I(l.shape[k]);
    p.dst[k] = I(l.dst[k]);
    p.src[k] = I(l.src[k]);
  }
  strided_copy_kernel<T, I><<<blocks_for(n), kThreads, 0, stream()>>>(dst, src, p, I(n));
  INGOT_CUDA_LAUNCH_CHECK();
}

template <class T>
void copy_strided_typed(T* dst, const Strides& dst_strides, const T* src, const Strides& src_strides,
                        const Shape& shape) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  Layout l = simplify(shape, dst_strides, src_strides);
  size_t r = l.shape.size();
  if (r == 0) return copy_async(dst, src, sizeof(T));
  if (r == 1 && l.dst[0] == 1 && l.src[0] == 1) return copy_async(dst, src, size_t(l.shape[0]) * sizeof(T));
  if (r > size_t(kMaxCopyRank)) fail("a copy of rank {} exceeds the CUDA limit of {}", r, kMaxCopyRank);
  int64_t n = shape_numel(l.shape);
  // A transpose: the source's unit-stride axis is not the destination's.
  if (r >= 2 && l.dst.back() == 1 && l.src.back() != 1 && l.src.back() != 0) {
    for (size_t a = 0; a + 1 < r; ++a) {
      if (l.src[a] != 1 || l.shape[a] < 16) continue;
      const bool narrow = l.shape.back() < 16;
      if (narrow && n / l.shape[a] / l.shape.back() > 65535) break;  // the outer positions: grid y
      TileParams p;
      size_t b = r - 1;
      p.na = l.shape[a];
      p.nb = l.shape[b];
      p.da = l.dst[a];
      p.sb = l.src[b];
      p.tiles_a = (p.na + kTile - 1) / kTile;
      p.tiles_b = (p.nb + kTile - 1) / kTile;
      int64_t outer = 1;
      for (size_t k = 0; k < b; ++k) {
        if (k == a) continue;
        p.outer_shape[p.outer_rank] = l.shape[k];
        p.outer_dst[p.outer_rank] = l.dst[k];
        p.outer_src[p.outer_rank] = l.src[k];
        ++p.outer_rank;
        outer *= l.shape[k];
      }
      if (narrow) {
        const dim3 grid(unsigned((p.na + kThreads - 1) / kThreads), unsigned(outer));
        narrow_transpose_kernel<T><<<grid, kThreads, 0, stream()>>>(dst, src, p);
        INGOT_CUDA_LAUNCH_CHECK();
        return;
      }
      p.total = outer * p.tiles_a * p.tiles_b;
      unsigned blocks = unsigned(std::min<int64_t>(p.total, int64_t(sm_count()) * 32));
      tiled_transpose_kernel<T><<<blocks, dim3(kTile, kTileRows), 0, stream()>>>(dst, src, p);
      INGOT_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  // 32-bit index arithmetic when every offset fits comfortably.
  int64_t dst_span = 0, src_span = 0;
  for (size_t k = 0; k < r; ++k) {
    dst_span += (l.shape[k] - 1) * std::abs(l.dst[k]);
    src_span += (l.shape[k] - 1) * std::abs(l.src[k]);
  }
  constexpr int64_t kLimit = int64_t(1) << 30;
  if (n < kLimit && dst_span < kLimit && src_span < kLimit) {
    launch_strided<T, int32_t>(dst, src, l, n);
  } else {
    launch_strided<T, int64_t>(dst, src, l, n);
  }
}

// Device strided copy of any non-string dtype; dst and src point at the first element. When the
// innermost run is contiguous on both sides (a head split [B,S,H,D] -> [B,H,S,D] keeps D whole), it
// moves in 16-, 8- or 4-byte words where sizes, strides and addresses allow: one index computation
// per word rather than per element (16-bit tensors: 8x fewer).
void copy_strided(DType dt, void* dst, const Strides& dst_strides, const void* src, const Strides& src_strides,
                  const Shape& shape) {
  const int64_t es = int64_t(dtype_size(dt));
  if (shape_numel(shape) > 0) {
    const Layout l = simplify(shape, dst_strides, src_strides);
    const size_t r = l.shape.size();
    if (r >= 2 && l.dst.back() == 1 && l.src.back() == 1) {
      for (int64_t w : {16, 8, 4}) {
        if (w <= es) break;
        const int64_t k = w / es;  // elements per word
        bool ok = l.shape.back() % k == 0 && reinterpret_cast<uintptr_t>(dst) % uintptr_t(w) == 0 &&
                  reinterpret_cast<uintptr_t>(src) % uintptr_t(w) == 0;
        for (size_t a = 0; a + 1 < r && ok; ++a) ok = l.dst[a] % k == 0 && l.src[a] % k == 0;
        if (!ok) continue;
        Shape words = l.shape;
        Strides wd = l.dst, ws = l.src;
        words.back() /= k;
        for (size_t a = 0; a + 1 < r; ++a) wd[a] /= k, ws[a] /= k;
        auto run = [&]<class W>() {
          copy_strided_typed(static_cast<W*>(dst), wd, static_cast<const W*>(src), ws, words);
        };
        if (w == 16) run.template operator()<uint4>();
        if (w == 8) run.template operator()<uint2>();
        if (w == 4) run.template operator()<uint32_t>();
        return;
      }
    }
  }
  dispatch_size(dt, [&]<class T>() {
    copy_strided_typed(static_cast<T*>(dst), dst_strides, static_cast<const T*>(src), src_strides, shape);
  });
}

// dst (dense, shape[perm]) = permutation of a dense src of `shape`.
void transpose_into(DType dt, void* dst, const void* src, const Shape& shape, const std::vector<int64_t>& perm) {
  Strides in = contiguous_strides(shape);
  Shape out_shape(perm.size());
  Strides src_strides(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) {
    out_shape[k] = shape[size_t(perm[k])];
    src_strides[k] = in[size_t(perm[k])];
  }
  copy_strided(dt, dst, contiguous_strides(out_shape), src, src_strides, out_shape);
}

template <class T>
__global__ void fill_kernel(T* __restrict__ out, T value, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

// Fills a device tensor with the one-element host tensor `value` (same dtype).
void fill(const Tensor& y, const Tensor& value) {
  int64_t n = y.numel();
  if (n == 0) return;
  dispatch_size(y.dtype(), [&]<class T>() {
    T v = host_bits<T>(value);
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), v, n);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// True when a block with these element strides is one dense run (size-1 axes don't matter).
bool is_dense(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 1) continue;
    if (strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

// Output i = the block of `x` at element offset `base` with `shape`/`strides`: a view when it is
// dense, else a copy.
void output_block(KernelContext& ctx, size_t i, const Tensor& x, int64_t base, const Shape& shape,
                  const Strides& strides) {
  int64_t n = shape_numel(shape);
  if (n == 0) {
    ctx.allocate(i, x.dtype(), shape);
    return;
  }
  if (is_dense(shape, strides))
    return ctx.set_output(i, x.reshape({x.numel()}).slice_rows(base, base + n).reshape(shape));
  Tensor& y = ctx.allocate(i, x.dtype(), shape);
  copy_strided(x.dtype(), y.raw_data(), contiguous_strides(shape), elem_ptr(x.raw_data(), x.dtype(), base), strides,
               shape);
}

// ---- Transpose, Concat, Split, Slice, Expand, Tile ------------------------------------------------

void transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  sem::TransposePlan plan = sem::transpose_plan(ctx, x);
  if (plan.is_view) return ctx.set_output(0, x.reshape(plan.shape));
  Tensor& y = ctx.allocate(0, x.dtype(), plan.shape);
  transpose_into(x.dtype(), y.raw_data(), x.raw_data(), x.shape(), plan.perm);
}

void concat(KernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  if (first.rank() == 0) fail("input 0: scalars cannot be concatenated");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), first.rank(), "axis");
  Shape out_shape = first.shape();
  out_shape[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    bool compatible = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int64_t k = 0; compatible && k < t.rank(); ++k) {
      compatible = k == axis || t.shape()[size_t(k)] == first.shape()[size_t(k)];
    }
    if (!compatible) {
      fail("input {}: {} cannot be concatenated with input 0 ({}) along axis {}", i, t.describe(), first.describe(),
           axis);
    }
    out_shape[size_t(axis)] += t.shape()[size_t(axis)];
  }
  if (ctx.num_inputs() == 1) return ctx.set_output(0, first);
  Tensor& y = ctx.allocate(0, first.dtype(), out_shape);
  if (y.numel() == 0) return;
  // Each input is `outer` blocks of `block` elements landing `total` elements apart.
  int64_t outer = shape_numel(out_shape, 0, size_t(axis));
  int64_t inner = shape_numel(out_shape, size_t(axis) + 1, out_shape.size());
  int64_t total = out_shape[size_t(axis)] * inner;
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    int64_t block = t.shape()[size_t(axis)] * inner;
    copy_strided(t.dtype(), elem_ptr(y.raw_data(), t.dtype(), offset), {total, 1}, t.raw_data(), {block, 1},
                 {outer, block});
    offset += block;
  }
}

void split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<sem::SliceView> views = sem::split_views(ctx, x);
  for (size_t i = 0; i < views.size(); ++i) output_block(ctx, i, x, views[i].offset, views[i].shape, views[i].strides);
}

void slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  sem::SliceView v = sem::slice_view(ctx, x);
  output_block(ctx, 0, x, v.offset, v.shape, v.strides);
}

void expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape target = read_ints(ctx.input(1), "input 1 (shape)");
  Shape out_shape = broadcast_shapes({x.shape(), target});
  if (out_shape == x.shape()) return ctx.set_output(0, x);
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  copy_strided(x.dtype(), y.raw_data(), contiguous_strides(out_shape), x.raw_data(),
               broadcast_strides(x.shape(), out_shape), out_shape);
}

void tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> repeats = read_ints(ctx.input(1), "input 1 (repeats)");
  size_t r = size_t(x.rank());
  if (repeats.size() != r) fail("input 1 (repeats): {} entries for an input of rank {}", repeats.size(), r);
  Shape out_shape(r);
  for (size_t k = 0; k < r; ++k) {
    if (repeats[k] < 0) fail("input 1 (repeats): negative repeat {}", repeats[k]);
    out_shape[k] = x.shape()[k] * repeats[k];
  }
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  // Seen as a rank-2r copy: axis pair (repeat k, dim k); the repeat axis reads with stride 0.
  Strides out_strides = contiguous_strides(out_shape), in_strides = contiguous_strides(x.shape());
  Shape shape2;
  Strides dst2, src2;
  for (size_t k = 0; k < r; ++k) {
    shape2.insert(shape2.end(), {repeats[k], x.shape()[k]});
    dst2.insert(dst2.end(), {x.shape()[k] * out_strides[k], out_strides[k]});
    src2.insert(src2.end(), {0, in_strides[k]});
  }
  copy_strided(x.dtype(), y.raw_data(), dst2, x.raw_data(), src2, shape2);
}

// ---- Pad -----------------------------------------------------------------------------------------

enum PadMode : int { kConstant = 0, kReflect = 1, kEdge = 2, kWrap = 3 };

struct PadParams {
  int rank = 0;
  int mode = kConstant;
  int64_t out_dims[kMaxRank];
  int64_t in_strides[kMaxRank];
  int64_t src_begin[kMaxRank];
  int64_t dst_begin[kMaxRank];
  int64_t inner[kMaxRank];
};

// Index into an interior of length n for border position `rel` (relative to the interior start).
__device__ __forceinline__ int64_t border_source(int mode, int64_t rel, int64_t n) {
  if (mode == kEdge) return rel < 0 ? 0 : (rel > n - 1 ? n - 1 : rel);
  if (mode == kWrap) return ((rel % n) + n) % n;
  if (n == 1) return 0;  // reflect
  int64_t period = 2 * (n - 1);
  int64_t m = ((rel % period) + period) % period;
  return m < n ? m : period - m;
}

// Each output element maps every axis independently onto the surviving interior of the input
// (the CPU kernel's axis-by-axis border filling composes to the same per-axis mapping).
template <class T>
__global__ void pad_kernel(T* __restrict__ out, const T* __restrict__ in, PadParams p, T value,
                           const T* __restrict__ value_ptr, int64_t n) {
  T constant = value_ptr ? *value_ptr : value;
  for (int64_t linear = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; linear < n;
       linear += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = linear, src = 0;
    bool is_constant = false;
    for (int k = p.rank - 1; k >= 0; --k) {
      int64_t q = rem / p.out_dims[k];
      int64_t j = rem - q * p.out_dims[k];
      rem = q;
      int64_t rel = j - p.dst_begin[k];
      if (rel < 0 || rel >= p.inner[k]) {
        if (p.mode == kConstant) {
          is_constant = true;
          break;
        }
        rel = border_source(p.mode, rel, p.inner[k]);
      }
      src += (p.src_begin[k] + rel) * p.in_strides[k];
    }
    out[linear] = is_constant ? constant : in[src];
  }
}

void pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t r = size_t(x.rank());
  const sem::PadPlan plan = sem::pad_plan(ctx, x);
  const std::string& mode_name = plan.mode;
  const int mode = mode_name == "constant"  ? kConstant
                   : mode_name == "reflect" ? kReflect
                   : mode_name == "edge"    ? kEdge
                                            : kWrap;
  const Shape& out_shape = plan.shape;
  const Shape& inner = plan.inner;
  const std::vector<int64_t>&src_begin = plan.src_begin, &dst_begin = plan.dst_begin;
  Tensor host_value = Tensor::zeros(x.dtype(), {});  // constant value read on the host...
  const void* device_value = nullptr;                // ...or on the device (input 2)
  if (ctx.opset() < 11) {
    host_value = Tensor::scalar<float>(ctx.attr_float("value")).cast(x.dtype());
  } else if (ctx.has_input(2)) {
    const Tensor& value = ctx.input(2);
    if (value.device().type == DeviceType::CUDA) {
      device_value = value.raw_data();
    } else {
      host_value = value;
    }
  }
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  int64_t n = y.numel();
  if (n == 0) return;
  if (mode != kConstant) {
    for (size_t d = 0; d < r; ++d) {
      if (out_shape[d] != inner[d] && inner[d] == 0) fail("pads: mode '{}' cannot pad axis {} of size 0", mode_name, d);
    }
  }
  if (r > size_t(kMaxRank)) fail("Pad of rank {} exceeds the CUDA limit of {}", r, kMaxRank);
  PadParams p;
  p.rank = int(r);
  p.mode = mode;
  Strides in_strides = contiguous_strides(x.shape());
  for (size_t k = 0; k < r; ++k) {
    p.out_dims[k] = out_shape[k];
    p.in_strides[k] = in_strides[k];
    p.src_begin[k] = src_begin[k];
    p.dst_begin[k] = dst_begin[k];
    p.inner[k] = inner[k];
  }
  dispatch_size(x.dtype(), [&]<class T>() {
    T value = host_bits<T>(host_value);
    pad_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(x), p, value,
                                                            static_cast<const T*>(device_value), n);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---- DepthToSpace, SpaceToDepth, Trilu -----------------------------------------------------------

void check_nchw(const Tensor& x, int64_t blocksize) {
  if (x.rank() != 4) fail("input 0: expected rank 4 (NCHW), got {}", shape_str(x.shape()));
  if (blocksize <= 0) fail("attribute 'blocksize': must be positive, got {}", blocksize);
}

void depth_to_space(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t b = ctx.attr_int("blocksize");
  check_nchw(x, b);
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  if (c % (b * b) != 0) fail("input 0: channels {} are not divisible by blocksize^2 = {}", c, b * b);
  int64_t oc = c / (b * b);
  const std::string& mode = ctx.attr_string("mode");
  Shape blocks;
  std::vector<int64_t> perm;
  if (mode == "DCR") {
    blocks = {n, b, b, oc, h, w};
    perm = {0, 3, 4, 1, 5, 2};
  } else if (mode == "CRD") {
    blocks = {n, oc, b, b, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    fail("attribute 'mode': expected DCR or CRD, got '{}'", mode);
  }
  Tensor& y = ctx.allocate(0, x.dtype(), {n, oc, h * b, w * b});
  transpose_into(x.dtype(), y.raw_data(), x.raw_data(), blocks, perm);
}

void space_to_depth(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t b = ctx.attr_int("blocksize");
  check_nchw(x, b);
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  if (h % b != 0 || w % b != 0) fail("input 0: spatial size {}x{} is not divisible by blocksize {}", h, w, b);
  Tensor& y = ctx.allocate(0, x.dtype(), {n, c * b * b, h / b, w / b});
  transpose_into(x.dtype(), y.raw_data(), x.raw_data(), {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4});
}

template <class T>
__global__ void trilu_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t rows, int64_t cols, int64_t k,
                             bool upper, int64_t n) {
  for (int64_t linear = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; linear < n;
       linear += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = linear / cols;
    int64_t j = linear - row * cols, i = row % rows;
    bool keep = upper ? j >= i + k : j <= i + k;
    out[linear] = keep ? in[linear] : T{};
  }
}

void trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0: expected rank >= 2, got {}", shape_str(x.shape()));
  int64_t k = ctx.has_input(1) ? read_scalar_int(ctx.input(1), "input 1 (k)") : 0;
  bool upper = ctx.attr_int("upper") != 0;
  int64_t rows = x.shape()[size_t(x.rank() - 2)], cols = x.shape()[size_t(x.rank() - 1)];
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  int64_t n = y.numel();
  if (n == 0) return;
  // Beyond +-(rows + cols) every k keeps all or nothing; clamping avoids overflow in i + k.
  k = std::clamp<int64_t>(k, -(rows + cols), rows + cols);
  dispatch_size(x.dtype(), [&]<class T>() {
    trilu_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(x), rows, cols, k, upper, n);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---- Constant, ConstantOfShape, Range, EyeLike -----------------------------------------------------

struct ConstantState {
  Tensor value;  // uploaded once, handed out on every run (constants are immutable)
};

Tensor constant_on_host(KernelContext& ctx) {
  if (ctx.has_attr("value")) return ctx.attr_tensor("value");
  if (ctx.has_attr("value_float")) return Tensor::scalar<float>(ctx.attr_float("value_float"));
  if (ctx.has_attr("value_int")) return Tensor::scalar<int64_t>(ctx.attr_int("value_int"));
  if (ctx.has_attr("value_string")) return Tensor::scalar<std::string>(ctx.attr_string("value_string"));
  if (ctx.has_attr("value_floats")) {
    const auto& v = ctx.attr_floats("value_floats");
    return Tensor::from_vector<float>(v, {int64_t(v.size())});
  }
  if (ctx.has_attr("value_ints")) {
    const auto& v = ctx.attr_ints("value_ints");
    return Tensor::from_vector<int64_t>(v, {int64_t(v.size())});
  }
  if (ctx.has_attr("value_strings")) {
    const auto& v = ctx.attr_strings("value_strings");
    return Tensor::from_vector<std::string>(v, {int64_t(v.size())});
  }
  if (ctx.has_attr("sparse_value")) fail("attribute 'sparse_value': sparse constants are not supported");
  fail("no value attribute is set (value, value_float(s), value_int(s) or value_string(s))");
}

void constant(KernelContext& ctx) {
  ConstantState& state = ctx.state<ConstantState>();
  if (!state.value.defined() || state.value.device() != ctx.device()) {
    Tensor host = constant_on_host(ctx);
    if (host.dtype() == DType::String) fail("string constants cannot live on CUDA");
    state.value = host.to(ctx.device());
  }
  ctx.set_output(0, state.value);
}

void constant_of_shape(KernelContext& ctx) {
  Shape out = read_ints(ctx.input(0), "input 0 (shape)");
  for (int64_t d : out) {
    if (d < 0) fail("input 0 (shape): negative dimension in {}", shape_str(out));
  }
  Tensor value = ctx.has_attr("value") ? ctx.attr_tensor("value") : Tensor::scalar<float>(0.0f);
  if (value.numel() != 1) fail("attribute 'value': expected one element, got {}", value.describe());
  if (value.dtype() == DType::String) fail("attribute 'value': string tensors cannot live on CUDA");
  Tensor& y = ctx.allocate(0, value.dtype(), out);
  fill(y, value);
}

template <class T>
__global__ void range_kernel(T* __restrict__ out, T start, T delta, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    // Rounded exactly like the CPU's T(start + T(i) * delta): no fused multiply-add.
    if constexpr (std::is_same_v<T, float>) {
      out[i] = __fadd_rn(start, __fmul_rn(float(i), delta));
    } else if constexpr (std::is_same_v<T, double>) {
      out[i] = __dadd_rn(start, __dmul_rn(double(i), delta));
    } else {
      out[i] = T(start + T(i) * delta);
    }
  }
}

void range(KernelContext& ctx) {
  const Tensor& start_t = ctx.input(0);
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || t.dtype() != start_t.dtype()) {
      fail("input {}: expected a scalar of {}, got {}", i, dtype_name(start_t.dtype()), t.describe());
    }
  }
  dispatch<DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64>(start_t.dtype(), [&]<class T>() {
    T start = ctx.input(0).to(Device::cpu()).data<T>()[0], limit = ctx.input(1).to(Device::cpu()).data<T>()[0],
      delta = ctx.input(2).to(Device::cpu()).data<T>()[0];
    if (delta == T(0)) fail("input 2 (delta): must not be zero");
    double steps = std::ceil((double(limit) - double(start)) / double(delta));
    int64_t n = std::max<int64_t>(0, int64_t(steps));
    Tensor& y = ctx.allocate(0, start_t.dtype(), {n});
    if (n == 0) return;
    range_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), start, delta, n);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

template <class T>
__global__ void eye_kernel(T* __restrict__ out, int64_t cols, int64_t k, T one, int64_t n) {
  for (int64_t linear = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; linear < n;
       linear += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = linear / cols, j = linear - i * cols;
    out[linear] = j == i + k ? one : T{};
  }
}

void eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) fail("input 0: expected rank 2, got {}", shape_str(x.shape()));
  DType dtype = ctx.has_attr("dtype") ? DType(ctx.attr_int("dtype")) : x.dtype();
  if (dtype == DType::String) fail("attribute 'dtype': string is not supported here");
  int64_t rows = x.shape()[0], cols = x.shape()[1], k = ctx.attr_int("k");
  Tensor& y = ctx.allocate(0, dtype, x.shape());
  int64_t n = y.numel();
  if (n == 0) return;
  k = std::clamp<int64_t>(k, -(rows + cols), rows + cols);
  Tensor one = Tensor::scalar<float>(1.0f).cast(dtype);
  dispatch_size(dtype, [&]<class T>() {
    eye_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(y), cols, k, host_bits<T>(one), n);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---- CumSum --------------------------------------------------------------------------------------

// One thread per (outer, inner) line, summing sequentially along the axis (adjacent threads own
// adjacent inner positions, so the loads coalesce unless the axis is the last).
template <class T>
__global__ void cumsum_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t dim, int64_t inner, bool exclusive,
                              bool reverse, int64_t lines) {
  using A = compute_t<T>;
  for (int64_t line = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; line < lines;
       line += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = line / inner, i = line - o * inner;
    int64_t base = o * dim * inner + i;
    A acc = A(0);
    for (int64_t step = 0; step < dim; ++step) {
      int64_t j = reverse ? dim - 1 - step : step;
      int64_t at = base + j * inner;
      A before = acc;
      acc = A(before + load(in[at]));
      out[at] = store<T>(exclusive ? before : acc);
    }
  }
}

void cum_sum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) fail("input 0: expected rank >= 1, got a scalar");
  int64_t axis = normalize_axis(read_scalar_int(ctx.input(1), "input 1 (axis)"), x.rank(), "input 1 (axis)");
  bool exclusive = ctx.attr_int("exclusive") != 0, reverse = ctx.attr_int("reverse") != 0;
  int64_t dim = x.shape()[size_t(axis)];
  int64_t outer = shape_numel(x.shape(), 0, size_t(axis)), inner = shape_numel(x.shape(), size_t(axis) + 1, x.shape().size());
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  int64_t lines = outer * inner;
  dispatch_device<INGOT_CUDA_NUMERIC_TYPES>(x.dtype(), [&]<class T>() {
    cumsum_kernel<T>
        <<<blocks_for(lines), kThreads, 0, stream()>>>(ptr<T>(y), ptr<T>(x), dim, inner, exclusive, reverse, lines);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

INGOT_CUDA_KERNEL(Transpose, transpose).versions(1).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(Concat, concat).versions(4).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(Split, split).versions(2).dtypes(data_dtypes()).host_inputs({1});
INGOT_CUDA_KERNEL(Slice, slice).versions(1).dtypes(data_dtypes()).host_inputs({1, 2, 3, 4});
INGOT_CUDA_KERNEL(Expand, expand).versions(8).dtypes(data_dtypes()).host_inputs({1});
INGOT_CUDA_KERNEL(Tile, tile).versions(6).dtypes(data_dtypes()).host_inputs({1});
INGOT_CUDA_KERNEL(Pad, pad).versions(2).dtypes(data_dtypes()).host_inputs({1, 3});
INGOT_CUDA_KERNEL(DepthToSpace, depth_to_space).versions(1).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(SpaceToDepth, space_to_depth).versions(1).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(Trilu, trilu).versions(14).dtypes(data_dtypes()).host_inputs({1});
INGOT_CUDA_KERNEL(Constant, constant).versions(1);
INGOT_CUDA_KERNEL(ConstantOfShape, constant_of_shape).versions(9).host_inputs({0});
INGOT_CUDA_KERNEL(Range, range)
    .versions(11)
    .dtypes({DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64})
    .host_inputs({0, 1, 2});
INGOT_CUDA_KERNEL(EyeLike, eye_like).versions(9).dtypes(data_dtypes());
INGOT_CUDA_KERNEL(CumSum, cum_sum).versions(11).dtypes(numeric_dtypes()).host_inputs({1});

}  // namespace ingot::cuda
