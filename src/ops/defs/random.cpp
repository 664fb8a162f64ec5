// Random generators. With a `seed` attribute the sequence is reproducible (std::mt19937 seeded with
// it); without one it is seeded from std::random_device, as ONNX leaves it nondeterministic.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(RandomUniform)
    .no_gradient("random draws (no float inputs)")
    .versions(1)
    .inputs(0)
    .attr("dtype", 1)
    .dtype_attr("dtype")
    .attr("high", 1.0f)
    .attr("low", 0.0f)
    .optional_attr("seed", AttrKind::Float)
    .required_attr("shape", AttrKind::Ints)
    .summary("Samples U[low, high) into a tensor of the given shape and dtype.");
INGOT_OP(RandomNormal)
    .no_gradient("random draws (no float inputs)")
    .versions(1)
    .inputs(0)
    .attr("dtype", 1)
    .dtype_attr("dtype")
    .attr("mean", 0.0f)
    .attr("scale", 1.0f)
    .optional_attr("seed", AttrKind::Float)
    .required_attr("shape", AttrKind::Ints)
    .summary("Samples N(mean, scale^2) into a tensor of the given shape and dtype.");
INGOT_OP(RandomUniformLike)
    .no_gradient("random draws: the input gives only a shape and dtype")
    .versions(1)
    .inputs(1)
    .optional_attr("dtype", AttrKind::Int)
    .dtype_attr("dtype")
    .attr("high", 1.0f)
    .attr("low", 0.0f)
    .optional_attr("seed", AttrKind::Float)
    .summary("Samples U[low, high) with the input's shape (and dtype unless `dtype` is set).");
INGOT_OP(RandomNormalLike)
    .no_gradient("random draws: the input gives only a shape and dtype")
    .versions(1)
    .inputs(1)
    .optional_attr("dtype", AttrKind::Int)
    .dtype_attr("dtype")
    .attr("mean", 0.0f)
    .attr("scale", 1.0f)
    .optional_attr("seed", AttrKind::Float)
    .summary("Samples N(mean, scale^2) with the input's shape (and dtype unless `dtype` is set).");
INGOT_OP(Bernoulli)
    .no_gradient("random draws (PyTorch's bernoulli has no gradient either)")
    .versions(15)
    .inputs(1)
    .optional_attr("dtype", AttrKind::Int)
    .dtype_attr("dtype")
    .optional_attr("seed", AttrKind::Float)
    .summary("Draws 0/1 with probability given by each input element.");
INGOT_OP(Multinomial)
    .versions(7)
    .inputs(1)
    .attr("dtype", 6)
    .dtype_attr("dtype")
    .attr("sample_size", 1)
    .optional_attr("seed", AttrKind::Float)
    .summary("Draws sample_size class indices per row of [batch, classes] unnormalized log-probabilities.");

}  // namespace ingot
