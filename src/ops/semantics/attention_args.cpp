#include "ops/semantics/attention_args.h"

#include <ingot/error.h>

#include <algorithm>

#include "core/broadcast.h"

namespace ingot::sem {

namespace {

constexpr const char* kNames[] = {"Q", "K", "V", "mask"};

// An operand as [lead..., T, D]: its leading dims with their element strides, and its row stride.
struct OperandView {
  Shape lead;
  std::vector<int64_t> lead_strides;
  int64_t rows = 0, cols = 0, row_stride = 0;
};

OperandView operand_view(const Tensor& t, bool transposed, size_t index) {
  const Shape& s = t.shape();
  OperandView v;
  if (transposed) {  // [B, T, H, D] read as [B, H, T, D]
    if (s.size() != 4) {
      fail("input {} ({}): transposed operands are [B, T, H, D], got {}", index, kNames[index], shape_str(s));
    }
    v.lead = {s[0], s[2]};
    v.lead_strides = {s[1] * s[2] * s[3], s[3]};
    v.rows = s[1], v.cols = s[3], v.row_stride = s[2] * s[3];
    return v;
  }
  v.lead.assign(s.begin(), s.end() - 2);
  v.rows = s[s.size() - 2], v.cols = s.back(), v.row_stride = v.cols;
  v.lead_strides = contiguous_lead(v.lead, v.rows * v.cols);
  return v;
}

// An operand's lead strides seen from the broadcast `lead` (0 on broadcast dims, left-padded).
std::vector<int64_t> broadcast_lead(const OperandView& v, const Shape& lead) {
  std::vector<int64_t> out(lead.size(), 0);
  const size_t pad = lead.size() - v.lead.size();
  for (size_t j = 0; j < v.lead.size(); ++j) out[pad + j] = v.lead[j] == 1 && lead[pad + j] != 1 ? 0 : v.lead_strides[j];
  return out;
}

}  // namespace

std::vector<int64_t> contiguous_lead(const Shape& lead, int64_t matrix) {
  std::vector<int64_t> strides(lead.size());
  for (size_t j = lead.size(); j-- > 0;) {
    strides[j] = matrix;
    matrix *= lead[j];
  }
  return strides;
}

AttentionArgs attention_args(const KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  AttentionArgs a;
  a.has_mask = ctx.has_input(3);
  const std::vector<int64_t>& flags = ctx.attr_ints("transposed");
  if (!flags.empty() && flags.size() != 4) {
    fail("transposed: expected 4 flags (Q, K, V, Y) or none, got {}", flags.size());
  }
  for (size_t i = 0; i < flags.size(); ++i) a.transposed[i] = flags[i] != 0;
  const size_t operands = a.has_mask ? 4 : 3;
  if (!is_floating(q.dtype())) fail("input 0 (Q): expected a floating-point tensor, got {}", q.describe());
  for (size_t i = 0; i < operands; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != q.dtype()) {
      fail("input {} ({}): expected {} like Q, got {}", i, kNames[i], dtype_name(q.dtype()), dtype_name(t.dtype()));
    }
    if (i < 3 && t.rank() < 2) fail("input {} ({}): expected rank >= 2, got {}", i, kNames[i], shape_str(t.shape()));
  }
  const OperandView qv = operand_view(q, a.transposed[0], 0), kv = operand_view(k, a.transposed[1], 1),
                    vv = operand_view(v, a.transposed[2], 2);
  a.tq = qv.rows, a.d = qv.cols, a.tk = kv.rows, a.dv = vv.cols;
  if (kv.cols != a.d) {
    fail("input 1 (K): expected {} columns like Q {}, got {}", a.d, shape_str(q.shape()), shape_str(k.shape()));
  }
  if (vv.rows != a.tk) {
    fail("input 2 (V): expected {} rows like K {}, got {}", a.tk, shape_str(k.shape()), shape_str(v.shape()));
  }
  // Leading dims broadcast like MatMul's batch dims.
  const OperandView* views[] = {&qv, &kv, &vv};
  const size_t rank = std::max({qv.lead.size(), kv.lead.size(), vv.lead.size()});
  a.lead.assign(rank, 1);
  for (size_t i = 0; i < 3; ++i) {
    const Shape& l = views[i]->lead;
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
  a.q_lead = broadcast_lead(qv, a.lead), a.q_row = qv.row_stride;
  a.k_lead = broadcast_lead(kv, a.lead), a.k_row = kv.row_stride;
  a.v_lead = broadcast_lead(vv, a.lead), a.v_row = vv.row_stride;
  if (a.transposed[3]) {
    if (rank != 2) fail("transposed: Y as [B, T, H, D] needs two leading dims, got {}", shape_str(a.lead));
    a.out_shape = {a.lead[0], a.tq, a.lead[1], a.dv};
    a.y_lead = {a.tq * a.lead[1] * a.dv, a.dv};
    a.y_row = a.lead[1] * a.dv;
  } else {
    a.out_shape = a.lead;
    a.out_shape.push_back(a.tq);
    a.out_shape.push_back(a.dv);
    a.y_lead = contiguous_lead(a.lead, a.tq * a.dv);
    a.y_row = a.dv;
  }
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
  const std::vector<int64_t>* strides[] = {&a.q_lead, &a.k_lead, &a.v_lead, &a.y_lead,
                                           a.has_mask ? &a.mask_lead : nullptr};
  int64_t* out[] = {r.q, r.k, r.v, r.y, r.mask};
  for (size_t i = 0; i < 5; ++i) {
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

}  // namespace ingot::sem
