// Optimizers of the ai.onnx.preview.training domain. Each node may update several tensors: the
// inputs are R (learning rate), T (step count), then the Xs, the Gs and the per-optimizer states;
// the outputs are the new Xs followed by the new states.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(Adagrad)
    .no_gradient("an optimizer update: its results are the next parameters and state")
    .domain("ai.onnx.preview.training")
    .versions(1)
    .inputs(5, -1)
    .outputs(2, -1)
    .attr("decay_factor", 0.0f)
    .attr("epsilon", 1e-6f)
    .attr("norm_coefficient", 0.0f)
    .summary("Adagrad step on (R, T, X..., G..., H...) -> (X_new..., H_new...).");
INGOT_OP(Adam)
    .no_gradient("an optimizer update: its results are the next parameters and state")
    .domain("ai.onnx.preview.training")
    .versions(1)
    .inputs(6, -1)
    .outputs(3, -1)
    .attr("alpha", 0.9f)
    .attr("beta", 0.999f)
    .attr("epsilon", 1e-6f)
    .attr("norm_coefficient", 0.0f)
    .attr("norm_coefficient_post", 0.0f)
    .summary("Adam step on (R, T, X..., G..., V..., H...) -> (X_new..., V_new..., H_new...).");
INGOT_OP(Momentum)
    .no_gradient("an optimizer update: its results are the next parameters and state")
    .domain("ai.onnx.preview.training")
    .versions(1)
    .inputs(5, -1)
    .outputs(2, -1)
    .required_attr("alpha", AttrKind::Float)
    .required_attr("beta", AttrKind::Float)
    .required_attr("mode", AttrKind::String)
    .required_attr("norm_coefficient", AttrKind::Float)
    .summary("Momentum step (mode standard or nesterov) on (R, T, X..., G..., V...) -> (X_new..., V_new...).");

}  // namespace ingot

namespace ingot {

// No kernel: src/passes/lower_gradient.cpp rewrites it into ordinary nodes before execution.
INGOT_OP(Gradient)
    .no_gradient("a gradient itself (lowered before it runs; differentiate the forward twice instead)")
    .domain("ai.onnx.preview.training")
    .versions(1)
    .inputs(1, -1)
    .outputs(1, -1)
    .required_attr("xs", AttrKind::Strings)
    .required_attr("y", AttrKind::String)
    .optional_attr("zs", AttrKind::Strings)
    .summary("Gradients of y with respect to xs through the nodes of the same graph (lowered at load).");

}  // namespace ingot

namespace ingot {

// Ingot's fused optimizer steps (include/ingot/optim.h), PyTorch's update rules over many tensors in
// one node. Input 0 holds the hyperparameters (float, 1-D: the values schedules change every step,
// and float64 so that they are PyTorch's Python floats exactly), input 1 this step's 1-based count,
// then one group of tensors per parameter; the outputs are each group's new values in the same
// order (not the gradient). With in_place = 1 (eager optimizers) the kernel writes the new values
// into the input tensors themselves and outputs them; graphs use the functional form.
const std::vector<DType> kOptimizerFloats = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
#define INGOT_OPTIMIZER_OP(name)                                                    \
  INGOT_OP(name)                                                                    \
      .domain(kIngotDomain)                                                         \
      .versions(1)                                                                  \
      .input("hyperparameters", "S")                                                \
      .input("step", "S")                                                           \
      .variadic_input("groups", "T")                                                \
      .variadic_output("updated", "T")                                              \
      .type("S", {DType::Float32, DType::Float64})                                  \
      .type("T", kOptimizerFloats)                                                  \
      .attr("in_place", 0)                                                          \
      .no_gradient("an optimizer update: its results are the next parameters and state")

// Hyperparameters [lr, momentum, dampening, weight_decay]; groups (param, grad, momentum_buffer):
// the buffer is omitted (an empty input, and output) when momentum is 0. d = g + weight_decay p (g
// negated when maximizing); with momentum, buf = d at the first step, else momentum buf +
// (1 - dampening) d, and d = d + momentum buf (nesterov) or buf; p -= lr d.
INGOT_OPTIMIZER_OP(SGDStep)
    .attr("nesterov", 0)
    .attr("maximize", 0)
    .summary("SGD (momentum, dampening, nesterov, weight decay) on (hyperparameters, step, (param, grad, buffer)...) -> "
             "(param', buffer')...; PyTorch's torch.optim.SGD.");

// Hyperparameters [lr, beta1, beta2, eps, weight_decay]; groups (param, grad, exp_avg, exp_avg_sq[,
// max_exp_avg_sq with amsgrad]). Adam adds weight_decay p to the gradient; AdamW (decoupled_weight_decay = 1) scales p by 1 - lr weight_decay first. Then
// m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2 (amsgrad: vmax = max(vmax, v), used
// for v), and p -= lr / (1 - beta1^t) m / (sqrt(v / (1 - beta2^t)) + eps).
INGOT_OPTIMIZER_OP(AdamStep)
    .attr("decoupled_weight_decay", 0)
    .attr("amsgrad", 0)
    .attr("maximize", 0)
    .summary("Adam / AdamW (amsgrad, maximize) on (hyperparameters, step, (param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq])...) "
             "-> (param', exp_avg', exp_avg_sq'[, max'])...; PyTorch's torch.optim.Adam and AdamW.");
#undef INGOT_OPTIMIZER_OP

}  // namespace ingot

namespace ingot {

// GradScaler's unscale (include/ingot/amp.h): every gradient multiplied by inv_scale (a host
// scalar) in place, and found_inf [1] set to 1 where any element of any of them is inf or NaN
// (0 otherwise), in one pass; outputs (found_inf, grads'...). PyTorch's
// _amp_foreach_non_finite_check_and_unscale_.
INGOT_OP(UnscaleGrads)
    .domain(kIngotDomain)
    .versions(1)
    .input("inv_scale", "S")
    .variadic_input("grads", "T")
    .output("found_inf", "F")
    .variadic_output("unscaled", "T")
    .type("S", {DType::Float32, DType::Float64})
    .type("F", {DType::Float32})
    .type("T", kOptimizerFloats)
    .no_gradient("the gradient scaler's bookkeeping")
    .summary("grads *= inv_scale in place; found_inf = any non-finite element (float32 [1]).");

}  // namespace ingot
