#include "autograd/trace.h"

#include <algorithm>
#include <fmt/format.h>
#include <ingot/error.h>

namespace ingot::autograd::detail {
namespace {
thread_local Tracer* t_tracer = nullptr;
}  // namespace

Tracer::Tracer() : previous_(t_tracer) {
  graph_->name = "traced";
  t_tracer = this;
}

Tracer::~Tracer() { t_tracer = previous_; }

Tracer* Tracer::active() { return t_tracer; }

ValueInfo Tracer::info(const std::string& name, const Tensor& t) {
  ValueInfo vi{name, {}};
  vi.type.kind = ValueKind::Tensor;
  vi.type.dtype = t.dtype();
  std::vector<Dim> dims;
  for (int64_t d : t.shape()) dims.push_back(Dim{d, {}});
  vi.type.shape = std::move(dims);
  return vi;
}

void Tracer::add_input(const Tensor& t) {
  std::string name = fmt::format("input_{}", graph_->inputs.size());
  graph_->inputs.push_back(info(name, t));
  names_.try_emplace(key(t), name);
  keep_.push_back(t);
}

std::string Tracer::name_of(const Tensor& t) {
  if (!t.defined()) return "";
  auto [it, inserted] = names_.try_emplace(key(t), "");
  if (inserted) {
    it->second = fmt::format("const_{}", counter_++);
    graph_->initializers.emplace(it->second, t.detach());
    keep_.push_back(t);
  }
  return it->second;
}

void Tracer::record(const OpDef& def, const Attributes& attrs, int opset, const std::vector<Tensor>& inputs,
                    const std::vector<Tensor>& outputs) {
  const bool onnx = def.domain.empty() || def.domain == "ai.onnx";
  if (onnx) {
    if (onnx_opset_ == 0) onnx_opset_ = opset;
    if (opset != onnx_opset_)
      fail("compile: {} ran at opset {} while the traced ops before it ran at {} (one opset per graph)", def.name,
           opset, onnx_opset_);
  } else if (def.domain != kIngotDomain) {
    int& v = other_opsets_[def.domain];
    v = std::max(v, opset);
  }
  for (const AttrDef& a : def.attrs) {
    if (a.kind == AttrKind::Graph || a.kind == AttrKind::Graphs)
      fail("compile: {} takes subgraphs, which tracing cannot follow", def.name);
  }
  Node n;
  n.op_type = def.name;
  n.domain = def.domain;
  n.attrs = attrs;
  n.name = fmt::format("{}_{}", def.name, counter_++);
  for (const Tensor& t : inputs) n.inputs.push_back(name_of(t));
  for (const Tensor& t : outputs) {
    if (!t.defined()) {
      n.outputs.emplace_back();
      continue;
    }
    std::string name = fmt::format("v{}", counter_++);
    names_[key(t)] = name;  // a view op's output viewing its input's data names the output from here on
    graph_->value_info.emplace(name, info(name, t));
    keep_.push_back(t);
    n.outputs.push_back(std::move(name));
  }
  graph_->nodes.push_back(std::move(n));
}

std::shared_ptr<Model> Tracer::finish(const std::vector<Tensor>& outputs, const std::string& name) {
  for (const Tensor& t : outputs) {
    if (!t.defined()) fail("compile: the function returned an undefined tensor");
    std::string value = name_of(t);
    std::string out = fmt::format("output_{}", graph_->outputs.size());
    Node id;
    id.op_type = "Identity";
    id.name = out;
    id.inputs = {value};
    id.outputs = {out};
    graph_->nodes.push_back(std::move(id));
    graph_->outputs.push_back(info(out, t));
  }
  auto model = std::make_shared<Model>();
  model->name = name;
  model->graph = graph_;
  model->opsets[""] = onnx_opset_ ? onnx_opset_ : 21;
  model->opsets[kIngotDomain] = 1;
  for (const auto& [domain, version] : other_opsets_) model->opsets[domain] = version;
  model->ir_version = 8;
  model->producer = "ingot compile";
  return model;
}

}  // namespace ingot::autograd::detail
