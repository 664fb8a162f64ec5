// The graph IR: SSA values named as in ONNX, nodes with op name and attributes, nested subgraphs
// (If/Loop/Scan bodies) that may read values of enclosing graphs, and initializers held by reference.
#pragma once
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ingot {

// A dimension: a known size, a named symbol ("batch"), or unknown (value < 0, empty symbol).
struct Dim {
  int64_t value = -1;
  std::string symbol;
  bool is_static() const { return value >= 0; }
  std::string str() const;
  bool operator==(const Dim&) const = default;
};

enum class ValueKind : uint8_t { Tensor, Sequence, Optional };

struct ValueType {
  ValueKind kind = ValueKind::Tensor;
  DType dtype = DType::Undefined;         // element dtype (of the tensor, or of sequence/optional elements)
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
  std::string str() const;                // "float32[N,3,224,224]", "seq(int64)"
};

struct ValueInfo {
  std::string name;
  ValueType type;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" is the default ONNX domain
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  Attributes attrs;

  std::string label() const;  // "node 'conv1' (Conv)"
};

class Graph {
 public:
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;  // graph inputs (excluding initializers)
  std::vector<ValueInfo> outputs;
  std::map<std::string, ValueInfo> value_info;  // known types of intermediate values
  std::map<std::string, Tensor> initializers;

  const ValueInfo* find_value_info(const std::string& value) const;
  int64_t parameter_count() const;  // elements in initializers, subgraphs included
  // Calls fn(graph, depth) for this graph and every nested subgraph.
  void for_each_graph(const std::function<void(const Graph&, int)>& fn, int depth = 0) const;
};

struct Model {
  std::string name;  // file name or given name; used in error messages
  std::shared_ptr<Graph> graph;
  std::map<std::string, int64_t> opsets;  // domain -> version ("" and "ai.onnx" are the same)
  int64_t ir_version = 0;
  std::string producer;

  int64_t opset(const std::string& domain) const;  // 0 when not imported
};

// Checks structure: every input is defined before use (in this graph or an enclosing one), each
// value is defined once, outputs exist, node ops are known to the catalogue with legal
// input/output counts and attributes. Throws ingot::Error naming the model, graph and node.
void verify(const Model& model);

// Fixes dims of graph inputs (`ingot convert --input-shape`): {"x", {1, 3, 224, 224}}; a symbol
// fixed on an input is fixed wherever the graph uses it. Errors name the option and the input.
void fix_input_shapes(Model& model, const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes);

// A readable text form, one node per line, subgraphs indented.
std::string print_graph(const Graph& graph);

}  // namespace ingot
