// Gradient rules. Each differentiable op's vector-Jacobian product is written once, beside the op's
// definition (OpBuilder::vjp in src/ops/defs/), against GradBuilder: the rule reads the forward
// inputs and outputs and the output cotangents and states each input's gradient as calls of other
// catalogue ops. The same rule serves the three places gradients are taken:
//   - eager tensors (autograd/tape.cpp): the builder runs each call at once (through ops::call, so a
//     gradient is itself differentiable when the backward pass records: create_graph);
//   - graphs (autograd/graph_gradient.cpp): the builder appends nodes, for ONNX's
//     ai.onnx.preview.training.Gradient and for traced functions;
//   - checks (autograd/gradcheck.cpp): every rule against finite differences.
// A rule handles broadcasting with sum_to (the gradient summed down to the input's shape), reads
// attributes with their catalogue defaults, and leaves inputs it cannot differentiate (integer
// indices, shapes) without a gradient. Ops whose results are integers or bools have no gradient
// and need no rule; a differentiable float op without one is an error naming the op when a gradient
// has to pass through it.
#pragma once
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_def.h"

namespace ingot {

// A value in a gradient computation: a tensor (eager) or a value of the graph being built.
struct GradValue {
  Tensor tensor;
  std::string name;
  bool defined() const { return tensor.defined() || !name.empty(); }
};

// Where a rule's calls go: run at once, or appended to a graph.
class GradEmitter {
 public:
  virtual ~GradEmitter() = default;
  virtual std::vector<GradValue> emit(const OpDef& def, const std::vector<GradValue>& inputs, const Attributes& attrs,
                                      int num_outputs) = 0;
  virtual GradValue constant(const Tensor& t) = 0;
  virtual DType dtype(const GradValue& v) const = 0;
  // The static shape where known (always, eagerly); nullopt in a graph whose value has a symbolic dim.
  virtual std::optional<Shape> shape(const GradValue& v) const = 0;
  virtual int64_t rank(const GradValue& v) const = 0;  // fails when unknown
  // The value when it is known before running (always, eagerly; a graph's initializers and
  // constants): axes, pads, shapes given as inputs.
  virtual std::optional<Tensor> value(const GradValue& v) const = 0;
  // The opset of ONNX's domain the calls are made in (ops whose form changed, like ReduceSum's axes
  // becoming an input at 13, are written in the form of that opset).
  virtual int onnx_opset() const = 0;
};

class GradBuilder {
 public:
  GradBuilder(GradEmitter& emitter, const OpDef& def, const Attributes& attrs, int opset,
              std::vector<GradValue> inputs, std::vector<GradValue> outputs, std::vector<GradValue> cotangents,
              std::vector<bool> wanted)
      : emitter_(emitter), def_(def), attrs_(attrs), opset_(opset), inputs_(std::move(inputs)),
        outputs_(std::move(outputs)), cotangents_(std::move(cotangents)), wanted_(std::move(wanted)),
        grads_(inputs_.size()) {}

  // ---- the forward node
  const OpDef& def() const { return def_; }
  int opset() const { return opset_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const GradValue& x(size_t i) const;  // forward input i (undefined when omitted)
  const GradValue& y(size_t i = 0) const;  // forward output i
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  // The cotangent of output i; undefined when no gradient flows into it (a zero).
  const GradValue& dy(size_t i = 0) const;
  bool wants(size_t i) const { return i < wanted_.size() && wanted_[i]; }
  // States input i's gradient (ignored where not wanted; its shape must be the input's).
  void grad(size_t i, GradValue g);
  const std::vector<GradValue>& grads() const { return grads_; }

  // ---- attributes, with the catalogue's defaults
  const Attribute& attr(std::string_view name, AttrKind kind) const { return def_.attribute(attrs_, name, kind); }
  int64_t attr_int(std::string_view name) const { return attr(name, AttrKind::Int).i; }
  float attr_float(std::string_view name) const { return attr(name, AttrKind::Float).f; }
  const std::vector<int64_t>& attr_ints(std::string_view name) const { return attr(name, AttrKind::Ints).ints; }
  bool has_attr(std::string_view name) const { return attrs_.count(name) > 0; }
  const Attributes& attrs() const { return attrs_; }

  // ---- calls (any catalogue op), and the ones rules use most
  std::vector<GradValue> call(std::string_view op, const std::vector<GradValue>& inputs, const Attributes& attrs = {},
                              int num_outputs = 1, std::string_view domain = "");
  GradValue call1(std::string_view op, const std::vector<GradValue>& inputs, const Attributes& attrs = {},
                  std::string_view domain = "") {
    return call(op, inputs, attrs, 1, domain).at(0);
  }
  GradValue add(const GradValue& a, const GradValue& b) { return call1("Add", {a, b}); }
  GradValue sub(const GradValue& a, const GradValue& b) { return call1("Sub", {a, b}); }
  GradValue mul(const GradValue& a, const GradValue& b) { return call1("Mul", {a, b}); }
  GradValue div(const GradValue& a, const GradValue& b) { return call1("Div", {a, b}); }
  GradValue neg(const GradValue& a) { return call1("Neg", {a}); }
  GradValue matmul(const GradValue& a, const GradValue& b) { return call1("MatMul", {a, b}); }
  // A scalar of `like`'s dtype (a rank-0 constant: it broadcasts).
  GradValue scalar(double value, const GradValue& like);
  // 1 - v (the complement of a gate or probability).
  GradValue one_minus(const GradValue& v) { return sub(scalar(1.0, v), v); }
  GradValue int64s(const std::vector<int64_t>& values);  // a 1-D int64 constant
  GradValue zeros_like(const GradValue& like) { return mul(like, scalar(0.0, like)); }
  GradValue shape_of(const GradValue& v) { return call1("Shape", {v}); }
  GradValue reshape(const GradValue& v, const GradValue& shape) { return call1("Reshape", {v, shape}); }
  // Reshaped to `like`'s shape (the gradient of a view).
  GradValue reshape_like(const GradValue& v, const GradValue& like) { return reshape(v, shape_of(like)); }
  GradValue transpose(const GradValue& v, const std::vector<int64_t>& perm) {
    return call1("Transpose", {v}, {{"perm", perm}});
  }
  // v with its last two axes swapped (a batch of matrices transposed).
  GradValue transpose_last_two(const GradValue& v);
  // `g` summed over the axes along which `like` was broadcast to g's shape (numpy rules), then shaped
  // like `like`: the gradient of a broadcasting operand. The identity when the shapes are equal.
  GradValue sum_to(const GradValue& g, const GradValue& like);
  // ReduceSum / ReduceMean over `axes` in the form of the emitter's opset.
  GradValue reduce_sum(const GradValue& v, const std::vector<int64_t>& axes, bool keepdims);
  GradValue reduce_mean(const GradValue& v, const std::vector<int64_t>& axes, bool keepdims);
  GradValue unsqueeze(const GradValue& v, const std::vector<int64_t>& axes);  // (no axes: v itself)
  GradValue squeeze(const GradValue& v, const std::vector<int64_t>& axes);
  GradValue expand_like(const GradValue& v, const GradValue& like) { return call1("Expand", {v, shape_of(like)}); }
  // 1 where a == b (as a float of `like`'s dtype).
  GradValue equal_mask(const GradValue& a, const GradValue& b, const GradValue& like);
  GradValue cast_like(const GradValue& v, const GradValue& like) {
    return call1("Cast", {v}, {{"to", int64_t(dtype(like))}});
  }

  // The input gradients of a node of another op (its inputs, outputs and output cotangents) by that
  // op's own rule, on this builder's emitter: fused ops differentiate through the ops they fuse.
  // Undefined entries for inputs without a gradient.
  std::vector<GradValue> vjp_of(std::string_view op, const std::vector<GradValue>& inputs, const Attributes& attrs,
                                const std::vector<GradValue>& outputs, const std::vector<GradValue>& cotangents,
                                std::string_view domain = "");

  // The gradient of input 0 of an op that only selects its elements (each output element a copy of
  // one input element, or a value the op fills in: strided slices, pads, nearest resizes,
  // Compress): the op itself run on input 0's element numbers (from 1) says where each output
  // element came from (0: nowhere), and dy is added there.
  GradValue selection_grad();

  DType dtype(const GradValue& v) const { return emitter_.dtype(v); }
  std::optional<Shape> shape(const GradValue& v) const { return emitter_.shape(v); }
  int64_t rank(const GradValue& v) const { return emitter_.rank(v); }
  // A static shape, or an error naming the op whose gradient needs it.
  Shape static_shape(const GradValue& v) const;
  // An input's value as int64s (axes, pads, a shape), or an error naming the op when it is not known.
  std::vector<int64_t> int64_values(const GradValue& v, std::string_view what) const;
  double double_value(const GradValue& v, std::string_view what) const;  // a one-element input's value
  // The axes of a reduction: input 1 from opset 13 (18 for some), else the `axes` attribute; empty: all.
  std::vector<int64_t> reduction_axes(bool axes_input) const;
  [[noreturn]] void unsupported(std::string_view what) const;
  GradEmitter& emitter() { return emitter_; }

 private:
  GradEmitter& emitter_;
  const OpDef& def_;
  const Attributes& attrs_;
  int opset_;
  std::vector<GradValue> inputs_, outputs_, cotangents_;
  std::vector<bool> wanted_;
  std::vector<GradValue> grads_;
};

// The float dtypes gradients flow through; other inputs and outputs are not differentiable.
inline bool differentiable_dtype(DType dt) {
  return dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16 || dt == DType::BFloat16;
}

}  // namespace ingot
