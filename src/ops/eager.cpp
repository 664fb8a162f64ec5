// Eager calls: the same catalogue entry and the same kernel as graph execution, run immediately.
#include <ingot/ops.h>

#include <fmt/format.h>

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "autograd/tape.h"
#include "ops/autocast.h"
#include "autograd/trace.h"
#include "core/backend.h"
#include "core/thread_pool.h"
#include "graph/graph.h"
#include "ops/kernel.h"
#include "profiler/hooks.h"

namespace ingot::ops {
namespace {

// One line on stderr the first time an op runs on the CPU for accelerator tensors.
void report_fallback(const std::string& op, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard lock(mutex);
  if (reported.insert(op).second)
    fmt::print(stderr, "ingot: eager {} runs on the CPU ({}); its inputs and outputs are copied\n", op, why);
}

// The stand-in node a profile records eager calls of an op under (named "eager <op>"): made once
// per op and kept, so the profiler's pointers to it never dangle.
const Node& profiled_node(const OpDef& def) {
  static std::mutex mutex;
  static std::map<const OpDef*, std::unique_ptr<Node>> nodes;
  std::lock_guard lock(mutex);
  std::unique_ptr<Node>& n = nodes[&def];
  if (!n) {
    n = std::make_unique<Node>();
    n->name = "eager " + def.name;
    n->op_type = def.name;
    n->domain = def.domain;
  }
  return *n;
}

// The state eager calls of one signature share, for kernels whose state is a signature-keyed cache
// (KernelDef::eager_state: cuDNN plans, backward-filter algorithm choices): a training step's
// convolutions then build their plans once, not at every step. Keyed by the kernel, opset, device,
// attributes and input shapes; the 1024 most recently used are kept. Null (a fresh state per call)
// for other kernels and for attributes that hold tensors or graphs.
std::shared_ptr<NodeState> eager_state(const KernelDef& kernel, const Attributes& attrs, int opset,
                                       const std::vector<Value>& inputs, size_t outputs, Device device) {
  if (!kernel.eager_state) return nullptr;
  std::string key = fmt::format("{}|{}|{}|{}|{}", static_cast<const void*>(&kernel), opset, device.str(), outputs, attrs.size());
  for (const auto& [name, a] : attrs) {
    if (a.kind == AttrKind::Tensor || a.kind == AttrKind::Graph || a.kind == AttrKind::Tensors || a.kind == AttrKind::Graphs)
      return nullptr;
    fmt::format_to(std::back_inserter(key), "|{}={}", name, a.str());
  }
  for (const Value& v : inputs) {
    if (v.kind == Value::Kind::None) {
      key += "|-";
    } else {
      fmt::format_to(std::back_inserter(key), "|{}{}", dtype_name(v.tensor.dtype()), shape_str(v.tensor.shape()));
    }
  }
  constexpr size_t kMaxStates = 1024;
  struct Cache {
    std::mutex mutex;
    std::list<std::pair<std::string, std::shared_ptr<NodeState>>> recent;  // most recent first
    std::unordered_map<std::string, std::list<std::pair<std::string, std::shared_ptr<NodeState>>>::iterator> index;
  };
  // Never destroyed: states may hold device memory and library handles, which must not be released
  // after the CUDA runtime has shut down at exit.
  static Cache* cache = new Cache;
  std::lock_guard lock(cache->mutex);
  if (auto it = cache->index.find(key); it != cache->index.end()) {
    cache->recent.splice(cache->recent.begin(), cache->recent, it->second);
    return it->second->second;
  }
  if (cache->recent.size() == kMaxStates) {
    cache->index.erase(cache->recent.back().first);
    cache->recent.pop_back();
  }
  cache->recent.emplace_front(key, std::make_shared<NodeState>());
  cache->index[cache->recent.front().first] = cache->recent.begin();
  return cache->recent.front().second;
}

}  // namespace

std::vector<Tensor> call(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs,
                         int num_outputs, const std::string& domain, int requested_opset) {
  try {
    cpu_pool();  // this thread's OpenMP team sized as configured (core/thread_pool.h)
    const OpDef* def = OpCatalogue::instance().find(domain, op);
    if (!def) fail("unsupported op {} (not in Ingot's op catalogue)", op);
    Device device = Device::cpu();
    for (const Tensor& t : inputs) {
      if (t.defined() && t.device().type != DeviceType::CPU) device = t.device();
    }
    if (const DType low = detail::active_autocast(device); low != DType::Undefined) [[unlikely]] {
      if (auto cast = detail::autocast_inputs(*def, inputs, low)) return call(op, *cast, attrs, num_outputs, domain, requested_opset);
    }
    // Eager calls use the newest opset the definition covers, so that inputs-over-attributes forms apply,
    // unless the caller runs a model's node (constant folding) and names the model's opset.
    int opset = requested_opset > 0 ? requested_opset : def->until_version == INT_MAX ? 21 : def->until_version;
    // The kernel for the opset, else (no opset named) the backend's newest kernel of the op.
    auto find = [&](DeviceType backend, int& at) -> const KernelDef* {
      if (const KernelDef* k = KernelRegistry::instance().find(domain, op, backend, at)) return k;
      if (requested_opset > 0) return nullptr;
      const KernelDef* newest = nullptr;
      for (const KernelDef* k : KernelRegistry::instance().all()) {
        if (k->op == op && k->domain == domain && k->backend == backend) newest = k;
      }
      if (newest) at = newest->until_version == INT_MAX ? newest->since_version : newest->until_version;
      return newest;
    };
    int kernel_opset = opset;
    const KernelDef* kernel = find(device.type, kernel_opset);
    const DType first = !inputs.empty() && inputs[0].defined() ? inputs[0].dtype() : DType::Undefined;
    // Accelerator tensors an op has no kernel for there run on the CPU, as graphs do (reported once
    // per op), their outputs copied back; views and shape reads (any_device) run on the host by
    // design, with no copies.
    bool fallback = false;
    const Device result_device = device;
    if (device.type != DeviceType::CPU && (!kernel || !kernel->supports(first))) {
      int cpu_opset = opset;
      if (const KernelDef* cpu = find(DeviceType::CPU, cpu_opset)) {
        fallback = !cpu->any_device;
        if (fallback)
          report_fallback(op, kernel ? fmt::format("its {} kernel does not take {}", device.str(), dtype_name(first))
                                     : fmt::format("no {} kernel", device.str()));
        kernel = cpu;
        kernel_opset = cpu_opset;
        device = Device::cpu();
      }
    }
    if (!kernel) fail("no {} kernel for op {}", result_device.str(), op);
    opset = kernel_opset;
    std::vector<Value> in_values;
    in_values.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      if (!t.defined()) {
        in_values.emplace_back();
      } else {
        in_values.emplace_back(kernel->is_host_input(i) || kernel->any_device ? t : t.to(device));
        if (kernel->is_host_input(i)) in_values.back().tensor = t.to(Device::cpu());
      }
    }
    std::vector<const Value*> in_ptrs;
    for (const Value& v : in_values) in_ptrs.push_back(v.kind == Value::Kind::None ? nullptr : &v);
    std::vector<Value> outputs(size_t(num_outputs >= 0 ? num_outputs : def->min_outputs));
    std::shared_ptr<NodeState> shared = eager_state(*kernel, attrs, opset, in_values, outputs.size(), device);
    NodeState fresh;
    NodeState* state = shared ? shared.get() : &fresh;
    profiler::detail::Range range;  // off: one relaxed load and branch
    const Node* profiled = nullptr;
    if (profiler::detail::op_hooks()) [[unlikely]] {
      profiled = &profiled_node(*def);
      range.begin_op(*profiled, device.type != DeviceType::CPU);
    }
    KernelContext ctx(*def, attrs, opset, in_ptrs, outputs, nullptr, state, device);
    kernel->fn(ctx);
    if (range.active()) [[unlikely]]
      range.end_op(*profiled, backend_for(device).name(), in_ptrs, fallback);
    std::vector<Tensor> result;
    for (Value& v : outputs) result.push_back(fallback && v.tensor.defined() ? v.tensor.to(result_device) : std::move(v.tensor));
    if (auto* tracer = autograd::detail::Tracer::active()) tracer->record(*def, attrs, opset, inputs, result);
    if (autograd::detail::should_record(inputs)) {
      autograd::detail::record(*def, attrs, opset, inputs, result);
    } else {
      for (Tensor& t : result) {
        if (t.autograd_meta()) t.set_autograd_meta(nullptr);  // an input passed through (Identity) keeps none
      }
    }
    return result;
  } catch (Error& e) {
    e.add_context("eager " + op);
    throw;
  }
}

static Tensor call1(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) {
  return call(op, inputs, attrs, 1).at(0);
}

Tensor add(const Tensor& a, const Tensor& b) { return call1("Add", {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call1("Sub", {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call1("Mul", {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call1("Div", {a, b}); }
Tensor matmul(const Tensor& a, const Tensor& b) { return call1("MatMul", {a, b}); }
Tensor relu(const Tensor& x) { return call1("Relu", {x}); }
Tensor sigmoid(const Tensor& x) { return call1("Sigmoid", {x}); }
Tensor tanh(const Tensor& x) { return call1("Tanh", {x}); }
Tensor exp(const Tensor& x) { return call1("Exp", {x}); }
Tensor softmax(const Tensor& x, int64_t axis) { return call1("Softmax", {x}, {{"axis", axis}}); }

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  Attributes attrs;
  if (!perm.empty()) attrs["perm"] = perm;
  return call1("Transpose", {x}, attrs);
}

Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape) {
  return call1("Reshape", {x, Tensor::from_vector<int64_t>(shape, {int64_t(shape.size())})});
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) { return call1("Concat", xs, {{"axis", axis}}); }

static Tensor reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return call1(op, {x, Tensor::from_vector<int64_t>(axes, {int64_t(axes.size())})}, {{"keepdims", int64_t(keepdims)}});
}
Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce("ReduceSum", x, axes, keepdims);
}
Tensor reduce_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce("ReduceMean", x, axes, keepdims);
}

Tensor conv(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, const ConvOptions& options) {
  Attributes attrs{{"group", options.group}, {"auto_pad", options.auto_pad}};
  if (!options.strides.empty()) attrs["strides"] = options.strides;
  if (!options.pads.empty()) attrs["pads"] = options.pads;
  if (!options.dilations.empty()) attrs["dilations"] = options.dilations;
  return call1("Conv", {x, w, bias.value_or(Tensor())}, attrs);
}

static Attributes pool_attrs(const PoolOptions& options) {
  Attributes attrs{{"kernel_shape", options.kernel_shape}, {"ceil_mode", int64_t(options.ceil_mode)}};
  if (!options.strides.empty()) attrs["strides"] = options.strides;
  if (!options.pads.empty()) attrs["pads"] = options.pads;
  return attrs;
}
Tensor max_pool(const Tensor& x, const PoolOptions& options) { return call1("MaxPool", {x}, pool_attrs(options)); }
Tensor average_pool(const Tensor& x, const PoolOptions& options) {
  return call1("AveragePool", {x}, pool_attrs(options));
}

}  // namespace ingot::ops
