// Export of nn modules (include/ingot/nn.h): the forward traced (autograd/trace.h) in eval mode,
// without autocast or the tape, its initializers renamed after the state_dict, then written as ONNX
// (onnx/onnx_export.h) or run through the package conversion (package/package.h).
#include <fmt/format.h>
#include <ingot/autograd.h>
#include <ingot/nn.h>
#include <ingot/ops.h>

#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "autograd/trace.h"
#include "graph/graph.h"
#include "onnx/onnx_export.h"
#include "ops/autocast.h"
#include "ops/op_def.h"
#include "package/package.h"

namespace ingot::nn {
namespace {

using DataKey = std::tuple<const void*, size_t, DType, Shape>;
DataKey data_key(const Tensor& t) { return {t.storage().get(), t.byte_offset(), t.dtype(), t.shape()}; }

std::vector<std::string> names_or_default(const std::vector<std::string>& given, size_t count, const char* stem,
                                          const char* what) {
  if (given.empty()) {
    if (count == 1) return {stem};
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) names.push_back(fmt::format("{}_{}", stem, i));
    return names;
  }
  if (given.size() != count) fail("export: {} {} names given for {} {}s", given.size(), what, count, what);
  if (std::set<std::string>(given.begin(), given.end()).size() != given.size())
    fail("export: the {} names repeat a name", what);
  return given;
}

// Renames values throughout a graph (its inputs, outputs, value_info, initializers and node operands).
void rename(Graph& g, const std::map<std::string, std::string>& to) {
  auto fix = [&](std::string& name) {
    if (auto it = to.find(name); it != to.end()) name = it->second;
  };
  for (ValueInfo& vi : g.inputs) fix(vi.name);
  for (ValueInfo& vi : g.outputs) fix(vi.name);
  std::map<std::string, ValueInfo> info;
  for (auto& [name, vi] : g.value_info) {
    fix(vi.name);
    info.emplace(vi.name, vi);
  }
  g.value_info = std::move(info);
  std::map<std::string, Tensor> inits;
  for (auto& [name, t] : g.initializers) {
    std::string n = name;
    fix(n);
    inits.emplace(n, t);
  }
  g.initializers = std::move(inits);
  for (Node& n : g.nodes) {
    for (std::string& v : n.inputs) fix(v);
    for (std::string& v : n.outputs) fix(v);
  }
}

// One trace of `forward` on `inputs`, with parameters, inputs and outputs named.
std::shared_ptr<Model> trace_once(Module& module, const ExportFunction& forward, const std::vector<Tensor>& inputs,
                                  const ExportOptions& options) {
  std::shared_ptr<Model> model;
  {
    autograd::detail::Tracer tracer;
    for (const Tensor& t : inputs) {
      if (!t.defined()) fail("export: an example input is undefined");
      tracer.add_input(t);
    }
    std::vector<Tensor> outputs = forward(inputs);
    if (outputs.empty()) fail("export: the forward returned no tensor");
    model = tracer.finish(outputs, options.name);
  }
  Graph& g = *model->graph;
  g.name = options.name;
  std::map<DataKey, std::string> state;
  for (const auto& [name, t] : module.state_dict()) state.emplace(data_key(t), name);
  std::map<std::string, std::string> to;
  for (const auto& [name, t] : g.initializers) {
    if (auto it = state.find(data_key(t)); it != state.end()) to[name] = it->second;
  }
  const auto in = names_or_default(options.input_names, g.inputs.size(), "input", "input");
  const auto out = names_or_default(options.output_names, g.outputs.size(), "output", "output");
  for (size_t i = 0; i < in.size(); ++i) to[g.inputs[i].name] = in[i];
  for (size_t i = 0; i < out.size(); ++i) to[g.outputs[i].name] = out[i];
  // A user's name may not collide with a traced value's ("v12", "const_3") or a parameter's.
  std::set<std::string> taken;
  for (const auto& [from, name] : to) {
    if (!taken.insert(name).second) fail("export: '{}' names two values of the graph", name);
  }
  for (const auto& [name, vi] : g.value_info) {
    if (!to.count(name) && taken.count(name)) fail("export: the name '{}' is taken by a traced value", name);
  }
  rename(g, to);
  return model;
}

// `t` with its first row repeated once more: the same data at batch size + 1.
Tensor one_more_row(const Tensor& t) {
  if (t.rank() < 1 || t.dim(0) < 1)
    fail("export: dynamic_batch needs every example input to have a batch axis (got {})", t.describe());
  return ops::call("Concat", {t, t.slice_rows(0, 1)}, {{"axis", int64_t(0)}}, 1).at(0);
}

bool same_data(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  if (x.dtype() == DType::String) return false;
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Marks the batch axis symbolic: `other` is the trace at batch + 1; the graphs must agree node for
// node, and every dim that grew with the batch becomes "batch".
void make_batch_dynamic(Model& model, const Model& other) {
  Graph& g = *model.graph;
  const Graph& h = *other.graph;
  auto batch_dependent = [](const Node& n, const std::string& why) {
    fail("export: dynamic_batch: {} depends on the batch size ({}); the forward bakes the batch into the graph "
         "(a Reshape to a fixed shape, say): export with a fixed batch, or reshape with -1 / 0",
         n.label(), why);
  };
  if (g.nodes.size() != h.nodes.size())
    fail("export: dynamic_batch: the forward traces {} ops at one batch size and {} at another", g.nodes.size(),
         h.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node &a = g.nodes[i], &b = h.nodes[i];
    if (a.op_type != b.op_type || a.inputs.size() != b.inputs.size())
      fail("export: dynamic_batch: the forward traces {} at one batch size and {} at another", a.label(), b.label());
    for (const auto& [name, attr] : a.attrs) {
      auto it = b.attrs.find(name);
      if (it == b.attrs.end() || it->second.str() != attr.str()) batch_dependent(a, "attribute " + name);
    }
    for (size_t k = 0; k < a.inputs.size(); ++k) {
      auto x = g.initializers.find(a.inputs[k]);
      auto y = h.initializers.find(b.inputs[k]);
      if ((x == g.initializers.end()) != (y == h.initializers.end())) batch_dependent(a, fmt::format("input {}", k));
      if (x != g.initializers.end() && !same_data(x->second, y->second))
        batch_dependent(a, fmt::format("its constant input {} differs", k));
    }
  }
  auto mark = [](ValueInfo& vi, const ValueInfo* at_other) {
    if (!at_other || !vi.type.shape || !at_other->type.shape) return;
    auto& dims = *vi.type.shape;
    const auto& others = *at_other->type.shape;
    for (size_t d = 0; d < dims.size() && d < others.size(); ++d) {
      if (dims[d].is_static() && others[d].is_static() && dims[d].value + 1 == others[d].value) dims[d] = Dim{-1, "batch"};
    }
  };
  for (size_t i = 0; i < g.inputs.size(); ++i) mark(g.inputs[i], &h.inputs[i]);
  for (size_t i = 0; i < g.outputs.size(); ++i) mark(g.outputs[i], &h.outputs[i]);
  for (auto& [name, vi] : g.value_info) mark(vi, h.find_value_info(name));
}

// Rewrites Ingot's own ops the trace may hold into ONNX ops, for export_onnx: ai.ingot.Attention
// becomes Softmax(scale Q K^T + mask) V with the Transposes its `transposed` flags stand for.
void lower_to_onnx(Graph& g) {
  std::vector<Node> nodes;
  for (Node& n : g.nodes) {
    if (n.domain != kIngotDomain || n.op_type != "Attention") {
      nodes.push_back(std::move(n));
      continue;
    }
    const ValueInfo* q_info = g.find_value_info(n.inputs[0]);
    if (!q_info || !q_info->type.shape) fail("export: {}: the rank of its query is not known", n.label());
    const auto rank = int64_t(q_info->type.shape->size());
    std::vector<int64_t> flags = n.attrs.count("transposed") ? n.attrs.at("transposed").ints : std::vector<int64_t>{};
    flags.resize(4, 0);
    int counter = 0;
    auto emit = [&](const std::string& op, std::vector<std::string> in, Attributes attrs = {}, std::string out = "") {
      Node m;
      m.op_type = op;
      m.name = fmt::format("{}/{}_{}", n.name, op, counter++);
      m.inputs = std::move(in);
      m.outputs = {out.empty() ? m.name : out};
      m.attrs = std::move(attrs);
      nodes.push_back(m);
      return m.outputs[0];
    };
    const std::vector<int64_t> bthd{0, 2, 1, 3};
    auto heads_first = [&](size_t i) { return flags[i] && rank == 4 ? emit("Transpose", {n.inputs[i]}, {{"perm", bthd}}) : n.inputs[i]; };
    std::vector<int64_t> swap_last(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) swap_last[size_t(i)] = i;
    std::swap(swap_last[size_t(rank - 1)], swap_last[size_t(rank - 2)]);
    const std::string q = heads_first(0), k = heads_first(1), v = heads_first(2);
    const std::string scale = n.name + "/scale";
    g.initializers[scale] = Tensor::scalar<float>(n.attrs.count("scale") ? n.attrs.at("scale").f : 1.0f).cast(q_info->type.dtype);
    std::string logits = emit("Mul", {emit("MatMul", {q, emit("Transpose", {k}, {{"perm", swap_last}})}), scale});
    if (n.inputs.size() > 3 && !n.inputs[3].empty()) logits = emit("Add", {logits, n.inputs[3]});
    const std::string p = emit("Softmax", {logits}, {{"axis", int64_t(-1)}});
    if (flags[3] && rank == 4) {
      emit("Transpose", {emit("MatMul", {p, v})}, {{"perm", bthd}}, n.outputs[0]);
    } else {
      emit("MatMul", {p, v}, {}, n.outputs[0]);
    }
  }
  g.nodes = std::move(nodes);
}

// The model to export: traced once (twice for a dynamic batch), the module's mode restored after.
std::shared_ptr<Model> trace_for_export(Module& module, const ExportFunction& forward,
                                        const std::vector<Tensor>& inputs, const ExportOptions& options) {
  const bool was_training = module.is_training();
  module.eval();
  struct Restore {
    Module& m;
    bool on;
    ~Restore() { m.train(on); }
  } restore{module, was_training};
  autograd::NoGradGuard no_grad;
  ops::detail::AutocastSuspend no_autocast;
  std::shared_ptr<Model> model = trace_once(module, forward, inputs, options);
  if (options.dynamic_batch) {
    std::vector<Tensor> bigger;
    for (const Tensor& t : inputs) bigger.push_back(one_more_row(t));
    std::shared_ptr<Model> other;
    try {
      other = trace_once(module, forward, bigger, options);
    } catch (Error& e) {
      e.add_context(fmt::format("dynamic_batch: tracing again at batch size {} (to check that the graph does not "
                                "depend on it)",
                                bigger.at(0).dim(0)));
      throw;
    }
    make_batch_dynamic(*model, *other);
  }
  verify(*model);
  return model;
}

ExportFunction layer_function(Layer& layer) {
  return [&layer](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer.forward(in.at(0))}; };
}

}  // namespace

void export_onnx(Module& module, const ExportFunction& forward, const std::vector<Tensor>& example_inputs,
                 const std::string& path, const ExportOptions& options) {
  try {
    auto model = trace_for_export(module, forward, example_inputs, options);
    lower_to_onnx(*model->graph);
    save_onnx(*model, path);
  } catch (Error& e) {
    e.add_context("export_onnx('" + path + "')");
    throw;
  }
}

void export_onnx(Layer& layer, const Tensor& example_input, const std::string& path, const ExportOptions& options) {
  export_onnx(layer, layer_function(layer), {example_input}, path, options);
}

void export_package(Module& module, const ExportFunction& forward, const std::vector<Tensor>& example_inputs,
                    const std::string& path, const ExportOptions& options) {
  try {
    PackageMetadata meta;
    meta.device = options.device.type == DeviceType::CPU ? "cpu" : "cuda";
    meta.arch = current_arch(options.device);
    if (meta.arch.empty()) fail("no {} device here to build the package for", options.device.str());
    meta.precision = std::string(precision_name(options.precision));
    meta.source_model = options.name + " (traced nn module)";
    ConvertOptions convert;
    convert.device = options.device;
    convert.precision = options.precision;
    auto model = convert_model(trace_for_export(module, forward, example_inputs, options), convert);
    save_package(*model, meta, path);
  } catch (Error& e) {
    e.add_context("export_package('" + path + "')");
    throw;
  }
}

void export_package(Layer& layer, const Tensor& example_input, const std::string& path, const ExportOptions& options) {
  export_package(layer, layer_function(layer), {example_input}, path, options);
}

}  // namespace ingot::nn
