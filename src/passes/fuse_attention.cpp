// Recognizes scaled dot-product attention written out in elementary ops and rewrites it into one
// ai.ingot.Attention (inputs Q, K, V, optional mask; attributes scale, transposed), which the CUDA
// backend runs without the score matrix in memory (flash attention) and the CPU backend a chunk of
// batches at a time:
//   MatMul(A, B) [-> Mul(., s) or Div(., s)] [-> Add(., mask)] -> Softmax(last axis) -> MatMul(., V)
// where A = [Mul(Q, s)] and B = K^T: [Mul(., s)] of a Transpose whose permutation ends by swapping
// the last two axes, or of any other value (a Transpose is then inserted). Scalar constants s on the
// scores, on Q or on K multiply into `scale` (exporters put 1/sqrt(d) in any of these places; torch's
// scaled_dot_product_attention splits it between Q and K). The Transpose feeding B is rewritten to
// produce K directly (Whisper's K^T = Transpose(k, [0,2,3,1]) of k [B,T,H,D]: K = Transpose(k,
// [0,2,1,3]), which the `transposed` flag below then absorbs).
// Transposes by [0, 2, 1, 3] of Q, K (also the composed K^T Transpose), V and of the result, each
// read once, are absorbed too: the op reads and writes [B, T, H, D] through row strides (its
// `transposed` flags), so Whisper's attention is one node between the projections' Reshapes.
// Every intermediate must have one reader; ranks of Q, K^T and V must be known and >= 2, the mask's
// known and at most the scores' (and the masked scores provably of the scores' shape); all float
// operands share one dtype. Softmax before opset 13 works on
// rows coerced at `axis`, the same thing only when axis is the last one.
#include <cmath>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;


std::optional<int64_t> rank_of(const Graph& g, const std::string& name) {
  auto t = value_type(g, name);
  if (!t || t->kind != ValueKind::Tensor || !t->shape) return std::nullopt;
  return int64_t(t->shape->size());
}

struct Match {
  std::vector<size_t> absorbed;  // nodes the fused op replaces: [0] the Softmax, [1] MatMul(P, V)
  size_t qk = 0;                 // the score MatMul (also absorbed)
  std::string q, k, v, mask;
  double scale = 1.0;
  std::optional<size_t> k_transpose;       // the Transpose rewritten to produce K (absorbed)
  std::vector<int64_t> k_perm;             // its new permutation (empty: K is that Transpose's input)
  std::string k_source;                    // input of the K Transpose, or the value B when none exists
  std::vector<int64_t> transposed = {0, 0, 0, 0};  // Q, K, V, Y as [B, T, H, D] (the attribute)
  std::optional<size_t> y_transpose;       // the head Transpose after MatMul(P, V) (absorbed)
};

class AttentionMatcher {
 public:
  AttentionMatcher(const Model& model, const Readers& readers, const std::map<std::string, size_t>& producers,
                   const std::vector<bool>& removed)
      : model_(model), g_(*model.graph), readers_(readers), producers_(producers), removed_(removed) {}

  std::optional<Match> match(size_t softmax_index) {
    const Node& sm = g_.nodes[softmax_index];
    if (sm.inputs.size() != 1 || sm.outputs.size() != 1) return std::nullopt;
    const std::string& x = sm.inputs[0];
    dtype_ = value_dtype(g_, x);
    if (dtype_ != DType::Float32 && dtype_ != DType::Float16 && dtype_ != DType::BFloat16 && dtype_ != DType::Float64)
      return std::nullopt;
    auto rank = rank_of(g_, x);
    if (!rank || *rank < 2) return std::nullopt;
    const bool modern = model_.opset("") >= 13;
    int64_t axis = attr_int(sm, "axis", modern ? -1 : 1);
    if (axis < 0) axis += *rank;
    if (axis != *rank - 1) return std::nullopt;

    Match m;
    m.absorbed.push_back(softmax_index);
    // After the Softmax: MatMul(P, V).
    auto pv = only_reader(g_, readers_, removed_, sm.outputs[0], "MatMul");
    if (!pv || g_.nodes[*pv].inputs.size() != 2 || g_.nodes[*pv].inputs[0] != sm.outputs[0] ||
        g_.nodes[*pv].inputs[1] == sm.outputs[0])
      return std::nullopt;
    m.v = g_.nodes[*pv].inputs[1];
    if (!operand_ok(m.v)) return std::nullopt;
    m.absorbed.push_back(*pv);

    // Before it: [Add(mask)] [Mul/Div(s)] MatMul(A, B).
    std::string s = x;
    if (auto add = producer(s, "Add")) {
      const Node& n = g_.nodes[*add];
      for (int side = 0; side < 2; ++side) {
        const std::string& scores = n.inputs[size_t(side)];
        const std::string& mask = n.inputs[size_t(1 - side)];
        auto mask_rank = rank_of(g_, mask);
        // The mask must not widen the scores (Add's result of their shape, provably): the op
        // broadcasts the mask into the scores, never the other way.
        if (scores == mask || !single_reader(scores) || value_dtype(g_, mask) != dtype_ || !mask_rank ||
            *mask_rank > *rank || !same_shape(g_, scores, n.outputs[0]) ||
            !(producer(scores, "MatMul") || producer(scores, "Mul") || producer(scores, "Div")))
          continue;
        m.mask = mask;
        m.absorbed.push_back(*add);
        s = scores;
        break;
      }
      if (m.mask.empty()) return std::nullopt;
    }
    if (auto scaled = strip_scale(s, *rank, m.scale, /*allow_div=*/true)) {
      m.absorbed.push_back(producers_.at(s));
      s = *scaled;
    }
    auto qk = producer(s, "MatMul");
    if (!qk || !single_reader(s) || g_.nodes[*qk].inputs.size() != 2) return std::nullopt;
    m.absorbed.push_back(*qk);
    m.qk = *qk;
    const std::string& a = g_.nodes[*qk].inputs[0];
    const std::string& b = g_.nodes[*qk].inputs[1];
    if (a == b || !operand_ok(a) || !operand_ok(b)) return std::nullopt;

    // Q: A without a scalar Mul.
    m.q = a;
    if (auto unscaled = strip_scale(a, *rank_of(g_, a), m.scale, false)) {
      m.absorbed.push_back(producers_.at(a));
      m.q = *unscaled;
    }
    // K: B = [Mul(., s)] of [Transpose(., perm)] of [Mul(k, s)].
    const int64_t kt_rank = *rank_of(g_, b);
    std::string kt = b;
    if (auto unscaled = strip_scale(kt, kt_rank, m.scale, false)) {
      m.absorbed.push_back(producers_.at(kt));
      kt = *unscaled;
    }
    std::vector<int64_t> perm(static_cast<size_t>(kt_rank));
    for (int64_t i = 0; i < kt_rank; ++i) perm[size_t(i)] = i;
    std::string source = kt;
    if (auto t = producer(kt, "Transpose"); t && single_reader(kt)) {
      const Node& tn = g_.nodes[*t];
      auto it = tn.attrs.find("perm");
      if (it != tn.attrs.end() && it->second.ints.size() == size_t(kt_rank)) {
        perm = it->second.ints;
      } else if (it == tn.attrs.end()) {
        for (int64_t i = 0; i < kt_rank; ++i) perm[size_t(i)] = kt_rank - 1 - i;
      } else {
        return std::nullopt;
      }
      m.k_transpose = *t;
      m.absorbed.push_back(*t);
      source = tn.inputs[0];
      if (auto unscaled = strip_scale(source, kt_rank, m.scale, false)) {
        m.absorbed.push_back(producers_.at(source));
        source = *unscaled;
      }
    }
    // K = Transpose(source, perm with its last two entries swapped); identity: K is the source.
    std::swap(perm[size_t(kt_rank - 1)], perm[size_t(kt_rank - 2)]);
    bool identity = true;
    for (int64_t i = 0; i < kt_rank; ++i) identity = identity && perm[size_t(i)] == i;
    m.k_source = source;
    if (identity) {
      m.k = source;
    } else {
      m.k_perm = perm;
    }
    absorb_head_transposes(m, *rank);
    return m;
  }

 private:
  std::optional<size_t> producer(const std::string& value, const char* op) const {
    auto it = producers_.find(value);
    if (it == producers_.end() || removed_[it->second] || !is_op(g_.nodes[it->second], op) ||
        g_.nodes[it->second].outputs.size() != 1)
      return std::nullopt;
    return it->second;
  }
  bool single_reader(const std::string& value) const { return readers_.single(value).has_value(); }

  // Q, K, V and Y given as [B, T, H, D]: the Transposes by [0, 2, 1, 3] that exporters write around
  // the heads (read once) become the Attention's `transposed` flags, which its kernels follow with
  // row strides instead of copies.
  void absorb_head_transposes(Match& m, int64_t rank) {
    static const std::vector<int64_t> kHeads = {0, 2, 1, 3};
    auto head_input = [&](const std::string& value) -> std::optional<std::string> {
      auto t = producer(value, "Transpose");
      if (!t || !single_reader(value)) return std::nullopt;
      auto it = g_.nodes[*t].attrs.find("perm");
      if (it == g_.nodes[*t].attrs.end() || it->second.ints != kHeads) return std::nullopt;
      return g_.nodes[*t].inputs[0];
    };
    for (std::string* operand : {&m.q, &m.v}) {
      if (auto in = head_input(*operand)) {
        m.absorbed.push_back(producers_.at(*operand));
        m.transposed[operand == &m.q ? 0 : 2] = 1;
        *operand = *in;
      }
    }
    if (m.k_perm == kHeads) {  // K^T's Transpose composed to [0, 2, 1, 3]: K read in place
      m.k_perm.clear();
      m.k = m.k_source;
      m.transposed[1] = 1;
    } else if (m.k_perm.empty()) {
      if (auto in = head_input(m.k)) {
        m.absorbed.push_back(producers_.at(m.k));
        m.k = *in;
        m.transposed[1] = 1;
      }
    }
    if (rank != 4) return;
    const std::string& y = g_.nodes[m.absorbed[1]].outputs[0];
    if (auto t = only_reader(g_, readers_, removed_, y, "Transpose")) {
      auto it = g_.nodes[*t].attrs.find("perm");
      if (it != g_.nodes[*t].attrs.end() && it->second.ints == kHeads) {
        m.y_transpose = *t;
        m.absorbed.push_back(*t);
        m.transposed[3] = 1;
      }
    }
  }
  bool operand_ok(const std::string& value) const {
    auto r = rank_of(g_, value);
    return r && *r >= 2 && value_dtype(g_, value) == dtype_;
  }
  // `value` = Mul(x, s) (or Div(x, s) when allowed) with s a scalar constant and `value` read once:
  // multiplies s into `scale` and returns x.
  std::optional<std::string> strip_scale(const std::string& value, int64_t rank, double& scale, bool allow_div) {
    if (!single_reader(value)) return std::nullopt;
    std::optional<size_t> p = producer(value, "Mul");
    const bool div = !p && allow_div && (p = producer(value, "Div"));
    if (!p) return std::nullopt;
    const Node& n = g_.nodes[*p];
    if (n.inputs.size() != 2) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      if (div && side == 0) continue;  // s / x is no scale
      const std::string& c = n.inputs[size_t(side)];
      const std::string& x = n.inputs[size_t(1 - side)];
      auto v = scalar_constant(g_, c);
      auto shape = static_shape(g_, c);
      if (!v || *v == 0 || !std::isfinite(*v) || value_dtype(g_, c) != dtype_ || !shape ||
          int64_t(shape->size()) > rank || x == c)
        continue;
      scale *= div ? 1.0 / *v : *v;
      return x;
    }
    return std::nullopt;
  }

  const Model& model_;
  const Graph& g_;
  const Readers& readers_;
  const std::map<std::string, size_t>& producers_;
  const std::vector<bool>& removed_;
  DType dtype_ = DType::Undefined;
};

}  // namespace

bool fuse_attention(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  const auto prods = producers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> replacements;
  AttentionMatcher matcher(model, readers, prods, removed);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (removed[i] || !is_op(g.nodes[i], "Softmax")) continue;
    std::optional<Match> m = matcher.match(i);
    if (!m) continue;
    const Node& pv = g.nodes[m->absorbed[1]];
    Node fused;
    fused.op_type = "Attention";
    fused.domain = kIngotDomain;
    fused.name = pv.name.empty() ? pv.outputs[0] : pv.name;
    fused.outputs = m->y_transpose ? g.nodes[*m->y_transpose].outputs : pv.outputs;
    if (m->transposed != std::vector<int64_t>{0, 0, 0, 0}) fused.attrs["transposed"] = Attribute(m->transposed);
    if (!m->k_perm.empty()) {
      // K's Transpose sits where the score MatMul was (or the old Transpose, when there was one).
      Node t;
      t.op_type = "Transpose";
      t.name = fused.name + "/K";
      t.inputs = {m->k_source};
      m->k = fresh_name(g, fused.name + "/K");
      t.outputs = {m->k};
      t.attrs["perm"] = Attribute(m->k_perm);
      if (auto source = value_type(g, m->k_source); source && source->shape && source->shape->size() == m->k_perm.size()) {
        ValueType k_type = *source;
        for (size_t d = 0; d < m->k_perm.size(); ++d) (*k_type.shape)[d] = (*source->shape)[size_t(m->k_perm[d])];
        g.value_info[m->k] = ValueInfo{m->k, k_type};
      }
      replacements.emplace(m->k_transpose ? *m->k_transpose : m->qk, std::move(t));
    }
    fused.inputs = {m->q, m->k, m->v};
    if (!m->mask.empty()) fused.inputs.push_back(m->mask);
    fused.attrs["scale"] = Attribute(float(m->scale));
    for (size_t a : m->absorbed) removed[a] = true;
    replacements.emplace(m->y_transpose.value_or(m->absorbed[1]), std::move(fused));
  }
  if (replacements.empty()) return false;
  replace_nodes(g, removed, replacements);
  model.opsets[kIngotDomain] = 1;
  return true;
}

}  // namespace ingot
