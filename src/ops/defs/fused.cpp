// Ingot's own fused operators (domain "ai.ingot"), created by graph passes (src/passes/), never by
// importers of ordinary ONNX files.
#include "ops/op_def.h"

namespace ingot {

// Written by fuse_conv_add_relu: Y = activation(Conv(X, W, B) + R). B and R are optional ("").
INGOT_OP(FusedConv)
    .domain("ai.ingot")
    .versions(1)
    .inputs(2, 4)
    .attr("activation", "")
    .conv_attrs()
    .summary("Conv plus an optional residual R (same shape as the output) and activation ('Relu' or '').");

// Written by fuse_matmul_bias_act: Y = activation(MatMul(A, transB ? B^T : B) + bias), MatMul's numpy
// semantics (batch broadcasting, 1-D A); transB swaps B's last two axes; bias has N elements ([N] or
// [1, N]) and is optional ("").
INGOT_OP(FusedMatMul)
    .domain("ai.ingot")
    .versions(1)
    .inputs(2, 3)
    .attr("activation", "")
    .attr("transB", 0)
    .summary("MatMul (B transposed when transB) plus an optional bias of N elements and activation ('Relu' or '').");

}  // namespace ingot
