// vmap (include/ingot/autograd.h): f traced once on one example, its ops replayed on the whole batch
// through their batching rules (ops/batching.h), one batch element at a time where a rule is missing.
#include "autograd/vmap.h"

#include <fmt/format.h>
#include <ingot/autograd.h>
#include <ingot/ops.h>

#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>

#include "autograd/trace.h"
#include "ops/batching.h"

namespace ingot {
namespace {

std::atomic<size_t> g_loop_nodes{0};

// A value of the replay: a tensor holding the whole batch at axis 0, or one shared by every element.
struct Slot {
  Tensor t;
  bool batched = false;
};

Tensor int64s(const std::vector<int64_t>& v) { return Tensor::from_vector<int64_t>(v, {int64_t(v.size())}); }

// Axis `from` of t moved to position `to` (the other axes keep their order).
Tensor move_axis(const Tensor& t, int64_t from, int64_t to) {
  if (from == to) return t;
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < t.rank(); ++a) {
    if (a != from) perm.push_back(a);
  }
  perm.insert(perm.begin() + to, from);
  return ops::transpose(t, perm);
}

Tensor element(const Tensor& batched, int64_t b) {
  return ops::call("Gather", {batched, Tensor::scalar<int64_t>(b)}, {{"axis", int64_t(0)}}, 1).at(0);
}

void report_loop(const OpDef& def, bool has_rule) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard lock(mutex);
  if (reported.insert(def.name).second)
    fmt::print(stderr, "ingot: vmap: {} has no batching rule{}; it runs once per batch element\n", def.name,
               has_rule ? " for these inputs" : "");
}

// The node once per batch element, its outputs stacked along a new axis 0.
std::vector<Slot> run_per_element(const OpDef& def, const Node& node, int opset, const std::vector<Slot>& in,
                                  int64_t batch) {
  ++g_loop_nodes;
  std::vector<std::vector<Tensor>> rows(node.outputs.size());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> args;
    for (const Slot& s : in) args.push_back(s.batched ? element(s.t, b) : s.t);
    std::vector<Tensor> outs = ops::call(def.name, args, node.attrs, int(node.outputs.size()), def.domain, opset);
    for (size_t k = 0; k < outs.size() && k < rows.size(); ++k) {
      if (outs[k].defined()) rows[k].push_back(ops::call("Unsqueeze", {outs[k], int64s({0})}, {}, 1).at(0));
    }
  }
  std::vector<Slot> result(node.outputs.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k].size() == size_t(batch)) result[k] = {rows[k].size() == 1 ? rows[k][0] : ops::concat(rows[k], 0), true};
  }
  return result;
}

std::vector<Slot> run_node(const Node& node, int opset, const std::vector<Slot>& in, int64_t batch) {
  const OpDef* def = OpCatalogue::instance().find(node.domain, node.op_type);
  if (!def) fail("vmap: op {} is not in the catalogue", node.op_type);
  std::vector<Tensor> tensors;
  std::vector<bool> batched;
  bool any = false;
  for (const Slot& s : in) {
    tensors.push_back(s.t);
    batched.push_back(s.batched);
    any |= s.batched;
  }
  const int num_outputs = int(node.outputs.size());
  if (!any) {
    std::vector<Slot> out;
    for (Tensor& t : ops::call(def->name, tensors, node.attrs, num_outputs, def->domain, opset)) out.push_back({t, false});
    return out;
  }
  const BatchRule rule = batch_rule_of(*def);
  if (rule) {
    BatchBuilder b(*def, node.attrs, opset, tensors, batched, batch, size_t(num_outputs));
    bool done = false;
    try {
      done = rule(b);
    } catch (Error& e) {
      e.add_context(fmt::format("the batching rule of {}", def->name));
      throw;
    }
    if (done) {
      std::vector<Slot> out;
      for (size_t k = 0; k < b.results().size(); ++k) out.push_back({b.results()[k], b.results_batched()[k]});
      return out;
    }
  }
  report_loop(*def, rule != nullptr);
  return run_per_element(*def, node, opset, in, batch);
}

}  // namespace

namespace autograd::detail {
size_t vmap_loop_nodes() { return g_loop_nodes.load(); }
}  // namespace autograd::detail

Function vmap(Function f, std::vector<int64_t> in_axes, std::vector<int64_t> out_axes) {
  return [f = std::move(f), in_axes = std::move(in_axes), out_axes = std::move(out_axes)](const std::vector<Tensor>& args) {
    auto axis_of = [](const std::vector<int64_t>& axes, size_t i) { return axes.size() == 1 ? axes[0] : axes.at(i); };
    if (in_axes.size() != 1 && in_axes.size() != args.size())
      fail("vmap: {} in_axes for {} arguments", in_axes.size(), args.size());
    int64_t batch = -1;
    std::vector<Slot> arg_slots(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const int64_t a = axis_of(in_axes, i);
      arg_slots[i] = {args[i], false};
      if (a == -1) continue;
      const int64_t rank = args[i].rank();
      if (a < 0 || a >= rank) fail("vmap: in_axes[{}] = {} is outside argument {}'s rank {}", i, a, i, rank);
      const int64_t size = args[i].shape()[size_t(a)];
      if (batch >= 0 && size != batch)
        fail("vmap: argument {} has {} elements along axis {}, another mapped argument {}", i, size, a, batch);
      batch = size;
      arg_slots[i] = {move_axis(args[i], a, 0), true};
    }
    if (batch < 0) fail("vmap: no argument is mapped (every in_axes entry is -1)");
    if (batch == 0) fail("vmap: the mapped axes are empty (no batch element to trace f on)");

    // f once on the first example, traced.
    std::shared_ptr<Model> model;
    std::vector<Tensor> example;
    for (const Slot& s : arg_slots) example.push_back(s.batched ? element(s.t, 0) : s.t);
    {
      autograd::detail::Tracer tracer;
      for (const Tensor& t : example) tracer.add_input(t);
      std::vector<Tensor> outs = f(example);
      model = tracer.finish(outs, "vmap");
    }
    const Graph& g = *model->graph;
    if (out_axes.size() != 1 && out_axes.size() != g.outputs.size())
      fail("vmap: {} out_axes for {} outputs", out_axes.size(), g.outputs.size());

    // The replay on the whole batch.
    std::unordered_map<std::string, Slot> env;
    for (size_t i = 0; i < g.inputs.size(); ++i) env[g.inputs[i].name] = arg_slots[i];
    for (const auto& [name, t] : g.initializers) env[name] = {t, false};
    for (const Node& node : g.nodes) {
      std::vector<Slot> in;
      for (const std::string& name : node.inputs) in.push_back(name.empty() ? Slot{} : env.at(name));
      const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
      auto opset_it = model->opsets.find(onnx ? "" : node.domain);
      const int opset = opset_it == model->opsets.end() ? 0 : opset_it->second;
      std::vector<Slot> out;
      try {
        out = run_node(node, onnx ? opset : 0, in, batch);
      } catch (Error& e) {
        e.add_context("vmap " + node.op_type);
        throw;
      }
      for (size_t k = 0; k < node.outputs.size() && k < out.size(); ++k) {
        if (!node.outputs[k].empty()) env[node.outputs[k]] = out[k];
      }
    }

    std::vector<Tensor> results;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const Slot& s = env.at(g.outputs[k].name);
      const int64_t rank = s.t.rank() - (s.batched ? 1 : 0);
      const int64_t a = axis_of(out_axes, k);
      if (a < 0 || a > rank) fail("vmap: out_axes[{}] = {} is outside output {}'s rank {} + 1", k, a, k, rank);
      if (s.batched) {
        results.push_back(move_axis(s.t, 0, a));
      } else {
        // An output that does not depend on the mapped arguments: the same for every element.
        Shape shape = s.t.shape();
        shape.insert(shape.begin() + a, batch);
        Tensor t = ops::call("Unsqueeze", {s.t, int64s({a})}, {}, 1).at(0);
        results.push_back(ops::call("Expand", {t, int64s(std::vector<int64_t>(shape.begin(), shape.end()))}, {}, 1).at(0));
      }
    }
    return results;
  };
}

}  // namespace ingot
