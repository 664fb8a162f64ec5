// Node attributes, as in ONNX: scalars, lists, tensors and subgraphs.
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ingot {
class Graph;  // internal (graph/graph.h): declared outside the exported region, so it stays hidden
}  // namespace ingot

INGOT_API_BEGIN
namespace ingot {

enum class AttrKind : uint8_t { Int, Float, String, Tensor, Graph, Ints, Floats, Strings, Tensors, Graphs };
std::string_view attr_kind_name(AttrKind kind);

struct Attribute {
  AttrKind kind = AttrKind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;

  Attribute() = default;
  Attribute(int64_t v) : kind(AttrKind::Int), i(v) {}                    // NOLINT: implicit for brevity at call sites
  Attribute(int v) : kind(AttrKind::Int), i(v) {}                        // NOLINT
  Attribute(float v) : kind(AttrKind::Float), f(v) {}                    // NOLINT
  Attribute(const char* v) : kind(AttrKind::String), s(v) {}             // NOLINT
  Attribute(std::string v) : kind(AttrKind::String), s(std::move(v)) {}  // NOLINT
  Attribute(Tensor v) : kind(AttrKind::Tensor), t(std::move(v)) {}       // NOLINT
  Attribute(std::vector<int64_t> v) : kind(AttrKind::Ints), ints(std::move(v)) {}            // NOLINT
  Attribute(std::vector<float> v) : kind(AttrKind::Floats), floats(std::move(v)) {}          // NOLINT
  Attribute(std::vector<std::string> v) : kind(AttrKind::Strings), strings(std::move(v)) {}  // NOLINT
  static Attribute graph(std::shared_ptr<Graph> graph) {
    Attribute a;
    a.kind = AttrKind::Graph;
    a.g = std::move(graph);
    return a;
  }
  std::string str() const;  // short human-readable form for the printer
};

using Attributes = std::map<std::string, Attribute, std::less<>>;

}  // namespace ingot
INGOT_API_END
