// The op catalogue: every operator is defined once here (name, domain, opset range, input/output
// arity, attributes with defaults). The importer, the verifier, eager calls and kernels all read
// these definitions; kernels take attribute defaults from them, never from literals of their own.
#pragma once
#include <ingot/attribute.h>

#include <climits>
#include <functional>
#include <map>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace ingot {

// Facts about an op that passes, autocast and (later) autograd read, declared with the op instead of
// in lists of their own. Bit flags: an op may carry several.
enum class OpTag : uint32_t {
  None = 0,
  // Each output element depends only on the same element of each input under numpy broadcasting, so
  // the op commutes with any permutation of the axes applied to every operand (channels-last moves
  // such ops into NHWC with their constant operands permuted).
  Elementwise = 1u << 0,
  // Autocast runs it in float16/bfloat16 (PyTorch's lower_precision_fp list: convolutions, matrix
  // products, attention).
  AutocastLowPrecision = 1u << 1,
  // Runs in the precision of its float data input: precision-neutral arithmetic, activations,
  // comparisons, data movement and pooling, whose CPU and CUDA kernels take float16 and bfloat16.
  // Ops with neither autocast tag are kept in float32 (PyTorch's fp32 list, and anything unlisted).
  AutocastFollow = 1u << 2,
  // Computes in float32 inside whatever its input dtype (nn::acc_t) and has a bounded output, so it may
  // follow a 16-bit input although autocast lists it as float32 (Softmax, LayerNormalization, Erf).
  Float32Inside = 1u << 3,
};
constexpr OpTag operator|(OpTag a, OpTag b) { return OpTag(uint32_t(a) | uint32_t(b)); }

struct AttrDef {
  std::string name;
  AttrKind kind;
  std::optional<Attribute> default_value;  // nullopt: required (or optional without default)
  bool required = false;
};

struct OpDef {
  std::string name;
  std::string domain;                    // "" = ai.onnx
  int since_version = 1;                 // oldest opset version implemented
  int until_version = INT_MAX;           // newest opset version implemented (inclusive)
  int min_inputs = 0, max_inputs = 0;    // max -1: variadic
  int min_outputs = 1, max_outputs = 1;  // max -1: variadic
  std::vector<AttrDef> attrs;
  OpTag tags = OpTag::None;
  std::string summary;

  const AttrDef* find_attr(std::string_view attr) const;
  bool has(OpTag tag) const { return (uint32_t(tags) & uint32_t(tag)) == uint32_t(tag); }
};

class OpCatalogue {
 public:
  static OpCatalogue& instance();
  void add(OpDef def);
  const OpDef* find(std::string_view domain, std::string_view name) const;
  // Whether the op (domain "" or "ai.onnx" for ONNX's) is in the catalogue and carries the tag.
  bool has_tag(std::string_view domain, std::string_view name, OpTag tag) const {
    const OpDef* d = find(domain, name);
    return d && d->has(tag);
  }
  std::vector<const OpDef*> all() const;

 private:
  // Entries never move (a map's nodes stay put), and it is locked: ops may be added while sessions
  // that point to definitions exist.
  mutable std::shared_mutex mutex_;
  std::map<std::string, OpDef, std::less<>> defs_;  // key: domain + "::" + name
};

// Fluent builder, registered at static-initialization time:
//   INGOT_OP(Conv).inputs(2, 3).attr("group", 1).attr("auto_pad", "NOTSET").attr("pads", Ints{});
class OpBuilder {
 public:
  explicit OpBuilder(std::string name) { def_.name = std::move(name); }
  OpBuilder& domain(std::string d) {
    def_.domain = std::move(d);
    return *this;
  }
  OpBuilder& versions(int since, int until = INT_MAX) {
    def_.since_version = since;
    def_.until_version = until;
    return *this;
  }
  OpBuilder& inputs(int min, int max) {
    def_.min_inputs = min;
    def_.max_inputs = max;
    return *this;
  }
  OpBuilder& inputs(int n) { return inputs(n, n); }
  OpBuilder& outputs(int min, int max) {
    def_.min_outputs = min;
    def_.max_outputs = max;
    return *this;
  }
  OpBuilder& outputs(int n) { return outputs(n, n); }
  OpBuilder& attr(std::string name, Attribute default_value) {
    AttrKind k = default_value.kind;
    def_.attrs.push_back({std::move(name), k, std::move(default_value), false});
    return *this;
  }
  OpBuilder& required_attr(std::string name, AttrKind kind) {
    def_.attrs.push_back({std::move(name), kind, std::nullopt, true});
    return *this;
  }
  OpBuilder& optional_attr(std::string name, AttrKind kind) {
    def_.attrs.push_back({std::move(name), kind, std::nullopt, false});
    return *this;
  }
  // The attributes every convolution-shaped op shares (Conv, ConvTranspose, ConvInteger, QLinearConv,
  // FusedConv), with ONNX's defaults.
  OpBuilder& conv_attrs() {
    return attr("auto_pad", "NOTSET")
        .optional_attr("dilations", AttrKind::Ints)
        .attr("group", 1)
        .optional_attr("kernel_shape", AttrKind::Ints)
        .optional_attr("pads", AttrKind::Ints)
        .optional_attr("strides", AttrKind::Ints);
  }
  OpBuilder& tag(OpTag t) {
    def_.tags = def_.tags | t;
    return *this;
  }
  OpBuilder& summary(std::string s) {
    def_.summary = std::move(s);
    return *this;
  }
  OpDef& def() { return def_; }

 private:
  OpDef def_;
};

struct OpRegistrar {
  OpRegistrar(OpBuilder& b) { OpCatalogue::instance().add(std::move(b.def())); }  // NOLINT
};

using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;
using Strings = std::vector<std::string>;

}  // namespace ingot

#define INGOT_CONCAT_INNER(a, b) a##b
#define INGOT_CONCAT(a, b) INGOT_CONCAT_INNER(a, b)
#define INGOT_OP(name) static ::ingot::OpRegistrar INGOT_CONCAT(ingot_op_, __COUNTER__) = ::ingot::OpBuilder(#name)
