#include "ops/op_def.h"

#include "core/strings.h"
#include "graph/graph.h"

namespace ingot {

const AttrDef* OpDef::find_attr(std::string_view attr) const {
  for (const AttrDef& a : attrs) {
    if (a.name == attr) return &a;
  }
  return nullptr;
}

const Attribute& OpDef::attribute(const Attributes& attrs, std::string_view name, AttrKind kind) const {
  const Attribute* a = nullptr;
  if (auto it = attrs.find(name); it != attrs.end()) {
    a = &it->second;
  } else if (const AttrDef* d = find_attr(name)) {
    if (!d->default_value) fail("attribute '{}' is required", name);
    a = &*d->default_value;
  } else {
    fail("attribute '{}' is not declared for {} in the op catalogue", name, this->name);
  }
  if (a->kind != kind) {
    // ONNX files sometimes store a float attribute as an int; accept the lossless widening.
    if (kind == AttrKind::Float && a->kind == AttrKind::Int) {
      thread_local Attribute widened;
      widened = Attribute(float(a->i));
      return widened;
    }
    fail("attribute '{}': expected {}, got {}", name, attr_kind_name(kind), attr_kind_name(a->kind));
  }
  return *a;
}

const ParamDef* OpSignature::bind(const std::vector<ParamDef>& params, size_t i) {
  if (i < params.size()) return &params[i];
  if (!params.empty() && params.back().arity == ParamDef::Arity::Variadic) return &params.back();
  return nullptr;
}

const TypeVar* OpSignature::type_var(std::string_view name) const {
  for (const TypeVar& t : types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::map<std::string, DType, std::less<>> OpSignature::bind_types(const std::vector<DType>& input_dtypes) const {
  std::map<std::string, DType, std::less<>> bound;
  for (size_t i = 0; i < input_dtypes.size(); ++i) {
    const ParamDef* p = input(i);
    if (p && input_dtypes[i] != DType::Undefined) bound.emplace(p->type, input_dtypes[i]);
  }
  return bound;
}

const OpSignature& OpDef::signature() const {
  std::call_once(lazy_signature_->once, [&] {
    if (declared.known()) {
      lazy_signature_->signature = declared;
    } else if (auto source = OpCatalogue::instance().signature_source()) {
      if (auto s = source(domain, name, until_version)) lazy_signature_->signature = std::move(*s);
    }
  });
  return lazy_signature_->signature;
}

DType OpDef::output_dtype(const Attributes& attrs, size_t i, const std::vector<DType>& input_dtypes) const {
  auto input = [&](size_t k) { return k < input_dtypes.size() ? input_dtypes[k] : DType::Undefined; };
  if (dtype_rule) return dtype_rule(attrs, i);
  if (!dtype_attr.empty() && i == 0) {
    if (auto it = attrs.find(dtype_attr); it != attrs.end() && it->second.kind == AttrKind::Int) return DType(it->second.i);
    const AttrDef* a = find_attr(dtype_attr);
    if (a && a->default_value) return DType(a->default_value->i);
    return input(0);
  }
  const OpSignature& sig = signature();
  const ParamDef* out = sig.output(i);
  if (!out) return DType::Undefined;
  for (size_t k = 0; k < input_dtypes.size(); ++k) {
    const ParamDef* p = sig.input(k);
    if (p && p->type == out->type && input_dtypes[k] != DType::Undefined) return input_dtypes[k];
  }
  const TypeVar* var = sig.type_var(out->type);
  return var && var->allowed.size() == 1 ? var->allowed[0] : DType::Undefined;
}

OpCatalogue& OpCatalogue::instance() {
  static OpCatalogue catalogue;
  return catalogue;
}

static std::string key(std::string_view domain, std::string_view name) {
  if (domain == "ai.onnx") domain = "";
  return std::string(domain) + "::" + std::string(name);
}

void OpCatalogue::add(OpDef def) {
  std::string k = key(def.domain, def.name);
  std::unique_lock lock(mutex_);
  if (defs_.count(k)) fail("op {} is defined twice in the catalogue", def.name);
  defs_.emplace(std::move(k), std::move(def));
}

const OpDef* OpCatalogue::find(std::string_view domain, std::string_view name) const {
  std::shared_lock lock(mutex_);
  auto it = defs_.find(key(domain, name));
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<const OpDef*> OpCatalogue::all() const {
  std::shared_lock lock(mutex_);
  std::vector<const OpDef*> out;
  for (const auto& [k, d] : defs_) out.push_back(&d);
  return out;
}

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::String: return "string";
    case AttrKind::Tensor: return "tensor";
    case AttrKind::Graph: return "graph";
    case AttrKind::Ints: return "ints";
    case AttrKind::Floats: return "floats";
    case AttrKind::Strings: return "strings";
    case AttrKind::Tensors: return "tensors";
    case AttrKind::Graphs: return "graphs";
  }
  return "?";
}

std::string Attribute::str() const {
  auto list = [](const auto& v, auto fmt_one) { return "[" + join(v, ",", fmt_one) + "]"; };
  switch (kind) {
    case AttrKind::Int: return std::to_string(i);
    case AttrKind::Float: return fmt::format("{}", f);
    case AttrKind::String: return "\"" + s + "\"";
    case AttrKind::Tensor: return t.describe();
    case AttrKind::Graph: return "graph(" + (g ? g->name : std::string()) + ")";
    case AttrKind::Ints: return list(ints, [](int64_t x) { return std::to_string(x); });
    case AttrKind::Floats: return list(floats, [](float x) { return fmt::format("{}", x); });
    case AttrKind::Strings: return list(strings, [](const std::string& x) { return "\"" + x + "\""; });
    case AttrKind::Tensors: return list(tensors, [](const Tensor& x) { return x.describe(); });
    case AttrKind::Graphs: return fmt::format("[{} graphs]", graphs.size());
  }
  return "?";
}

}  // namespace ingot
