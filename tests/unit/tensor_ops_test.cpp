// Tensor, shape and data-movement ops: edge cases the ONNX node suite does not cover (views sharing
// storage, zero-size dims, negative axes and steps, bad indices, strings, the tiled transpose on
// sizes that are not multiples of a tile). Expected values are worked out by hand in the comments
// or by an independent naive loop in the test.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <climits>
#include <numeric>

namespace ingot {
namespace {

using I64 = std::vector<int64_t>;

Tensor iota_f(Shape shape, float start = 0) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), start);
  return Tensor::from_vector(v, std::move(shape));
}

Tensor ints(I64 v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector(v, {n});
}

Tensor call1(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) {
  return ops::call(op, inputs, attrs, 1).at(0);
}

// Runs `op` and returns the error message it throws ("" when it does not throw).
std::string error_of(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}) {
  try {
    ops::call(op, inputs, attrs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool same_storage(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

TEST(TensorViews, ReshapeFamilySharesStorage) {
  const Tensor x = iota_f({2, 1, 3});
  const Tensor r = call1("Reshape", {x, ints({0, -1})});  // 0 copies dim 0 (2), -1 infers 3
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_TRUE(same_storage(r, x));
  const Tensor f = call1("Flatten", {x}, {{"axis", -1}});
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_TRUE(same_storage(f, x));
  const Tensor s = call1("Squeeze", {x, ints({-2})});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_TRUE(same_storage(s, x));
  const Tensor u = call1("Unsqueeze", {x, ints({-1, 0})});  // output rank 5: axes 4 and 0
  EXPECT_EQ(u.shape(), (Shape{1, 2, 1, 3, 1}));
  EXPECT_TRUE(same_storage(u, x));
  EXPECT_TRUE(same_storage(call1("Identity", {x}), x));
  // A transpose that only moves the size-1 axis keeps the element order: also a view.
  const Tensor t = call1("Transpose", {x}, {{"perm", I64{1, 0, 2}}});
  EXPECT_EQ(t.shape(), (Shape{1, 2, 3}));
  EXPECT_TRUE(same_storage(t, x));
}

TEST(TensorViews, ReshapeAllowZeroAndErrors) {
  const Tensor empty = Tensor::zeros(DType::Float32, {0, 3});
  EXPECT_EQ(call1("Reshape", {empty, ints({3, 0})}, {{"allowzero", 1}}).shape(), (Shape{3, 0}));
  // Without allowzero, 0 copies the input dim: [0, 3] -> [0, 3].
  EXPECT_EQ(call1("Reshape", {empty, ints({0, 3})}).shape(), (Shape{0, 3}));
  const std::string msg = error_of("Reshape", {iota_f({2, 3}), ints({4, 2})});
  EXPECT_NE(msg.find("[2,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4,2]"), std::string::npos) << msg;
  EXPECT_NE(error_of("Reshape", {iota_f({2, 3}), ints({-1, -1})}), "");
  EXPECT_NE(error_of("Squeeze", {iota_f({2, 3}), ints({0})}), "");  // axis 0 has size 2
}

// Naive reference: out[i] = x[perm applied], computed with explicit index arithmetic.
std::vector<float> naive_transpose(const std::vector<float>& x, const Shape& shape, const I64& perm) {
  size_t r = shape.size();
  Shape out_shape(r);
  for (size_t k = 0; k < r; ++k) out_shape[k] = shape[size_t(perm[k])];
  std::vector<int64_t> in_strides(r, 1);
  for (size_t k = r - 1; k-- > 0;) in_strides[k] = in_strides[k + 1] * shape[k + 1];
  std::vector<float> out(x.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t rest = int64_t(i), src = 0;
    for (size_t k = r; k-- > 0;) {
      src += (rest % out_shape[k]) * in_strides[size_t(perm[k])];
      rest /= out_shape[k];
    }
    out[i] = x[size_t(src)];
  }
  return out;
}

TEST(Transpose, MatchesNaiveLoopOnAwkwardSizes) {
  // NHWC -> NCHW and back, with sizes that are not tile multiples, plus a general 4-D permutation.
  const std::vector<std::pair<Shape, I64>> cases = {{{1, 37, 41, 3}, {0, 3, 1, 2}},
                                                    {{2, 3, 37, 41}, {0, 2, 3, 1}},
                                                    {{3, 5, 7, 11}, {2, 0, 3, 1}},
                                                    {{70, 90}, {1, 0}}};
  for (const auto& [shape, perm] : cases) {
    const Tensor x = iota_f(shape);
    const Tensor y = call1("Transpose", {x}, {{"perm", perm}});
    EXPECT_EQ(y.to_vector<float>(), naive_transpose(x.to_vector<float>(), shape, perm)) << shape_str(shape);
  }
}

TEST(Transpose, StringsAndDefaultPerm) {
  const Tensor x = Tensor::from_vector<std::string>({"a", "b", "c", "d", "e", "f"}, {2, 3});
  const Tensor y = call1("Transpose", {x});  // reversed axes
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector<std::string>(), (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
}

TEST(Concat, NegativeAxisAndZeroSizeInput) {
  const Tensor a = iota_f({2, 2});  // [[0,1],[2,3]]
  const Tensor b = Tensor::zeros(DType::Float32, {2, 0});
  const Tensor c = iota_f({2, 1}, 10);  // [[10],[11]]
  const Tensor y = ops::concat({a, b, c}, -1);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 10, 2, 3, 11}));
  EXPECT_NE(error_of("Concat", {a, iota_f({3, 3})}, {{"axis", 1}}), "");  // dim 0 differs
}

TEST(Split, UnevenNumOutputsAndViews) {
  // num_outputs 3 over 5 elements: ceil(5/3) = 2 -> [2, 2, 1].
  const Tensor x = iota_f({5, 2});
  const auto parts = ops::call("Split", {x}, {{"num_outputs", 3}}, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(parts[2].to_vector<float>(), (std::vector<float>{8, 9}));
  EXPECT_TRUE(same_storage(parts[1], x));  // leading-axis pieces are views
  // Splitting the last axis copies: [[0,1],[2,3],...] -> columns.
  const auto cols = ops::call("Split", {x, ints({1, 1})}, {{"axis", -1}}, 2);
  EXPECT_EQ(cols[1].to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9}));
  EXPECT_NE(error_of("Split", {x, ints({2, 2})}), "");  // sizes sum to 4, not 5
}

Tensor slice(const Tensor& x, I64 starts, I64 ends, I64 axes, I64 steps) {
  return call1("Slice",
               {x, ints(std::move(starts)), ints(std::move(ends)), ints(std::move(axes)), ints(std::move(steps))});
}

TEST(Slice, NegativeStepsAndClamping) {
  const Tensor x = iota_f({10});
  // From the last element down past the front, every second: 9 7 5 3 1.
  EXPECT_EQ(slice(x, {-1}, {INT64_MIN}, {0}, {-2}).to_vector<float>(), (std::vector<float>{9, 7, 5, 3, 1}));
  // start beyond the end clamps to 9 for negative steps; end -8 is index 2 (exclusive): 9..3.
  EXPECT_EQ(slice(x, {100}, {-8}, {0}, {-3}).to_vector<float>(), (std::vector<float>{9, 6, 3}));
  EXPECT_EQ(slice(x, {-100}, {INT64_MAX}, {0}, {4}).to_vector<float>(), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(slice(x, {5}, {5}, {0}, {1}).numel(), 0);
  // 2-D, reversed columns on the negative axis: [[0,1,2],[3,4,5]] -> [[2,1,0],[5,4,3]].
  const Tensor m = iota_f({2, 3});
  EXPECT_EQ(slice(m, {-1}, {INT64_MIN}, {-1}, {-1}).to_vector<float>(), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_NE(error_of("Slice", {x, ints({0}), ints({1}), ints({0}), ints({0})}), "");  // step 0
}

TEST(Slice, ContiguousResultIsAView) {
  const Tensor x = iota_f({4, 3});
  const Tensor rows = slice(x, {1}, {3}, {0}, {1});
  EXPECT_TRUE(same_storage(rows, x));
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
}

TEST(Gather, OutOfRangeIndexNamesIndexAndAxisSize) {
  const Tensor x = iota_f({3, 2});
  const std::string msg = error_of("Gather", {x, ints({0, 5})});
  EXPECT_NE(msg.find("index 5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_NE(error_of("Gather", {x, ints({-4})}), "");
  // Negative indices count from the end: -1 on axis 1 takes the last column.
  EXPECT_EQ(call1("Gather", {x, ints({-1})}, {{"axis", 1}}).to_vector<float>(), (std::vector<float>{1, 3, 5}));
  // Zero indices give a zero-size result.
  const Tensor none = call1("Gather", {x, Tensor::zeros(DType::Int64, {0})});
  EXPECT_EQ(none.shape(), (Shape{0, 2}));
}

TEST(GatherScatter, NdAndElementsWithReductions) {
  // GatherND with batch_dims 1: data [[0,1],[2,3]], indices [[1],[0]] -> [data[0][1], data[1][0]] = [1, 2].
  const Tensor d = iota_f({2, 2});
  const Tensor idx = Tensor::from_vector<int64_t>({1, 0}, {2, 1});
  EXPECT_EQ(call1("GatherND", {d, idx}, {{"batch_dims", 1}}).to_vector<float>(), (std::vector<float>{1, 2}));
  // ScatterND add with a repeated index: row 0 gets 10 + 10 added.
  const Tensor rows = Tensor::from_vector<int64_t>({0, 0}, {2, 1});
  const Tensor upd = Tensor::from_vector<float>({10, 10, 10, 10}, {2, 2});
  EXPECT_EQ(call1("ScatterND", {d, rows, upd}, {{"reduction", "add"}}).to_vector<float>(),
            (std::vector<float>{20, 21, 2, 3}));
  // ScatterElements max along axis 1 with a negative index: -1 is column 1.
  const Tensor ei = Tensor::from_vector<int64_t>({-1, 0}, {1, 2});
  const Tensor eu = Tensor::from_vector<float>({0.5f, 7}, {1, 2});
  EXPECT_EQ(call1("ScatterElements", {d, ei, eu}, {{"axis", 1}, {"reduction", "max"}}).to_vector<float>(),
            (std::vector<float>{7, 1, 2, 3}));
  EXPECT_NE(error_of("ScatterElements", {d, Tensor::from_vector<int64_t>({2}, {1, 1}), iota_f({1, 1})}), "");
}

TEST(Pad, ModesAndNegativePads) {
  const Tensor x = iota_f({3});  // [0, 1, 2]
  auto pad = [&](const char* mode, I64 pads) { return call1("Pad", {x, ints(std::move(pads))}, {{"mode", mode}}); };
  EXPECT_EQ(pad("constant", {2, 1}).to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 2, 0}));
  EXPECT_EQ(pad("reflect", {2, 2}).to_vector<float>(), (std::vector<float>{2, 1, 0, 1, 2, 1, 0}));
  EXPECT_EQ(pad("edge", {2, 1}).to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 2, 2}));
  EXPECT_EQ(pad("constant", {-1, 1}).to_vector<float>(), (std::vector<float>{1, 2, 0}));  // crop front
  // 2-D edge padding fills corners from the padded rows: [[0,1],[2,3]] padded by 1 on each side.
  const Tensor m = iota_f({2, 2});
  EXPECT_EQ(call1("Pad", {m, ints({1, 1, 1, 1})}, {{"mode", "edge"}}).to_vector<float>(),
            (std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}));
  // Constant value and the axes input (opset 18): pad only axis -1 of [2,2] by (0, 1) with 9.
  EXPECT_EQ(call1("Pad", {m, ints({0, 1}), Tensor::scalar<float>(9), ints({-1})}).to_vector<float>(),
            (std::vector<float>{0, 1, 9, 2, 3, 9}));
  // A zero-size input pads to constants only.
  EXPECT_EQ(call1("Pad", {Tensor::zeros(DType::Float32, {0}), ints({1, 1})}).to_vector<float>(),
            (std::vector<float>{0, 0}));
}

TEST(ExpandTile, BroadcastAndZeroRepeats) {
  const Tensor x = iota_f({2, 1});  // [[0],[1]]
  EXPECT_EQ(call1("Expand", {x, ints({2, 3})}).to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(call1("Tile", {x, ints({2, 2})}).to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(call1("Tile", {x, ints({0, 3})}).shape(), (Shape{0, 3}));
}

TEST(SortScan, TopKTiesUniqueAndCumSum) {
  const Tensor x = Tensor::from_vector<float>({3, 1, 3, 2, 1}, {5});
  const auto topk = ops::call("TopK", {x, ints({3})}, {}, 2);
  EXPECT_EQ(topk[0].to_vector<float>(), (std::vector<float>{3, 3, 2}));
  EXPECT_EQ(topk[1].to_vector<int64_t>(), (I64{0, 2, 3}));  // equal values: lower index first
  const auto smallest = ops::call("TopK", {x, ints({2})}, {{"largest", 0}}, 2);
  EXPECT_EQ(smallest[1].to_vector<int64_t>(), (I64{1, 4}));
  // Unique, sorted: values [1,2,3], first indices [1,3,0], inverse [2,0,2,1,0], counts [2,1,2].
  const auto u = ops::call("Unique", {x}, {}, 4);
  EXPECT_EQ(u[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(u[1].to_vector<int64_t>(), (I64{1, 3, 0}));
  EXPECT_EQ(u[2].to_vector<int64_t>(), (I64{2, 0, 2, 1, 0}));
  EXPECT_EQ(u[3].to_vector<int64_t>(), (I64{2, 1, 2}));
  // Reverse exclusive cumsum of [1,2,3,4] on axis -1: [2+3+4, 3+4, 4, 0].
  const Tensor c = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {1, 4});
  EXPECT_EQ(call1("CumSum", {c, Tensor::scalar<int64_t>(-1)}, {{"exclusive", 1}, {"reverse", 1}}).to_vector<int32_t>(),
            (std::vector<int32_t>{9, 7, 4, 0}));
}

TEST(Generators, ZeroSizesAndSmallCases) {
  EXPECT_EQ(call1("NonZero", {Tensor::zeros(DType::Float32, {0, 3})}).shape(), (Shape{2, 0}));
  // NonZero of [[0,5],[7,0]]: coordinates (0,1) and (1,0).
  EXPECT_EQ(call1("NonZero", {Tensor::from_vector<int32_t>({0, 5, 7, 0}, {2, 2})}).to_vector<int64_t>(),
            (I64{0, 1, 1, 0}));
  EXPECT_EQ(call1("ConstantOfShape", {ints({2, 0})}).shape(), (Shape{2, 0}));
  EXPECT_EQ(call1("Range", {Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(-2)})
                .to_vector<int64_t>(),
            (I64{5, 3, 1}));
  // OneHot with depth 3 and index -1 (= 2), off 0 / on 1.
  EXPECT_EQ(call1("OneHot", {ints({-1, 0}), Tensor::scalar<int64_t>(3), Tensor::from_vector<float>({0, 1}, {2})})
                .to_vector<float>(),
            (std::vector<float>{0, 0, 1, 1, 0, 0}));
  // Trilu lower with k = -1 keeps j <= i - 1 of a 3x3 of ones: rows [0,0,0], [1,0,0], [1,1,0].
  const Tensor ones = call1("ConstantOfShape", {ints({3, 3})}, {{"value", Tensor::from_vector<float>({1}, {1})}});
  EXPECT_EQ(call1("Trilu", {ones, Tensor::scalar<int64_t>(-1)}, {{"upper", 0}}).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(call1("Shape", {ones}, {{"start", -1}}).to_vector<int64_t>(), (I64{3}));
}

TEST(DepthSpace, SpaceToDepthThenDepthToSpaceRoundTrips) {
  const Tensor x = iota_f({2, 3, 4, 6});
  const Tensor d = call1("SpaceToDepth", {x}, {{"blocksize", 2}});
  EXPECT_EQ(d.shape(), (Shape{2, 12, 2, 3}));
  const Tensor back = call1("DepthToSpace", {d}, {{"blocksize", 2}, {"mode", "DCR"}});
  EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
  EXPECT_NE(error_of("DepthToSpace", {iota_f({1, 3, 2, 2})}, {{"blocksize", 2}}), "");  // 3 % 4 != 0
}

}  // namespace
}  // namespace ingot
