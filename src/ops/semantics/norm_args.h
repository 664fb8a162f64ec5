// Backend-neutral argument handling of the channel normalizations (BatchNormalization,
// InstanceNormalization, GroupNormalization, LRN): input validation with the kernels' error
// messages, attributes and the [N, C, plane] geometry. Used by the CPU and CUDA kernels.
#pragma once
#include <ingot/tensor.h>

#include <cmath>
#include <tuple>

#include "ops/kernel.h"
#include "ops/semantics/host_device.h"

namespace ingot::sem {

inline void check_channel_param(const Tensor& t, size_t index, const char* name, int64_t channels) {
  if (t.numel() != channels || t.rank() != 1) {
    fail("input {} ({}): expected shape [{}], got {}", index, name, channels, shape_str(t.shape()));
  }
}

struct BatchNormArgs {
  int64_t n = 0, channels = 0, plane = 0;
  bool training = false;
  double epsilon = 0, momentum = 0;
};

// Inputs X, scale, B, input_mean, input_var; training_mode (opset 14+) or extra outputs (before).
inline BatchNormArgs batch_norm_args(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0 (X): expected rank >= 2 ([N,C,...]), got {}", shape_str(x.shape()));
  BatchNormArgs a;
  a.n = x.dim(0), a.channels = x.dim(1);
  a.plane = a.n * a.channels > 0 ? x.numel() / (a.n * a.channels) : 0;
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) check_channel_param(ctx.input(i), i, names[i], a.channels);
  a.training = ctx.opset() >= 14 ? ctx.attr_int("training_mode") != 0 : ctx.num_outputs() > 1;
  if (ctx.opset() < 14 && ctx.num_outputs() > 3) {
    fail("BatchNormalization: the saved_mean/saved_var outputs of opset {} are not supported", ctx.opset());
  }
  a.epsilon = ctx.attr_float("epsilon"), a.momentum = ctx.attr_float("momentum");
  return a;
}

struct InstanceNormArgs {
  int64_t channels = 0, planes = 0, plane = 0;  // planes = N * C
  double epsilon = 0;
};

inline InstanceNormArgs instance_norm_args(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) fail("input 0 (input): expected rank >= 3 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  InstanceNormArgs a;
  a.channels = x.dim(1), a.planes = x.dim(0) * a.channels;
  check_channel_param(ctx.input(1), 1, "scale", a.channels);
  check_channel_param(ctx.input(2), 2, "B", a.channels);
  a.plane = a.planes > 0 ? x.numel() / a.planes : 0;
  a.epsilon = ctx.attr_float("epsilon");
  return a;
}

struct GroupNormArgs {
  int64_t n = 0, channels = 0, groups = 0, per_group = 0, plane = 0;
  double epsilon = 0;
};

// Scale and bias (inputs 1, 2) may hold one value per channel or per group.
inline GroupNormArgs group_norm_args(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) fail("input 0 (X): expected rank >= 2 ([N,C,...]), got {}", shape_str(x.shape()));
  GroupNormArgs a;
  const int64_t n = a.n = x.dim(0), channels = a.channels = x.dim(1), groups = a.groups = ctx.attr_int("num_groups");
  if (groups < 1 || channels % groups != 0) {
    fail("attribute 'num_groups': {} does not divide the {} channels of X", groups, channels);
  }
  const Tensor &scale_t = ctx.input(1), &bias_t = ctx.input(2);
  for (auto [t, i, name] : {std::tuple{&scale_t, 1, "scale"}, std::tuple{&bias_t, 2, "bias"}}) {
    if (t->numel() != channels && t->numel() != groups) {
      fail("input {} ({}): expected {} (per channel) or {} (per group) values, got {}", i, name, channels, groups,
           shape_str(t->shape()));
    }
  }
  a.per_group = channels / groups;
  a.plane = n * channels > 0 ? x.numel() / (n * channels) : 0;
  a.epsilon = ctx.attr_float("epsilon");
  return a;
}

struct LrnArgs {
  int64_t size = 1;
  double alpha = 0, beta = 0, bias = 0;
  int64_t n = 0, channels = 0, plane = 0;
  int64_t before = 0, after = 0;  // channels summed before and after each channel
};

inline LrnArgs lrn_args(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) fail("input 0 (X): expected rank >= 3 ([N,C,spatial...]), got {}", shape_str(x.shape()));
  LrnArgs a;
  a.size = ctx.attr_int("size");
  if (a.size < 1) fail("attribute 'size': expected >= 1, got {}", a.size);
  a.alpha = ctx.attr_float("alpha"), a.beta = ctx.attr_float("beta"), a.bias = ctx.attr_float("bias");
  a.n = x.dim(0), a.channels = x.dim(1);
  a.plane = a.n * a.channels > 0 ? x.numel() / (a.n * a.channels) : 0;
  a.before = (a.size - 1) / 2, a.after = a.size - 1 - a.before;
  return a;
}

// ai.ingot.BatchNormGrad: dY and X [N, C, ...] of one shape and dtype, scale [C].
struct BatchNormGradArgs {
  int64_t n = 0, channels = 0, plane = 0;
  double epsilon = 0;
  int64_t count() const { return n * plane; }  // elements per channel
};

inline BatchNormGradArgs batch_norm_grad_args(const KernelContext& ctx) {
  const Tensor &dy = ctx.input(0), &x = ctx.input(1);
  if (x.rank() < 2) fail("input 1 (X): expected rank >= 2 ([N,C,...]), got {}", shape_str(x.shape()));
  if (dy.shape() != x.shape() || dy.dtype() != x.dtype())
    fail("input 0 (dY): expected {} like X, got {}", x.describe(), dy.describe());
  BatchNormGradArgs a;
  a.n = x.dim(0), a.channels = x.dim(1);
  a.plane = a.n * a.channels > 0 ? x.numel() / (a.n * a.channels) : 0;
  check_channel_param(ctx.input(2), 2, "scale", a.channels);
  a.epsilon = ctx.attr_float("epsilon");
  return a;
}

// One channel's sums, shifted by one of its elements k so that the variance does not cancel:
// s1 = sum(x - k), s2 = sum((x - k)^2), g = sum(dy), gx = sum(dy (x - k)), over `count` elements.
struct BatchNormSums {
  double s1 = 0, s2 = 0, g = 0, gx = 0;
};

// The batch statistics from the sums.
struct BatchNormMoments {
  double mean, var;
};
INGOT_HD BatchNormMoments batch_norm_moments(const BatchNormSums& s, double shift, int64_t count) {
  const double m = count > 0 ? double(count) : 1.0, d = s.s1 / m, var = s.s2 / m - d * d;
  return {shift + d, var > 0 ? var : 0.0};
}

// The backward per channel as dX = a dY + b X + d, with dscale and dbias.
struct BatchNormGradCoeffs {
  double a, b, d, dscale, dbias;
};
INGOT_HD BatchNormGradCoeffs batch_norm_grad_coeffs(const BatchNormSums& s, double shift, int64_t count, double scale,
                                                       double epsilon) {
  const BatchNormMoments mo = batch_norm_moments(s, shift, count);
  const double m = count > 0 ? double(count) : 1.0;
  const double r = 1.0 / sqrt(mo.var + epsilon);
  const double dscale = r * (s.gx - (mo.mean - shift) * s.g);  // sum(dy (x - mean)) r
  const double a = scale * r, b = -scale * r * r * dscale / m;
  return {a, b, -a * s.g / m - b * mo.mean, dscale, s.g};
}

}  // namespace ingot::sem
