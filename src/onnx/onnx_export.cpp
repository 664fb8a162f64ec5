#include "onnx/onnx_export.h"

#include <fmt/format.h>
#include <ingot/error.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>

#include "ops/op_def.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "0.1.0"
#endif

namespace ingot {
namespace {

void write_tensor(const Tensor& value, const std::string& name, onnx::TensorProto& p) {
  const Tensor t = value.to(Device::cpu());
  p.set_name(name);
  p.set_data_type(int32_t(t.dtype()));  // DType's values are ONNX's element types
  for (int64_t d : t.shape()) p.add_dims(d);
  if (t.dtype() == DType::String) {
    for (const std::string& s : t.span<std::string>()) p.add_string_data(s);
    return;
  }
  p.set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
}

void write_type(const ValueType& type, onnx::TypeProto& p, const std::string& where) {
  if (type.kind != ValueKind::Tensor) fail("{}: only tensors can be exported (it is {})", where, type.str());
  auto* tensor = p.mutable_tensor_type();
  tensor->set_elem_type(int32_t(type.dtype));
  if (!type.shape) return;
  auto* shape = tensor->mutable_shape();
  for (const Dim& d : *type.shape) {
    auto* dim = shape->add_dim();
    if (d.is_static()) {
      dim->set_dim_value(d.value);
    } else if (!d.symbol.empty()) {
      dim->set_dim_param(d.symbol);
    }
  }
}

void write_value_info(const ValueInfo& vi, onnx::ValueInfoProto& p) {
  p.set_name(vi.name);
  write_type(vi.type, *p.mutable_type(), "value '" + vi.name + "'");
}

void write_graph(const Graph& g, onnx::GraphProto& p);

void write_attribute(const std::string& name, const Attribute& a, onnx::AttributeProto& p) {
  p.set_name(name);
  switch (a.kind) {
    case AttrKind::Int: p.set_type(onnx::AttributeProto::INT), p.set_i(a.i); break;
    case AttrKind::Float: p.set_type(onnx::AttributeProto::FLOAT), p.set_f(a.f); break;
    case AttrKind::String: p.set_type(onnx::AttributeProto::STRING), p.set_s(a.s); break;
    case AttrKind::Tensor: p.set_type(onnx::AttributeProto::TENSOR), write_tensor(a.t, "", *p.mutable_t()); break;
    case AttrKind::Graph: p.set_type(onnx::AttributeProto::GRAPH), write_graph(*a.g, *p.mutable_g()); break;
    case AttrKind::Ints:
      p.set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) p.add_ints(v);
      break;
    case AttrKind::Floats:
      p.set_type(onnx::AttributeProto::FLOATS);
      for (float v : a.floats) p.add_floats(v);
      break;
    case AttrKind::Strings:
      p.set_type(onnx::AttributeProto::STRINGS);
      for (const std::string& v : a.strings) p.add_strings(v);
      break;
    case AttrKind::Tensors:
      p.set_type(onnx::AttributeProto::TENSORS);
      for (const Tensor& t : a.tensors) write_tensor(t, "", *p.add_tensors());
      break;
    case AttrKind::Graphs:
      p.set_type(onnx::AttributeProto::GRAPHS);
      for (const auto& sub : a.graphs) write_graph(*sub, *p.add_graphs());
      break;
  }
}

void write_graph(const Graph& g, onnx::GraphProto& p) {
  p.set_name(g.name.empty() ? "graph" : g.name);
  for (const ValueInfo& vi : g.inputs) write_value_info(vi, *p.add_input());
  for (const ValueInfo& vi : g.outputs) write_value_info(vi, *p.add_output());
  for (const auto& [name, vi] : g.value_info) write_value_info(vi, *p.add_value_info());
  for (const auto& [name, t] : g.initializers) write_tensor(t, name, *p.add_initializer());
  for (const Node& n : g.nodes) {
    if (!n.domain.empty() && n.domain != "ai.onnx" && n.domain != "ai.onnx.ml")
      fail("{}: {}.{} is Ingot's own op; ONNX runtimes do not have it, so the model cannot be exported to ONNX",
           n.label(), n.domain, n.op_type);
    onnx::NodeProto& np = *p.add_node();
    np.set_name(n.name);
    np.set_op_type(n.op_type);
    if (!n.domain.empty()) np.set_domain(n.domain);
    for (const std::string& in : n.inputs) np.add_input(in);
    for (const std::string& out : n.outputs) np.add_output(out);
    try {
      for (const auto& [name, a] : n.attrs) write_attribute(name, a, *np.add_attribute());
    } catch (Error& e) {
      e.add_context(n.label());
      throw;
    }
  }
}

}  // namespace

void save_onnx(const Model& model, const std::string& path) {
  onnx::ModelProto proto;
  proto.set_ir_version(model.ir_version ? model.ir_version : int64_t(onnx::IR_VERSION));
  proto.set_producer_name("ingot");
  proto.set_producer_version(INGOT_VERSION);
  write_graph(*model.graph, *proto.mutable_graph());
  for (const auto& [domain, version] : model.opsets) {
    if (domain == kIngotDomain) continue;  // written only for nodes that use it, and those are refused above
    auto* op = proto.add_opset_import();
    op->set_domain(domain == "ai.onnx" ? "" : domain);
    op->set_version(version);
  }
  // ONNX's checker knows the opsets of the ONNX library it came with (Debian 12's 1.12: up to 17);
  // a model at a newer opset (eager ops run at 21) is checked by the runtime that loads it.
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  bool checkable = true;
  for (const auto& op : proto.opset_import()) {
    auto it = known.find(op.domain());
    checkable = checkable && it != known.end() && op.version() <= it->second.second;
  }
  try {
    if (checkable) onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    fail("export to '{}': ONNX's checker rejects the model: {}", path, e.what());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !proto.SerializeToOstream(&out) || !out.flush()) fail("export: cannot write '{}'", path);
}

}  // namespace ingot
