// Control flow: If, Loop and Scan. Their bodies are subgraph attributes that the executor runs
// (KernelContext::run_subgraph); a body reads values of enclosing graphs by name.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(If)
    .versions(1)
    .inputs(1)
    .outputs(1, -1)
    .required_attr("then_branch", AttrKind::Graph)
    .required_attr("else_branch", AttrKind::Graph)
    .summary(
        "Runs `then_branch` when the single-element bool `cond` is true, else `else_branch`; the outputs "
        "(tensors, sequences or optionals) are the branch's outputs.");

// Inputs: M (max trip count, optional), cond (optional), then the initial loop-carried values.
INGOT_OP(Loop)
    .versions(1)
    .inputs(2, -1)
    .outputs(1, -1)
    .required_attr("body", AttrKind::Graph)
    .summary(
        "Runs `body(iteration, cond, carried...) -> (cond, carried..., scan...)` while the iteration is "
        "below M and cond holds (both optional); outputs the final carried values, then each scan output "
        "stacked along a new axis 0.");

// Opset 8 has a leading optional sequence_lens input, batch axis 0 everywhere and `directions`;
// opset 9 dropped the batch axis and added per-input/output axes and directions.
INGOT_OP(Scan)
    .versions(8)
    .inputs(1, -1)
    .outputs(1, -1)
    .required_attr("body", AttrKind::Graph)
    .required_attr("num_scan_inputs", AttrKind::Int)
    .optional_attr("directions", AttrKind::Ints)
    .optional_attr("scan_input_axes", AttrKind::Ints)
    .optional_attr("scan_input_directions", AttrKind::Ints)
    .optional_attr("scan_output_axes", AttrKind::Ints)
    .optional_attr("scan_output_directions", AttrKind::Ints)
    .summary(
        "Runs `body(state..., slices...) -> (state..., scan slices...)` once per position of the scan "
        "inputs along their scan axes; outputs the final states and the stacked scan outputs.");

}  // namespace ingot
