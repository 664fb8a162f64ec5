// Batching rules for vmap (include/ingot/autograd.h). vmap traces its function once on one example
// (autograd/vmap.cpp), then replays the traced ops on the whole batch: a node none of whose inputs
// is batched runs as it is; a node with batched inputs runs its op's batching rule, written beside
// the op's definition (OpBuilder::batch in src/ops/defs/) against BatchBuilder: the rule reads which
// inputs carry the batch (always at axis 0) and states each output, batched or not, as calls of
// catalogue ops on the whole batch (MatMul's batch dims, a reduction's axes shifted by one, a
// convolution's batch folded into N). Ops tagged Elementwise share one rule (inputs aligned to the
// example rank, numpy broadcasting does the rest). A rule that cannot batch a case returns false and
// the node runs once per batch element instead (reported once per op), as do ops without a rule.
#pragma once
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <string_view>
#include <vector>

#include "ops/op_def.h"

namespace ingot {

class BatchBuilder {
 public:
  BatchBuilder(const OpDef& def, const Attributes& attrs, int opset, std::vector<Tensor> inputs,
               std::vector<bool> batched, int64_t batch, size_t num_outputs);

  // ---- the node
  const OpDef& def() const { return def_; }
  int opset() const { return opset_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  // Input i: with the batch at axis 0 when batched(i), as the example sees it otherwise.
  const Tensor& x(size_t i) const;
  bool batched(size_t i) const { return i < batched_.size() && batched_[i]; }
  bool any_batched(size_t from) const;  // whether an input from `from` on is batched
  int64_t batch_size() const { return batch_; }
  // Input i's rank as one example sees it (without the batch axis).
  int64_t example_rank(size_t i) const { return x(i).rank() - (batched(i) ? 1 : 0); }
  // An example axis (negative counts from the end) as an axis of input i's batched tensor.
  int64_t batched_axis(size_t i, int64_t axis) const;

  // ---- attributes, with the catalogue's defaults
  const Attribute& attr(std::string_view name, AttrKind kind) const { return def_.attribute(attrs_, name, kind); }
  int64_t attr_int(std::string_view name) const { return attr(name, AttrKind::Int).i; }
  const std::vector<int64_t>& attr_ints(std::string_view name) const { return attr(name, AttrKind::Ints).ints; }
  bool has_attr(std::string_view name) const { return attrs_.count(name) > 0; }
  const Attributes& attrs() const { return attrs_; }
  // The node's attributes with `name` set to `value`.
  Attributes attrs_with(const std::string& name, Attribute value) const;
  // Input i's values (axes, a shape); it must not be batched (callers check).
  std::vector<int64_t> int64_values(size_t i) const { return x(i).to_int64_vector(); }

  // ---- calls, in the node's opset
  std::vector<Tensor> call(std::string_view op, const std::vector<Tensor>& inputs, const Attributes& attrs,
                           int num_outputs = 1) const;
  Tensor call1(std::string_view op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) const {
    return call(op, inputs, attrs, 1).at(0);
  }
  // The node itself on these inputs, with these attributes (the rule's usual last step).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const Attributes& attrs) const;
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const { return run(inputs, attrs_); }
  // Input i with the batch at axis 0 (an unbatched input broadcast along a new axis 0).
  Tensor materialized(size_t i) const;
  // Input i with size-1 axes inserted after the batch axis up to example rank `rank` (a batched
  // input), so that numpy broadcasting lines its example axes up with those of rank-`rank` operands;
  // an unbatched input as it is (broadcasting aligns it from the right already).
  Tensor aligned(size_t i, int64_t rank) const;
  // The same for any tensor t holding the batch at axis 0, whose examples have rank `example_rank`.
  static Tensor line_up(const Tensor& t, int64_t example_rank, int64_t rank);
  // [B, N, ...] -> [B*N, ...] and back: ops that treat axis 0 as a batch of their own (convolutions,
  // pools, norms) take the vmap batch folded into it.
  Tensor fold(const Tensor& t) const;
  Tensor unfold(const Tensor& t) const;
  static Tensor reshape(const Tensor& t, const std::vector<int64_t>& shape);
  static Tensor unsqueeze(const Tensor& t, const std::vector<int64_t>& axes);
  static Tensor squeeze(const Tensor& t, const std::vector<int64_t>& axes);
  static Tensor int64s(const std::vector<int64_t>& values);

  // ---- results
  void output(size_t k, Tensor t, bool batched);
  // Every output batched (the usual case) or none.
  void outputs(std::vector<Tensor> ts, bool batched = true);
  const std::vector<Tensor>& results() const { return outputs_; }
  const std::vector<bool>& results_batched() const { return outputs_batched_; }

 private:
  const OpDef& def_;
  const Attributes& attrs_;
  int opset_;
  std::vector<Tensor> inputs_;
  std::vector<bool> batched_;
  int64_t batch_;
  std::vector<Tensor> outputs_;
  std::vector<bool> outputs_batched_;
};

// Rules shared by families of ops, named by the defs that use them.
namespace batching {
bool elementwise(BatchBuilder& b);  // the default of ops tagged Elementwise
bool first_input_only(BatchBuilder& b);  // same op on the batch when only input 0 is batched (shape-preserving ops)
bool axis_attr(BatchBuilder& b);    // input 0 batched; the `axis` attribute shifted (Softmax, ArgMax, ...)
bool fold_batch(BatchBuilder& b);   // input 0's batch folded into its axis 0 (Conv, pools, norms)
}  // namespace batching

// The rule vmap uses for an op: its own, else the elementwise one for ops tagged Elementwise, else null.
BatchRule batch_rule_of(const OpDef& def);

}  // namespace ingot
