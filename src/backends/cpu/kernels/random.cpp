// Random generators on the CPU. Each node keeps its own std::mt19937 across runs (in the node
// state): seeded with the `seed` attribute when present, so a fresh session reproduces the same
// sequence, otherwise from std::random_device.
#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

struct RngState {
  bool seeded = false;
  std::mt19937 engine;
};

std::mt19937& engine(const KernelContext& ctx) {
  RngState& s = ctx.state<RngState>();
  if (!s.seeded) {
    if (ctx.has_attr("seed")) {
      // The seed is a float attribute; its integer part seeds the engine.
      s.engine.seed(static_cast<uint32_t>(static_cast<int64_t>(ctx.attr_float("seed"))));
    } else {
      s.engine.seed(std::random_device{}());
    }
    s.seeded = true;
  }
  return s.engine;
}

// The output dtype: the `dtype` attribute, else `fallback` (the input's dtype for the *Like ops).
DType float_dtype_attr(const KernelContext& ctx, DType fallback) {
  if (!ctx.has_attr("dtype")) {
    INGOT_CHECK(is_floating(fallback),
                "input 0 (input): holds {}; without a `dtype` attribute the output needs a "
                "floating-point input dtype",
                dtype_name(fallback));
    return fallback;
  }
  const DType dt = DType(uint8_t(ctx.attr_int("dtype")));
  INGOT_CHECK(is_floating(dt), "attribute dtype: expected a floating-point type code, got {}", ctx.attr_int("dtype"));
  return dt;
}

// Fills y with draws of `dist` (a std:: distribution over double).
template <class Dist>
void fill(Tensor& y, std::mt19937& gen, Dist dist) {
  dispatch_float(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) out[i] = from_double<T>(dist(gen));
  });
}

Shape shape_attr(const KernelContext& ctx) {
  Shape shape = ctx.attr_ints("shape");
  for (int64_t d : shape) INGOT_CHECK(d >= 0, "attribute shape: negative dimension in {}", shape_str(shape));
  return shape;
}

std::uniform_real_distribution<double> uniform(const KernelContext& ctx) {
  const double low = ctx.attr_float("low"), high = ctx.attr_float("high");
  INGOT_CHECK(low <= high, "attributes low/high: expected low <= high, got {}, {}", low, high);
  return std::uniform_real_distribution<double>(low, high);
}

std::normal_distribution<double> normal(const KernelContext& ctx) {
  const double scale = ctx.attr_float("scale");
  INGOT_CHECK(scale >= 0, "attribute scale: expected >= 0, got {}", scale);
  return std::normal_distribution<double>(ctx.attr_float("mean"), scale);
}

void random_uniform(KernelContext& ctx) {
  Tensor& y = ctx.allocate(0, float_dtype_attr(ctx, DType::Float32), shape_attr(ctx));
  fill(y, engine(ctx), uniform(ctx));
}
void random_normal(KernelContext& ctx) {
  Tensor& y = ctx.allocate(0, float_dtype_attr(ctx, DType::Float32), shape_attr(ctx));
  fill(y, engine(ctx), normal(ctx));
}
void random_uniform_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, float_dtype_attr(ctx, x.dtype()), x.shape());
  fill(y, engine(ctx), uniform(ctx));
}
void random_normal_like(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.allocate(0, float_dtype_attr(ctx, x.dtype()), x.shape());
  fill(y, engine(ctx), normal(ctx));
}

void bernoulli(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType out_dt = ctx.has_attr("dtype") ? DType(uint8_t(ctx.attr_int("dtype"))) : x.dtype();
  INGOT_CHECK(is_floating(out_dt) || is_integral(out_dt) || out_dt == DType::Bool,
              "attribute dtype: expected a numeric or bool type code, got {}", ctx.attr_int("dtype"));
  Tensor& y = ctx.allocate(0, out_dt, x.shape());
  std::mt19937& gen = engine(ctx);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<uint8_t> draws(static_cast<size_t>(x.numel()));
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double pi = double(p[i]);
      INGOT_CHECK(pi >= 0 && pi <= 1, "input 0 (input): probability {} at index {} is outside [0, 1]", pi, i);
      draws[size_t(i)] = u(gen) < pi ? 1 : 0;
    }
  });
  dispatch_numeric_bool(out_dt, [&]<class T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = from_double<T>(draws[size_t(i)]);
  });
}

void multinomial(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  INGOT_CHECK(x.rank() == 2, "input 0 (input): expected [batch, classes], got {}", shape_str(x.shape()));
  const int64_t batch = x.dim(0), classes = x.dim(1);
  const int64_t samples = ctx.attr_int("sample_size");
  INGOT_CHECK(samples >= 0, "attribute sample_size: expected >= 0, got {}", samples);
  INGOT_CHECK(classes >= 1 || batch == 0 || samples == 0, "input 0 (input): no classes to sample from");
  const DType out_dt = DType(uint8_t(ctx.attr_int("dtype")));
  INGOT_CHECK(out_dt == DType::Int32 || out_dt == DType::Int64,
              "attribute dtype: expected int32 (6) or int64 (7), got {}", ctx.attr_int("dtype"));
  Tensor& y = ctx.allocate(0, out_dt, {batch, samples});
  std::mt19937& gen = engine(ctx);
  std::vector<double> cumulative(static_cast<size_t>(classes));
  std::vector<int64_t> picks(static_cast<size_t>(batch * samples));
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* logits = x.data<T>();
    for (int64_t b = 0; b < batch; ++b) {
      const T* row = logits + b * classes;
      double top = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) top = std::max(top, double(row[c]));
      double total = 0;
      for (int64_t c = 0; c < classes; ++c) {
        // Unnormalized log-probabilities: shift by the maximum so exp cannot overflow.
        total += std::isfinite(top) ? std::exp(double(row[c]) - top) : 0.0;
        cumulative[size_t(c)] = total;
      }
      INGOT_CHECK(total > 0 && std::isfinite(total), "input 0 (input): row {} has no finite log-probability", b);
      std::uniform_real_distribution<double> u(0.0, total);
      for (int64_t s = 0; s < samples; ++s) {
        const double r = u(gen);
        const int64_t c = std::upper_bound(cumulative.begin(), cumulative.end(), r) - cumulative.begin();
        picks[size_t(b * samples + s)] = std::min(c, classes - 1);
      }
    }
  });
  dispatch<DType::Int32, DType::Int64>(out_dt, [&]<class T>() {
    T* out = y.data<T>();
    for (size_t i = 0; i < picks.size(); ++i) out[i] = T(picks[i]);
  });
}

}  // namespace

INGOT_CPU_KERNEL(RandomUniform, random_uniform).versions(1);
INGOT_CPU_KERNEL(RandomNormal, random_normal).versions(1);
INGOT_CPU_KERNEL(RandomUniformLike, random_uniform_like).versions(1);
INGOT_CPU_KERNEL(RandomNormalLike, random_normal_like).versions(1);
INGOT_CPU_KERNEL(Bernoulli, bernoulli).versions(15).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(Multinomial, multinomial).versions(7).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
