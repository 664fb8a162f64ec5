// Ingot's fused optimizer steps on the CPU (ai.ingot.SGDStep, AdamStep; semantics in
// ops/defs/training.cpp): every parameter's update in one node, each a plain loop over its elements
// that the compiler vectorizes (no temporaries), split across the pool for large tensors. float32,
// float16 and bfloat16 parameters compute in float (as PyTorch's fp32 optimizers), float64 in double.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/nn_util.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/optimizer_args.h"

namespace ingot {
namespace {

// The tensors of parameter i: inputs (param, grad, states...) and where their new values go (the
// inputs themselves in place, else fresh outputs), typed T. States the node omitted stay null.
template <class T, size_t N>
struct Group {
  const T* in[N] = {};
  T* out[N] = {};  // out[1] (the gradient) unused
  int64_t n = 0;
};
template <class T, size_t N>
Group<T, N> group_of(KernelContext& ctx, const sem::OptimizerArgs& a, size_t i) {
  Group<T, N> g;
  const Tensor& p = ctx.input(a.input(i, 0));
  g.n = p.numel();
  for (size_t j = 0; j < N; ++j) {
    if (!ctx.has_input(a.input(i, j))) continue;
    const Tensor& t = ctx.input(a.input(i, j));
    g.in[j] = t.data<T>();
    if (j == 1) continue;
    if (a.in_place) {
      ctx.set_output(a.output(i, j), t);
      g.out[j] = t.data<T>();
    } else {
      g.out[j] = ctx.allocate(a.output(i, j), t.dtype(), t.shape()).template data<T>();
    }
  }
  return g;
}

template <class F>
void over_elements(int64_t n, F f) {
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) { f(b, e); });
}

void sgd_step(KernelContext& ctx) {
  const sem::OptimizerArgs a = sem::optimizer_args(ctx, 4, 3, 2);
  const double lr = a.hyper[0], momentum = a.hyper[1], dampening = a.hyper[2], decay = a.hyper[3];
  const bool nesterov = ctx.attr_int("nesterov") != 0, maximize = ctx.attr_int("maximize") != 0;
  INGOT_CHECK(!nesterov || (momentum > 0 && dampening == 0), "nesterov needs momentum > 0 and dampening 0");
  for (size_t i = 0; i < a.count; ++i) {
    INGOT_CHECK(momentum == 0 || ctx.has_input(a.input(i, 2)), "input {}: momentum {} needs parameter {}'s buffer",
                a.input(i, 2), momentum, i);
    dispatch_float(ctx.input(a.input(i, 0)).dtype(), [&]<class T>() {
      using A = sem::acc_t<T>;
      const Group<T, 3> g = group_of<T, 3>(ctx, a, i);
      const A rate = A(lr), wd = A(decay), mu = A(momentum), keep = A(1 - dampening), sign = maximize ? A(-1) : A(1);
      const bool first = a.step == 1;
      over_elements(g.n, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const A p = A(g.in[0][k]);
          A d = sign * A(g.in[1][k]) + wd * p;
          if (mu != A(0)) {
            const A buf = first ? d : mu * A(g.in[2][k]) + keep * d;
            g.out[2][k] = T(buf);
            d = nesterov ? d + mu * buf : buf;
          }
          g.out[0][k] = T(p - rate * d);
        }
      });
    });
  }
}

void adam_step(KernelContext& ctx) {
  const bool amsgrad = ctx.attr_int("amsgrad") != 0;
  const sem::OptimizerArgs a = sem::optimizer_args(ctx, 5, amsgrad ? 5 : 4);
  const double lr = a.hyper[0], beta1 = a.hyper[1], beta2 = a.hyper[2], eps = a.hyper[3], decay = a.hyper[4];
  const bool decoupled = ctx.attr_int("decoupled_weight_decay") != 0, maximize = ctx.attr_int("maximize") != 0;
  const double correction1 = 1 - std::pow(beta1, a.step), correction2 = 1 - std::pow(beta2, a.step);
  for (size_t i = 0; i < a.count; ++i) {
    dispatch_float(ctx.input(a.input(i, 0)).dtype(), [&]<class T>() {
      using A = sem::acc_t<T>;
      const Group<T, 5> g = amsgrad ? group_of<T, 5>(ctx, a, i) : [&] {
        Group<T, 4> four = group_of<T, 4>(ctx, a, i);
        Group<T, 5> five;
        std::copy(four.in, four.in + 4, five.in);
        std::copy(four.out, four.out + 4, five.out);
        five.n = four.n;
        return five;
      }();
      // PyTorch's arithmetic: step_size = lr / bc1, denom = sqrt(v) / sqrt(bc2) + eps.
      const A b1 = A(beta1), b2 = A(beta2), e = A(eps), step_size = A(lr / correction1);
      const A root2 = A(std::sqrt(correction2)), shrink = A(1 - lr * decay), wd = A(decay);
      const A sign = maximize ? A(-1) : A(1);
      over_elements(g.n, [&](int64_t b, int64_t end) {
        for (int64_t k = b; k < end; ++k) {
          A p = A(g.in[0][k]);
          A grad = sign * A(g.in[1][k]);
          if (decoupled) {
            p *= shrink;
          } else {
            grad += wd * p;
          }
          const A m = b1 * A(g.in[2][k]) + (1 - b1) * grad;
          const A v = b2 * A(g.in[3][k]) + (1 - b2) * grad * grad;
          A v_used = v;
          if (amsgrad) {
            v_used = std::max(A(g.in[4][k]), v);
            g.out[4][k] = T(v_used);
          }
          g.out[2][k] = T(m);
          g.out[3][k] = T(v);
          g.out[0][k] = T(p - step_size * m / (std::sqrt(v_used) / root2 + e));
        }
      });
    });
  }
}

void unscale_grads(KernelContext& ctx) {
  const double inv_scale = sem::unscale_args(ctx);
  bool found = false;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor& g = ctx.input(i);
    dispatch_float(g.dtype(), [&]<class T>() {
      using A = sem::acc_t<T>;
      T* p = g.data<T>();
      const A s = A(inv_scale);
      bool bad = false;
      for (int64_t k = 0; k < g.numel(); ++k) {
        const A v = A(p[k]);
        bad |= !std::isfinite(v);
        p[k] = T(v * s);
      }
      found |= bad;
    });
    ctx.set_output(i, g);
  }
  Tensor& flag = ctx.allocate(0, DType::Float32, {1});
  flag.data<float>()[0] = found ? 1.0f : 0.0f;
}

}  // namespace

INGOT_CPU_KERNEL(UnscaleGrads, unscale_grads).domain(kIngotDomain).versions(1).host_inputs({0}).dtypes({DType::Float32, DType::Float64});
INGOT_CPU_KERNEL(SGDStep, sgd_step).domain(kIngotDomain).versions(1).host_inputs({0, 1}).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(AdamStep, adam_step).domain(kIngotDomain).versions(1).host_inputs({0, 1}).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
