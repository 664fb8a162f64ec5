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
