// Recurrent layers: LSTM, GRU and RNN (ONNX semantics: gate orders iofc / zrh, optional bias,
// initial state, peepholes and sequence lengths, forward/reverse/bidirectional, layout 0 or 1).
#include "ops/op_def.h"

namespace ingot {

// Attributes every recurrent op shares. hidden_size has no default: it is taken from R when absent.
#define INGOT_RNN_COMMON_ATTRS                            \
  optional_attr("activation_alpha", AttrKind::Floats)     \
      .optional_attr("activation_beta", AttrKind::Floats) \
      .optional_attr("activations", AttrKind::Strings)    \
      .optional_attr("clip", AttrKind::Float)             \
      .attr("direction", "forward")                       \
      .optional_attr("hidden_size", AttrKind::Int)        \
      .attr("layout", 0)                                  \
      .attr("output_sequence", 0)

// Inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P. Outputs: Y, Y_h, Y_c.
INGOT_OP(LSTM)
    .versions(1)
    .inputs(3, 8)
    .outputs(0, 3)
    .INGOT_RNN_COMMON_ATTRS.attr("input_forget", 0)
    .summary("Long short-term memory layer; activations default to Sigmoid, Tanh, Tanh.");

// Inputs: X, W, R, B, sequence_lens, initial_h. Outputs: Y, Y_h.
INGOT_OP(GRU)
    .versions(1)
    .inputs(3, 6)
    .outputs(0, 2)
    .INGOT_RNN_COMMON_ATTRS.attr("linear_before_reset", 0)
    .summary("Gated recurrent unit layer; activations default to Sigmoid, Tanh.");

INGOT_OP(RNN).versions(1).inputs(3, 6).outputs(0, 2).INGOT_RNN_COMMON_ATTRS.summary(
    "Simple recurrent layer H = f(X*W^T + H*R^T + b); activation defaults to Tanh.");

#undef INGOT_RNN_COMMON_ATTRS

}  // namespace ingot
