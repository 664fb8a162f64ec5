// CPU kernels for If, Loop and Scan. The bodies run through the executor's subgraph runner; these
// kernels only sequence the iterations, thread loop-carried values through and stack scan outputs.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "backends/cpu/kernels/axis_copy.h"
#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

// An omitted input and an empty optional are both Kind::None for a body.
Value input_or_none(const KernelContext& ctx, size_t i) { return ctx.has_input(i) ? ctx.input_value(i) : Value{}; }

const Tensor& tensor_of(const Value& v, std::string_view what) {
  if (v.kind != Value::Kind::Tensor) fail("{}: expected a tensor, got {}", what, v.describe());
  return v.tensor;
}

bool single_bool(const Tensor& t, std::string_view what) {
  if (t.numel() != 1) fail("{}: expected a single element, got {}", what, t.describe());
  return t.item_int(0) != 0;
}

void check_output_count(const std::vector<Value>& outs, size_t expected, std::string_view body) {
  if (outs.size() != expected) fail("{} produced {} outputs, expected {}", body, outs.size(), expected);
}

// The stack of zero iterations: the body's declared element shape (unknown dims as 0) with a 0-sized
// axis inserted; just [0] when the body does not declare a rank.
Tensor empty_stack(const ValueInfo& info, int64_t axis) {
  DType dtype = info.type.dtype == DType::Undefined ? DType::Float32 : info.type.dtype;
  if (!info.type.shape) return Tensor::empty(dtype, {0});
  Shape shape;
  for (const Dim& d : *info.type.shape) shape.push_back(d.is_static() ? d.value : 0);
  axis = normalize_axis(axis, int64_t(shape.size()) + 1, "scan output axis");
  shape.insert(shape.begin() + axis, 0);
  return Tensor::empty(dtype, shape);
}

// Ints attribute of `count` entries, all zeros when the node does not set it.
std::vector<int64_t> ints_or_zeros(const KernelContext& ctx, std::string_view name, size_t count) {
  if (!ctx.has_attr(name)) return std::vector<int64_t>(count, 0);
  const std::vector<int64_t>& v = ctx.attr_ints(name);
  if (v.size() != count) fail("attribute '{}': expected {} entries, got {}", name, count, v.size());
  return v;
}

void if_kernel(KernelContext& ctx) {
  bool take_then = single_bool(ctx.input(0), "input 0 (cond)");
  const char* branch = take_then ? "then_branch" : "else_branch";
  std::vector<Value> outs = ctx.run_subgraph(ctx.attr_graph(branch), {});
  if (outs.size() != ctx.num_outputs()) {
    fail("{} produced {} outputs but the node has {}", branch, outs.size(), ctx.num_outputs());
  }
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_output_value(i, std::move(outs[i]));
}

void loop_kernel(KernelContext& ctx) {
  const Graph& body = ctx.attr_graph("body");
  if (ctx.num_inputs() < 2)
    fail("expected at least 2 inputs (M and cond, either may be empty), got {}", ctx.num_inputs());
  size_t num_carried = ctx.num_inputs() - 2;
  if (body.inputs.size() != num_carried + 2) {
    fail("body has {} inputs, expected {} (iteration number, condition and {} loop-carried values)", body.inputs.size(),
         num_carried + 2, num_carried);
  }
  if (body.outputs.size() < num_carried + 1) {
    fail("body has {} outputs, expected at least {} (condition and {} loop-carried values)", body.outputs.size(),
         num_carried + 1, num_carried);
  }
  size_t num_scan = body.outputs.size() - 1 - num_carried;
  if (ctx.num_outputs() > num_carried + num_scan) {
    fail("node has {} outputs but the body yields only {} loop-carried and {} scan outputs", ctx.num_outputs(),
         num_carried, num_scan);
  }

  int64_t max_trips = std::numeric_limits<int64_t>::max();
  if (ctx.has_input(0)) {
    const Tensor& m = ctx.input(0);
    if (m.numel() != 1) fail("input 0 (M): expected a single element, got {}", m.describe());
    max_trips = m.item_int(0);
  }
  bool cond = ctx.has_input(1) ? single_bool(ctx.input(1), "input 1 (cond)") : true;

  std::vector<Value> body_inputs(num_carried + 2);
  for (size_t j = 0; j < num_carried; ++j) body_inputs[2 + j] = input_or_none(ctx, 2 + j);
  std::vector<std::vector<Tensor>> scans(num_scan);
  for (int64_t iteration = 0; iteration < max_trips && cond; ++iteration) {
    body_inputs[0] = Tensor::scalar<int64_t>(iteration);
    body_inputs[1] = Tensor::scalar<bool>(cond);
    std::vector<Value> outs = ctx.run_subgraph(body, body_inputs);
    check_output_count(outs, body.outputs.size(), "body");
    cond = single_bool(tensor_of(outs[0], "body output 0 (cond)"), "body output 0 (cond)");
    for (size_t j = 0; j < num_carried; ++j) body_inputs[2 + j] = std::move(outs[1 + j]);
    for (size_t k = 0; k < num_scan; ++k) {
      scans[k].push_back(
          tensor_of(outs[1 + num_carried + k], fmt::format("body output {} (scan output {})", 1 + num_carried + k, k)));
    }
  }

  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < num_carried) {
      ctx.set_output_value(i, std::move(body_inputs[2 + i]));
      continue;
    }
    size_t k = i - num_carried;
    if (scans[k].empty()) {
      ctx.set_output(i, empty_stack(body.outputs[1 + i], 0));
    } else {
      ctx.set_output(i, cpu::stack_along_axis(scans[k], 0, fmt::format("scan output {} at iteration", k)));
    }
  }
}

struct ScanResult {
  std::vector<Value> states;
  std::vector<Tensor> outputs;
};

// One scan over `length` positions. Input axes are normalized; output axes are normalized against
// the rank of the stacked output once the slices are known.
ScanResult run_scan(const KernelContext& ctx, const Graph& body, std::vector<Value> states,
                    const std::vector<Tensor>& inputs, const std::vector<int64_t>& input_axes,
                    const std::vector<int64_t>& input_reverse, const std::vector<int64_t>& output_axes,
                    const std::vector<int64_t>& output_reverse, int64_t length) {
  size_t num_states = states.size(), num_inputs = inputs.size();
  size_t num_outputs = body.outputs.size() - num_states;
  std::vector<std::vector<Tensor>> slices(num_outputs);
  std::vector<Value> body_inputs(num_states + num_inputs);
  for (int64_t t = 0; t < length; ++t) {
    for (size_t i = 0; i < num_states; ++i) body_inputs[i] = std::move(states[i]);
    for (size_t j = 0; j < num_inputs; ++j) {
      int64_t position = input_reverse[j] ? length - 1 - t : t;
      Tensor slice = cpu::slice_along_axis(inputs[j], input_axes[j], position, position + 1);
      Shape shape = slice.shape();
      shape.erase(shape.begin() + input_axes[j]);
      body_inputs[num_states + j] = slice.reshape(std::move(shape));
    }
    std::vector<Value> outs = ctx.run_subgraph(body, body_inputs);
    check_output_count(outs, body.outputs.size(), "body");
    for (size_t i = 0; i < num_states; ++i) states[i] = std::move(outs[i]);
    for (size_t k = 0; k < num_outputs; ++k) {
      slices[k].push_back(
          tensor_of(outs[num_states + k], fmt::format("body output {} (scan output {})", num_states + k, k)));
    }
  }
  ScanResult result{std::move(states), {}};
  for (size_t k = 0; k < num_outputs; ++k) {
    if (slices[k].empty()) {
      result.outputs.push_back(empty_stack(body.outputs[num_states + k], output_axes[k]));
      continue;
    }
    if (output_reverse[k]) std::reverse(slices[k].begin(), slices[k].end());
    int64_t axis = normalize_axis(output_axes[k], slices[k][0].rank() + 1, "scan_output_axes");
    result.outputs.push_back(cpu::stack_along_axis(slices[k], axis, fmt::format("scan output {} at position", k)));
  }
  return result;
}

// Checks the body's arity against `num_states` states and `num_inputs` scan inputs; returns the
// number of scan outputs.
size_t check_scan_body(const KernelContext& ctx, const Graph& body, size_t num_states, size_t num_inputs) {
  if (body.inputs.size() != num_states + num_inputs) {
    fail("body has {} inputs, expected {} ({} states and {} scan inputs)", body.inputs.size(), num_states + num_inputs,
         num_states, num_inputs);
  }
  if (body.outputs.size() < num_states) {
    fail("body has {} outputs, expected at least the {} states", body.outputs.size(), num_states);
  }
  size_t num_outputs = body.outputs.size() - num_states;
  if (ctx.num_outputs() > num_states + num_outputs) {
    fail("node has {} outputs but the body yields {} states and {} scan outputs", ctx.num_outputs(), num_states,
         num_outputs);
  }
  return num_outputs;
}

size_t num_scan_inputs(const KernelContext& ctx, size_t available) {
  int64_t m = ctx.attr_int("num_scan_inputs");
  if (m < 1 || size_t(m) > available) {
    fail("attribute 'num_scan_inputs' is {}, expected 1..{} (the number of state and scan inputs)", m, available);
  }
  return size_t(m);
}

// Opset 8: a leading optional sequence_lens input and a batch axis 0 on every state, scan input
// and output; each batch entry is scanned on its own (over its sequence length, outputs zero-padded).
void scan8_kernel(KernelContext& ctx) {
  const Graph& body = ctx.attr_graph("body");
  size_t num_inputs = num_scan_inputs(ctx, ctx.num_inputs() - 1);
  size_t num_states = ctx.num_inputs() - 1 - num_inputs;
  size_t num_outputs = check_scan_body(ctx, body, num_states, num_inputs);
  std::vector<int64_t> reverse = ints_or_zeros(ctx, "directions", num_inputs);

  std::vector<Tensor> args;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    args.push_back(ctx.input(i));
    if (args.back().rank() < (i > num_states ? 2 : 1)) {
      fail("input {}: expected a batch axis{}, got {}", i, i > num_states ? " and a sequence axis" : "",
           args.back().describe());
    }
  }
  int64_t batch = args[0].dim(0);
  int64_t max_length = args[num_states].dim(1);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].dim(0) != batch) fail("input {}: batch size {} differs from {}", i + 1, args[i].dim(0), batch);
    if (i >= num_states && args[i].dim(1) != max_length) {
      fail("input {}: sequence length {} differs from {}", i + 1, args[i].dim(1), max_length);
    }
  }
  std::vector<int64_t> lengths(size_t(batch), max_length);
  if (ctx.has_input(0)) {
    lengths = ctx.input(0).to_int64_vector();
    if (int64_t(lengths.size()) != batch)
      fail("input 0 (sequence_lens): expected {} entries, got {}", batch, lengths.size());
    for (int64_t l : lengths) {
      if (l < 0 || l > max_length) fail("input 0 (sequence_lens): length {} is outside [0, {}]", l, max_length);
    }
  }

  auto drop_batch = [](const Tensor& t, int64_t b) {
    Shape shape(t.shape().begin() + 1, t.shape().end());
    return t.slice_rows(b, b + 1).reshape(std::move(shape));
  };
  std::vector<std::vector<Tensor>> per_batch(num_states + num_outputs);
  std::vector<int64_t> zeros(std::max(num_inputs, num_outputs), 0);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> states;
    for (size_t i = 0; i < num_states; ++i) states.push_back(drop_batch(args[i], b));
    std::vector<Tensor> inputs;
    for (size_t j = 0; j < num_inputs; ++j) inputs.push_back(drop_batch(args[num_states + j], b));
    ScanResult r = run_scan(ctx, body, std::move(states), inputs, zeros, reverse, zeros, zeros, lengths[size_t(b)]);
    for (size_t i = 0; i < num_states; ++i) {
      per_batch[i].push_back(tensor_of(r.states[i], fmt::format("body output {} (state)", i)));
    }
    for (size_t k = 0; k < num_outputs; ++k) {
      Tensor out = r.outputs[k];
      if (out.dim(0) < max_length) {  // pad the sequence axis with zeros up to the batch's longest
        Shape shape = out.shape();
        shape[0] = max_length;
        Tensor padded = Tensor::zeros(out.dtype(), shape);
        cpu::copy_blocks(padded, 0, 0, out, 0, 0, 1, out.numel());
        out = padded;
      }
      per_batch[num_states + k].push_back(out);
    }
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (per_batch[i].empty()) {
      ctx.set_output(i, empty_stack(body.outputs[i], 0));
    } else {
      ctx.set_output(i, cpu::stack_along_axis(per_batch[i], 0, fmt::format("output {} at batch", i)));
    }
  }
}

void scan_kernel(KernelContext& ctx) {
  if (ctx.opset() < 9) return scan8_kernel(ctx);
  const Graph& body = ctx.attr_graph("body");
  size_t num_inputs = num_scan_inputs(ctx, ctx.num_inputs());
  size_t num_states = ctx.num_inputs() - num_inputs;
  size_t num_outputs = check_scan_body(ctx, body, num_states, num_inputs);
  std::vector<int64_t> input_axes = ints_or_zeros(ctx, "scan_input_axes", num_inputs);
  std::vector<int64_t> input_reverse = ints_or_zeros(ctx, "scan_input_directions", num_inputs);
  std::vector<int64_t> output_axes = ints_or_zeros(ctx, "scan_output_axes", num_outputs);
  std::vector<int64_t> output_reverse = ints_or_zeros(ctx, "scan_output_directions", num_outputs);

  std::vector<Value> states;
  for (size_t i = 0; i < num_states; ++i) states.push_back(input_or_none(ctx, i));
  std::vector<Tensor> inputs;
  int64_t length = -1;
  for (size_t j = 0; j < num_inputs; ++j) {
    const Tensor& x = ctx.input(num_states + j);
    if (x.rank() == 0) fail("input {}: a scan input needs at least one axis, got a scalar", num_states + j);
    input_axes[j] = normalize_axis(input_axes[j], x.rank(), "scan_input_axes");
    int64_t n = x.shape()[size_t(input_axes[j])];
    if (length >= 0 && n != length) {
      fail("input {}: scan length {} (axis {}) differs from the first scan input's {}", num_states + j, n,
           input_axes[j], length);
    }
    length = n;
    inputs.push_back(x);
  }
  ScanResult r =
      run_scan(ctx, body, std::move(states), inputs, input_axes, input_reverse, output_axes, output_reverse, length);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < num_states) {
      ctx.set_output_value(i, std::move(r.states[i]));
    } else {
      ctx.set_output(i, std::move(r.outputs[i - num_states]));
    }
  }
}

}  // namespace

INGOT_CPU_KERNEL(If, if_kernel).versions(1).any_device();  // reads cond on the host; branches run as placed
INGOT_CPU_KERNEL(Loop, loop_kernel).versions(1);
INGOT_CPU_KERNEL(Scan, scan_kernel).versions(8);

}  // namespace ingot
