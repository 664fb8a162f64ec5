// Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, LRN and MeanVarianceNormalization. Statistics are computed in float
// (double for float64 tensors) with two passes (mean, then centered variance) for accuracy.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/norm_args.h"

namespace ingot {
namespace {

// Grain for parallel loops over planes of `plane` elements: about 32k elements per task.
int64_t plane_grain(int64_t plane) { return std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(plane, 1)); }

// Mean and population variance of n values.
template <class A, class T>
void moments(const T* x, int64_t n, A& mean, A& var) {
  A sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += A(x[i]);
  mean = n > 0 ? sum / A(n) : A(0);
  A sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const A d = A(x[i]) - mean;
    sq += d * d;
  }
  var = n > 0 ? sq / A(n) : A(0);
}

// y = x * a + b over one plane.
template <class A, class T>
void affine(const T* x, T* y, int64_t n, A a, A b) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(A(x[i]) * a + b);
}

using sem::check_channel_param;

void batch_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::BatchNormArgs args = sem::batch_norm_args(ctx);
  const int64_t n = args.n, channels = args.channels, plane = args.plane;
  const bool training = args.training;
  const double epsilon = args.epsilon, momentum = args.momentum;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    std::vector<A> scale = sem::to_vector_as<A>(ctx.input(1)), bias = sem::to_vector_as<A>(ctx.input(2));
    std::vector<A> mean = sem::to_vector_as<A>(ctx.input(3)), var = sem::to_vector_as<A>(ctx.input(4));
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    if (training) {
      // Batch statistics per channel over N and the spatial axes, summed in double (a channel may
      // hold millions of elements); running stats blend them in.
      std::vector<A> batch_mean(static_cast<size_t>(channels)), batch_var(static_cast<size_t>(channels));
      parallel_for(channels, 1, [&](int64_t cb, int64_t ce) {
        for (int64_t c = cb; c < ce; ++c) {
          double sum = 0, sq = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T* p = xp + (i * channels + c) * plane;
            for (int64_t j = 0; j < plane; ++j) sum += double(p[j]);
          }
          const double count = double(std::max<int64_t>(1, n * plane));
          const double mu = sum / count;
          for (int64_t i = 0; i < n; ++i) {
            const T* p = xp + (i * channels + c) * plane;
            for (int64_t j = 0; j < plane; ++j) sq += (double(p[j]) - mu) * (double(p[j]) - mu);
          }
          batch_mean[size_t(c)] = A(mu);
          batch_var[size_t(c)] = A(sq / count);
        }
      });
      auto blend = [&](size_t out, const std::vector<A>& running, const std::vector<A>& current) {
        if (ctx.num_outputs() <= out) return;
        const Tensor& like = ctx.input(out == 1 ? 3 : 4);
        Tensor& t = ctx.allocate(out, like.dtype(), like.shape());
        std::vector<double> v(static_cast<size_t>(channels));
        for (size_t c = 0; c < v.size(); ++c)
          v[c] = double(running[c]) * momentum + double(current[c]) * (1 - momentum);
        copy_tensor(Tensor::from_vector<double>(v, like.shape()).cast(like.dtype()), t);
      };
      blend(1, mean, batch_mean);
      blend(2, var, batch_var);
      mean = batch_mean;
      var = batch_var;
    }
    parallel_for(n * channels, plane_grain(plane), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const size_t c = size_t(i % channels);
        const A a = scale[c] / std::sqrt(var[c] + A(epsilon));
        affine<A>(xp + i * plane, yp + i * plane, plane, a, bias[c] - mean[c] * a);
      }
    });
  });
}

// ai.ingot.BatchNormGrad: per channel (in parallel), one pass for the shifted sums of X and dY in
// double, then dX = a dY + b X + d (ops/semantics/norm_args.h).
void batch_norm_grad(KernelContext& ctx) {
  const sem::BatchNormGradArgs args = sem::batch_norm_grad_args(ctx);
  const Tensor &dy = ctx.input(0), &x = ctx.input(1);
  const int64_t n = args.n, channels = args.channels, plane = args.plane;
  Tensor& dx = ctx.allocate(0, x.dtype(), x.shape());
  const std::vector<double> scale = sem::to_vector_as<double>(ctx.input(2));
  std::vector<double> dscale(static_cast<size_t>(channels)), dbias(static_cast<size_t>(channels));
  dispatch_float(x.dtype(), [&]<class T>() {
    const T *xp = x.data<T>(), *gp = dy.data<T>();
    T* out = dx.data<T>();
    parallel_for(channels, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        const double shift = args.count() > 0 ? double(xp[c * plane]) : 0.0;
        sem::BatchNormSums s;
        for (int64_t i = 0; i < n; ++i) {
          const T *xr = xp + (i * channels + c) * plane, *gr = gp + (i * channels + c) * plane;
          for (int64_t j = 0; j < plane; ++j) {
            const double d = double(xr[j]) - shift, g = double(gr[j]);
            s.s1 += d, s.s2 += d * d, s.g += g, s.gx += g * d;
          }
        }
        const sem::BatchNormGradCoeffs k = sem::batch_norm_grad_coeffs(s, shift, args.count(), scale[size_t(c)], args.epsilon);
        dscale[size_t(c)] = k.dscale, dbias[size_t(c)] = k.dbias;
        using A = sem::acc_t<T>;
        const A a = A(k.a), b = A(k.b), d = A(k.d);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t o = (i * channels + c) * plane;
          for (int64_t j = 0; j < plane; ++j) out[o + j] = T(a * A(gp[o + j]) + b * A(xp[o + j]) + d);
        }
      }
    });
  });
  const Tensor& scale_t = ctx.input(2);
  for (size_t out = 1; out < 3 && out < ctx.num_outputs(); ++out) {
    Tensor& t = ctx.allocate(out, scale_t.dtype(), scale_t.shape());
    copy_tensor(Tensor::from_vector<double>(out == 1 ? dscale : dbias, scale_t.shape()).cast(scale_t.dtype()), t);
  }
}

void instance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::InstanceNormArgs args = sem::instance_norm_args(ctx);
  const int64_t channels = args.channels, planes = args.planes, plane = args.plane;
  const double epsilon = args.epsilon;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    std::vector<A> scale = sem::to_vector_as<A>(ctx.input(1)), bias = sem::to_vector_as<A>(ctx.input(2));
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(planes, plane_grain(plane), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const size_t c = size_t(i % channels);
        A mu, var;
        moments<A>(xp + i * plane, plane, mu, var);
        const A a = scale[c] / std::sqrt(var + A(epsilon));
        affine<A>(xp + i * plane, yp + i * plane, plane, a, bias[c] - mu * a);
      }
    });
  });
}

// Expands a scale/bias tensor to `inner` values laid out like `norm_shape` (numpy broadcasting).
template <class A>
std::vector<A> broadcast_param(const Tensor& t, const Shape& norm_shape, size_t index, const char* name) {
  const int64_t inner = shape_numel(norm_shape);
  std::vector<A> src = sem::to_vector_as<A>(t);
  if (int64_t(src.size()) == inner) return src;
  if (t.rank() > int64_t(norm_shape.size()) || broadcast_shapes({t.shape(), norm_shape}) != norm_shape) {
    fail("input {} ({}): shape {} does not broadcast to the normalized shape {}", index, name, shape_str(t.shape()),
         shape_str(norm_shape));
  }
  std::vector<int64_t> strides = broadcast_strides(t.shape(), norm_shape);
  std::vector<A> out(static_cast<size_t>(inner));
  std::vector<int64_t> idx(norm_shape.size(), 0);
  for (int64_t i = 0; i < inner; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
    out[size_t(i)] = src[size_t(off)];
    for (int64_t d = int64_t(idx.size()) - 1; d >= 0 && ++idx[size_t(d)] == norm_shape[size_t(d)]; --d)
      idx[size_t(d)] = 0;
  }
  return out;
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
  // Mean/InvStdDev have the stash type (float32 by default; float64 keeps float64 precision).
  const DType stat_dtype = ctx.attr_int("stash_type") == 1 && x.dtype() != DType::Float64 ? DType::Float32 : x.dtype();
  Tensor mean_out, inv_out;
  if (ctx.num_outputs() > 1) mean_out = ctx.allocate(1, stat_dtype, stat_shape);
  if (ctx.num_outputs() > 2) inv_out = ctx.allocate(2, stat_dtype, stat_shape);
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    std::vector<A> scale = broadcast_param<A>(ctx.input(1), norm_shape, 1, "Scale");
    std::vector<A> bias =
        ctx.has_input(2) ? broadcast_param<A>(ctx.input(2), norm_shape, 2, "B") : std::vector<A>(size_t(inner), 0);
    std::vector<A> means(static_cast<size_t>(outer)), invs(static_cast<size_t>(outer));
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(outer, plane_grain(inner), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        A mu, var;
        moments<A>(xp + i * inner, inner, mu, var);
        const A inv = A(1) / std::sqrt(var + A(epsilon));
        const T* src = xp + i * inner;
        T* dst = yp + i * inner;
        for (int64_t j = 0; j < inner; ++j) dst[j] = T((A(src[j]) - mu) * inv * scale[size_t(j)] + bias[size_t(j)]);
        means[size_t(i)] = mu;
        invs[size_t(i)] = inv;
      }
    });
    auto store = [&](Tensor& t, const std::vector<A>& v) {
      if (!t.defined()) return;
      std::vector<double> d(v.begin(), v.end());
      copy_tensor(Tensor::from_vector<double>(d, t.shape()).cast(t.dtype()), t);
    };
    store(mean_out, means);
    store(inv_out, invs);
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
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    std::vector<A> scale = sem::to_vector_as<A>(scale_t), bias = sem::to_vector_as<A>(bias_t);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    const int64_t group_size = per_group * plane;
    parallel_for(n * groups, plane_grain(group_size), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        A mu, var;
        moments<A>(xp + i * group_size, group_size, mu, var);
        const A inv = A(1) / std::sqrt(var + A(epsilon));
        for (int64_t c = 0; c < per_group; ++c) {
          const int64_t channel = (i % groups) * per_group + c;
          const size_t p = size_t(scale.size() == size_t(channels) ? channel : i % groups);
          const size_t q = size_t(bias.size() == size_t(channels) ? channel : i % groups);
          const A a = inv * scale[p];
          const int64_t off = i * group_size + c * plane;
          affine<A>(xp + off, yp + off, plane, a, bias[q] - mu * a);
        }
      }
    });
  });
}

void lrn(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const sem::LrnArgs args = sem::lrn_args(ctx);
  const int64_t size = args.size, n = args.n, channels = args.channels, plane = args.plane;
  const int64_t before = args.before, after = args.after;
  const double alpha = args.alpha, beta = args.beta, bias = args.bias;
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  dispatch_float(x.dtype(), [&]<class T>() {
    using A = sem::acc_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(n * channels, plane_grain(plane * size), [&](int64_t b, int64_t e) {
      std::vector<A> sum(static_cast<size_t>(plane));
      for (int64_t i = b; i < e; ++i) {
        const int64_t batch = i / channels, c = i % channels;
        std::fill(sum.begin(), sum.end(), A(0));
        for (int64_t cc = std::max<int64_t>(0, c - before); cc <= std::min(channels - 1, c + after); ++cc) {
          const T* p = xp + (batch * channels + cc) * plane;
          for (int64_t j = 0; j < plane; ++j) sum[size_t(j)] += A(p[j]) * A(p[j]);
        }
        const T* src = xp + i * plane;
        T* dst = yp + i * plane;
        for (int64_t j = 0; j < plane; ++j) {
          dst[j] = T(A(src[j]) / std::pow(A(bias) + A(alpha) / A(size) * sum[size_t(j)], A(beta)));
        }
      }
    });
  });
}

void mean_variance_norm(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  std::vector<bool> reduced(size_t(rank), false);
  for (int64_t a : ctx.attr_ints("axes")) reduced[size_t(normalize_axis(a, rank, "axes"))] = true;
  // Each element belongs to the group given by its kept coordinates.
  std::vector<int64_t> kept_stride(size_t(rank), 0);
  int64_t groups = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (!reduced[size_t(d)]) {
      kept_stride[size_t(d)] = groups;
      groups *= x.dim(d);
    }
  }
  Tensor& y = ctx.allocate(0, x.dtype(), x.shape());
  if (x.numel() == 0) return;
  const int64_t count = x.numel() / groups;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<int64_t> group_of(size_t(x.numel()));
    std::vector<int64_t> idx(size_t(rank), 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t g = 0;
      for (int64_t d = 0; d < rank; ++d) g += idx[size_t(d)] * kept_stride[size_t(d)];
      group_of[size_t(i)] = g;
      for (int64_t d = rank - 1; d >= 0 && ++idx[size_t(d)] == x.dim(d); --d) idx[size_t(d)] = 0;
    }
    std::vector<double> mean(size_t(groups), 0.0), sq(size_t(groups), 0.0);
    for (int64_t i = 0; i < x.numel(); ++i) mean[size_t(group_of[size_t(i)])] += double(xp[i]);
    for (double& m : mean) m /= double(count);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double dlt = double(xp[i]) - mean[size_t(group_of[size_t(i)])];
      sq[size_t(group_of[size_t(i)])] += dlt * dlt;
    }
    // ONNX's function body: (X - mean) / (sqrt(var) + 1e-9).
    for (double& s : sq) s = std::sqrt(s / double(count)) + 1e-9;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t g = size_t(group_of[size_t(i)]);
      yp[i] = T((double(xp[i]) - mean[g]) / sq[g]);
    }
  });
}

}  // namespace

INGOT_CPU_KERNEL(BatchNormalization, batch_norm).versions(6).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(BatchNormGrad, batch_norm_grad).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(InstanceNormalization, instance_norm).versions(6).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(LayerNormalization, layer_norm).versions(17).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(LayerNormalization, layer_norm).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(GroupNormalization, group_norm).versions(18).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(LRN, lrn).versions(1).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(MeanVarianceNormalization, mean_variance_norm).versions(9).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
