#include "ops/semantics/attention_args.h"

#include <ingot/error.h>

#include <algorithm>

#include "core/broadcast.h"

namespace ingot::nn {

namespace {

constexpr const char* kNames[] = {"Q", "K", "V", "mask"};

Shape leading(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

}  // namespace

AttentionArgs attention_args(const KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  AttentionArgs a;
  a.has_mask = ctx.has_input(3);
  const size_t operands = a.has_mask ? 4 : 3;
  if (!is_floating(q.dtype())) fail("input 0 (Q): expected a floating-point tensor, got {}", q.describe());
  for (size_t i = 0; i < operands; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != q.dtype()) {
      fail("input {} ({}): expected {} like Q, got {}", i, kNames[i], dtype_name(q.dtype()), dtype_name(t.dtype()));
    }
    if (i < 3 && t.rank() < 2) fail("input {} ({}): expected rank >= 2, got {}", i, kNames[i], shape_str(t.shape()));
  }
  a.tq = q.dim(-2), a.d = q.dim(-1), a.tk = k.dim(-2), a.dv = v.dim(-1);
  if (k.dim(-1) != a.d) {
    fail("input 1 (K): expected {} columns like Q {}, got {}", a.d, shape_str(q.shape()), shape_str(k.shape()));
  }
  if (v.dim(-2) != a.tk) {
    fail("input 2 (V): expected {} rows like K {}, got {}", a.tk, shape_str(k.shape()), shape_str(v.shape()));
  }
  // Leading dims broadcast like MatMul's batch dims.
  const Shape lq = leading(q.shape()), lk = leading(k.shape()), lv = leading(v.shape());
  size_t rank = std::max({lq.size(), lk.size(), lv.size()});
  a.lead.assign(rank, 1);
  const Shape* leads[] = {&lq, &lk, &lv};
  for (size_t i = 0; i < 3; ++i) {
    const Shape& l = *leads[i];
    for (size_t j = 0; j < l.size(); ++j) {
      int64_t& out = a.lead[rank - l.size() + j];
      if (l[j] == out || l[j] == 1) continue;
      if (out != 1) {
        fail("input {} ({}) {}: leading dims do not broadcast with Q {}, K {} and V {}", i, kNames[i],
             shape_str(ctx.input(i).shape()), shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
      }
      out = l[j];
    }
  }
  a.batch = shape_numel(a.lead);
  a.out_shape = a.lead;
  a.out_shape.push_back(a.tq);
  a.out_shape.push_back(a.dv);
  auto lead_strides = [&](const Shape& l, int64_t matrix) {
    std::vector<int64_t> s = broadcast_strides(l, a.lead);
    for (int64_t& x : s) x *= matrix;
    return s;
  };
  a.q_lead = lead_strides(lq, a.tq * a.d);
  a.k_lead = lead_strides(lk, a.tk * a.d);
  a.v_lead = lead_strides(lv, a.tk * a.dv);
  if (a.has_mask) {
    const Tensor& m = ctx.input(3);
    Shape scores = a.lead;
    scores.push_back(a.tq);
    scores.push_back(a.tk);
    bool fits = m.rank() <= int64_t(scores.size());
    for (int64_t j = 1; fits && j <= m.rank(); ++j) {
      const int64_t dm = m.dim(-j), ds = scores[scores.size() - size_t(j)];
      fits = dm == ds || dm == 1;
    }
    if (!fits) {
      fail("input 3 (mask): {} does not broadcast to the scores' shape {}", shape_str(m.shape()), shape_str(scores));
    }
    std::vector<int64_t> s = broadcast_strides(m.shape(), scores);
    a.mask_k = s.back();
    a.mask_q = s[s.size() - 2];
    a.mask_lead.assign(s.begin(), s.end() - 2);
  }
  a.scale = ctx.attr_float("scale");
  return a;
}

std::optional<AttentionLead2> attention_lead2(const AttentionArgs& a) {
  AttentionLead2 r;
  const size_t rank = a.lead.size();
  if (rank == 0) return r;
  r.inner = a.lead.back();
  r.outer = a.batch / std::max<int64_t>(1, r.inner);
  const std::vector<int64_t>* strides[] = {&a.q_lead, &a.k_lead, &a.v_lead, a.has_mask ? &a.mask_lead : nullptr};
  int64_t* out[] = {r.q, r.k, r.v, r.mask};
  for (size_t i = 0; i < 4; ++i) {
    if (!strides[i]) continue;
    const std::vector<int64_t>& s = *strides[i];
    out[i][1] = s[rank - 1];
    // The outer dims (all but the last) merge when each one's stride is the next one's times its size,
    // skipping dims of size 1 (their stride never matters).
    int64_t stride = 0, size = 0;
    bool first = true;
    for (size_t j = rank - 1; j-- > 0;) {
      if (a.lead[j] == 1) continue;
      if (!first && s[j] != stride * size) return std::nullopt;
      if (first) out[i][0] = s[j];
      first = false;
      stride = s[j];
      size = a.lead[j];
    }
  }
  return r;
}

}  // namespace ingot::nn
