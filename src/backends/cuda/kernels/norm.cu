// Normalizations on CUDA: BatchNormalization (inference and training mode) and its training backward
// (ai.ingot.BatchNormGrad), InstanceNormalization,
// LayerNormalization, GroupNormalization, LRN and MeanVarianceNormalization. The CPU kernels
// (src/backends/cpu/kernels/norm.cpp) are the reference: statistics in float (double for float64
// tensors; MeanVarianceNormalization in double throughout), two passes (mean, then the centered
// variance). Per-row normalizations run one warp per row (short rows) or one block per row.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/cuda/kernels/cuda_util.cuh"
#include "core/broadcast.h"
#include "ops/semantics/norm_args.h"

namespace ingot::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Parameters (scale, bias, mean, var: any float dtype) as a device buffer of the accumulator
// type, optionally broadcast to `out` (numpy rules, via an Indexer).

template <class S, class A>
__global__ void to_acc_kernel(const S* __restrict__ src, A* __restrict__ dst, int64_t n, Indexer ix, bool flat) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = A(load(src[flat ? i : ix.offset(i)]));
}

// `t` converted to A (float or double) on the device; with `out`, broadcast to that shape.
template <class A>
Tensor to_acc(const Tensor& t, const Shape* out = nullptr) {
  const DType acc_dt = std::is_same_v<A, double> ? DType::Float64 : DType::Float32;
  const Shape shape = out ? *out : t.shape();
  const int64_t n = shape_numel(shape);
  Tensor r = Tensor::empty(acc_dt, shape, t.device());
  if (n == 0) return r;
  const bool flat = !out || t.numel() == n;
  Indexer ix;
  if (!flat) ix = make_indexer(t.shape(), shape);
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(t.dtype(), [&]<class S>() {
    to_acc_kernel<S, A><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const S>(t), ptr<A>(r), n, ix, flat);
    INGOT_CUDA_LAUNCH_CHECK();
  });
  return r;
}

using sem::check_channel_param;

// ---------------------------------------------------------------------------------------------
// Row normalization: rows of `len` contiguous elements; per row mean, variance and
// inv = 1 / sqrt(var + eps), then y = epi(row, j, x, mean, inv). epi.stats(row, mean, inv) is
// called once per row.

template <class T, class A, class Epi, bool kBlock>
__global__ void row_norm_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t len, A eps, Epi epi) {
  __shared__ A buf[32];
  const RowSplit rs = row_split<kBlock>();
  const int64_t group = rs.group, groups = rs.groups;
  const int lane = rs.lane, width = rs.width;
  auto sum_all = [&](A v) { return row_fold<kBlock, SumFold<A>>(v, A(0), buf); };
  for (int64_t row = group; row < rows; row += groups) {
    const T* src = x + row * len;
    T* dst = y + row * len;
    A s = 0;
    for (int64_t j = lane; j < len; j += width) s += A(load(src[j]));
    s = sum_all(s);
    const A mean = len > 0 ? s / A(len) : A(0);
    A sq = 0;
    for (int64_t j = lane; j < len; j += width) {
      const A d = A(load(src[j])) - mean;
      sq += d * d;
    }
    sq = sum_all(sq);
    const A var = len > 0 ? sq / A(len) : A(0);
    const A inv = A(1) / sqrt_of(var + eps);
    for (int64_t j = lane; j < len; j += width) dst[j] = store<T>(epi(row, j, A(load(src[j])), mean, inv));
    if (lane == 0) epi.stats(row, mean, inv);
  }
}

template <class T, class A, class Epi>
void launch_row_norm(const T* x, T* y, int64_t rows, int64_t len, double eps, const Epi& epi) {
  if (rows == 0) return;
  if (len > 2048) {
    row_norm_kernel<T, A, Epi, true><<<blocks_for(rows * kThreads), kThreads, 0, stream()>>>(x, y, rows, len, A(eps), epi);
  } else {
    row_norm_kernel<T, A, Epi, false><<<blocks_for(rows * 32), kThreads, 0, stream()>>>(x, y, rows, len, A(eps), epi);
  }
  INGOT_CUDA_LAUNCH_CHECK();
}

// LayerNormalization: (x - mean) * inv * scale[j] + bias[j]; optional Mean / InvStdDev outputs.
template <class A, class S>
struct LayerEpi {
  const A* scale;
  const A* bias;  // nullptr: no bias
  S* mean_out;    // nullptr when not requested
  S* inv_out;
  __device__ A operator()(int64_t, int64_t j, A v, A mean, A inv) const {
    return (v - mean) * inv * scale[j] + (bias ? bias[j] : A(0));
  }
  __device__ void stats(int64_t row, A mean, A inv) const {
    if (mean_out) mean_out[row] = store<S>(mean);
    if (inv_out) inv_out[row] = store<S>(inv);
  }
};

// InstanceNormalization: a = scale[c] * inv; y = x * a + (bias[c] - mean * a).
template <class A>
struct InstanceEpi {
  const A* scale;
  const A* bias;
  int64_t channels;
  __device__ A operator()(int64_t row, int64_t, A v, A mean, A inv) const {
    const int64_t c = row % channels;
    const A a = scale[c] * inv;
    return v * a + (bias[c] - mean * a);
  }
  __device__ void stats(int64_t, A, A) const {}
};

// GroupNormalization: rows are (n, group); scale/bias per channel or per group.
template <class A>
struct GroupEpi {
  const A* scale;
  const A* bias;
  int64_t groups, per_group, plane;
  bool scale_per_channel, bias_per_channel;
  __device__ A operator()(int64_t row, int64_t j, A v, A mean, A inv) const {
    const int64_t g = row % groups;
    const int64_t channel = g * per_group + (plane > 0 ? j / plane : 0);
    const A a = inv * scale[scale_per_channel ? channel : g];
    return v * a + (bias[bias_per_channel ? channel : g] - mean * a);
  }
  __device__ void stats(int64_t, A, A) const {}
};

// LayerNormalization over rows short enough for registers (a transformer's hidden size): one warp
// per row holds the row (16-byte loads and stores, kChunks of 32 lanes x V elements), takes the
// mean and the centered variance from the registers and reads scale and bias in their own dtype.
// The general kernel above reads a row three times and needs scale and bias converted to the
// accumulator type first (two more launches per call): on the H100, Whisper-tiny's nine
// LayerNorms over [1500, 384] float16 took 13 us each that way.
template <class T, class P, int kChunks>
__global__ void __launch_bounds__(kThreads) layer_norm_rows_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                   const P* __restrict__ scale,
                                                                   const P* __restrict__ bias, float* mean_out,
                                                                   float* inv_out, int64_t rows, int len, float eps) {
  constexpr int V = 16 / sizeof(T);
  const int64_t row = int64_t(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const T* src = x + row * len;
  float v[kChunks][V];
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int j = (c * 32 + lane) * V;
    if (j < len) {
      T in[V];
      *reinterpret_cast<uint4*>(in) = *reinterpret_cast<const uint4*>(src + j);
#pragma unroll
      for (int k = 0; k < V; ++k) s += v[c][k] = float(load(in[k]));
    }
  }
  const float mean = warp_sum(s) / float(len);
  float sq = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if ((c * 32 + lane) * V < len) {
#pragma unroll
      for (int k = 0; k < V; ++k) sq += (v[c][k] - mean) * (v[c][k] - mean);
    }
  }
  const float inv = 1.f / sqrtf(warp_sum(sq) / float(len) + eps);
  T* dst = y + row * len;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int j = (c * 32 + lane) * V;
    if (j < len) {
      T out[V];
#pragma unroll
      for (int k = 0; k < V; ++k)
        out[k] = store<T>((v[c][k] - mean) * inv * float(load(scale[j + k])) + (bias ? float(load(bias[j + k])) : 0.f));
      *reinterpret_cast<uint4*>(dst + j) = *reinterpret_cast<const uint4*>(out);
    }
  }
  if (lane == 0 && mean_out) mean_out[row] = mean;
  if (lane == 0 && inv_out) inv_out[row] = inv;
}

// The register kernel when it applies (float32/16-bit rows of at most 8 chunks, 16-byte aligned,
// scale and bias of the normalized shape in x's dtype or float32, float32 statistics); false
// otherwise.
bool layer_norm_rows(const Tensor& x, Tensor& y, const Tensor& scale, const Tensor* bias, Tensor& mean_out,
                     Tensor& inv_out, int64_t rows, int64_t len, double eps) {
  if (x.dtype() == DType::Float64) return false;
  const int V = 16 / int(dtype_size(x.dtype()));
  const int64_t chunks = (len + 32 * V - 1) / (32 * V);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (len == 0 || len % V != 0 || chunks > 8 || !aligned(x.raw_data()) || !aligned(y.raw_data())) return false;
  const DType pt = scale.dtype();
  if (scale.numel() != len || (pt != x.dtype() && pt != DType::Float32)) return false;
  if (bias && (bias->numel() != len || bias->dtype() != pt)) return false;
  for (const Tensor* t : {&mean_out, &inv_out})
    if (t->defined() && t->dtype() != DType::Float32) return false;
  float* mean_p = mean_out.defined() ? ptr<float>(mean_out) : nullptr;
  float* inv_p = inv_out.defined() ? ptr<float>(inv_out) : nullptr;
  const unsigned grid = unsigned((rows + kThreads / 32 - 1) / (kThreads / 32));
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, double>) {
      auto with_param = [&]<class P>() {
        const P* b = bias ? ptr<const P>(*bias) : nullptr;
        auto go = [&]<int C>() {
          layer_norm_rows_kernel<T, P, C><<<grid, kThreads, 0, stream()>>>(ptr<const T>(x), ptr<T>(y), ptr<const P>(scale),
                                                                       b, mean_p, inv_p, rows, int(len), float(eps));
        };
        if (chunks == 1) go.template operator()<1>();
        else if (chunks == 2) go.template operator()<2>();
        else if (chunks <= 4) go.template operator()<4>();
        else go.template operator()<8>();
      };
      if (pt == x.dtype()) with_param.template operator()<T>();
      else with_param.template operator()<float>();
    }
  });
  INGOT_CUDA_LAUNCH_CHECK();
  return true;
}

void layer_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank());
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  const int64_t inner = shape_numel(norm_shape);
  const int64_t outer = inner > 0 ? x.numel() / inner : shape_numel(Shape(x.shape().begin(), x.shape().begin() + axis));
  const double epsilon = ctx.attr_float("epsilon");
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  Shape stat_shape = x.shape();
  for (size_t d = size_t(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
  const DType stat_dtype = ctx.attr_int("stash_type") == 1 && x.dtype() != DType::Float64 ? DType::Float32 : x.dtype();
  Tensor mean_out, inv_out;
  if (ctx.num_outputs() > 1) mean_out = ctx.allocate(1, stat_dtype, stat_shape);
  if (ctx.num_outputs() > 2) inv_out = ctx.allocate(2, stat_dtype, stat_shape);
  auto check_param = [&](const Tensor& t, size_t index, const char* name) {
    if (t.numel() == inner) return;
    if (t.rank() > int64_t(norm_shape.size()) || broadcast_shapes({t.shape(), norm_shape}) != norm_shape) {
      fail("input {} ({}): shape {} does not broadcast to the normalized shape {}", index, name, shape_str(t.shape()),
           shape_str(norm_shape));
    }
  };
  check_param(ctx.input(1), 1, "Scale");
  if (ctx.has_input(2)) check_param(ctx.input(2), 2, "B");
  if (outer == 0) return;
  if (stat_dtype == DType::Float32 && layer_norm_rows(x, y, ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr,
                                                     mean_out, inv_out, outer, inner, epsilon))
    return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<T>;
    Tensor scale = to_acc<A>(ctx.input(1), &norm_shape);
    Tensor bias = ctx.has_input(2) ? to_acc<A>(ctx.input(2), &norm_shape) : Tensor();
    auto run = [&]<class S>() {
      LayerEpi<A, S> epi{ptr<const A>(scale), bias.defined() ? ptr<const A>(bias) : nullptr,
                         mean_out.defined() ? ptr<S>(mean_out) : nullptr, inv_out.defined() ? ptr<S>(inv_out) : nullptr};
      launch_row_norm<T, A>(ptr<const T>(x), ptr<T>(y), outer, inner, epsilon, epi);
    };
    if (stat_dtype == x.dtype()) {
      run.template operator()<T>();
    } else {
      run.template operator()<float>();
    }
  });
}

void instance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::InstanceNormArgs args = sem::instance_norm_args(ctx);
  const int64_t channels = args.channels, planes = args.planes, plane = args.plane;
  const double epsilon = args.epsilon;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<T>;
    Tensor scale = to_acc<A>(ctx.input(1)), bias = to_acc<A>(ctx.input(2));
    InstanceEpi<A> epi{ptr<const A>(scale), ptr<const A>(bias), channels};
    launch_row_norm<T, A>(ptr<const T>(x), ptr<T>(y), planes, plane, epsilon, epi);
  });
}

void group_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::GroupNormArgs args = sem::group_norm_args(ctx);
  const int64_t n = args.n, channels = args.channels, groups = args.groups, per_group = args.per_group;
  const int64_t plane = args.plane;
  const double epsilon = args.epsilon;
  const Tensor &scale_t = ctx.input(1), &bias_t = ctx.input(2);
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<T>;
    Tensor scale = to_acc<A>(scale_t), bias = to_acc<A>(bias_t);
    GroupEpi<A> epi{ptr<const A>(scale), ptr<const A>(bias), groups, per_group, plane,
                    scale_t.numel() == channels, bias_t.numel() == channels};
    launch_row_norm<T, A>(ptr<const T>(x), ptr<T>(y), n * groups, per_group * plane, epsilon, epi);
  });
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization.

// Per channel: a = scale / sqrt(var + eps), b = bias - mean * a.
template <class A>
__global__ void bn_coeffs_kernel(const A* __restrict__ scale, const A* __restrict__ bias, const A* __restrict__ mean,
                                 const A* __restrict__ var, A* __restrict__ a, A* __restrict__ b, int64_t channels,
                                 A eps) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    const A s = scale[c] / sqrt_of(var[c] + eps);
    a[c] = s;
    b[c] = bias[c] - mean[c] * s;
  }
}

// The channel of flat element i of [N, C, plane]: 32-bit division where the row count fits.
template <class I>
__device__ __forceinline__ int64_t channel_of(int64_t i, int64_t plane, int64_t channels) {
  return int64_t((I(i) / I(plane)) % I(channels));
}

template <class T, class A, class I>
__global__ void bn_apply_kernel(const T* __restrict__ x, T* __restrict__ y, const A* __restrict__ a,
                                const A* __restrict__ b, int64_t total, int64_t channels, int64_t plane) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of<I>(i, plane, channels);
    y[i] = store<T>(A(load(x[i])) * a[c] + b[c]);
  }
}

// Per-channel sums over N and the spatial axes (training-mode statistics and the backward), split
// over gridDim.y blocks per channel so that a few channels of many elements (a ResNet's first
// layers: 64 channels of 1.6M elements at batch 128) still fill the device. Block (c, s) sums
// elements [s chunk, (s + 1) chunk) of channel c, shifted by the channel's first element
// (ops/semantics/norm_args.h, BatchNormSums), and writes its four partial sums as doubles.
template <class T, class A, bool kGrad>
__global__ void bn_sums_kernel(const T* __restrict__ x, const T* __restrict__ dy, double* __restrict__ partials,
                               int64_t channels, int64_t plane, int64_t count, int64_t chunk) {
  __shared__ A buf[32];
  const int64_t c = blockIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * chunk, end = min(count, begin + chunk);
  const A shift = A(load(x[c * plane]));
  A s1 = 0, s2 = 0, g = 0, gx = 0;
  // Element k of the channel is sample k / plane, offset k % plane; (i, j) step by blockDim.x.
  int64_t k = begin + threadIdx.x, i = k / plane, j = k - i * plane;
  const int64_t step_i = int64_t(blockDim.x) / plane, step_j = int64_t(blockDim.x) - step_i * plane;
  for (; k < end; k += blockDim.x) {
    const int64_t at = (i * channels + c) * plane + j;
    const A d = A(load(x[at])) - shift;
    s1 += d;
    s2 += d * d;
    if constexpr (kGrad) {
      const A v = A(load(dy[at]));
      g += v;
      gx += v * d;
    }
    i += step_i;
    j += step_j;
    if (j >= plane) {
      j -= plane;
      ++i;
    }
  }
  s1 = block_sum(s1, buf);
  s2 = block_sum(s2, buf);
  if constexpr (kGrad) {
    g = block_sum(g, buf);
    gx = block_sum(gx, buf);
  }
  if (threadIdx.x == 0) {
    double* p = partials + (c * gridDim.y + blockIdx.y) * 4;
    p[0] = double(s1), p[1] = double(s2), p[2] = double(g), p[3] = double(gx);
  }
}

// The channel's sums from its blocks' partials.
__device__ inline sem::BatchNormSums bn_channel_sums(const double* partials, int64_t c, int splits) {
  sem::BatchNormSums s;
  for (int b = 0; b < splits; ++b) {
    const double* p = partials + (c * splits + b) * 4;
    s.s1 += p[0], s.s2 += p[1], s.g += p[2], s.gx += p[3];
  }
  return s;
}

template <class T, class A>
__global__ void bn_moments_kernel(const T* __restrict__ x, const double* __restrict__ partials, int splits,
                                  A* __restrict__ mean, A* __restrict__ var, int64_t channels, int64_t plane,
                                  int64_t count) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    const sem::BatchNormMoments m =
        sem::batch_norm_moments(bn_channel_sums(partials, c, splits), double(load(x[c * plane])), count);
    mean[c] = A(m.mean);
    var[c] = A(m.var);
  }
}

// Blocks per channel for the sums: about 8 elements per thread each, and enough blocks in all to
// fill the device (at most 65535, the grid's y limit).
int bn_splits(int64_t channels, int64_t count) {
  const int64_t by_work = (count + kThreads * 8 - 1) / (kThreads * 8);
  const int64_t to_fill = (int64_t(sm_count()) * 8 + channels - 1) / std::max<int64_t>(channels, 1);
  return int(std::clamp<int64_t>(std::min(by_work, std::max<int64_t>(to_fill, 1)), 1, 65535));
}

// The four sums of every channel (dy null: the statistics only) into a [channels, splits, 4] buffer.
template <class T, class A>
Tensor bn_sums(const T* x, const T* dy, int64_t channels, int64_t plane, int64_t count, Device device, int& splits) {
  splits = bn_splits(channels, count);
  Tensor partials = Tensor::empty(DType::Float64, {channels, splits, 4}, device);
  const int64_t chunk = (count + splits - 1) / splits;
  const dim3 grid{unsigned(channels), unsigned(splits)};
  if (dy) {
    bn_sums_kernel<T, A, true><<<grid, kThreads, 0, stream()>>>(x, dy, ptr<double>(partials), channels, plane, count, chunk);
  } else {
    bn_sums_kernel<T, A, false><<<grid, kThreads, 0, stream()>>>(x, dy, ptr<double>(partials), channels, plane, count, chunk);
  }
  INGOT_CUDA_LAUNCH_CHECK();
  return partials;
}

// running * momentum + current * (1 - momentum), in double as the CPU, stored as S.
template <class S, class A>
__global__ void bn_blend_kernel(const A* __restrict__ running, const A* __restrict__ current, S* __restrict__ out,
                                int64_t channels, double momentum) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x)
    out[c] = store<S>(double(running[c]) * momentum + double(current[c]) * (1 - momentum));
}

void batch_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::BatchNormArgs args = sem::batch_norm_args(ctx);
  const int64_t n = args.n, channels = args.channels, plane = args.plane;
  const bool training = args.training;
  const double epsilon = args.epsilon, momentum = args.momentum;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<T>;
    Tensor scale = to_acc<A>(ctx.input(1)), bias = to_acc<A>(ctx.input(2));
    Tensor mean = to_acc<A>(ctx.input(3)), var = to_acc<A>(ctx.input(4));
    if (training) {
      Tensor batch_mean = Tensor::empty(mean.dtype(), {channels}, x.device());
      Tensor batch_var = Tensor::empty(mean.dtype(), {channels}, x.device());
      if (channels > 0 && n * plane > 0) {
        int splits = 0;
        const Tensor partials = bn_sums<T, A>(ptr<const T>(x), nullptr, channels, plane, n * plane, x.device(), splits);
        bn_moments_kernel<T, A><<<blocks_for(channels), kThreads, 0, stream()>>>(
            ptr<const T>(x), ptr<const double>(partials), splits, ptr<A>(batch_mean), ptr<A>(batch_var), channels, plane,
            n * plane);
        INGOT_CUDA_LAUNCH_CHECK();
      }
      auto blend = [&](size_t out, const Tensor& running, const Tensor& current) {
        if (ctx.num_outputs() <= out) return;
        const Tensor& like = ctx.input(out == 1 ? 3 : 4);
        Tensor& t = ctx.allocate(out, like.dtype(), like.shape());
        if (channels == 0) return;
        dispatch_device<INGOT_CUDA_FLOAT_TYPES>(like.dtype(), [&]<class S>() {
          bn_blend_kernel<S, A><<<blocks_for(channels), kThreads, 0, stream()>>>(ptr<const A>(running),
                                                                                 ptr<const A>(current), ptr<S>(t),
                                                                                 channels, momentum);
          INGOT_CUDA_LAUNCH_CHECK();
        });
      };
      blend(1, mean, batch_mean);
      blend(2, var, batch_var);
      mean = batch_mean;
      var = batch_var;
    }
    if (x.numel() == 0) return;
    Tensor a = Tensor::empty(mean.dtype(), {channels}, x.device());
    Tensor b = Tensor::empty(mean.dtype(), {channels}, x.device());
    bn_coeffs_kernel<A><<<blocks_for(channels), kThreads, 0, stream()>>>(ptr<const A>(scale), ptr<const A>(bias),
                                                                         ptr<const A>(mean), ptr<const A>(var),
                                                                         ptr<A>(a), ptr<A>(b), channels, A(epsilon));
    INGOT_CUDA_LAUNCH_CHECK();
    if (x.numel() <= INT32_MAX) {
      bn_apply_kernel<T, A, uint32_t><<<blocks_for(x.numel()), kThreads, 0, stream()>>>(
          ptr<const T>(x), ptr<T>(y), ptr<const A>(a), ptr<const A>(b), x.numel(), channels, plane);
    } else {
      bn_apply_kernel<T, A, uint64_t><<<blocks_for(x.numel()), kThreads, 0, stream()>>>(
          ptr<const T>(x), ptr<T>(y), ptr<const A>(a), ptr<const A>(b), x.numel(), channels, plane);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ai.ingot.BatchNormGrad: the four sums per channel (bn_sums), the coefficients of dX = a dY + b X
// + d with dscale and dbias per channel, then one elementwise pass.
template <class T, class A, class S>
__global__ void bn_grad_coeffs_kernel(const T* __restrict__ x, const double* __restrict__ partials, int splits,
                                      const A* __restrict__ scale, A* __restrict__ coeffs, S* __restrict__ dscale,
                                      S* __restrict__ dbias, int64_t channels, int64_t plane, int64_t count, double eps) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    const sem::BatchNormGradCoeffs k = sem::batch_norm_grad_coeffs(
        bn_channel_sums(partials, c, splits), count > 0 ? double(load(x[c * plane])) : 0.0, count, double(scale[c]), eps);
    coeffs[c] = A(k.a), coeffs[channels + c] = A(k.b), coeffs[2 * channels + c] = A(k.d);
    if (dscale) dscale[c] = store<S>(k.dscale);
    if (dbias) dbias[c] = store<S>(k.dbias);
  }
}

template <class T, class A, class I>
__global__ void bn_grad_apply_kernel(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx,
                                     const A* __restrict__ coeffs, int64_t total, int64_t channels, int64_t plane) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of<I>(i, plane, channels);
    dx[i] = store<T>(coeffs[c] * A(load(dy[i])) + coeffs[channels + c] * A(load(x[i])) + coeffs[2 * channels + c]);
  }
}

void batch_norm_grad(KernelContext& ctx) {
  const sem::BatchNormGradArgs args = sem::batch_norm_grad_args(ctx);
  const Tensor &dy = ctx.input(0), &x = ctx.input(1), &scale_t = ctx.input(2);
  const int64_t channels = args.channels, plane = args.plane, count = args.count();
  Tensor& dx = ctx.allocate(0, x.dtype(), x.shape());
  Tensor* dscale = ctx.num_outputs() > 1 ? &ctx.allocate(1, scale_t.dtype(), scale_t.shape()) : nullptr;
  Tensor* dbias = ctx.num_outputs() > 2 ? &ctx.allocate(2, scale_t.dtype(), scale_t.shape()) : nullptr;
  if (channels == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<T>;
    const Tensor scale = to_acc<A>(scale_t);
    Tensor partials = Tensor::zeros(DType::Float64, {channels, 1, 4}, x.device());
    int splits = 1;
    if (count > 0) partials = bn_sums<T, A>(ptr<const T>(x), ptr<const T>(dy), channels, plane, count, x.device(), splits);
    Tensor coeffs = Tensor::empty(scale.dtype(), {3, channels}, x.device());
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(scale_t.dtype(), [&]<class S>() {
      bn_grad_coeffs_kernel<T, A, S><<<blocks_for(channels), kThreads, 0, stream()>>>(
          ptr<const T>(x), ptr<const double>(partials), splits, ptr<const A>(scale), ptr<A>(coeffs),
          dscale ? ptr<S>(*dscale) : nullptr, dbias ? ptr<S>(*dbias) : nullptr, channels, plane, count, args.epsilon);
      INGOT_CUDA_LAUNCH_CHECK();
    });
    if (x.numel() == 0) return;
    if (x.numel() <= INT32_MAX) {
      bn_grad_apply_kernel<T, A, uint32_t><<<blocks_for(x.numel()), kThreads, 0, stream()>>>(
          ptr<const T>(dy), ptr<const T>(x), ptr<T>(dx), ptr<const A>(coeffs), x.numel(), channels, plane);
    } else {
      bn_grad_apply_kernel<T, A, uint64_t><<<blocks_for(x.numel()), kThreads, 0, stream()>>>(
          ptr<const T>(dy), ptr<const T>(x), ptr<T>(dx), ptr<const A>(coeffs), x.numel(), channels, plane);
    }
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---------------------------------------------------------------------------------------------
// LRN: x / (bias + alpha / size * sum of squares over the channel window)^beta.

template <class T, class A>
__global__ void lrn_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t channels, int64_t plane,
                           int64_t before, int64_t after, A alpha_over_size, A beta, A bias) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % plane, c = (i / plane) % channels, batch = i / (plane * channels);
    const int64_t lo = c - before < 0 ? 0 : c - before, hi = c + after < channels - 1 ? c + after : channels - 1;
    A sum = 0;
    for (int64_t cc = lo; cc <= hi; ++cc) {
      const A v = A(load(x[(batch * channels + cc) * plane + j]));
      sum += v * v;
    }
    y[i] = store<T>(A(load(x[i])) / pow(bias + alpha_over_size * sum, beta));
  }
}

void lrn(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::LrnArgs args = sem::lrn_args(ctx);
  const int64_t size = args.size, channels = args.channels, plane = args.plane;
  const int64_t before = args.before, after = args.after;
  const double alpha = args.alpha, beta = args.beta, bias = args.bias;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    using A = acc_of<T>;
    lrn_kernel<T, A><<<blocks_for(x.numel()), kThreads, 0, stream()>>>(
        ptr<const T>(x), ptr<T>(y), x.numel(), channels, plane, before, after, A(alpha) / A(size), A(beta), A(bias));
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---------------------------------------------------------------------------------------------
// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes`, in double. One block
// per group of kept coordinates, walking the reduced coordinates with strides.

template <class T>
__global__ void mvn_kernel(const T* __restrict__ x, T* __restrict__ y, Dims kept, Dims red, int64_t groups,
                           int64_t count) {
  __shared__ double buf[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t base = kept.offset(g);
    double s = 0;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) s += double(load(x[base + red.offset(r)]));
    const double mean = block_sum(s, buf) / double(count);
    double sq = 0;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      const double d = double(load(x[base + red.offset(r)])) - mean;
      sq += d * d;
    }
    const double den = sqrt(block_sum(sq, buf) / double(count)) + 1e-9;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      const int64_t off = base + red.offset(r);
      y[off] = store<T>((double(load(x[off])) - mean) / den);
    }
  }
}

void mean_variance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  std::vector<bool> reduced(size_t(rank), false);
  for (int64_t a : ctx.attr_ints("axes")) reduced[size_t(normalize_axis(a, rank, "axes"))] = true;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  // Merge neighbouring axes of the same kind (size-1 axes dropped) so any rank fits the Dims.
  Dims kept, red;
  int64_t groups = 1, count = 1, stride = 1;
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int64_t d = rank - 1; d >= 0; --d) {
    strides[size_t(d)] = stride;
    stride *= x.dim(d);
  }
  int last_kind = -1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = x.dim(d);
    if (size == 1) continue;
    const int kind = reduced[size_t(d)] ? 1 : 0;
    Dims& dims = kind ? red : kept;
    if (kind == last_kind) {
      dims.size[dims.rank - 1] *= size;
      dims.stride[dims.rank - 1] = strides[size_t(d)];
    } else {
      if (dims.rank == kMaxRank) fail("input 0: too many alternating axes for the CUDA kernel ({})", shape_str(x.shape()));
      dims.size[dims.rank] = size;
      dims.stride[dims.rank] = strides[size_t(d)];
      ++dims.rank;
    }
    (kind ? count : groups) *= size;
    last_kind = kind;
  }
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class T>() {
    mvn_kernel<T><<<unsigned(std::min<int64_t>(groups, int64_t(sm_count()) * 32)), kThreads, 0, stream()>>>(
        ptr<const T>(x), ptr<T>(y), kept, red, groups, count);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

INGOT_CUDA_KERNEL(BatchNormalization, batch_norm).versions(6).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(BatchNormGrad, batch_norm_grad).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(InstanceNormalization, instance_norm).versions(6).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LayerNormalization, layer_norm).versions(17).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LayerNormalization, layer_norm).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(GroupNormalization, group_norm).versions(18).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(LRN, lrn).versions(1).dtypes({INGOT_CUDA_FLOAT_TYPES});
INGOT_CUDA_KERNEL(MeanVarianceNormalization, mean_variance_norm).versions(9).dtypes({INGOT_CUDA_FLOAT_TYPES});

}  // namespace ingot::cuda
