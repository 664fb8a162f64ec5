#include "runtime/executor.h"

#include <algorithm>
#include <set>

#include "core/strings.h"
#include "core/thread_pool.h"
#include "profiler/hooks.h"

namespace ingot {

struct Executor::Plan {
  struct Step {
    const Node* node;
    const OpDef* def;
    const KernelDef* kernel;
    int opset;
    std::vector<int> input_slots;         // -1: omitted optional input; -2: resolved by name in an outer graph
    std::vector<int> output_slots;        // -1: unused optional output
    std::vector<int> free_after;          // slots whose last use is this step
    mutable std::shared_ptr<void> state;  // kernel's per-node cache
  };
  std::unordered_map<std::string, int> slot_of;
  int num_slots = 0;
  std::vector<std::pair<int, Tensor>> initializers;
  std::vector<int> input_slots, output_slots;
  std::vector<Step> steps;
};

struct Executor::Env {
  const Plan* plan;
  const Env* parent;
  std::vector<Value> slots;

  const Value* find(const std::string& name) const {
    // A name defined in this graph shadows outer ones; its value may legitimately be None (an
    // empty optional), so it never falls through to an enclosing graph.
    if (auto it = plan->slot_of.find(name); it != plan->slot_of.end()) return &slots[size_t(it->second)];
    return parent ? parent->find(name) : nullptr;
  }
};

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

// A kernel declares the dtypes of its first input it accepts; a model whose types are known is
// rejected at load time, naming the node, rather than when the node first runs.
void check_kernel_dtype(const Graph& g, const Node& n, const KernelDef& kernel, std::string_view backend) {
  if (kernel.dtypes.empty() || n.inputs.empty() || n.inputs[0].empty()) return;
  DType dt = static_dtype(g, n.inputs[0]);
  if (dt == DType::Undefined || std::find(kernel.dtypes.begin(), kernel.dtypes.end(), dt) != kernel.dtypes.end())
    return;
  fail("input 0 ('{}') has dtype {}, which the {} kernel of {} does not support (it takes {})", n.inputs[0],
       dtype_name(dt), backend, n.op_type,
       join(kernel.dtypes, ", ", [](DType d) { return std::string(dtype_name(d)); }));
}

}  // namespace

Executor::Executor(std::shared_ptr<const Model> model, Device device) : model_(std::move(model)), device_(device) {
  if (device_.type != DeviceType::CPU) fail("device {} is not supported by this executor yet", device_.str());
  model_->graph->for_each_graph([&](const Graph& g, int) {
    auto plan = std::make_unique<Plan>();
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
      Plan::Step step{&n, nullptr, nullptr, int(model_->opset(n.domain)), {}, {}, {}, nullptr};
      step.def = OpCatalogue::instance().find(n.domain, n.op_type);
      step.kernel = KernelRegistry::instance().find(n.domain, n.op_type, device_.type, step.opset);
      try {
        if (!step.def || !step.kernel) {
          fail("unsupported op {}{} at opset {}: no {} kernel", n.domain.empty() ? "" : n.domain + ".", n.op_type,
               step.opset, device_.type == DeviceType::CPU ? "CPU" : "CUDA");
        }
        check_kernel_dtype(g, n, *step.kernel, device_.type == DeviceType::CPU ? "CPU" : "CUDA");
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
      for (const auto& o : n.outputs) step.output_slots.push_back(o.empty() ? -1 : plan->slot_of.at(o));
      size_t index = plan->steps.size();
      for (int s : step.input_slots) {
        if (s >= 0) last_use[s] = index;
      }
      std::set<std::string> reads;
      collect_subgraph_reads(n, reads);
      for (const auto& r : reads) {
        if (auto it = plan->slot_of.find(r); it != plan->slot_of.end()) last_use[it->second] = index;
      }
      plan->steps.push_back(std::move(step));
    }
    // Graph inputs and initializers are freed too once dead: they are references, so freeing only
    // drops this run's handle. Graph outputs are never freed.
    for (const auto& [s, index] : last_use) {
      if (!graph_outputs.count(s)) plan->steps[index].free_after.push_back(s);
    }
    plans_[&g] = std::move(plan);
  });
}

Executor::~Executor() {
  if (profiler::enabled()) [[unlikely]]
    profiler::detail::forget_nodes();
}

const Executor::Plan& Executor::plan_for(const Graph& graph) const {
  auto it = plans_.find(&graph);
  if (it == plans_.end()) fail("graph '{}' was not prepared by this executor", graph.name);
  return *it->second;
}

std::vector<Value> Executor::run(const std::vector<Value>& inputs) {
  cpu_pool();  // make sure the pool and library thread counts are set up before timing-sensitive work
  profiler::detail::Range range;  // off: one relaxed load and branch, nothing else
  if (profiler::enabled()) [[unlikely]]
    range.begin();
  std::vector<Value> outputs = run_graph(*model_->graph, inputs, nullptr);
  if (range.active()) [[unlikely]]
    range.end_session(model_->name);
  return outputs;
}

std::vector<Value> Executor::run_subgraph(const Graph& graph, const std::vector<Value>& inputs) {
  return run_graph(graph, inputs, current_env_);
}

std::vector<Value> Executor::run_graph(const Graph& graph, const std::vector<Value>& inputs, const Env* parent) {
  const Plan& plan = plan_for(graph);
  if (inputs.size() != plan.input_slots.size()) {
    fail("graph '{}' takes {} inputs, {} given", graph.name, plan.input_slots.size(), inputs.size());
  }
  Env env{&plan, parent, std::vector<Value>(size_t(plan.num_slots))};
  for (const auto& [slot, t] : plan.initializers) env.slots[size_t(slot)] = Value(t);
  for (size_t i = 0; i < inputs.size(); ++i) env.slots[size_t(plan.input_slots[i])] = inputs[i];

  const Env* saved_env = current_env_;
  std::vector<const Value*> in_values;
  std::vector<Value> out_values;
  for (const auto& step : plan.steps) {
    const Node& node = *step.node;
    try {
      in_values.clear();
      for (size_t i = 0; i < step.input_slots.size(); ++i) {
        int s = step.input_slots[i];
        if (s == -1) {
          in_values.push_back(nullptr);
          continue;
        }
        const Value* v = s >= 0 ? &env.slots[size_t(s)] : env.find(node.inputs[i]);
        if (!v) fail("input {} ('{}') has no value", i, node.inputs[i]);
        in_values.push_back(v);
      }
      out_values.assign(step.output_slots.size(), Value());
      current_env_ = &env;
      KernelContext ctx(*step.def, node.attrs, step.opset, in_values, out_values, this, &step.state);
      profiler::detail::Range range;  // off: one relaxed load and branch, nothing else
      if (profiler::enabled()) [[unlikely]]
        range.begin();
      step.kernel->fn(ctx);
      if (range.active()) [[unlikely]]
        range.end_op(node, "cpu", in_values);
      current_env_ = saved_env;
    } catch (Error& e) {
      current_env_ = saved_env;
      e.add_context(node.label());
      throw;
    }
    for (size_t i = 0; i < step.output_slots.size(); ++i) {
      if (step.output_slots[i] >= 0) env.slots[size_t(step.output_slots[i])] = std::move(out_values[i]);
    }
    for (int s : step.free_after) env.slots[size_t(s)] = Value();
  }
  std::vector<Value> outputs;
  for (size_t i = 0; i < plan.output_slots.size(); ++i) {
    int s = plan.output_slots[i];
    const Value* v = s >= 0 ? &env.slots[size_t(s)] : env.find(graph.outputs[i].name);
    if (!v) fail("graph '{}': output '{}' has no value", graph.name, graph.outputs[i].name);
    outputs.push_back(*v);
  }
  return outputs;
}

}  // namespace ingot
