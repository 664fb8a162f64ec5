// Tracing eager op calls into a graph, for compile() (include/ingot/autograd.h). While a Tracer is
// active on a thread, every ops::call also appends its node: inputs are named by the data they view
// (a tensor handle's storage, offset, dtype and shape), values f did not get as arguments and no
// traced op made become initializers (constants captured by reference).
#pragma once
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "graph/graph.h"
#include "ops/op_def.h"

namespace ingot::autograd::detail {

class Tracer {
 public:
  Tracer();
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  static Tracer* active();  // on this thread, or nullptr

  void add_input(const Tensor& t);
  void record(const OpDef& def, const Attributes& attrs, int opset, const std::vector<Tensor>& inputs,
              const std::vector<Tensor>& outputs);
  // Ends the trace: a model whose outputs are `outputs` (each a traced value, an input or a constant).
  std::shared_ptr<Model> finish(const std::vector<Tensor>& outputs, const std::string& name);

 private:
  using Key = std::tuple<const void*, size_t, DType, Shape>;
  static Key key(const Tensor& t) { return {t.storage().get(), t.byte_offset(), t.dtype(), t.shape()}; }
  std::string name_of(const Tensor& t);  // a traced value, or a new initializer
  static ValueInfo info(const std::string& name, const Tensor& t);

  Tracer* previous_;
  std::shared_ptr<Graph> graph_ = std::make_shared<Graph>();
  std::map<Key, std::string> names_;
  std::vector<Tensor> keep_;  // every traced tensor, alive to the end (no address is reused meanwhile)
  int counter_ = 0;
  int onnx_opset_ = 0;
  std::map<std::string, int> other_opsets_;  // other domains' (extension ops): the newest each ran at
};

}  // namespace ingot::autograd::detail
