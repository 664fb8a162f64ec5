// Arguments of the layout ops, resolved the same way for every backend: integer host inputs read
// as int64, and Slice's starts/ends/axes/steps turned into a strided view of its input.
#pragma once
#include <ingot/tensor.h>

#include <string_view>
#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

// An integer tensor of any integer dtype as int64 values (exact, unlike item_int's double); `what`
// names it in errors ("input 1 (starts)").
std::vector<int64_t> read_ints(const Tensor& t, std::string_view what);
// A one-element integer tensor.
int64_t read_scalar_int(const Tensor& t, std::string_view what);

// Slice's result as a view of its (contiguous) input: output shape, the element offset of its
// first element, and element strides with the steps folded in.
struct SliceView {
  Shape shape;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};
// Opset < 10: attributes starts/ends/axes; from 10: inputs 1-4 (host inputs).
SliceView slice_view(const KernelContext& ctx, const Tensor& x);
// Transpose's permutation (attribute 'perm', default: reversed), validated, and the output shape;
// `is_view` when only size-1 axes move, which keeps the element order (a reshape, no copy).
struct TransposePlan {
  std::vector<int64_t> perm;
  Shape shape;
  bool is_view = false;
};
TransposePlan transpose_plan(const KernelContext& ctx, const Tensor& x);

// Pad's arguments and geometry: the mode (checked), the 2*rank pads (attribute before opset 11;
// input 1 from 11, placed by the optional axes input 3), and per axis the output size, the part of
// the input that survives (negative pads crop: `inner` elements from `src_begin`) and where it lands
// (`dst_begin`). Input 2 (constant_value), when given, is checked to be one element of x's dtype;
// the backends read it where they need it.
struct PadPlan {
  std::string mode;
  std::vector<int64_t> pads;
  Shape shape, inner;
  std::vector<int64_t> src_begin, dst_begin;
};
PadPlan pad_plan(const KernelContext& ctx, const Tensor& x);

// Split's outputs as views of its input, one per output: sizes from the 'split' attribute (opset
// < 13) or input 1, 'num_outputs' (opset 18), or equal parts.
std::vector<SliceView> split_views(const KernelContext& ctx, const Tensor& x);

}  // namespace ingot::sem
