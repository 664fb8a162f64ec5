#include "compiler/executable.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/backend.h"
#include "core/strings.h"

namespace ingot {

namespace {

// Every value name a node's subgraphs read (their free variables, and then some): such names must
// stay alive until the node has run.
void collect_subgraph_reads(const Node& node, std::set<std::string>& reads) {
  for (const auto& [k, a] : node.attrs) {
    std::vector<const Graph*> graphs;
    if (a.g) graphs.push_back(a.g.get());
    for (const auto& g : a.graphs) graphs.push_back(g.get());
    for (const Graph* g : graphs) {
      g->for_each_graph([&](const Graph& sg, int) {
        for (const Node& n : sg.nodes) reads.insert(n.inputs.begin(), n.inputs.end());
        for (const auto& o : sg.outputs) reads.insert(o.name);
      });
    }
  }
}

// The dtype of a value when the graph knows it statically (initializer, graph input, inferred type).
DType static_dtype(const Graph& g, const std::string& name) {
  if (auto it = g.initializers.find(name); it != g.initializers.end()) return it->second.dtype();
  const ValueInfo* vi = g.find_value_info(name);
  return vi && vi->type.kind == ValueKind::Tensor ? vi->type.dtype : DType::Undefined;
}

// The statically known dtype of each input (Undefined where unknown or omitted).
std::vector<DType> static_input_dtypes(const Graph& g, const Node& n) {
  std::vector<DType> dtypes;
  for (const std::string& in : n.inputs) dtypes.push_back(in.empty() ? DType::Undefined : static_dtype(g, in));
  return dtypes;
}

// A kernel declares the dtypes it accepts (of its first input, and per type variable of the op's
// signature); a model whose types are known is rejected at load time, naming the node, rather than
// when the node first runs.
void check_kernel_dtype(const Graph& g, const Node& n, const OpDef& def, const KernelDef& kernel,
                        std::string_view backend) {
  if (!kernel.dtypes.empty() && !n.inputs.empty() && !n.inputs[0].empty()) {
    DType dt = static_dtype(g, n.inputs[0]);
    if (!kernel.supports(dt)) {
      fail("input 0 ('{}') has dtype {}, which the {} kernel of {} does not support (it takes {})", n.inputs[0],
           dtype_name(dt), backend, n.op_type,
           join(kernel.dtypes, ", ", [](DType d) { return std::string(dtype_name(d)); }));
    }
  }
  std::string why = kernel.rejects_types(def, static_input_dtypes(g, n));
  if (!why.empty()) fail("the {} kernel of {} does not take this node: {}", backend, n.op_type, why);
}

// The node's attributes and its inputs' static dtypes and ranks, for a kernel's own limits.
NodeSignature node_signature(const Graph& g, const Node& n) {
  NodeSignature sig{n.attrs, {}};
  for (const std::string& in : n.inputs) {
    StaticInput s;
    if (!in.empty()) {
      s.dtype = static_dtype(g, in);
      if (auto it = g.initializers.find(in); it != g.initializers.end()) {
        s.rank = int(it->second.rank());
      } else if (const ValueInfo* vi = g.find_value_info(in); vi && vi->type.kind == ValueKind::Tensor && vi->type.shape) {
        s.rank = int(vi->type.shape->size());
      }
    }
    sig.inputs.push_back(s);
  }
  return sig;
}

bool is_integral_or_bool(DType dt) { return dt != DType::Undefined && !is_floating(dt) && dt != DType::String; }

// An op whose first output is not its first input's data (its type variable differs: Shape's T1
// against T), as opposed to a view (Reshape's, Unsqueeze's output is T like the data).
bool metadata_read(const OpDef& def) {
  const OpSignature& sig = def.signature();
  const ParamDef *in = sig.input(0), *out = sig.output(0);
  return in && out && in->type != out->type;
}

// Placement of one node on an accelerator build: returns the kernel and device and says why.
struct Choice {
  const KernelDef* kernel = nullptr;
  Device device;
  bool fallback = false;
  std::string reason;
};

Choice place(const Graph& g, const Node& n, int opset, Device accel, const std::set<std::string>& on_host) {
  const KernelRegistry& reg = KernelRegistry::instance();
  const KernelDef* cpu = reg.find(n.domain, n.op_type, DeviceType::CPU, opset);
  if (accel.type == DeviceType::CPU) return {cpu, accel, false, ""};
  if (cpu && cpu->any_device) return {cpu, Device::cpu(), false, "reads only shapes or makes a view"};
  // Shape arithmetic: every input already on the host and every output an integer or bool, but for
  // 8-bit integers: quantized data (a QDQ model's QuantizeLinear of its input, an int8 convolution
  // of that), which belongs on the device.
  bool host_inputs = true, int_outputs = !n.outputs.empty();
  for (const auto& in : n.inputs) {
    if (!in.empty() && !on_host.count(in)) host_inputs = false;
  }
  for (const auto& out : n.outputs) {
    if (out.empty()) continue;
    const DType dt = static_dtype(g, out);
    if (!is_integral_or_bool(dt) || dt == DType::Int8 || dt == DType::UInt8) int_outputs = false;
  }
  if (cpu && host_inputs && int_outputs) return {cpu, Device::cpu(), false, "shape arithmetic"};
  const std::string label = backend_for(accel).label();
  const KernelDef* gpu = reg.find(n.domain, n.op_type, accel.type, opset);
  if (!gpu) return {cpu, Device::cpu(), true, fmt::format("no {} kernel for {} at opset {}", label, n.op_type, opset)};
  const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
  DType dt = n.inputs.empty() || n.inputs[0].empty() ? DType::Undefined : static_dtype(g, n.inputs[0]);
  if (!gpu->supports(dt))
    return {cpu, Device::cpu(), true, fmt::format("the {} kernel does not take {}", label, dtype_name(dt))};
  std::string why = def ? gpu->rejects_types(*def, static_input_dtypes(g, n)) : "";
  if (why.empty()) why = gpu->rejects(node_signature(g, n));
  if (!why.empty()) return {cpu, Device::cpu(), true, fmt::format("the {} kernel does not take this node: {}", label, why)};
  return {gpu, accel, false, ""};
}

}  // namespace

bool GraphPlan::is_initializer(int slot) const {
  return std::any_of(initializers.begin(), initializers.end(), [&](const auto& init) { return init.first == slot; });
}

std::shared_ptr<const Executable> Executable::build(std::shared_ptr<const Model> model, Device device,
                                                   std::vector<bool> inputs_on_device) {
  if (!backend_for(device).memory().available(device.index)) {
    fail("device {} is not available on this machine (no such GPU is visible)", device.str());
  }
  std::shared_ptr<Executable> ex(new Executable(std::move(model), device));
  ex->plan_graphs(inputs_on_device);
  return ex;
}

void Executable::plan_graphs(const std::vector<bool>& inputs_on_device) {
  const bool device_inputs = std::find(inputs_on_device.begin(), inputs_on_device.end(), true) != inputs_on_device.end();
  std::set<std::string> on_host;  // values expected on the host (names are unique across subgraphs)
  model_->graph->for_each_graph([&](const Graph& g, int depth) {
    for (const auto& [name, t] : g.initializers) on_host.insert(name);
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const bool device_input = depth == 0 && i < inputs_on_device.size() && inputs_on_device[i];
      if (!device_input) on_host.insert(g.inputs[i].name);
    }
  });
  model_->graph->for_each_graph([&](const Graph& g, int) {
    auto plan = std::make_unique<GraphPlan>();
    auto slot = [&](const std::string& name) {
      auto [it, inserted] = plan->slot_of.emplace(name, plan->num_slots);
      if (inserted) ++plan->num_slots;
      return it->second;
    };
    for (const auto& [name, t] : g.initializers) plan->initializers.emplace_back(slot(name), t);
    for (const auto& in : g.inputs) plan->input_slots.push_back(slot(in.name));
    for (const Node& n : g.nodes) {
      for (const auto& o : n.outputs) {
        if (!o.empty()) slot(o);
      }
    }
    std::unordered_map<int, size_t> last_use;
    std::set<int> graph_outputs;
    for (const auto& out : g.outputs) {
      auto it = plan->slot_of.find(out.name);
      plan->output_slots.push_back(it == plan->slot_of.end() ? -2 : it->second);
      if (it != plan->slot_of.end()) graph_outputs.insert(it->second);
    }
    for (const Node& n : g.nodes) {
      GraphPlan::Step step{&n, nullptr, nullptr, int(model_->opset(n.domain)), {}, {}, {}, {}, device_, false};
      step.def = OpCatalogue::instance().find(n.domain, n.op_type);
      Choice choice = place(g, n, step.opset, device_, on_host);
      step.kernel = choice.kernel;
      step.device = choice.device;
      step.fallback = choice.fallback;
      try {
        if (!step.def || !step.kernel) {
          fail("unsupported op {}{} at opset {}: no CPU kernel", n.domain.empty() ? "" : n.domain + ".", n.op_type,
               step.opset);
        }
        check_kernel_dtype(g, n, *step.def, *step.kernel, backend_for(step.device).label());
      } catch (Error& e) {
        e.add_context(n.label());
        e.add_context("model '" + model_->name + "'");
        throw;
      }
      for (const auto& in : n.inputs) {
        if (in.empty())
          step.input_slots.push_back(-1);
        else if (auto it = plan->slot_of.find(in); it != plan->slot_of.end())
          step.input_slots.push_back(it->second);
        else
          step.input_slots.push_back(-2);
      }
      for (size_t i = 0; i < step.input_slots.size() && i < 64; ++i) {
        if (step.input_slots[i] >= 0 && plan->is_initializer(step.input_slots[i])) step.constant_inputs |= uint64_t(1) << i;
      }
      for (const auto& o : n.outputs) step.output_slots.push_back(o.empty() ? -1 : plan->slot_of.at(o));
      if (step.device.type == DeviceType::CPU && !step.kernel->any_device) {
        for (const auto& o : n.outputs) on_host.insert(o);
      } else if (step.kernel->any_device) {
        // Views and metadata: Shape/Size results are new host tensors; a view lives with its input.
        // An integer view is taken for shape data (on the host) unless inputs arrive on the device
        // (compile(f) of device tensors: Unsqueeze of labels on the GPU stays there). (Sessions keep
        // the older rule until the GPU suites have run with the narrower one.)
        const bool integer_output = !n.outputs.empty() && is_integral_or_bool(static_dtype(g, n.outputs[0]));
        const bool shape_data = device_inputs ? step.def && metadata_read(*step.def) : true;
        bool host = n.inputs.empty() || n.inputs[0].empty() || on_host.count(n.inputs[0]) ||
                    (integer_output && shape_data);
        if (host) on_host.insert(n.outputs.begin(), n.outputs.end());
      }
      placement_.push_back({n.name.empty() ? fmt::format("#{}", plan->steps.size()) : n.name, n.op_type,
                            step.device, step.fallback, choice.reason});
      size_t index = plan->steps.size();
      for (int s : step.input_slots) {
        if (s >= 0) last_use[s] = index;
      }
      std::set<std::string> reads;
      collect_subgraph_reads(n, reads);
      for (const auto& r : reads) {
        if (auto it = plan->slot_of.find(r); it != plan->slot_of.end()) {
          last_use[it->second] = index;
          step.body_reads.push_back(it->second);
        }
      }
      if (!reads.empty()) {
        for (int s : step.input_slots) {
          if (s >= 0) step.body_reads.push_back(s);
        }
      }
      plan->steps.push_back(std::move(step));
    }
    // Graph inputs and initializers are freed too once dead: they are references, so freeing only
    // drops this run's handle. Graph outputs are never freed.
    for (const auto& [s, index] : last_use) {
      if (!graph_outputs.count(s)) plan->steps[index].free_after.push_back(s);
    }
    plan->graph = &g;
    plans_[&g] = std::move(plan);
  });
  if (device_.type == DeviceType::CPU) return;
  // Top-level inputs some step reads on the host (names are unique across subgraphs, which read
  // outer values by name).
  const auto& top_inputs = model_->graph->inputs;
  std::set<size_t> host_read;
  for (const auto& [graph, plan] : plans_) {
    for (const GraphPlan::Step& step : plan->steps) {
      for (size_t i = 0; i < step.node->inputs.size(); ++i) {
        const bool on_host = (step.device.type == DeviceType::CPU && !step.kernel->any_device) ||
                             (step.device.type != DeviceType::CPU && step.kernel->is_host_input(i));
        if (!on_host) continue;
        for (size_t k = 0; k < top_inputs.size(); ++k) {
          if (top_inputs[k].name == step.node->inputs[i]) host_read.insert(k);
        }
      }
    }
  }
  host_read_inputs_.assign(host_read.begin(), host_read.end());
}

const GraphPlan& Executable::plan(const Graph& graph) const {
  auto it = plans_.find(&graph);
  if (it == plans_.end()) fail("graph '{}' was not prepared for this model", graph.name);
  return *it->second;
}

std::vector<const GraphPlan*> Executable::plans() const {
  std::vector<const GraphPlan*> out;
  for (const auto& [g, p] : plans_) out.push_back(p.get());
  return out;
}

std::vector<NodePlacement> Executable::fallbacks() const {
  std::vector<NodePlacement> out;
  for (const auto& p : placement_) {
    if (p.fallback) out.push_back(p);
  }
  return out;
}

std::string Executable::fallback_summary() const {
  std::map<std::string, int> count;
  std::map<std::string, std::string> reason;
  for (const auto& p : placement_) {
    if (!p.fallback) continue;
    ++count[p.op];
    reason[p.op] = p.reason;
  }
  if (count.empty()) return "";
  int total = 0;
  for (const auto& [op, c] : count) total += c;
  std::string ops = join(count, ", ", [&](const auto& kv) { return fmt::format("{} x{} ({})", kv.first, kv.second,
                                                                                reason[kv.first]); });
  return fmt::format("{} of {} nodes run on the CPU instead of {}: {}", total, placement_.size(), device_.str(), ops);
}

}  // namespace ingot
