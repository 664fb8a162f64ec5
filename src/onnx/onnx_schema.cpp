// The signatures of ONNX's ops (named inputs and outputs, type variables and the dtypes each takes),
// read from libonnx's own operator schemas: the catalogue asks for one the first time an op's
// signature is needed (OpDef::signature), so ONNX's definitions are never written out again here.
#include <onnx/defs/schema.h>

#include <mutex>
#include <set>
#include <string>

#include "onnx/onnx_import.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// "tensor(float)" -> Float32; Undefined for what is not a tensor type Ingot has (sequences,
// optionals, maps, complex numbers).
DType tensor_dtype(const std::string& type) {
  const std::string prefix = "tensor(";
  if (type.compare(0, prefix.size(), prefix) != 0 || type.back() != ')') return DType::Undefined;
  std::string name = type.substr(prefix.size(), type.size() - prefix.size() - 1);
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  return dtype_from_name(name);
}

ParamDef::Arity arity(onnx::OpSchema::FormalParameterOption option) {
  switch (option) {
    case onnx::OpSchema::Optional: return ParamDef::Arity::Optional;
    case onnx::OpSchema::Variadic: return ParamDef::Arity::Variadic;
    default: return ParamDef::Arity::Single;
  }
}

std::optional<OpSignature> onnx_signature(std::string_view domain, std::string_view name, int version) {
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(std::string(name), version, domain == "ai.onnx" ? "" : std::string(domain));
  if (!schema) return std::nullopt;
  OpSignature sig;
  for (const auto& t : schema->typeConstraintParams()) {
    TypeVar var{t.type_param_str, {}};
    for (const std::string& allowed : t.allowed_type_strs) {
      if (DType d = tensor_dtype(allowed); d != DType::Undefined) var.allowed.push_back(d);
    }
    sig.types.push_back(std::move(var));
  }
  // A parameter of one fixed type ("tensor(int64)") gets a variable of that name allowing just it.
  auto add = [&](std::vector<ParamDef>& params, const onnx::OpSchema::FormalParameter& p) {
    params.push_back({p.GetName(), p.GetTypeStr(), arity(p.GetOption())});
    if (!sig.type_var(p.GetTypeStr())) {
      DType d = tensor_dtype(p.GetTypeStr());
      sig.types.push_back({p.GetTypeStr(), d == DType::Undefined ? std::vector<DType>{} : std::vector<DType>{d}});
    }
  };
  for (const auto& p : schema->inputs()) add(sig.inputs, p);
  for (const auto& p : schema->outputs()) add(sig.outputs, p);
  return sig;
}

const bool g_registered = [] {
  OpCatalogue::instance().set_signature_source(onnx_signature);
  return true;
}();

// ---- schemas for ops with a shape rule (extension ops), so that libonnx infers through them

std::string onnx_type(DType d) {
  if (d == DType::Float32) return "tensor(float)";
  if (d == DType::Float64) return "tensor(double)";
  return "tensor(" + std::string(dtype_name(d)) + ")";
}

onnx::AttributeProto::AttributeType onnx_attr_type(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return onnx::AttributeProto::INT;
    case AttrKind::Float: return onnx::AttributeProto::FLOAT;
    case AttrKind::String: return onnx::AttributeProto::STRING;
    case AttrKind::Ints: return onnx::AttributeProto::INTS;
    case AttrKind::Floats: return onnx::AttributeProto::FLOATS;
    default: return onnx::AttributeProto::UNDEFINED;
  }
}

// libonnx's inference context -> the op's shape rule -> output types.
void infer_with_rule(const OpDef& def, onnx::InferenceContext& ctx) {
  std::vector<StaticType> inputs(ctx.getNumInputs());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const onnx::TypeProto* t = ctx.getInputType(i);
    if (!t || !t->has_tensor_type()) continue;
    inputs[i].dtype = DType(t->tensor_type().elem_type());
    if (!t->tensor_type().has_shape()) continue;
    inputs[i].rank = t->tensor_type().shape().dim_size();
    for (const auto& d : t->tensor_type().shape().dim()) inputs[i].dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  Attributes attrs;
  for (const AttrDef& a : def.attrs) {
    const onnx::AttributeProto* p = ctx.getAttribute(a.name);
    if (!p) continue;
    switch (a.kind) {
      case AttrKind::Int: attrs[a.name] = Attribute(int64_t(p->i())); break;
      case AttrKind::Float: attrs[a.name] = Attribute(p->f()); break;
      case AttrKind::String: attrs[a.name] = Attribute(p->s()); break;
      case AttrKind::Ints: attrs[a.name] = Attribute(std::vector<int64_t>(p->ints().begin(), p->ints().end())); break;
      case AttrKind::Floats: attrs[a.name] = Attribute(std::vector<float>(p->floats().begin(), p->floats().end())); break;
      default: break;
    }
  }
  std::vector<StaticType> outputs;
  try {
    outputs = def.shape_rule(def, attrs, inputs);
  } catch (const Error& e) {
    fail_shape_inference(e.what());
  }
  for (size_t i = 0; i < outputs.size() && i < ctx.getNumOutputs(); ++i) {
    if (outputs[i].dtype == DType::Undefined) continue;
    auto* tt = ctx.getOutputType(i)->mutable_tensor_type();
    tt->set_elem_type(int32_t(outputs[i].dtype));
    if (outputs[i].rank < 0) continue;
    auto* shape = tt->mutable_shape();
    shape->clear_dim();
    for (int64_t d : outputs[i].dims) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
    }
  }
}

}  // namespace

void register_shape_rule_schemas() {
  static std::mutex mutex;
  static std::set<const OpDef*> done;
  std::lock_guard lock(mutex);
  for (const OpDef* def : OpCatalogue::instance().all()) {
    if (!def->shape_rule || def->domain.empty() || done.count(def)) continue;
    done.insert(def);
    auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!ranges.Map().count(def->domain)) ranges.AddDomainToVersion(def->domain, 1, 1 << 20);
    if (onnx::OpSchemaRegistry::Schema(def->name, 1 << 20, def->domain)) continue;  // a schema of its own
    onnx::OpSchema schema(def->name, "extension", 0);
    schema.SetDomain(def->domain).SinceVersion(def->since_version).SetDoc(def->summary);
    const OpSignature& sig = def->signature();
    auto option = [](ParamDef::Arity a) {
      return a == ParamDef::Arity::Optional ? onnx::OpSchema::Optional
             : a == ParamDef::Arity::Variadic ? onnx::OpSchema::Variadic : onnx::OpSchema::Single;
    };
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      schema.Input(int(i), sig.inputs[i].name, "", sig.inputs[i].type, option(sig.inputs[i].arity));
    for (size_t i = 0; i < sig.outputs.size(); ++i)
      schema.Output(int(i), sig.outputs[i].name, "", sig.outputs[i].type, option(sig.outputs[i].arity));
    std::set<std::string> constrained;
    for (const TypeVar& t : sig.types) {
      std::vector<std::string> allowed;
      for (DType d : t.allowed) allowed.push_back(onnx_type(d));
      schema.TypeConstraint(t.name, allowed.empty() ? onnx::OpSchema::all_tensor_types() : allowed, "");
      constrained.insert(t.name);
    }
    for (const auto* params : {&sig.inputs, &sig.outputs})
      for (const ParamDef& p : *params)
        if (constrained.insert(p.type).second) schema.TypeConstraint(p.type, onnx::OpSchema::all_tensor_types(), "");
    for (const AttrDef& a : def->attrs)
      if (onnx_attr_type(a.kind) != onnx::AttributeProto::UNDEFINED)
        schema.Attr(a.name, "", onnx_attr_type(a.kind), a.required);
    schema.TypeAndShapeInferenceFunction([def](onnx::InferenceContext& ctx) { infer_with_rule(*def, ctx); });
    onnx::OpSchemaRegistry::OpSchemaRegisterOnce registered(schema);
  }
}

}  // namespace ingot
