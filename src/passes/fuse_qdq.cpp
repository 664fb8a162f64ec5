// Folds the QuantizeLinear/DequantizeLinear pairs of a QDQ model (what `ingot quantize`,
// onnxruntime's quantizer and TensorRT's explicit quantization write) into integer kernels:
//
//   DQ(x) -> Conv(., DQ(W const)[, B]) [-> Add(., DQ(r) or r)] [-> Relu|HardSwish|Sigmoid] [-> Q]
//      => ai.ingot.QuantizedConv (8-bit output with the Q, float32 without)
//   DQ(a) -> MatMul(., DQ(B const 2-D)) [-> Add(., bias const)] [-> Relu] [-> Q]
//   DQ(a) -> Gemm(., DQ(B const)[, C const]) [-> Relu] [-> Q]
//      => ai.ingot.QuantizedMatMul (Gemm's transB folded into the int8 weight)
//   DQ(x; s, z) -> MaxPool | Reshape | Flatten | Transpose | Squeeze | Unsqueeze -> Q(s, z)
//      => the same op on the 8-bit values (these commute with a quantization they keep); also
//   DQ(x; s, z) -> Concat(with constants) -> Q(s, z) => Concat of x and the constants quantized
//      (BlazeFace's channel padding)
//
// A float bias (or a DQ of an int32 one) is requantized to int32 in x_scale * w_scale[c] units, as
// QLinearConv takes it. Runs first in the pipeline, before constant folding would turn DQ(W) into
// float weights (CPU and CUDA targets both have the integer kernels). DQ/Q nodes left
// over (an op with no integer kernel between them) run as they are; dead code drops the rest.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <limits>

#include "ops/semantics/quantized_args.h"
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

bool is_8bit(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// A DequantizeLinear (or QuantizeLinear) with constant float32 scale and zero point.
struct QdqNode {
  size_t index = 0;
  std::string data, scale, zero_point;  // zero_point "" when the node omits it
  const Tensor* scale_t = nullptr;
  const Tensor* zp_t = nullptr;
  DType dtype = DType::Undefined;  // the 8-bit side's dtype
  int64_t axis = 1;
  bool per_tensor() const { return !scale_t || scale_t->numel() == 1; }  // (dynamic: one scale per call)
  bool dynamic() const { return !scale_t; }
};

std::optional<QdqNode> qdq_node(const Graph& g, const Node& n, size_t index, const char* op) {
  if (!is_op(n, op) || n.inputs.size() < 2 || n.outputs.size() != 1) return std::nullopt;
  if (attr_int(n, "block_size", 0) != 0) return std::nullopt;
  QdqNode q;
  q.index = index;
  q.data = n.inputs[0];
  q.scale = n.inputs[1];
  q.scale_t = constant_initializer(g, q.scale);
  if (!q.scale_t || q.scale_t->dtype() != DType::Float32 || q.scale_t->rank() > 1) return std::nullopt;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    q.zero_point = n.inputs[2];
    q.zp_t = constant_initializer(g, q.zero_point);
    if (!q.zp_t || q.zp_t->numel() != q.scale_t->numel()) return std::nullopt;
    q.dtype = q.zp_t->dtype();
  } else {
    q.dtype = std::string(op) == "QuantizeLinear" ? DType(attr_int(n, "output_dtype", 0)) : value_dtype(g, q.data);
    if (q.dtype == DType::Undefined) q.dtype = DType::UInt8;
  }
  if (!is_8bit(q.dtype)) return std::nullopt;
  // (Per-axis parameters at any opset: Ingot's own int8 packages of models below opset 13 use them.)
  q.axis = attr_int(n, "axis", 1);
  return q;
}

// Dynamic quantization: DequantizeLinear(q, s, z) where q, s, z are the outputs of one
// DynamicQuantizeLinear (activations quantized per call): its scale and zero point are not
// constants (scale_t and zp_t stay null).
std::optional<QdqNode> dynamic_dequant_of(const Graph& g, const std::map<std::string, size_t>& producer,
                                          const std::string& value) {
  auto it = producer.find(value);
  if (it == producer.end()) return std::nullopt;
  const Node& dq = g.nodes[it->second];
  if (!is_op(dq, "DequantizeLinear") || dq.inputs.size() != 3 || dq.outputs.size() != 1) return std::nullopt;
  auto p = producer.find(dq.inputs[0]);
  if (p == producer.end()) return std::nullopt;
  const Node& dql = g.nodes[p->second];
  if (!is_op(dql, "DynamicQuantizeLinear") || dql.outputs.size() != 3 ||
      std::vector<std::string>(dq.inputs.begin(), dq.inputs.end()) != dql.outputs)
    return std::nullopt;
  QdqNode q;
  q.index = it->second;
  q.data = dq.inputs[0];
  q.scale = dq.inputs[1];
  q.zero_point = dq.inputs[2];
  q.dtype = DType::UInt8;
  return q;
}

// The DequantizeLinear writing `value`, if any.
std::optional<QdqNode> dequant_of(const Graph& g, const std::map<std::string, size_t>& producer,
                                  const std::string& value) {
  auto it = producer.find(value);
  if (it == producer.end()) return std::nullopt;
  return qdq_node(g, g.nodes[it->second], it->second, "DequantizeLinear");
}

// Everything the rewrites add: zero points for nodes that omit them, requantized biases, transposed weights.
struct NewConstants {
  Graph& g;
  std::string prefix;
  std::string add(const std::string& hint, Tensor t) {
    std::string name = prefix + hint;
    for (int i = 1; g.initializers.count(name) || g.find_value_info(name); ++i) name = prefix + hint + "_" + std::to_string(i);
    g.initializers[name] = std::move(t);
    return name;
  }
  std::string zero_point(const QdqNode& q, const std::string& owner) {
    if (!q.zero_point.empty()) return q.zero_point;
    Tensor z = Tensor::zeros(q.dtype, {});
    return add(owner + "_zero_point", z);
  }
};

// The int32 bias of a product in x_scale * w_scale[c] units, from a float constant or a DQ of an
// int32 constant; nullopt when neither (or when a value does not fit int32).
std::optional<Tensor> requantized_bias(const Graph& g, const std::map<std::string, size_t>& producer,
                                       const std::string& value, float x_scale, const Tensor& w_scale,
                                       int64_t channels) {
  std::vector<double> real;
  if (const Tensor* b = constant_initializer(g, value); b && is_floating(b->dtype()) && b->numel() == channels) {
    for (int64_t i = 0; i < channels; ++i) real.push_back(b->item_double(i));
  } else if (auto it = producer.find(value); it != producer.end()) {
    const Node& n = g.nodes[it->second];
    if (!is_op(n, "DequantizeLinear") || n.inputs.size() < 2) return std::nullopt;
    const Tensor* data = constant_initializer(g, n.inputs[0]);
    const Tensor* scale = constant_initializer(g, n.inputs[1]);
    const Tensor* zp = n.inputs.size() > 2 && !n.inputs[2].empty() ? constant_initializer(g, n.inputs[2]) : nullptr;
    if (!data || !scale || data->dtype() != DType::Int32 || data->numel() != channels ||
        (scale->numel() != 1 && scale->numel() != channels) || (n.inputs.size() > 2 && !n.inputs[2].empty() && !zp))
      return std::nullopt;
    for (int64_t i = 0; i < channels; ++i) {
      const double s = scale->item_double(scale->numel() == 1 ? 0 : i);
      const double z = zp ? zp->item_double(zp->numel() == 1 ? 0 : i) : 0.0;
      real.push_back((data->item_double(i) - z) * s);
    }
  } else {
    return std::nullopt;
  }
  std::vector<int32_t> q(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double unit = double(x_scale) * w_scale.item_double(w_scale.numel() == 1 ? 0 : c);
    const double v = std::nearbyint(real[size_t(c)] / unit);
    if (!(std::abs(v) < 2147483647.0)) return std::nullopt;
    q[size_t(c)] = int32_t(v);
  }
  return Tensor::from_vector(q, {channels});
}

// [N, K] -> [K, N] of an 8-bit constant.
Tensor transposed_2d(const Tensor& t) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out = Tensor::empty(t.dtype(), {cols, rows});
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
  return out;
}

struct Rewriter {
  Model& model;
  Graph& g;
  Readers readers;
  std::map<std::string, size_t> producer;
  std::vector<bool> removed;
  std::map<size_t, Node> replacements;
  NewConstants constants;

  explicit Rewriter(Model& m)
      : model(m),
        g(*m.graph),
        readers(g),
        producer(producers(g)),
        removed(g.nodes.size(), false),
        constants{g, "qdq_"} {}

  std::optional<size_t> next(const std::string& value) const {
    auto r = readers.single(value);
    if (!r || removed[*r] || g.nodes[*r].outputs.size() != 1) return std::nullopt;
    return r;
  }

  // The epilogue after a product writing `out`: [Add residual] [activation] [Q]. Absorbed nodes go
  // into `absorbed`; `last` and `out` advance.
  struct Epilogue {
    std::string residual, r_scale, r_zp, activation;
    std::optional<QdqNode> quant;
  };
  Epilogue epilogue(std::string& out, size_t& last, std::vector<size_t>& absorbed, bool allow_residual,
                    bool allow_any_activation) {
    Epilogue e;
    if (auto r = next(out); allow_residual && r && is_op(g.nodes[*r], "Add") && g.nodes[*r].inputs.size() == 2 &&
                             g.nodes[*r].inputs[0] != g.nodes[*r].inputs[1]) {
      const Node& add = g.nodes[*r];
      const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      auto out_shape = static_shape(g, out), other_shape = static_shape(g, other);
      if (out_shape && other_shape && *out_shape == *other_shape) {
        if (auto dq = dequant_of(g, producer, other); dq && dq->per_tensor()) {
          e.residual = dq->data;
          e.r_scale = dq->scale;
          e.r_zp = constants.zero_point(*dq, add.outputs[0] + "_residual");
        } else if (value_dtype(g, other) == DType::Float32) {
          e.residual = other;
        }
        if (!e.residual.empty()) {
          absorbed.push_back(*r);
          last = *r;
          out = add.outputs[0];
        }
      }
    }
    if (auto r = next(out)) {
      const Node& act = g.nodes[*r];
      const bool hard_swish = act.op_type == "HardSwish" && (is_default_domain(act.domain) || act.domain == kIngotDomain);
      if (is_op(act, "Relu") || (allow_any_activation && (hard_swish || is_op(act, "Sigmoid")))) {
        e.activation = act.op_type;
        absorbed.push_back(*r);
        last = *r;
        out = act.outputs[0];
      }
    }
    if (auto r = next(out)) {
      if (auto q = qdq_node(g, g.nodes[*r], *r, "QuantizeLinear"); q && q->per_tensor()) {
        e.quant = q;
        absorbed.push_back(*r);
        last = *r;
        out = g.nodes[*r].outputs[0];
      }
    }
    return e;
  }

  void emit(size_t first, const std::vector<size_t>& absorbed, size_t last, Node fused) {
    removed[first] = true;
    for (size_t a : absorbed) removed[a] = true;
    replacements.emplace(last, std::move(fused));
  }

  // Inputs 0-7 (and the output attributes) of both fused ops.
  void product_inputs(Node& fused, const QdqNode& x, const std::string& w, const std::string& w_scale,
                      const std::string& w_zp, const Epilogue& e, const std::string& owner) {
    fused.inputs = {x.data, x.scale, constants.zero_point(x, owner + "_x"), w, w_scale, w_zp};
    if (e.quant) {
      fused.inputs.push_back(e.quant->scale);
      fused.inputs.push_back(constants.zero_point(*e.quant, owner + "_y"));
      fused.attrs["output_dtype"] = Attribute(int64_t(e.quant->dtype));
    } else {
      fused.inputs.push_back("");
      fused.inputs.push_back("");
      fused.attrs["output_dtype"] = Attribute(int64_t(DType::Float32));
    }
    fused.attrs["activation"] = Attribute(e.activation);
  }

  bool conv(size_t ci) {
    const Node& conv = g.nodes[ci];
    if (!is_op(conv, "Conv") || conv.inputs.size() < 2 || conv.outputs.size() != 1) return false;
    auto x = dequant_of(g, producer, conv.inputs[0]);
    auto w = dequant_of(g, producer, conv.inputs[1]);
    if (!x || !x->per_tensor() || !w || !constant_initializer(g, w->data)) return false;
    const Tensor& wt = *constant_initializer(g, w->data);
    const int64_t channels = wt.rank() >= 1 ? wt.dim(0) : 0;
    if (wt.rank() < 3 || (!w->per_tensor() && (w->axis != 0 || w->scale_t->numel() != channels))) return false;
    std::string bias;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) {
      auto b = requantized_bias(g, producer, conv.inputs[2], x->scale_t->data<float>()[0], *w->scale_t, channels);
      if (!b) return false;
      bias = constants.add(conv.outputs[0] + "_bias_int32", *b);
    }
    std::string out = conv.outputs[0];
    size_t last = ci;
    std::vector<size_t> absorbed;
    Epilogue e = epilogue(out, last, absorbed, true, true);
    Node fused;
    fused.name = conv.name.empty() ? out : conv.name;
    fused.op_type = "QuantizedConv";
    fused.domain = kIngotDomain;
    fused.attrs = conv.attrs;
    product_inputs(fused, *x, w->data, w->scale, constants.zero_point(*w, conv.outputs[0] + "_w"), e,
                   conv.outputs[0]);
    fused.inputs.push_back(bias);
    if (!e.residual.empty()) {
      fused.inputs.push_back(e.residual);
      fused.inputs.push_back(e.r_scale);
      fused.inputs.push_back(e.r_zp);
    }
    fused.outputs = {out};
    emit(ci, absorbed, last, std::move(fused));
    return true;
  }

  bool matmul(size_t mi) {
    const Node& mm = g.nodes[mi];
    const bool gemm = is_op(mm, "Gemm");
    if ((!is_op(mm, "MatMul") && !gemm) || mm.inputs.size() < 2 || mm.outputs.size() != 1) return false;
    if (gemm && (attr_float(mm, "alpha", 1.0f) != 1.0f || attr_float(mm, "beta", 1.0f) != 1.0f ||
                 attr_int(mm, "transA", 0) != 0))
      return false;
    auto a = dequant_of(g, producer, mm.inputs[0]);
    if (!a) a = dynamic_dequant_of(g, producer, mm.inputs[0]);
    auto b = dequant_of(g, producer, mm.inputs[1]);
    if (!a || !a->per_tensor() || !b || !constant_initializer(g, b->data)) return false;
    const Tensor& bt = *constant_initializer(g, b->data);
    if (bt.rank() != 2) return false;
    const bool trans_b = gemm && attr_int(mm, "transB", 0) != 0;
    const int64_t n = trans_b ? bt.dim(0) : bt.dim(1);
    // Per-column scales: axis 1 of [K, N] (axis 0 of Gemm's transposed [N, K]).
    const int64_t column_axis = trans_b ? 0 : 1;
    if (!b->per_tensor() && ((b->axis + 2) % 2 != column_axis || b->scale_t->numel() != n)) return false;
    std::string weight = b->data, w_zp = constants.zero_point(*b, mm.outputs[0] + "_w");
    if (trans_b) weight = constants.add(mm.outputs[0] + "_weight_kn", transposed_2d(bt));
    std::string bias_value = gemm && mm.inputs.size() > 2 ? mm.inputs[2] : "";
    std::string out = mm.outputs[0];
    size_t last = mi;
    std::vector<size_t> absorbed;
    if (!gemm) {  // MatMul -> Add(bias [N]) absorbs the bias
      if (auto r = next(out); r && is_op(g.nodes[*r], "Add") && g.nodes[*r].inputs.size() == 2) {
        const Node& add = g.nodes[*r];
        const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
        auto shape = static_shape(g, other);
        const Tensor* fb = constant_initializer(g, other);
        const bool usable = a->dynamic() ? fb && fb->dtype() == DType::Float32
                                         : bool(requantized_bias(g, producer, other, 1.0f, *b->scale_t, n));
        if (shape && shape_numel(Shape(shape->begin(), shape->end())) == n && !shape->empty() && shape->back() == n &&
            usable) {
          bias_value = other;
          absorbed.push_back(*r);
          last = *r;
          out = add.outputs[0];
        }
      }
    }
    std::string bias, float_bias;
    if (!bias_value.empty() && a->dynamic()) {
      // The activation's scale is known per call only: the bias stays float32 (input 9).
      const Tensor* fb = constant_initializer(g, bias_value);
      if (!fb || fb->dtype() != DType::Float32 || fb->numel() != n) return false;
      float_bias = constants.add(mm.outputs[0] + "_bias", fb->reshape({n}));
    } else if (!bias_value.empty()) {
      auto q = requantized_bias(g, producer, bias_value, a->scale_t->data<float>()[0], *b->scale_t, n);
      if (!q) return false;
      bias = constants.add(mm.outputs[0] + "_bias_int32", *q);
    }
    Epilogue e = epilogue(out, last, absorbed, false, false);
    if (a->dynamic() && e.quant) return false;  // (a dynamic product's output stays float32)
    Node fused;
    fused.name = mm.name.empty() ? out : mm.name;
    fused.op_type = "QuantizedMatMul";
    fused.domain = kIngotDomain;
    product_inputs(fused, *a, weight, b->scale, w_zp, e, mm.outputs[0]);
    fused.inputs.push_back(bias);
    if (!float_bias.empty()) fused.inputs.push_back(float_bias);
    fused.outputs = {out};
    emit(mi, absorbed, last, std::move(fused));
    return true;
  }

  // DQ(x; s, z) -> op -> Q(s, z): the op on x. For Concat: one DQ operand, the others constants,
  // quantized here with (s, z).
  bool pass_through(size_t oi) {
    const Node& op = g.nodes[oi];
    static const std::set<std::string> ops{"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat"};
    if (!is_default_domain(op.domain) || !ops.count(op.op_type) || op.inputs.empty() || op.outputs.size() != 1)
      return false;
    const bool concat = op.op_type == "Concat";
    size_t data_index = 0;
    if (concat) {
      size_t found = SIZE_MAX;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        if (constant_initializer(g, op.inputs[i])) continue;
        if (found != SIZE_MAX) return false;
        found = i;
      }
      if (found == SIZE_MAX) return false;
      data_index = found;
    }
    auto dq = dequant_of(g, producer, op.inputs[data_index]);
    if (!dq || !dq->per_tensor()) return false;
    auto r = next(op.outputs[0]);
    if (!r) return false;
    auto q = qdq_node(g, g.nodes[*r], *r, "QuantizeLinear");
    if (!q || !q->per_tensor() || q->dtype != dq->dtype) return false;
    const float s_in = dq->scale_t->data<float>()[0], s_out = q->scale_t->data<float>()[0];
    const int64_t z_in = dq->zp_t ? dq->zp_t->item_int() : 0, z_out = q->zp_t ? q->zp_t->item_int() : 0;
    if (s_in != s_out || z_in != z_out) return false;
    Node moved = op;
    moved.inputs[data_index] = dq->data;
    if (concat) {
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        if (i == data_index) continue;
        const Tensor& c = *constant_initializer(g, op.inputs[i]);
        if (!is_floating(c.dtype())) return false;
        Tensor qc = Tensor::empty(dq->dtype, c.shape());
        const double lo = dq->dtype == DType::UInt8 ? 0 : -128, hi = dq->dtype == DType::UInt8 ? 255 : 127;
        for (int64_t k = 0; k < c.numel(); ++k) {
          const double v = std::clamp(std::nearbyint(c.item_double(k) / s_in) + double(z_in), lo, hi);
          if (dq->dtype == DType::UInt8) qc.data<uint8_t>()[k] = uint8_t(v);
          else qc.data<int8_t>()[k] = int8_t(v);
        }
        moved.inputs[i] = constants.add(op.inputs[i] + "_quantized", qc);
      }
    }
    moved.outputs = {g.nodes[*r].outputs[0]};
    emit(oi, {*r}, *r, std::move(moved));
    return true;
  }

  // The per-tensor QuantizeLinear of dtype `dtype` that alone reads op's output.
  std::optional<QdqNode> sole_quantize(const Node& op, DType dtype) const {
    auto r = next(op.outputs[0]);
    if (!r) return std::nullopt;
    auto q = qdq_node(g, g.nodes[*r], *r, "QuantizeLinear");
    if (!q || !q->per_tensor() || q->dtype != dtype) return std::nullopt;
    return q;
  }

  // DQ(x) -> ReduceMean | GlobalAveragePool -> Q, per tensor, 8-bit of one dtype
  //   => ai.ingot.QuantizedReduceMean.
  bool mean(size_t mi) {
    const Node& op = g.nodes[mi];
    const bool gap = is_op(op, "GlobalAveragePool");
    if ((!gap && !is_op(op, "ReduceMean")) || op.inputs.empty() || op.outputs.size() != 1) return false;
    auto x = dequant_of(g, producer, op.inputs[0]);
    if (!x || !x->per_tensor()) return false;
    auto q = sole_quantize(op, x->dtype);
    if (!q) return false;
    std::vector<int64_t> axes;
    int64_t keepdims = 1;
    if (gap) {
      auto t = value_type(g, op.inputs[0]);
      if (!t || !t->shape || t->shape->size() < 3) return false;
      for (int64_t d = 2; d < int64_t(t->shape->size()); ++d) axes.push_back(d);
    } else {
      keepdims = attr_int(op, "keepdims", 1);
      if (op.inputs.size() > 1 && !op.inputs[1].empty()) {
        const Tensor* a = constant_initializer(g, op.inputs[1]);
        if (!a || a->dtype() != DType::Int64) return false;
        axes = a->to_int64_vector();
      } else if (auto it = op.attrs.find("axes"); it != op.attrs.end()) {
        axes = it->second.ints;
      }
      if (axes.empty() && attr_int(op, "noop_with_empty_axes", 0) != 0) return false;  // the identity
    }
    Node fused;
    fused.name = op.name.empty() ? q->data : op.name;
    fused.op_type = "QuantizedReduceMean";
    fused.domain = kIngotDomain;
    fused.inputs = {x->data, x->scale, constants.zero_point(*x, op.outputs[0] + "_x"), q->scale,
                    constants.zero_point(*q, op.outputs[0] + "_y")};
    if (!axes.empty()) fused.attrs["axes"] = Attribute(axes);
    fused.attrs["keepdims"] = Attribute(keepdims);
    fused.outputs = {g.nodes[q->index].outputs[0]};
    emit(mi, {q->index}, q->index, std::move(fused));
    return true;
  }

  // DQ(a), DQ(b) -> Mul -> Q, per tensor, 8-bit of one dtype => ai.ingot.QuantizedMul.
  bool mul(size_t mi) {
    const Node& op = g.nodes[mi];
    if (!is_op(op, "Mul") || op.inputs.size() != 2 || op.outputs.size() != 1) return false;
    auto a = dequant_of(g, producer, op.inputs[0]);
    auto b = dequant_of(g, producer, op.inputs[1]);
    if (!a || !b || !a->per_tensor() || !b->per_tensor() || a->dtype != b->dtype) return false;
    auto q = sole_quantize(op, a->dtype);
    if (!q) return false;
    Node fused;
    fused.name = op.name.empty() ? q->data : op.name;
    fused.op_type = "QuantizedMul";
    fused.domain = kIngotDomain;
    fused.inputs = {a->data, a->scale, constants.zero_point(*a, op.outputs[0] + "_a"),
                    b->data, b->scale, constants.zero_point(*b, op.outputs[0] + "_b"),
                    q->scale, constants.zero_point(*q, op.outputs[0] + "_c")};
    fused.outputs = {g.nodes[q->index].outputs[0]};
    emit(mi, {q->index}, q->index, std::move(fused));
    return true;
  }
};

}  // namespace

bool fuse_qdq(Model& model) {
  Rewriter rw(model);
  bool any = false;
  for (size_t i = 0; i < rw.g.nodes.size(); ++i) {
    if (rw.removed[i]) continue;
    any |= rw.conv(i) || rw.matmul(i) || rw.pass_through(i);
  }
  if (!any) return false;
  replace_nodes(rw.g, rw.removed, rw.replacements);
  model.opsets[kIngotDomain] = 1;
  return true;
}

}  // namespace ingot

// ---- fuse-qdq-pointwise ---------------------------------------------------------------------------
//
//   DQ(x) -> ReduceMean | GlobalAveragePool -> Q   => ai.ingot.QuantizedReduceMean
//   DQ(a), DQ(b) -> Mul -> Q                       => ai.ingot.QuantizedMul (numpy broadcasting)
// per tensor, the 8-bit values of one dtype (the math: ops/semantics/quantized_args.h). The
// squeeze-excitation blocks of int8 CNNs (MobileNetV3, PP-LCNet) and their classifier heads, where
// `ingot quantize` quantizes the mean's and the product's inputs. Runs after the layout step
// (compiler/compile.cpp), where a channels-last GlobalAveragePool already is a ReduceMean over the
// spatial axes and the DQ/Q pairs have followed their values, so these ops need no layout handling.

namespace ingot {

bool fuse_qdq_pointwise(Model& model) {
  Rewriter rw(model);
  bool any = false;
  for (size_t i = 0; i < rw.g.nodes.size(); ++i) {
    if (rw.removed[i]) continue;
    any |= rw.mean(i) || rw.mul(i);
  }
  if (!any) return false;
  replace_nodes(rw.g, rw.removed, rw.replacements);
  model.opsets[kIngotDomain] = 1;
  dead_code(model);  // the DequantizeLinear nodes nothing reads any more
  return true;
}

}  // namespace ingot

// ---- fuse-quantized-epilogue ---------------------------------------------------------------------
//
// A QuantizedConv / QuantizedMatMul with a float32 output (no QuantizeLinear right after it when
// fuse-qdq ran: an activation written out, a learnable affine, a HardSigmoid), followed by a chain of
// elementwise nodes that are unary functions of it with constants [-> QuantizeLinear]: the chain
// becomes the product's `epilogue` program (and the QuantizeLinear its 8-bit output), so that one
// kernel computes dequantize -> product -> epilogue -> quantize. Runs after fuse-hard-swish and
// fuse-elementwise have shaped the chains (FusedElementwise programs over one input).

namespace ingot {
namespace {

using namespace passes;
using Step = sem::EpilogueStep;

// The steps of one elementwise node reading `value`, or nullopt.
std::optional<std::vector<Step>> node_steps(const Graph& g, const Node& n, const std::string& value) {
  using K = Step::Kind;
  if (n.outputs.size() != 1 || n.inputs.empty()) return std::nullopt;
  if (n.domain == kIngotDomain && n.op_type == "FusedElementwise") {
    if (n.inputs.size() != 1 || n.inputs[0] != value) return std::nullopt;
    auto it = n.attrs.find("program");
    return it == n.attrs.end() ? std::nullopt : sem::epilogue_steps(it->second.s);
  }
  if (!is_default_domain(n.domain) && !(n.domain == kIngotDomain && n.op_type == "HardSwish")) return std::nullopt;
  const std::string& op = n.op_type;
  auto unary = [&](K k, float a = 0, float b = 0) -> std::optional<std::vector<Step>> {
    if (n.inputs.size() != 1 || n.inputs[0] != value) return std::nullopt;
    return std::vector<Step>{{k, a, b}};
  };
  if (op == "Relu") return unary(K::Relu);
  if (op == "LeakyRelu") return unary(K::Relu, attr_float(n, "alpha", 0.01f));
  if (op == "HardSwish") return unary(K::HardSwish);
  if (op == "Sigmoid") return unary(K::Sigmoid);
  if (op == "Tanh") return unary(K::Tanh);
  if (op == "Exp") return unary(K::Exp);
  if (op == "Abs") return unary(K::Abs);
  if (op == "Sqrt") return unary(K::Sqrt);
  if (op == "Neg") return unary(K::Linear, -1, 0);
  if (op == "HardSigmoid") {
    if (n.inputs.size() != 1 || n.inputs[0] != value) return std::nullopt;
    return std::vector<Step>{{K::Linear, attr_float(n, "alpha", 0.2f), attr_float(n, "beta", 0.5f)}, {K::Clip, 0, 1}};
  }
  if (op == "Clip") {
    if (n.inputs[0] != value) return std::nullopt;
    constexpr float kMax = std::numeric_limits<float>::max();
    float lo = attr_float(n, "min", -kMax), hi = attr_float(n, "max", kMax);
    for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
      if (n.inputs[i].empty()) continue;
      auto c = scalar_constant(g, n.inputs[i]);
      if (!c) return std::nullopt;
      (i == 1 ? lo : hi) = float(*c);
    }
    return std::vector<Step>{{K::Clip, lo, hi}};
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && n.inputs.size() == 2) {
    const bool first = n.inputs[0] == value;
    if (n.inputs[0] == n.inputs[1] || (!first && n.inputs[1] != value)) return std::nullopt;
    auto c = scalar_constant(g, n.inputs[first ? 1 : 0]);
    if (!c) return std::nullopt;
    const float v = float(*c);
    if (op == "Add") return std::vector<Step>{{K::Linear, 1, v}};
    if (op == "Mul") return std::vector<Step>{{K::Linear, v, 0}};
    if (op == "Sub") return std::vector<Step>{first ? Step{K::Linear, 1, -v} : Step{K::Linear, -1, v}};
    if (first && v != 0) return std::vector<Step>{{K::Linear, 1 / v, 0}};
  }
  return std::nullopt;
}

// The steps as a FusedElementwise program over x0.
std::string program_text(const std::vector<Step>& steps) {
  using K = Step::Kind;
  constexpr float kMax = std::numeric_limits<float>::max();
  std::vector<std::string> instrs;
  auto prev = [&] { return instrs.empty() ? std::string("x0") : "t" + std::to_string(instrs.size() - 1); };
  auto num = [](float v) { return fmt::format("{:.9g}", v); };
  for (const Step& s : steps) {
    switch (s.kind) {
      case K::Relu:
        instrs.push_back(s.a == 0 ? "Relu(" + prev() + ")" : "LeakyRelu(" + prev() + ", " + num(s.a) + ")");
        break;
      case K::HardSwish: instrs.push_back("HardSwish(" + prev() + ")"); break;
      case K::Sigmoid: instrs.push_back("Sigmoid(" + prev() + ")"); break;
      case K::Tanh: instrs.push_back("Tanh(" + prev() + ")"); break;
      case K::Exp: instrs.push_back("Exp(" + prev() + ")"); break;
      case K::Abs: instrs.push_back("Abs(" + prev() + ")"); break;
      case K::Sqrt: instrs.push_back("Sqrt(" + prev() + ")"); break;
      case K::Linear:
        if (s.a != 1 || (s.a == 1 && s.b == 0)) instrs.push_back("Mul(" + prev() + ", " + num(s.a) + ")");
        if (s.b != 0) instrs.push_back("Add(" + prev() + ", " + num(s.b) + ")");
        break;
      case K::Clip:
        if (s.a > -kMax) instrs.push_back("Max(" + prev() + ", " + num(s.a) + ")");
        if (s.b < kMax) instrs.push_back("Min(" + prev() + ", " + num(s.b) + ")");
        break;
    }
  }
  std::string text;
  for (size_t i = 0; i < instrs.size(); ++i) text += (i ? "; " : "") + instrs[i];
  return text;
}

}  // namespace

bool fuse_quantized_epilogue(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& product = g.nodes[i];
    if (removed[i] || product.domain != kIngotDomain ||
        (product.op_type != "QuantizedConv" && product.op_type != "QuantizedMatMul") || product.outputs.size() != 1)
      continue;
    if (attr_int(product, "output_dtype", int64_t(DType::UInt8)) != int64_t(DType::Float32)) continue;
    auto epilogue = product.attrs.find("epilogue");
    std::vector<Step> steps;
    if (epilogue != product.attrs.end() && !epilogue->second.s.empty()) {
      auto existing = sem::epilogue_steps(epilogue->second.s);
      if (!existing) continue;
      steps = *existing;
    }
    std::string out = product.outputs[0];
    size_t last = i;
    std::vector<size_t> absorbed;
    while (true) {
      auto r = readers.single(out);
      if (!r || removed[*r]) break;
      auto more = node_steps(g, g.nodes[*r], out);
      if (!more || steps.size() + more->size() > 16) break;
      steps.insert(steps.end(), more->begin(), more->end());
      absorbed.push_back(*r);
      last = *r;
      out = g.nodes[*r].outputs[0];
    }
    std::optional<QdqNode> quant;
    if (auto r = readers.single(out); r && !removed[*r]) {
      quant = qdq_node(g, g.nodes[*r], *r, "QuantizeLinear");
      if (quant && !quant->per_tensor()) quant.reset();
      if (quant) {
        absorbed.push_back(*r);
        last = *r;
        out = g.nodes[*r].outputs[0];
      }
    }
    if (absorbed.empty()) continue;
    Node fused = product;
    fused.attrs["epilogue"] = Attribute(program_text(steps));
    if (quant) {
      NewConstants constants{g, "qdq_"};
      fused.inputs.resize(std::max<size_t>(fused.inputs.size(), 8));
      fused.inputs[6] = quant->scale;
      fused.inputs[7] = constants.zero_point(*quant, out);
      fused.attrs["output_dtype"] = Attribute(int64_t(quant->dtype));
    }
    fused.outputs = {out};
    removed[i] = true;
    for (size_t a : absorbed) removed[a] = true;
    replacements.emplace(last, std::move(fused));
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  return true;
}

}  // namespace ingot
