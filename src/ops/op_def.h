// The op catalogue: every operator is defined once here (name, domain, opset range, input/output
// arity, attributes with defaults). The importer, the verifier, eager calls and kernels all read
// these definitions; kernels take attribute defaults from them, never from literals of their own.
#pragma once
#include <ingot/attribute.h>

#include <climits>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace ingot {

// The domain of Ingot's own ops (the fused ones graph passes create: ops/defs/fused.cpp).
inline constexpr const char* kIngotDomain = "ai.ingot";

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
  // Computes in float32 inside whatever its input dtype (sem::acc_t) and has a bounded output, so it may
  // follow a 16-bit input although autocast lists it as float32 (Softmax, LayerNormalization, Erf).
  Float32Inside = 1u << 3,
};
constexpr OpTag operator|(OpTag a, OpTag b) { return OpTag(uint32_t(a) | uint32_t(b)); }

// A named input or output and the type variable that constrains its dtype.
struct ParamDef {
  enum class Arity : uint8_t { Single, Optional, Variadic };
  std::string name;  // "X"
  std::string type;  // a type variable of the op's signature ("T", "T1")
  Arity arity = Arity::Single;
};
struct TypeVar {
  std::string name;
  std::vector<DType> allowed;  // the dtypes Ingot has among those the op allows
};

// An op's named inputs and outputs with their type variables: ONNX's own for ai.onnx ops (read from
// libonnx's schemas, onnx/onnx_schema.cpp), declared with the op for Ingot's (OpBuilder::input...).
// Kernels constrain the variables (KernelBuilder::types: QLinearConv's uint8/int8 X as T1, int8 W as
// T2, int32 B as T4), and placement binds each variable to the dtype of its first input.
struct OpSignature {
  std::vector<ParamDef> inputs, outputs;
  std::vector<TypeVar> types;

  bool known() const { return !inputs.empty() || !outputs.empty(); }
  // The parameter input (output) i binds to: a variadic last parameter takes the rest; nullptr beyond.
  const ParamDef* input(size_t i) const { return bind(inputs, i); }
  const ParamDef* output(size_t i) const { return bind(outputs, i); }
  const TypeVar* type_var(std::string_view name) const;
  // Each type variable's dtype: that of the first input bound to it whose dtype is known.
  std::map<std::string, DType, std::less<>> bind_types(const std::vector<DType>& input_dtypes) const;

 private:
  static const ParamDef* bind(const std::vector<ParamDef>& params, size_t i);
};

struct AttrDef {
  std::string name;
  AttrKind kind;
  std::optional<Attribute> default_value;  // nullopt: required (or optional without default)
  bool required = false;
};

class GradBuilder;  // ops/gradient.h
// An op's vector-Jacobian product (ops/gradient.h), written beside its definition.
using VjpRule = void (*)(GradBuilder& b);

class BatchBuilder;  // ops/batching.h
// An op's batching rule for vmap (ops/batching.h), written beside its definition; false: it cannot
// batch this case (the node then runs once per batch element).
using BatchRule = bool (*)(BatchBuilder& b);

// An output dtype that an attribute decides where no input does (Constant's value): declared with the op.
using DTypeRule = DType (*)(const Attributes& attrs, size_t output);

// A value's static type as shape rules see it: dtype Undefined, rank -1 and dims -1 where unknown.
struct StaticType {
  DType dtype = DType::Undefined;
  int rank = -1;
  std::vector<int64_t> dims;
};
struct OpDef;
// Output types from input types and attributes, for ops that libonnx's shape inference has no
// schema for (extension ops): graph import infers through them (onnx/onnx_schema.cpp). Throws
// ingot::Error for inputs the op refuses.
using ShapeRule = std::vector<StaticType> (*)(const OpDef& def, const Attributes& attrs,
                                              const std::vector<StaticType>& inputs);

struct ExtensionOp;  // extension/registry.h

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
  OpSignature declared;  // Ingot's own ops: their signature as declared; ai.onnx ops: empty (libonnx's)
  // Output 0's dtype is this int attribute's (Cast's `to`, RandomNormal's `dtype`; its default when
  // absent), or input 0's when the attribute is optional and absent (EyeLike, RandomNormalLike).
  std::string dtype_attr;
  DTypeRule dtype_rule = nullptr;  // output dtypes decided otherwise by attributes (Constant)
  // The gradient rule; null for ops without one (integer and bool results need none). Eager tapes,
  // the Gradient lowering and gradcheck all read it.
  VjpRule vjp = nullptr;
  // Why the op has no gradient by design: its float results do not vary with its float inputs
  // (random draws, generated constants, optimizer updates, a gradient itself). Autograd treats them
  // as constants, as it does integer results. Empty: the op has a rule, or lacks one (an error
  // naming it when a gradient has to pass through).
  std::string no_gradient;
  // The batching rule (vmap); null: ops tagged Elementwise share one, the rest run per element.
  BatchRule batch = nullptr;
  // Float inputs from this index on are parameters, not data, and keep float32 when the op runs in
  // half precision (autocast, and half-precision models): Resize's roi and scales, Dropout's ratio.
  // -1: none.
  int float32_params_from = -1;
  ShapeRule shape_rule = nullptr;  // see ShapeRule; nullptr: libonnx's inference (ONNX's ops), or none
  // Ops an extension library defined (extension/registry.h): its kernels, shape rule, gradient op and
  // the library that carries them (packages embed it). nullptr for Ingot's own ops.
  const ExtensionOp* extension = nullptr;

  const AttrDef* find_attr(std::string_view attr) const;
  // The attribute as set in `attrs`, else the catalogue default; a required attribute that is
  // missing, an undeclared one, or a kind mismatch throws naming the attribute (an int given where a
  // float is declared is widened).
  const Attribute& attribute(const Attributes& attrs, std::string_view name, AttrKind kind) const;
  bool has(OpTag tag) const { return (uint32_t(tags) & uint32_t(tag)) == uint32_t(tag); }
  // The op's signature: declared, or from the catalogue's signature source (libonnx for ai.onnx ops),
  // looked up once at first use; empty (known() false) when neither has it.
  const OpSignature& signature() const;
  // Dtype inference: the dtype of output `i` for these attributes and input dtypes (Undefined where
  // unknown), from dtype_attr or dtype_rule, else from the signature: the output's type variable as an
  // input binds it, or the one dtype it allows (Shape's int64, Equal's bool). Undefined when neither
  // decides it (an op without a known signature).
  DType output_dtype(const Attributes& attrs, size_t i, const std::vector<DType>& input_dtypes) const;

 private:
  struct LazySignature {
    std::once_flag once;
    OpSignature signature;
  };
  std::shared_ptr<LazySignature> lazy_signature_ = std::make_shared<LazySignature>();
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

  // Where signatures of ops that do not declare one come from: (domain, name, newest opset the
  // definition covers) -> signature, or nullopt. The ONNX layer sets libonnx's schemas.
  using SignatureSource = std::optional<OpSignature> (*)(std::string_view domain, std::string_view name, int version);
  void set_signature_source(SignatureSource source) { signature_source_ = source; }
  SignatureSource signature_source() const { return signature_source_; }

 private:
  SignatureSource signature_source_ = nullptr;
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
  // The window attributes every pooling op shares (MaxPool, AveragePool, ai.ingot.MaxPool), with
  // ONNX's defaults.
  OpBuilder& pool_attrs() {
    return attr("auto_pad", "NOTSET")
        .attr("ceil_mode", 0)
        .optional_attr("dilations", AttrKind::Ints)
        .required_attr("kernel_shape", AttrKind::Ints)
        .optional_attr("pads", AttrKind::Ints)
        .optional_attr("strides", AttrKind::Ints);
  }
  // Named inputs and outputs with their type variables (Ingot's own ops; ai.onnx ops take ONNX's).
  // Declaring inputs sets the arity: required ones, then optional ones, a variadic one last.
  OpBuilder& input(std::string name, std::string type) { return param(def_.declared.inputs, name, type, ParamDef::Arity::Single); }
  OpBuilder& optional_input(std::string name, std::string type) {
    return param(def_.declared.inputs, name, type, ParamDef::Arity::Optional);
  }
  OpBuilder& variadic_input(std::string name, std::string type) {
    return param(def_.declared.inputs, name, type, ParamDef::Arity::Variadic);
  }
  OpBuilder& output(std::string name, std::string type) {
    return param(def_.declared.outputs, name, type, ParamDef::Arity::Single);
  }
  OpBuilder& optional_output(std::string name, std::string type) {
    return param(def_.declared.outputs, name, type, ParamDef::Arity::Optional);
  }
  OpBuilder& variadic_output(std::string name, std::string type) {
    return param(def_.declared.outputs, name, type, ParamDef::Arity::Variadic);
  }
  OpBuilder& type(std::string var, std::vector<DType> allowed) {
    def_.declared.types.push_back({std::move(var), std::move(allowed)});
    return *this;
  }
  // Output 0's dtype comes from this int attribute (see OpDef::dtype_attr).
  OpBuilder& dtype_attr(std::string attr) {
    def_.dtype_attr = std::move(attr);
    return *this;
  }
  OpBuilder& dtype_rule(DTypeRule rule) {
    def_.dtype_rule = rule;
    return *this;
  }
  OpBuilder& vjp(VjpRule rule) {
    def_.vjp = rule;
    return *this;
  }
  OpBuilder& no_gradient(std::string why) {
    def_.no_gradient = std::move(why);
    return *this;
  }
  OpBuilder& float32_params_from(int input) {
    def_.float32_params_from = input;
    return *this;
  }
  OpBuilder& batch(BatchRule rule) {
    def_.batch = rule;
    return *this;
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
  OpBuilder& param(std::vector<ParamDef>& params, std::string& name, std::string& type, ParamDef::Arity arity) {
    params.push_back({std::move(name), std::move(type), arity});
    int required = 0, total = 0;
    bool variadic = false;
    for (const ParamDef& p : params) {
      required += p.arity == ParamDef::Arity::Single;
      ++total;
      variadic |= p.arity == ParamDef::Arity::Variadic;
    }
    if (&params == &def_.declared.inputs) {
      def_.min_inputs = required;
      def_.max_inputs = variadic ? -1 : total;
    } else {
      def_.min_outputs = required;
      def_.max_outputs = variadic ? -1 : total;
    }
    return *this;
  }

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
