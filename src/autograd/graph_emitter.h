// Gradient rules that append nodes to a graph (ops/gradient.h's GradEmitter), for the lowering of
// ONNX's ai.onnx.preview.training.Gradient (passes/lower_gradient.cpp).
//
// Rules ask for the shapes of what they build (a broadcast to sum away, a rank for a permutation),
// so every value carries a shadow: a tensor of its static dtype and shape (zeros for data whose
// value is not known; the value itself for initializers, constants and anything computed from
// them and from shapes), and each emitted op also runs eagerly on the shadows. The shadows cost one
// evaluation of the backward ops at lowering time; values with symbolic dims are refused, naming
// the value.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/gradient.h"

namespace ingot {

class GraphEmitter final : public GradEmitter {
 public:
  // New nodes go to `out`, named `prefix` + a counter; ONNX ops are written in `onnx_opset`'s form.
  GraphEmitter(const Model& model, const Graph& graph, std::string prefix, std::vector<Node>& out);

  // A value of the graph (an input, an initializer, a node output with a static type).
  GradValue value_of(const std::string& name);

  std::vector<GradValue> emit(const OpDef& def, const std::vector<GradValue>& inputs, const Attributes& attrs,
                              int num_outputs) override;
  GradValue constant(const Tensor& t) override;
  DType dtype(const GradValue& v) const override { return v.tensor.dtype(); }
  std::optional<Shape> shape(const GradValue& v) const override { return v.tensor.shape(); }
  int64_t rank(const GradValue& v) const override { return v.tensor.rank(); }
  std::optional<Tensor> value(const GradValue& v) const override;
  int onnx_opset() const override { return onnx_opset_; }

  // A node of the output list (Identity, Sum) written directly.
  std::string add_node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                       Attributes attrs = {});
  std::string fresh();

 private:
  const Graph& graph_;
  std::string prefix_;
  std::vector<Node>& out_;
  int onnx_opset_;
  int counter_ = 0;
  std::map<std::string, Tensor> known_;  // values known before running: initializers, constants
};

}  // namespace ingot
