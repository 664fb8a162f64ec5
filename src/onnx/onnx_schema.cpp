// The signatures of ONNX's ops (named inputs and outputs, type variables and the dtypes each takes),
// read from libonnx's own operator schemas: the catalogue asks for one the first time an op's
// signature is needed (OpDef::signature), so ONNX's definitions are never written out again here.
#include <onnx/defs/schema.h>

#include <string>

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

}  // namespace
}  // namespace ingot
