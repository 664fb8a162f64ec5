#include "core/broadcast.h"

#include <algorithm>

namespace ingot {

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
        continue;
      }
      std::string all;
      for (const Shape& t : shapes) all += (all.empty() ? "" : " and ") + shape_str(t);
      fail("shapes {} cannot be broadcast together (axis {}: {} vs {})", all, off + i, o, s[i]);
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  size_t off = out.size() - shape.size();
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[off + i] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

BroadcastIterator::BroadcastIterator(const Shape& out, const std::vector<Shape>& operands) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : operands) strides.push_back(broadcast_strides(s, out));
  // Merge trailing axes into one inner run while every operand stays contiguous (or broadcast) over them.
  size_t rank = out.size();
  size_t split = rank;  // axes [split, rank) form the inner run
  inner_strides_.assign(operands.size(), 0);
  if (rank > 0) {
    split = rank - 1;
    inner_ = out[rank - 1];
    for (size_t k = 0; k < operands.size(); ++k) inner_strides_[k] = strides[k][rank - 1];
    while (split > 0) {
      size_t a = split - 1;
      bool mergeable = true;
      for (size_t k = 0; k < operands.size() && out[a] != 1; ++k) {
        int64_t s_in = inner_strides_[k], s_a = strides[k][a];
        bool contiguous = s_in == 1 && s_a == inner_;
        bool both_broadcast = s_in == 0 && s_a == 0;
        if (!contiguous && !both_broadcast) mergeable = false;
      }
      if (!mergeable) break;
      inner_ *= out[a];
      split = a;
    }
  }
  outer_shape_.assign(out.begin(), out.begin() + int64_t(split));
  outer_ = shape_numel(outer_shape_);
  for (auto& s : strides) outer_strides_.emplace_back(s.begin(), s.begin() + int64_t(split));
}

void BroadcastIterator::offsets(int64_t row, int64_t* out_offsets) const {
  size_t n = outer_strides_.size();
  for (size_t k = 0; k < n; ++k) out_offsets[k] = 0;
  for (size_t a = outer_shape_.size(); a-- > 0;) {
    int64_t idx = row % outer_shape_[a];
    row /= outer_shape_[a];
    for (size_t k = 0; k < n; ++k) out_offsets[k] += idx * outer_strides_[k][a];
  }
}

}  // namespace ingot
