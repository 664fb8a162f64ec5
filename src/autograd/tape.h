// The eager tape (include/ingot/autograd.h is the API): what an op call records when an input
// requires a gradient, and the backward walk over it.
#pragma once
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ops/op_def.h"

namespace ingot {

struct GradNode;

// A tensor handle's autograd state (Tensor::autograd_meta): a leaf that requires a gradient, or the
// output `output_index` of the node that made it.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                        // a leaf's accumulated gradient
  std::shared_ptr<GradNode> grad_fn;  // null for leaves
  int output_index = 0;
  // A leaf's post-accumulate-grad hooks (autograd::register_post_accumulate_grad_hook), by id.
  std::vector<std::pair<uint64_t, std::function<void(Tensor&)>>> hooks;
};

// One recorded op call. Inputs are kept as given (their metas are the tape's edges, toward the
// nodes that made them); outputs are kept detached (an output's meta points back here: keeping it
// would be a cycle). A backward without retain_graph releases both.
struct GradNode {
  const OpDef* def = nullptr;
  Attributes attrs;
  int opset = 0;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  size_t num_outputs = 0;  // (outputs is emptied on release)
  uint64_t sequence = 0;  // creation order: a node runs after every node created after it
  bool released = false;
};

namespace autograd::detail {

// Whether an op call on these inputs records (gradients are on and an input requires one).
bool should_record(const std::vector<Tensor>& inputs);
// Records the call; its float outputs (given back with metas) require gradients.
void record(const OpDef& def, const Attributes& attrs, int opset, const std::vector<Tensor>& inputs,
            std::vector<Tensor>& outputs);

// The backward walk from `roots` with their cotangents. With `targets` empty, gradients reaching
// leaves are added into their grad(); otherwise the gradient of each target is returned (undefined
// where none reached it) and leaves are left alone.
std::vector<Tensor> backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& cotangents,
                             const std::vector<Tensor>& targets, bool retain_graph, bool create_graph);

}  // namespace autograd::detail
}  // namespace ingot
