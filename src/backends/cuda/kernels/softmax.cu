// Softmax, LogSoftmax, Hardmax and SoftmaxGrad on CUDA. The CPU kernel
// (src/backends/cpu/kernels/softmax.cpp) is the semantic reference.
#include "backends/cuda/kernels/reduction_common.cuh"
#include "backends/cuda/kernels/reduction.h"
#include "ops/semantics/reduce_axes.h"

namespace ingot::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Softmax / LogSoftmax / Hardmax over an [outer, dim, inner] view. The maximum ignores NaN (as the
// CPU's `v > best` loop); Hardmax marks the first index of the maximum (index 0 when no element
// exceeds -inf).

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

using sem::AxisView;

AxisView axis_view(const KernelContext& ctx, const Tensor& x) { return sem::softmax_axis_view(ctx, x); }

template <class A>
struct MaxIgnoreNan {
  __device__ static A apply(A a, A b) { return b > a ? b : a; }
};
struct MinIndex {
  __device__ static int64_t apply(int64_t a, int64_t b) { return b < a ? b : a; }
};

// Rows (inner == 1): one warp per row (kBlock false) or one block per row.
template <SoftmaxKind K, class T, bool kBlock>
__global__ void softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t dim) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  __shared__ A abuf[32];
  __shared__ int64_t ibuf[32];
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const RowSplit rs = row_split<kBlock>();
  const int64_t group = rs.group, groups = rs.groups;
  const int lane = rs.lane, width = rs.width;
  for (int64_t row = group; row < rows; row += groups) {
    const T* src = x + row * dim;
    T* dst = y + row * dim;
    A best = kNegInf;
    for (int64_t d = lane; d < dim; d += width) {
      const A v = A(load(src[d]));
      if (v > best) best = v;
    }
    best = row_fold<kBlock, MaxIgnoreNan<A>>(best, kNegInf, abuf);
    if constexpr (K == SoftmaxKind::Hardmax) {
      // The first index holding the maximum (0 when the maximum is -inf or everything is NaN).
      int64_t arg = INT64_MAX;
      if (best != kNegInf) {
        for (int64_t d = lane; d < dim; d += width) {
          if (A(load(src[d])) == best) {
            arg = d;
            break;
          }
        }
      }
      arg = row_fold<kBlock, MinIndex>(arg, int64_t(INT64_MAX), ibuf);
      if (arg == INT64_MAX) arg = 0;
      for (int64_t d = lane; d < dim; d += width) dst[d] = store<T>(A(d == arg ? 1 : 0));
    } else {
      A sum = 0;
      for (int64_t d = lane; d < dim; d += width) sum += exp_of(A(load(src[d])) - best);
      sum = row_fold<kBlock, SumFold<A>>(sum, A(0), abuf);
      if constexpr (K == SoftmaxKind::Softmax) {
        const A inv = A(1) / sum;
        for (int64_t d = lane; d < dim; d += width) dst[d] = store<T>(exp_of(A(load(src[d])) - best) * inv);
      } else {
        const A shift = best + log_of(sum);
        for (int64_t d = lane; d < dim; d += width) dst[d] = store<T>(A(load(src[d])) - shift);
      }
    }
  }
}

// Softmax / LogSoftmax rows of at most 32 * kPer * kVec elements in 16/32-bit floats: one warp per
// row, the row read once into registers and written once, so each byte moves once
// (softmax_rows_kernel reads the row three times). kVec elements travel per access (2 for 16-bit
// rows of even length: 4-byte loads); lane l holds vectors l, l + 32, ... The same arithmetic as
// softmax_rows_kernel: NaN is ignored by the maximum and propagates through the sum.
template <class T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <SoftmaxKind K, class T, int kPer, int kVec>
__global__ void softmax_warp_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int dim) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  using P = Pack<T, kVec>;
  const int lane = threadIdx.x & 31;
  const int packs = dim / kVec;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = thread_index() >> 5; row < rows; row += warps) {
    const P* src = reinterpret_cast<const P*>(x + row * dim);
    P* dst = reinterpret_cast<P*>(y + row * dim);
    float v[kPer][kVec];
    float best = kNegInf;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int d = lane + 32 * k;
      if (d < packs) {
        const P p = src[d];
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[k][j] = float(load(p.v[j]));
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[k][j] = kNegInf;
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) best = v[k][j] > best ? v[k][j] : best;
    }
    best = warp_fold<MaxIgnoreNan<float>>(best);
    float sum = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (lane + 32 * k < packs) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float e = exp_of(v[k][j] - best);
          sum += e;
          if constexpr (K == SoftmaxKind::Softmax) v[k][j] = e;
        }
      }
    }
    sum = warp_sum(sum);
    const float inv = 1.0f / sum, shift = best + log_of(sum);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int d = lane + 32 * k;
      if (d < packs) {
        P p;
#pragma unroll
        for (int j = 0; j < kVec; ++j) p.v[j] = store<T>(K == SoftmaxKind::Softmax ? v[k][j] * inv : v[k][j] - shift);
        dst[d] = p;
      }
    }
  }
}

// Vectors per lane for a warp-per-row softmax of `dim` elements in vectors of `vec`, 0 when the
// row is too long for registers.
inline int softmax_warp_per_lane(int64_t dim, int vec) {
  for (int per : {1, 2, 4, 8, 12, 16, 24, 32}) {
    if (dim <= int64_t(32) * per * vec) return per;
  }
  return 0;
}

// Launches the warp-per-row kernel where it measured faster than softmax_rows_kernel; false
// otherwise. H200, 0.9-1.7 GB per call (ingot bench of one Softmax, 2026-11-30): rows of 64 and 256
// 1.3-1.5x faster in float16 and float32-64 1.3x; 1500-long float16 rows (Whisper's attention) 1.15x
// faster than the block-per-row kernel; but 1000-long rows (warp-per-row there too) and 2048-long
// float16 rows slower (more registers per lane, fewer warps resident).
template <SoftmaxKind K, class T>
bool launch_softmax_warp_rows(const T* in, T* out, int64_t rows, int64_t dim) {
  const int vec = sizeof(T) == 2 && dim % 2 == 0 ? 2 : 1;
  const int per = softmax_warp_per_lane(dim, vec);
  const int values = per * vec;  // floats each lane keeps
  if (per == 0 || !(values <= 8 || (dim > 1024 && values <= 48))) return false;
  const unsigned blocks = blocks_for(rows * 32);
  auto go = [&]<int V>() {
    switch (per) {
#define INGOT_PER(N) \
  case N: softmax_warp_rows_kernel<K, T, N, V><<<blocks, kThreads, 0, stream()>>>(in, out, rows, int(dim)); break;
      INGOT_PER(1) INGOT_PER(2) INGOT_PER(4) INGOT_PER(8) INGOT_PER(12) INGOT_PER(16) INGOT_PER(24) INGOT_PER(32)
#undef INGOT_PER
    }
  };
  if (vec == 2) {
    go.template operator()<2>();
  } else {
    go.template operator()<1>();
  }
  return true;
}

// inner > 1: one thread per (outer, inner) column, serial over dim (coalesced across inner).
template <SoftmaxKind K, class T>
__global__ void softmax_cols_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t dim,
                                    int64_t inner) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t total = outer * inner;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner, j = i - o * inner;
    const T* src = x + o * dim * inner + j;
    T* dst = y + o * dim * inner + j;
    A best = -std::numeric_limits<A>::infinity();
    int64_t arg = 0;
    for (int64_t d = 0; d < dim; ++d) {
      const A v = A(load(src[d * inner]));
      if (v > best) {
        best = v;
        arg = d;
      }
    }
    if constexpr (K == SoftmaxKind::Hardmax) {
      for (int64_t d = 0; d < dim; ++d) dst[d * inner] = store<T>(A(d == arg ? 1 : 0));
    } else {
      A sum = 0;
      for (int64_t d = 0; d < dim; ++d) sum += exp_of(A(load(src[d * inner])) - best);
      if constexpr (K == SoftmaxKind::Softmax) {
        const A inv = A(1) / sum;
        for (int64_t d = 0; d < dim; ++d) dst[d * inner] = store<T>(exp_of(A(load(src[d * inner])) - best) * inv);
      } else {
        const A shift = best + log_of(sum);
        for (int64_t d = 0; d < dim; ++d) dst[d * inner] = store<T>(A(load(src[d * inner])) - shift);
      }
    }
  }
}

// Contiguous rows: the warp-per-row kernel where it measured faster, else one warp (rows up to
// 1024) or one block per row.
template <SoftmaxKind K, class T>
void launch_softmax_rows(const T* in, T* out, int64_t rows, int64_t dim) {
  if constexpr (K != SoftmaxKind::Hardmax && !std::is_same_v<T, double>) {
    if (launch_softmax_warp_rows<K, T>(in, out, rows, dim)) return;
  }
  if (dim > 1024) {
    softmax_rows_kernel<K, T, true><<<blocks_for(rows * kThreads), kThreads, 0, stream()>>>(in, out, rows, dim);
  } else {
    softmax_rows_kernel<K, T, false><<<blocks_for(rows * 32), kThreads, 0, stream()>>>(in, out, rows, dim);
  }
}

template <SoftmaxKind K>
void softmax_family(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const AxisView v = axis_view(ctx, x);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    const T* in = ptr<const T>(x);
    T* out = ptr<T>(y);
    if (v.inner == 1) {
      launch_softmax_rows<K, T>(in, out, v.outer, v.dim);
    } else {
      softmax_cols_kernel<K, T><<<blocks_for(v.outer * v.inner), kThreads, 0, stream()>>>(in, out, v.outer, v.dim,
                                                                                           v.inner);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ai.ingot.SoftmaxGrad: dX = Y (dY - sum(dY Y)). Contiguous rows: one warp (rows up to 1024) or
// one block per row, two passes over the row; columns (inner > 1): one thread each, serial.
template <class T, bool kBlock>
__global__ void softmax_grad_rows_kernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                         int64_t rows, int64_t dim) {
  using A = acc_of<T>;
  __shared__ A buf[32];
  const RowSplit rs = row_split<kBlock>();
  for (int64_t row = rs.group; row < rows; row += rs.groups) {
    const T *g = dy + row * dim, *p = y + row * dim;
    T* out = dx + row * dim;
    A s = 0;
    for (int64_t d = rs.lane; d < dim; d += rs.width) s += A(load(g[d])) * A(load(p[d]));
    s = row_fold<kBlock, SumFold<A>>(s, A(0), buf);
    for (int64_t d = rs.lane; d < dim; d += rs.width) out[d] = store<T>(A(load(p[d])) * (A(load(g[d])) - s));
  }
}

template <class T>
__global__ void softmax_grad_cols_kernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                         int64_t outer, int64_t dim, int64_t inner) {
  using A = acc_of<T>;
  for (int64_t c = thread_index(); c < outer * inner; c += grid_stride()) {
    const int64_t base = (c / inner) * dim * inner + c % inner;
    A s = 0;
    for (int64_t d = 0; d < dim; ++d) s += A(load(dy[base + d * inner])) * A(load(y[base + d * inner]));
    for (int64_t d = 0; d < dim; ++d) {
      const int64_t i = base + d * inner;
      dx[i] = store<T>(A(load(y[i])) * (A(load(dy[i])) - s));
    }
  }
}

void softmax_grad(KernelContext& ctx) {
  const Tensor &dy = ctx.input(0), &y = ctx.input(1);
  const AxisView v = sem::softmax_grad_view(ctx);
  Tensor& dx = ctx.allocate(0, y.dtype(), y.shape());
  if (y.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(y.dtype(), [&]<class T>() {
    const T *g = ptr<const T>(dy), *p = ptr<const T>(y);
    T* out = ptr<T>(dx);
    if (v.inner != 1) {
      softmax_grad_cols_kernel<T><<<blocks_for(v.outer * v.inner), kThreads, 0, stream()>>>(g, p, out, v.outer, v.dim, v.inner);
    } else if (v.dim > 1024) {
      softmax_grad_rows_kernel<T, true><<<blocks_for(v.outer * kThreads), kThreads, 0, stream()>>>(g, p, out, v.outer, v.dim);
    } else {
      softmax_grad_rows_kernel<T, false><<<blocks_for(v.outer * 32), kThreads, 0, stream()>>>(g, p, out, v.outer, v.dim);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

void softmax_rows(DType dtype, const void* in, void* out, int64_t rows, int64_t dim) {
  if (rows == 0 || dim == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(dtype, [&]<class T>() {
    launch_softmax_rows<SoftmaxKind::Softmax, T>(static_cast<const T*>(in), static_cast<T*>(out), rows, dim);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

INGOT_CUDA_KERNEL(Softmax, softmax_family<SoftmaxKind::Softmax>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(SoftmaxGrad, softmax_grad).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LogSoftmax, softmax_family<SoftmaxKind::LogSoftmax>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(Hardmax, softmax_family<SoftmaxKind::Hardmax>).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot::cuda
