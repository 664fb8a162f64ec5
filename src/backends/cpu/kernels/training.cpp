// Optimizers of the ai.onnx.preview.training domain on the CPU (formulas as in ONNX's operator
// documentation). One node updates k tensors: inputs R, T, then k Xs, k Gs and k of each state;
// outputs the k new Xs followed by the k new states. Scalars are applied in double.
#include <cmath>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

// Reads R and T and checks the grouping: returns k, the number of tensors updated.
int64_t check_groups(const KernelContext& ctx, int64_t per_tensor_inputs, int64_t states, double& rate, int64_t& step) {
  const int64_t tensor_inputs = int64_t(ctx.num_inputs()) - 2;
  INGOT_CHECK(tensor_inputs > 0 && tensor_inputs % per_tensor_inputs == 0,
              "inputs: expected R, T and {} groups of k tensors (X, G, states), got {} inputs", per_tensor_inputs,
              ctx.num_inputs());
  const int64_t k = tensor_inputs / per_tensor_inputs;
  INGOT_CHECK(int64_t(ctx.num_outputs()) == k * (1 + states), "outputs: expected {} ({} tensors x {}), got {}",
              k * (1 + states), k, 1 + states, ctx.num_outputs());
  const Tensor& r = ctx.input(0);
  const Tensor& t = ctx.input(1);
  INGOT_CHECK(r.numel() == 1 && is_floating(r.dtype()), "input 0 (R): expected a floating-point scalar, got {}",
              r.describe());
  INGOT_CHECK(t.numel() == 1 && t.dtype() == DType::Int64, "input 1 (T): expected an int64 scalar, got {}",
              t.describe());
  rate = r.item_double(0);
  step = t.item_int(0);
  for (int64_t g = 0; g < per_tensor_inputs; ++g) {
    for (int64_t i = 0; i < k; ++i) {
      const Tensor& a = ctx.input(size_t(2 + g * k + i));
      const Tensor& x = ctx.input(size_t(2 + i));
      INGOT_CHECK(a.shape() == x.shape() && a.dtype() == x.dtype(), "input {}: expected {} like X{} (input {}), got {}",
                  2 + g * k + i, x.describe(), i, 2 + i, a.describe());
      INGOT_CHECK(is_floating(a.dtype()), "input {}: expected a floating-point tensor, got {}", 2 + g * k + i,
                  a.describe());
    }
  }
  return k;
}

// Calls body(x, g, states..., outs...) element-wise for tensor i of each group, in double.
template <int States, class Body>
void update(KernelContext& ctx, int64_t k, int64_t i, Body body) {
  const Tensor& x = ctx.input(size_t(2 + i));
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* in[2 + States];
    T* out[1 + States];
    for (int64_t g = 0; g < 2 + States; ++g) in[g] = ctx.input(size_t(2 + g * k + i)).template data<T>();
    for (int64_t o = 0; o < 1 + States; ++o)
      out[o] = ctx.allocate(size_t(o * k + i), x.dtype(), x.shape()).template data<T>();
    parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      double vin[2 + States], vout[1 + States];
      for (int64_t j = b; j < e; ++j) {
        for (int g = 0; g < 2 + States; ++g) vin[g] = double(in[g][j]);
        body(vin, vout);
        for (int o = 0; o < 1 + States; ++o) out[o][j] = from_double<T>(vout[o]);
      }
    });
  });
}

void adagrad(KernelContext& ctx) {
  double rate;
  int64_t step;
  const int64_t k = check_groups(ctx, 3, 1, rate, step);
  const double decay = ctx.attr_float("decay_factor"), eps = ctx.attr_float("epsilon");
  const double lambda = ctx.attr_float("norm_coefficient");
  const double r = rate / (1.0 + double(step) * decay);
  for (int64_t i = 0; i < k; ++i) {
    update<1>(ctx, k, i, [&](const double* in, double* out) {  // in: x, g, h; out: x_new, h_new
      const double g = lambda * in[0] + in[1];
      const double h = in[2] + g * g;
      out[0] = in[0] - r * g / (std::sqrt(h) + eps);
      out[1] = h;
    });
  }
}

void adam(KernelContext& ctx) {
  double rate;
  int64_t step;
  const int64_t k = check_groups(ctx, 4, 2, rate, step);
  const double alpha = ctx.attr_float("alpha"), beta = ctx.attr_float("beta"), eps = ctx.attr_float("epsilon");
  const double lambda = ctx.attr_float("norm_coefficient"), lambda_post = ctx.attr_float("norm_coefficient_post");
  // Bias correction from the second step on (T > 0).
  const double r =
      step > 0 ? rate * std::sqrt(1.0 - std::pow(beta, double(step))) / (1.0 - std::pow(alpha, double(step))) : rate;
  for (int64_t i = 0; i < k; ++i) {
    update<2>(ctx, k, i, [&](const double* in, double* out) {  // in: x, g, v, h; out: x_new, v_new, h_new
      const double g = lambda * in[0] + in[1];
      const double v = alpha * in[2] + (1.0 - alpha) * g;
      const double h = beta * in[3] + (1.0 - beta) * g * g;
      const double x = in[0] - r * v / (std::sqrt(h) + eps);
      out[0] = (1.0 - lambda_post) * x;
      out[1] = v;
      out[2] = h;
    });
  }
}

void momentum(KernelContext& ctx) {
  double rate;
  int64_t step;
  const int64_t k = check_groups(ctx, 3, 1, rate, step);
  const double alpha = ctx.attr_float("alpha"), lambda = ctx.attr_float("norm_coefficient");
  const double beta = step > 0 ? double(ctx.attr_float("beta")) : 1.0;  // the first step takes the whole gradient
  const std::string& mode = ctx.attr_string("mode");
  INGOT_CHECK(mode == "standard" || mode == "nesterov", "attribute mode: expected standard or nesterov, got '{}'",
              mode);
  const bool nesterov = mode == "nesterov";
  for (int64_t i = 0; i < k; ++i) {
    update<1>(ctx, k, i, [&](const double* in, double* out) {  // in: x, g, v; out: x_new, v_new
      const double g = lambda * in[0] + in[1];
      const double v = alpha * in[2] + beta * g;
      out[0] = nesterov ? in[0] - rate * (g + alpha * v) : in[0] - rate * v;
      out[1] = v;
    });
  }
}

}  // namespace

INGOT_CPU_KERNEL(Adagrad, adagrad).domain("ai.onnx.preview.training").versions(1);
INGOT_CPU_KERNEL(Adam, adam).domain("ai.onnx.preview.training").versions(1);
INGOT_CPU_KERNEL(Momentum, momentum).domain("ai.onnx.preview.training").versions(1);

}  // namespace ingot
