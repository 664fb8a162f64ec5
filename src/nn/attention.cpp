// MultiheadAttention (include/ingot/nn.h), PyTorch's module over the fused ai.ingot.Attention op:
// heads are split by a Reshape to [B, T, heads, head_dim] and given to the op in that layout (its
// `transposed` flags), so no Transpose of Q, K, V or the output runs.
#include <ingot/nn.h>
#include <ingot/ops.h>

#include <cmath>
#include <limits>

#include "nn/constants.h"

namespace ingot::nn {
namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.byte_offset() == b.byte_offset() && a.shape() == b.shape() &&
         a.dtype() == b.dtype();
}
// A mask as an additive float mask of like's dtype: bool true -> -inf, float as it is.
Tensor additive(const Tensor& mask, const Tensor& like) {
  if (mask.dtype() != DType::Bool) return mask;
  return ops::call("Where", {mask, scalar_like(-std::numeric_limits<double>::infinity(), like), scalar_like(0.0, like)})
      .at(0);
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options)
    : embed_dim_(embed_dim), num_heads_(num_heads), options_(options) {
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads)
    fail("MultiheadAttention({}, {}): num_heads must divide embed_dim", embed_dim, num_heads);
  if (options.dropout != 0.0)
    fail("MultiheadAttention: attention dropout ({}) is not supported; the fused attention has no dropout", options.dropout);
  in_proj_weight = uniform({3 * embed_dim, embed_dim}, std::sqrt(6.0 / double(4 * embed_dim)));  // Xavier uniform
  register_parameter("in_proj_weight", in_proj_weight);
  if (options.bias) {
    in_proj_bias = filled({3 * embed_dim}, 0.0f);
    register_parameter("in_proj_bias", in_proj_bias);
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, options.bias));
  if (options.bias) {
    for (float& b : out_proj->bias.span<float>()) b = 0.0f;  // PyTorch zeroes it too
  }
}

AttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const AttentionInputs& extra) {
  const int64_t e = embed_dim_, heads = num_heads_, d = e / heads;
  for (const Tensor* t : {&query, &key, &value}) {
    if (t->rank() != 3 || t->dim(2) != e)
      fail("MultiheadAttention({}, {}): expected [{}, {}] inputs, got {}", e, heads,
           options_.batch_first ? "B, T" : "T, B", e, t->describe());
  }
  auto batch_major = [&](const Tensor& t) { return options_.batch_first ? t : ops::transpose(t, {1, 0, 2}); };
  auto project = [&](const Tensor& x, int64_t begin, int64_t end) {  // x W[begin:end]^T + b[begin:end]
    Tensor w = begin == 0 && end == 3 * e ? in_proj_weight : slice(in_proj_weight, 0, begin, end);
    Tensor y = ops::matmul(batch_major(x), ops::transpose(w, {1, 0}));
    if (!in_proj_bias.defined()) return y;
    return ops::add(y, begin == 0 && end == 3 * e ? in_proj_bias : slice(in_proj_bias, 0, begin, end));
  };
  Tensor q, k, v;
  if (same_tensor(query, key) && same_tensor(key, value)) {
    Tensor qkv = project(query, 0, 3 * e);  // [B, L, 3E]
    q = slice(qkv, 2, 0, e), k = slice(qkv, 2, e, 2 * e), v = slice(qkv, 2, 2 * e, 3 * e);
  } else {
    q = project(query, 0, e), k = project(key, e, 2 * e), v = project(value, 2 * e, 3 * e);
  }
  const int64_t batch = q.dim(0), target = q.dim(1), source = k.dim(1);
  // [B, T, E] -> [B, T, heads, head_dim]
  q = ops::reshape(q, {0, 0, heads, d}), k = ops::reshape(k, {0, 0, heads, d}), v = ops::reshape(v, {0, 0, heads, d});

  // One additive mask broadcasting to [B, heads, L, S].
  Tensor mask;
  auto add_mask = [&](Tensor m) { mask = mask.defined() ? ops::add(mask, m) : m; };
  if (extra.is_causal) {
    if (extra.attn_mask.defined()) fail("MultiheadAttention: is_causal and an attn_mask cannot both be given");
    Tensor causal = Tensor::empty(DType::Bool, {target, source});
    bool* c = causal.data<bool>();
    for (int64_t i = 0; i < target; ++i)
      for (int64_t j = 0; j < source; ++j) c[i * source + j] = j > i;
    add_mask(additive(causal.to(q.device()), q));
  }
  if (extra.attn_mask.defined()) {
    const Tensor& m = extra.attn_mask;
    if (m.rank() == 2 && m.dim(0) == target && m.dim(1) == source) {
      add_mask(additive(m, q));
    } else if (m.rank() == 3 && m.dim(0) == batch * heads && m.dim(1) == target && m.dim(2) == source) {
      add_mask(ops::reshape(additive(m, q), {-1, heads, target, source}));
    } else {
      fail("MultiheadAttention: attn_mask must be [{}, {}] or [{}, {}, {}], got {}", target, source, batch * heads, target,
           source, m.describe());
    }
  }
  if (extra.key_padding_mask.defined()) {
    const Tensor& m = extra.key_padding_mask;
    if (m.rank() != 2 || m.dim(0) != batch || m.dim(1) != source)
      fail("MultiheadAttention: key_padding_mask must be [{}, {}], got {}", batch, source, m.describe());
    add_mask(ops::call("Unsqueeze", {additive(m, q), int64s({1, 2})}).at(0));
  }

  const double scale = 1.0 / std::sqrt(double(d));
  AttentionOutput result;
  Tensor y;  // [B, L, heads, head_dim]
  if (!extra.need_weights) {
    std::vector<Tensor> in{q, k, v};
    if (mask.defined()) in.push_back(mask);
    y = ops::call("Attention", in, {{"scale", float(scale)}, {"transposed", std::vector<int64_t>{1, 1, 1, 1}}}, 1,
                  "ai.ingot")
            .at(0);
  } else {
    const std::vector<int64_t> heads_first{0, 2, 1, 3};
    Tensor scores = ops::mul(ops::matmul(ops::transpose(q, heads_first), ops::transpose(k, {0, 2, 3, 1})), scalar_like(scale, q));
    if (mask.defined()) scores = ops::add(scores, mask);
    Tensor p = ops::softmax(scores, -1);  // [B, heads, L, S]
    y = ops::transpose(ops::matmul(p, ops::transpose(v, heads_first)), heads_first);
    result.weights = extra.average_attn_weights ? ops::reduce_mean(p, {1}, false) : p;
  }
  Tensor out = out_proj->forward(ops::reshape(y, {0, 0, e}));
  result.output = options_.batch_first ? out : ops::transpose(out, {1, 0, 2});
  return result;
}

}  // namespace ingot::nn
