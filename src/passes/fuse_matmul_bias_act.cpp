// Fuses matrix products with what follows them into one ai.ingot FusedMatMul (inputs A, B, optional
// bias of N elements, optional residual; attributes activation "" or "Relu", transB), so the bias,
// the residual and the activation are applied while the product is in cache (CPU) or in cuBLASLt's
// epilogue (CUDA; the residual as its C with beta 1):
//   MatMul(A, B) [-> Mul(., s) or Div(., s)] [-> Add(., bias) or Add(bias, .)] [-> Add(., R)] [-> Relu]
//                                     (at least one; s a scalar constant: alpha = s or 1 / s; R of the
//                                      product's shape, provably: the same static or named dims)
//   MatMul(A, B) -> Add(., bias) -> Mul(., s) ...   (a scale after a constant float32 bias, as
//                                      transformers' q_proj(x) * scaling: alpha = s, bias * s a new
//                                      initializer)
//   Gemm(A, B, C) -> Relu     with alpha = beta = 1, transA = 0, C of shape [N] or [1, N] (or no C)
// A bias needs B's static shape (rank >= 2: N known) and a static shape [N] (or [1, N] when A has
// rank >= 2); every operand has the same floating dtype. Anything else stays as it is.
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;


bool float_dtype(DType dt) {
  return dt == DType::Float32 || dt == DType::Float16 || dt == DType::BFloat16 || dt == DType::Float64;
}

// Whether `bias` can be the N-element bias of a product with output rank `out_rank` (-1 unknown).
bool bias_fits(const Graph& g, const std::string& bias, int64_t n, int64_t a_rank, DType dtype) {
  auto shape = static_shape(g, bias);
  if (!shape || value_dtype(g, bias) != dtype) return false;
  if (shape->size() == 1) return (*shape)[0] == n;
  return shape->size() == 2 && (*shape)[0] == 1 && (*shape)[1] == n && a_rank >= 2;
}

}  // namespace

bool fuse_matmul_bias_act(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;  // index of the last absorbed node -> fused node
  for (size_t mi = 0; mi < g.nodes.size(); ++mi) {
    const Node& mm = g.nodes[mi];
    const bool is_matmul = is_op(mm, "MatMul"), is_gemm = is_op(mm, "Gemm");
    if ((!is_matmul && !is_gemm) || mm.outputs.size() != 1 || mm.inputs.size() < 2 || removed[mi]) continue;
    const DType dtype = value_dtype(g, mm.inputs[0]);
    if (!float_dtype(dtype) || value_dtype(g, mm.inputs[1]) != dtype) continue;
    // N (for the bias) comes from B's static shape; a scale or an activation alone needs none
    // (attention scores: B is a transposed activation whose batch is symbolic).
    auto b_shape = static_shape(g, mm.inputs[1]);
    if (b_shape && b_shape->size() < 2) continue;
    if (!b_shape && is_gemm) continue;
    auto a_type = value_type(g, mm.inputs[0]);
    const int64_t a_rank = a_type && a_type->shape ? int64_t(a_type->shape->size()) : -1;
    if (a_rank == 0) continue;

    // The only reader of `value` when it is a Mul by (or a Div through) a nonzero scalar constant
    // of the product's dtype that does not broadcast the product to a higher rank: the node and
    // the factor it applies.
    struct Scale {
      size_t node;
      double factor;
    };
    auto scale_of = [&](const std::string& value) -> std::optional<Scale> {
      auto r = readers.single(value);
      if (!r || removed[*r] || g.nodes[*r].inputs.size() != 2 || g.nodes[*r].outputs.size() != 1 ||
          !(is_op(g.nodes[*r], "Mul") || is_op(g.nodes[*r], "Div")))
        return std::nullopt;
      const Node& scale = g.nodes[*r];
      const bool div = is_op(scale, "Div");
      const std::string other = other_operand(scale, value).value_or("");
      if (other.empty() || (div && scale.inputs[0] != value)) return std::nullopt;  // s / product: no scale
      std::optional<double> s = scalar_constant(g, other);
      auto s_shape = static_shape(g, other);
      const bool rank_ok = s_shape && (s_shape->empty() || (a_rank >= 0 && int64_t(s_shape->size()) <= a_rank));
      if (!s || !rank_ok || value_dtype(g, other) != dtype || *s == 0) return std::nullopt;
      return Scale{*r, div ? 1.0 / *s : *s};
    };

    Node fused;
    fused.op_type = "FusedMatMul";
    fused.domain = kIngotDomain;
    fused.inputs = {mm.inputs[0], mm.inputs[1], ""};
    std::string out = mm.outputs[0];
    std::vector<size_t> absorbed;
    int64_t n = b_shape ? b_shape->back() : -1;  // -1: no bias can fit
    if (is_gemm) {
      const bool trans_b = attr_int(mm, "transB", 0) != 0;
      if (b_shape->size() != 2 || attr_int(mm, "transA", 0) != 0 || attr_float(mm, "alpha", 1.0f) != 1.0f) continue;
      n = trans_b ? (*b_shape)[0] : (*b_shape)[1];
      const bool has_c = mm.inputs.size() > 2 && !mm.inputs[2].empty();
      if (has_c && (attr_float(mm, "beta", 1.0f) != 1.0f || !bias_fits(g, mm.inputs[2], n, 2, dtype))) continue;
      if (has_c) fused.inputs[2] = mm.inputs[2];
      fused.attrs["transB"] = int64_t(trans_b);
    } else if (auto sc = scale_of(out)) {
      // A scalar scale of the product (attention scores times 1/sqrt(d)): cuBLASLt's alpha.
      fused.attrs["alpha"] = float(sc->factor);
      absorbed.push_back(sc->node);
      out = g.nodes[sc->node].outputs[0];
    }
    if (is_gemm) {
    } else if (auto r = readers.single(out); r && !removed[*r] && is_op(g.nodes[*r], "Add") &&
                                             g.nodes[*r].inputs.size() == 2 && g.nodes[*r].outputs.size() == 1) {
      const Node& add = g.nodes[*r];
      const std::string& bias = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      if (add.inputs[0] != add.inputs[1] && bias_fits(g, bias, n, a_rank, dtype)) {
        fused.inputs[2] = bias;
        absorbed.push_back(*r);
        out = add.outputs[0];
        // (A B + bias) * s = s A B + s bias, for a bias known now (a float32 initializer).
        const Tensor* bt = constant_initializer(g, bias);
        if (auto sc = scale_of(out); sc && !fused.attrs.count("alpha") && bt && bt->dtype() == DType::Float32 &&
                                     bt->device() == Device::cpu()) {
          Tensor scaled = bt->clone();
          float* v = scaled.data<float>();
          for (int64_t i = 0; i < scaled.numel(); ++i) v[i] = float(double(v[i]) * sc->factor);
          const std::string name = fresh_name(g, bias + "_scaled");
          g.initializers[name] = std::move(scaled);
          fused.inputs[2] = name;
          fused.attrs["alpha"] = float(sc->factor);
          absorbed.push_back(sc->node);
          out = g.nodes[sc->node].outputs[0];
        }
      }
    }
    // A residual of the product's shape (a transformer's x + Linear(x)): cuBLASLt's C with beta 1.
    if (is_gemm) {
    } else if (auto r = readers.single(out); r && !removed[*r] && is_op(g.nodes[*r], "Add") &&
                                             g.nodes[*r].inputs.size() == 2 && g.nodes[*r].outputs.size() == 1) {
      const Node& add = g.nodes[*r];
      const std::string& residual = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      if (add.inputs[0] != add.inputs[1] && value_dtype(g, residual) == dtype && same_shape(g, residual, out)) {
        fused.inputs.resize(4);
        fused.inputs[3] = residual;
        absorbed.push_back(*r);
        out = add.outputs[0];
      }
    }
    std::string activation;
    if (auto r = readers.single(out);
        r && !removed[*r] && is_op(g.nodes[*r], "Relu") && g.nodes[*r].outputs.size() == 1) {
      activation = "Relu";
      absorbed.push_back(*r);
      out = g.nodes[*r].outputs[0];
    }
    // A Gemm alone is already one kernel; a Gemm is worth rewriting only for its activation.
    if (absorbed.empty() || (is_gemm && activation.empty())) continue;
    fused.attrs["activation"] = activation;
    fused.name = mm.name.empty() ? out : mm.name;
    fused.outputs = {out};
    removed[mi] = true;
    for (size_t a : absorbed) removed[a] = true;
    // Placed where the last absorbed node was: the bias may be computed after the product.
    replacements.emplace(absorbed.back(), std::move(fused));
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  model.opsets[kIngotDomain] = 1;
  return true;
}

}  // namespace ingot
