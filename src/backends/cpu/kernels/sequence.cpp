// CPU kernels for sequence ops (a sequence is a Value holding a vector of tensors, which share
// storage with the tensors put in, so inserting or reading an element copies nothing) and for
// optional ops (an empty optional is a Value of Kind::None).
#include <fmt/format.h>

#include <cstdint>

#include "backends/cpu/kernels/axis_copy.h"
#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

const std::vector<Tensor>& sequence_input(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) fail("input {}: expected a sequence, got nothing (an empty optional?)", i);
  const Value& v = ctx.input_value(i);
  if (v.kind != Value::Kind::Sequence) fail("input {}: expected a sequence, got {}", i, v.describe());
  return v.sequence;
}

// Reads a scalar position input and checks it against [-size, size - 1], or [-size, size] when
// `allow_end` (insertion may append). Returns the non-negative index.
int64_t position_input(const KernelContext& ctx, size_t i, int64_t size, bool allow_end) {
  const Tensor& p = ctx.input(i);
  if (p.numel() != 1 || (p.dtype() != DType::Int32 && p.dtype() != DType::Int64)) {
    fail("input {} (position): expected an int32 or int64 scalar, got {}", i, p.describe());
  }
  int64_t pos = p.item_int(0);
  int64_t upper = allow_end ? size : size - 1;
  if (pos < -size || pos > upper) {
    fail("input {} (position): {} is outside [{}, {}] for a sequence of {} elements", i, pos, -size, upper, size);
  }
  return pos < 0 ? pos + size : pos;
}

void check_element_dtype(const std::vector<Tensor>& seq, const Tensor& t, std::string_view what) {
  if (!seq.empty() && seq[0].dtype() != t.dtype()) {
    fail("{}: dtype {} differs from the sequence's {}", what, dtype_name(t.dtype()), dtype_name(seq[0].dtype()));
  }
}

void sequence_empty(KernelContext& ctx) { ctx.set_output_value(0, Value::make_sequence({})); }

void sequence_construct(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    check_element_dtype(items, t, fmt::format("input {}", i));
    items.push_back(t);
  }
  ctx.set_output_value(0, Value::make_sequence(std::move(items)));
}

void sequence_insert(KernelContext& ctx) {
  std::vector<Tensor> items = sequence_input(ctx, 0);
  const Tensor& t = ctx.input(1);
  check_element_dtype(items, t, "input 1 (tensor)");
  int64_t size = int64_t(items.size());
  int64_t pos = ctx.has_input(2) ? position_input(ctx, 2, size, true) : size;
  items.insert(items.begin() + pos, t);
  ctx.set_output_value(0, Value::make_sequence(std::move(items)));
}

void sequence_at(KernelContext& ctx) {
  const std::vector<Tensor>& items = sequence_input(ctx, 0);
  ctx.set_output(0, items[size_t(position_input(ctx, 1, int64_t(items.size()), false))]);
}

void sequence_erase(KernelContext& ctx) {
  std::vector<Tensor> items = sequence_input(ctx, 0);
  int64_t size = int64_t(items.size());
  if (size == 0) fail("input 0: cannot erase from an empty sequence");
  int64_t pos = ctx.has_input(1) ? position_input(ctx, 1, size, false) : size - 1;
  items.erase(items.begin() + pos);
  ctx.set_output_value(0, Value::make_sequence(std::move(items)));
}

void sequence_length(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<int64_t>(int64_t(sequence_input(ctx, 0).size())));
}

void concat_from_sequence(KernelContext& ctx) {
  const std::vector<Tensor>& items = sequence_input(ctx, 0);
  if (items.empty()) fail("input 0: cannot concatenate an empty sequence");
  bool new_axis = ctx.attr_int("new_axis") != 0;
  int64_t rank = items[0].rank();
  if (!new_axis && rank == 0) fail("input 0: cannot concatenate scalars without new_axis=1");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), new_axis ? rank + 1 : rank, "attribute 'axis'");
  ctx.set_output(0, new_axis ? cpu::stack_along_axis(items, axis, "sequence element")
                             : cpu::concat_along_axis(items, axis, "sequence element"));
}

void split_to_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) fail("input 0: cannot split a scalar");
  int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "attribute 'axis'");
  int64_t length = x.shape()[size_t(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (ctx.has_input(1)) {
    const Tensor& split = ctx.input(1);
    std::vector<int64_t> values = split.to_int64_vector();
    if (split.rank() == 0) {
      int64_t chunk = values[0];
      if (chunk <= 0) fail("input 1 (split): chunk size must be positive, got {}", chunk);
      for (int64_t begin = 0; begin < length; begin += chunk) sizes.push_back(std::min(chunk, length - begin));
    } else {
      if (split.rank() != 1) fail("input 1 (split): expected a scalar or 1-D tensor, got {}", split.describe());
      int64_t total = 0;
      for (int64_t v : values) {
        if (v < 0) fail("input 1 (split): sizes must be non-negative, got {}", v);
        total += v;
      }
      if (total != length) fail("input 1 (split): sizes sum to {} but axis {} has {}", total, axis, length);
      sizes = std::move(values);
    }
  } else {
    sizes.assign(size_t(length), 1);
    squeeze = ctx.attr_int("keepdims") == 0;
  }
  std::vector<Tensor> items;
  int64_t begin = 0;
  for (int64_t size : sizes) {
    Tensor part = cpu::slice_along_axis(x, axis, begin, begin + size);
    if (squeeze) {
      Shape shape = part.shape();
      shape.erase(shape.begin() + axis);
      part = part.reshape(std::move(shape));
    }
    items.push_back(std::move(part));
    begin += size;
  }
  ctx.set_output_value(0, Value::make_sequence(std::move(items)));
}

void sequence_map(KernelContext& ctx) {
  const Graph& body = ctx.attr_graph("body");
  if (body.inputs.size() != ctx.num_inputs()) {
    fail("body has {} inputs but the node has {}", body.inputs.size(), ctx.num_inputs());
  }
  if (body.outputs.size() != ctx.num_outputs()) {
    fail("body has {} outputs but the node has {}", body.outputs.size(), ctx.num_outputs());
  }
  size_t count = sequence_input(ctx, 0).size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Value& v = ctx.input_value(i);
    if (v.kind == Value::Kind::Sequence && v.sequence.size() != count) {
      fail("input {}: sequence of {} elements, but input 0 has {}", i, v.sequence.size(), count);
    }
  }
  std::vector<std::vector<Tensor>> results(ctx.num_outputs());
  std::vector<Value> body_inputs(ctx.num_inputs());
  for (size_t n = 0; n < count; ++n) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Value& v = ctx.input_value(i);
      body_inputs[i] = v.kind == Value::Kind::Sequence ? Value(v.sequence[n]) : v;
    }
    std::vector<Value> outs = ctx.run_subgraph(body, body_inputs);
    if (outs.size() != results.size()) fail("body produced {} outputs, expected {}", outs.size(), results.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].kind != Value::Kind::Tensor) fail("body output {}: expected a tensor, got {}", k, outs[k].describe());
      results[k].push_back(std::move(outs[k].tensor));
    }
  }
  for (size_t k = 0; k < results.size(); ++k) ctx.set_output_value(k, Value::make_sequence(std::move(results[k])));
}

void optional_kernel(KernelContext& ctx) { ctx.set_output_value(0, ctx.has_input(0) ? ctx.input_value(0) : Value{}); }

void optional_has_element(KernelContext& ctx) { ctx.set_output(0, Tensor::scalar<bool>(ctx.has_input(0))); }

void optional_get_element(KernelContext& ctx) {
  if (!ctx.has_input(0)) fail("input 0: the optional is empty");
  ctx.set_output_value(0, ctx.input_value(0));
}

}  // namespace

INGOT_CPU_KERNEL(SequenceEmpty, sequence_empty).versions(11);
INGOT_CPU_KERNEL(SequenceConstruct, sequence_construct).versions(11);
INGOT_CPU_KERNEL(SequenceInsert, sequence_insert).versions(11);
INGOT_CPU_KERNEL(SequenceAt, sequence_at).versions(11);
INGOT_CPU_KERNEL(SequenceErase, sequence_erase).versions(11);
INGOT_CPU_KERNEL(SequenceLength, sequence_length).versions(11);
INGOT_CPU_KERNEL(ConcatFromSequence, concat_from_sequence).versions(11);
INGOT_CPU_KERNEL(SplitToSequence, split_to_sequence).versions(11);
INGOT_CPU_KERNEL(SequenceMap, sequence_map).versions(17);
INGOT_CPU_KERNEL(Optional, optional_kernel).versions(15);
INGOT_CPU_KERNEL(OptionalHasElement, optional_has_element).versions(15);
INGOT_CPU_KERNEL(OptionalGetElement, optional_get_element).versions(15);

}  // namespace ingot
