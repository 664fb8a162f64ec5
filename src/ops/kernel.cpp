#include "ops/kernel.h"

#include <algorithm>

#include "core/flags.h"
#include "core/strings.h"
#include "graph/graph.h"

namespace ingot {

std::string Value::describe() const {
  switch (kind) {
    case Kind::None: return "none";
    case Kind::Tensor: return tensor.describe();
    case Kind::Sequence: return fmt::format("sequence of {} tensors", sequence.size());
  }
  return "?";
}

const Value& KernelContext::input_value(size_t i) const {
  if (i >= inputs_.size() || !inputs_[i]) {
    fail("input {} is missing ({} given)", i, inputs_.size());
  }
  return *inputs_[i];
}

const Tensor& KernelContext::input(size_t i) const {
  const Value& v = input_value(i);
  if (v.kind != Value::Kind::Tensor) fail("input {}: expected a tensor, got {}", i, v.describe());
  return v.tensor;
}

Tensor& KernelContext::allocate(size_t i, DType dtype, Shape shape) {
  if (i >= outputs_.size()) fail("output {} does not exist ({} outputs)", i, outputs_.size());
  outputs_[i] = Value(allocator_ ? allocator_->allocate(i, dtype, std::move(shape), device_)
                                 : Tensor::empty(dtype, std::move(shape), device_));
  return outputs_[i].tensor;
}

void KernelContext::set_output(size_t i, Tensor t) { set_output_value(i, Value(std::move(t))); }

void KernelContext::set_output_value(size_t i, Value v) {
  if (i >= outputs_.size()) fail("output {} does not exist ({} outputs)", i, outputs_.size());
  outputs_[i] = std::move(v);
}

bool KernelContext::has_attr(std::string_view name) const { return attrs_.find(name) != attrs_.end(); }

const Attribute& KernelContext::attr(std::string_view name, AttrKind kind) const {
  return def_.attribute(attrs_, name, kind);
}

int64_t KernelContext::attr_int(std::string_view name) const { return attr(name, AttrKind::Int).i; }
float KernelContext::attr_float(std::string_view name) const { return attr(name, AttrKind::Float).f; }
const std::string& KernelContext::attr_string(std::string_view name) const { return attr(name, AttrKind::String).s; }
const std::vector<int64_t>& KernelContext::attr_ints(std::string_view name) const {
  return attr(name, AttrKind::Ints).ints;
}
const std::vector<float>& KernelContext::attr_floats(std::string_view name) const {
  return attr(name, AttrKind::Floats).floats;
}
const std::vector<std::string>& KernelContext::attr_strings(std::string_view name) const {
  return attr(name, AttrKind::Strings).strings;
}
const Tensor& KernelContext::attr_tensor(std::string_view name) const { return attr(name, AttrKind::Tensor).t; }
const Graph& KernelContext::attr_graph(std::string_view name) const {
  const Attribute& a = attr(name, AttrKind::Graph);
  if (!a.g) fail("attribute '{}' holds no graph", name);
  return *a.g;
}

std::vector<Value> KernelContext::run_subgraph(const Graph& graph, const std::vector<Value>& inputs) const {
  if (!subgraphs_) fail("{} needs a subgraph runner, which this call has none of", def_.name);
  return subgraphs_->run_subgraph(graph, inputs);
}

std::string KernelDef::rejects(const NodeSignature& node) const {
  if (max_rank > 0) {
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].rank > max_rank)
        return fmt::format("input {} has rank {}, above the kernel's limit of {}", i, node.inputs[i].rank, max_rank);
    }
  }
  return accepts ? accepts(node) : std::string();
}

static std::string dtype_list(const std::vector<DType>& dtypes) {
  return join(dtypes, ", ", [](DType d) { return std::string(dtype_name(d)); });
}

std::string KernelDef::rejects_types(const OpDef& def, const std::vector<DType>& input_dtypes) const {
  if (type_constraints.empty()) return "";
  const OpSignature& sig = def.signature();
  for (const auto& [var, allowed] : type_constraints) {
    if (!sig.type_var(var))
      return fmt::format("the kernel constrains type {}, which {}'s signature does not have", var, def.name);
    for (size_t i = 0; i < input_dtypes.size(); ++i) {
      const ParamDef* p = sig.input(i);
      if (!p || p->type != var || input_dtypes[i] == DType::Undefined) continue;
      if (std::find(allowed.begin(), allowed.end(), input_dtypes[i]) == allowed.end())
        return fmt::format("input {} ({}) has dtype {}, but the kernel takes {} for {}", i, p->name,
                           dtype_name(input_dtypes[i]), dtype_list(allowed), var);
    }
  }
  return "";
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry registry;
  return registry;
}

static bool dtypes_overlap(const KernelDef& a, const KernelDef& b) {
  if (a.dtypes.empty() || b.dtypes.empty()) return true;
  for (DType d : a.dtypes) {
    if (b.supports(d)) return true;
  }
  return false;
}

void KernelRegistry::add(KernelDef def) {
  if (def.domain == "ai.onnx") def.domain.clear();
  std::unique_lock lock(mutex_);
  for (const KernelDef& k : kernels_) {
    if (k.op == def.op && k.domain == def.domain && k.backend == def.backend &&
        k.since_version <= def.until_version && def.since_version <= k.until_version && dtypes_overlap(k, def)) {
      fail("a {} kernel for {}{} is registered twice (opsets {}..{} and {}..{} overlap)", def.backend == DeviceType::CPU ? "CPU" : "CUDA",
           def.domain.empty() ? "" : def.domain + ".", def.op, k.since_version, k.until_version, def.since_version,
           def.until_version);
    }
  }
  kernels_.push_back(std::move(def));
}

// Test-only switch: INGOT_HIDE_CUDA_KERNELS=Op1,Op2 hides those ops' accelerator kernels, forcing
// a CPU fallback (the fallback tests use it). A live flag: read at every lookup, so a test can set it.
static bool hidden_on_accelerator(std::string_view op) { return flags::list_contains("INGOT_HIDE_CUDA_KERNELS", op); }

const KernelDef* KernelRegistry::find(std::string_view domain, std::string_view op, DeviceType backend,
                                      int opset) const {
  if (domain == "ai.onnx") domain = "";
  if (backend != DeviceType::CPU && hidden_on_accelerator(op)) return nullptr;
  std::shared_lock lock(mutex_);
  for (const KernelDef& k : kernels_) {
    if (k.op == op && k.domain == domain && k.backend == backend && opset >= k.since_version &&
        opset <= k.until_version) {
      return &k;
    }
  }
  return nullptr;
}

std::vector<const KernelDef*> KernelRegistry::all() const {
  std::shared_lock lock(mutex_);
  std::vector<const KernelDef*> out;
  for (const KernelDef& k : kernels_) out.push_back(&k);
  return out;
}

}  // namespace ingot
