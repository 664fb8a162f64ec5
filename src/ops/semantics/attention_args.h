// Backend-neutral argument handling of ai.ingot.Attention (ops/defs/fused.cpp): validation with
// the kernels' error messages, the output shape, and where each batch's Q, K, V and mask start.
// Used by the CPU and CUDA kernels.
#pragma once
#include <ingot/tensor.h>

#include <optional>
#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

struct AttentionArgs {
  Shape lead;       // the broadcast leading dims; `batch` is their product
  Shape out_shape;  // lead + [tq, dv], or [B, tq, H, dv] when Y is transposed
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  float scale = 1.0f;
  bool has_mask = false;
  bool transposed[4] = {};  // Q, K, V, Y given (produced) as [B, T, H, D]
  // Element strides per leading dim (0 where an operand broadcasts) and between consecutive rows
  // (along T; the D elements of a row are contiguous). The mask's strides along Tq and Tk are
  // mask_q and mask_k.
  std::vector<int64_t> q_lead, k_lead, v_lead, y_lead, mask_lead;
  int64_t q_row = 0, k_row = 0, v_row = 0, y_row = 0;
  int64_t mask_q = 0, mask_k = 0;

  // Element offset of batch b (row-major over `lead`) for an operand's lead strides.
  int64_t offset(const std::vector<int64_t>& strides, int64_t b) const {
    int64_t off = 0;
    for (int64_t i = int64_t(lead.size()) - 1; i >= 0 && b > 0; --i) {
      const int64_t n = lead[size_t(i)];
      off += (b % n) * strides[size_t(i)];
      b /= n;
    }
    return off;
  }
};

// Reads and checks inputs Q, K, V (and mask) and the scale and transposed attributes.
AttentionArgs attention_args(const KernelContext& ctx);

// Element strides of the leading dims of a dense [lead..., matrix elements] tensor.
std::vector<int64_t> contiguous_lead(const Shape& lead, int64_t matrix);

// The leading dims as two levels, batch = outer * inner (inner the last leading dim), each operand
// with one stride per level: what a GPU grid indexes. nullopt when some operand's outer dims do not
// merge into one stride (broadcast in one of them but not the next).
struct AttentionLead2 {
  int64_t outer = 1, inner = 1;
  int64_t q[2] = {}, k[2] = {}, v[2] = {}, y[2] = {}, mask[2] = {};
};
std::optional<AttentionLead2> attention_lead2(const AttentionArgs& a);

}  // namespace ingot::sem
