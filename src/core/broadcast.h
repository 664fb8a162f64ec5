// Numpy-style (multidirectional) broadcasting.
#pragma once
#include <ingot/tensor.h>

#include <vector>

namespace ingot {

// The broadcast result of several shapes; throws naming both shapes when they are incompatible.
Shape broadcast_shapes(const std::vector<Shape>& shapes);

// Element strides of `shape` seen through broadcasting to `out` (0 on broadcast axes), padded on
// the left to out.size().
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out);

// Walks the output in row-major order, keeping one source offset per operand. For speed, callers
// iterate the innermost dimension themselves: `inner()` elements with per-operand `inner_stride(k)`.
class BroadcastIterator {
 public:
  BroadcastIterator(const Shape& out, const std::vector<Shape>& operands);
  int64_t inner() const { return inner_; }
  int64_t outer() const { return outer_; }  // number of inner rows
  int64_t inner_stride(size_t operand) const { return inner_strides_[operand]; }
  // Offsets of row `row` (0 <= row < outer()) for every operand.
  void offsets(int64_t row, int64_t* out_offsets) const;

 private:
  Shape outer_shape_;
  std::vector<std::vector<int64_t>> outer_strides_;
  std::vector<int64_t> inner_strides_;
  int64_t inner_ = 1, outer_ = 1;
};

}  // namespace ingot
