// Reductions, ArgMax, losses, Einsum and Det: edge cases the ONNX node suite does not cover
// (zero-size dims, negative axes, reduction to a scalar, NaN propagation, both loop shapes of the
// reduction planner, bad inputs). Expected values are computed by hand in the comments.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include "core/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ingot {
namespace {

Tensor iota_f(Shape shape, float start = 0) {
  std::vector<float> v(size_t(shape_numel(shape)));
  std::iota(v.begin(), v.end(), start);
  return Tensor::from_vector(v, std::move(shape));
}

Tensor axes_input(std::vector<int64_t> axes) {
  const int64_t n = int64_t(axes.size());
  return Tensor::from_vector(axes, {n});
}

Tensor reduce(const std::string& op, const Tensor& x, std::vector<int64_t> axes, int64_t keepdims = 1) {
  // Axes as an input (the opset >= 18 form, which eager calls use).
  return ops::call(op, {x, axes_input(std::move(axes))}, {{"keepdims", keepdims}}).at(0);
}

TEST(Reduce, ZeroSizeReducedAxisGivesIdentity) {
  const Tensor x = Tensor::zeros(DType::Float32, {2, 0, 3});
  const Tensor sum = reduce("ReduceSum", x, {1});
  EXPECT_EQ(sum.shape(), (Shape{2, 1, 3}));
  for (float v : sum.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  for (float v : reduce("ReduceProd", x, {1}).to_vector<float>()) EXPECT_EQ(v, 1.0f);
  for (float v : reduce("ReduceMax", x, {1}).to_vector<float>()) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
  for (float v : reduce("ReduceMin", x, {1}).to_vector<float>()) EXPECT_EQ(v, std::numeric_limits<float>::infinity());
  for (float v : reduce("ReduceMean", x, {1}).to_vector<float>()) EXPECT_TRUE(std::isnan(v));  // 0 / 0
  for (float v : reduce("ReduceLogSumExp", x, {1}).to_vector<float>())
    EXPECT_EQ(v, -std::numeric_limits<float>::infinity());  // log(0)
  // Integers: max of nothing is the type's lowest value.
  const Tensor xi = Tensor::zeros(DType::Int32, {0, 2});
  const Tensor maxi = reduce("ReduceMax", xi, {0}, 0);
  EXPECT_EQ(maxi.shape(), (Shape{2}));
  for (int32_t v : maxi.to_vector<int32_t>()) EXPECT_EQ(v, std::numeric_limits<int32_t>::lowest());
}

TEST(Reduce, ZeroSizeKeptAxisGivesEmptyOutput) {
  const Tensor x = Tensor::zeros(DType::Float32, {0, 4});
  const Tensor y = reduce("ReduceSum", x, {1});
  EXPECT_EQ(y.shape(), (Shape{0, 1}));
  EXPECT_EQ(y.numel(), 0);
}

TEST(Reduce, NegativeAxes) {
  // x = 0..23 as [2,3,4]; summing the last axis gives 4 * first + 6 = 16 r + 6 for row r = 0..5.
  const Tensor x = iota_f({2, 3, 4});
  const Tensor y = reduce("ReduceSum", x, {-1}, 0);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6, 22, 38, 54, 70, 86}));
  // Axes -3 and -1 (0 and 2): for middle index j, sum over i < 2, k < 4 of 12 i + 4 j + k
  // = 4 * 12 + 8 * 4 j + 2 * 6 = 60 + 32 j.
  const Tensor z = reduce("ReduceSum", x, {-3, -1}, 1);
  EXPECT_EQ(z.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{60, 92, 124}));
}

TEST(Reduce, OuterAxisUsesRowAccumulation) {
  // [3, 1000] reduced over axis 0 runs the contiguous "inner kept" loop, in two blocks of 512.
  // x[r, c] = r * 1000 + c, so the max over r is 2000 + c and the mean 1000 + c.
  const Tensor x = iota_f({3, 1000});
  const std::vector<float> mx = reduce("ReduceMax", x, {0}, 0).to_vector<float>();
  const std::vector<float> mean = reduce("ReduceMean", x, {0}, 0).to_vector<float>();
  ASSERT_EQ(mx.size(), 1000u);
  for (int c = 0; c < 1000; ++c) {
    EXPECT_EQ(mx[size_t(c)], 2000.0f + float(c));
    EXPECT_EQ(mean[size_t(c)], 1000.0f + float(c));
  }
}

// [2, 40, 30, 5] reduced over axes 1 and 2 (a squeeze-excitation mean over H and W, channels last):
// two output rows of 5 over 1200 reduced positions, so the reduced range is cut into chunks summed in
// parallel and combined in order. Against a float64 loop, and the same bits at 1 and 2 threads.
TEST(Reduce, LongReductionOfFewOutputsIsSplitAndStaysDeterministic) {
  const Shape shape{2, 40, 30, 5};
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) * 0.37)) * 3.0f + float(i % 7) * 0.01f;
  const Tensor x = Tensor::from_vector(v, shape);
  const int before = num_threads();
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    std::vector<float> got[2];
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      got[threads - 1] = reduce(op, x, {1, 2}, 0).to_vector<float>();
    }
    set_num_threads(before);
    ASSERT_EQ(got[0].size(), 10u);
    EXPECT_EQ(got[0], got[1]) << "the result depends on the thread count";
    const std::string name = op;
    for (int n = 0; n < 2; ++n) {
      for (int c = 0; c < 5; ++c) {
        double sum = 0, sq = 0, mx = -1e300, mn = 1e300, lse_max = -1e300;
        for (int r = 0; r < 1200; ++r) {
          const double a = v[size_t((n * 1200 + r) * 5 + c)];
          sum += a, sq += a * a, mx = std::max(mx, a), mn = std::min(mn, a), lse_max = std::max(lse_max, a);
        }
        double lse = 0;
        for (int r = 0; r < 1200; ++r) lse += std::exp(double(v[size_t((n * 1200 + r) * 5 + c)]) - lse_max);
        const double want = name == "ReduceSum"         ? sum
                            : name == "ReduceMean"      ? sum / 1200
                            : name == "ReduceMax"       ? mx
                            : name == "ReduceMin"       ? mn
                            : name == "ReduceLogSumExp" ? lse_max + std::log(lse)
                                                        : sq;
        EXPECT_NEAR(got[0][size_t(n * 5 + c)], want, 1e-5 * std::max(1.0, std::abs(want))) << n << ", " << c;
      }
    }
  }
}

TEST(Reduce, KeepdimsZeroToScalar) {
  // Mean of 1..6 = 3.5; L2 of 1..6 = sqrt(91); the default (empty) axes reduce everything.
  const Tensor x = iota_f({2, 3}, 1);
  const Tensor mean = reduce("ReduceMean", x, {}, 0);
  EXPECT_EQ(mean.shape(), Shape{});
  EXPECT_FLOAT_EQ(mean.to_vector<float>()[0], 3.5f);
  const Tensor l2 = ops::call("ReduceL2", {x}, {{"keepdims", int64_t(0)}}).at(0);
  EXPECT_EQ(l2.shape(), Shape{});
  EXPECT_FLOAT_EQ(l2.to_vector<float>()[0], std::sqrt(91.0f));
  const Tensor kept = reduce("ReduceSum", x, {0, 1}, 1);
  EXPECT_EQ(kept.shape(), (Shape{1, 1}));
  EXPECT_EQ(kept.to_vector<float>()[0], 21.0f);
}

TEST(Reduce, NoopWithEmptyAxesIsIdentity) {
  const Tensor x = iota_f({2, 3});
  const Tensor y = ops::call("ReduceSum", {x, axes_input({})}, {{"noop_with_empty_axes", int64_t(1)}}).at(0);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
}

TEST(Reduce, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 20 elements per row so both the 8-lane part and the tail are exercised; NaN in a lane (row 0),
  // in the tail (row 1), none (row 2: max 19, min 0).
  std::vector<float> v(60);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 20; ++c) v[size_t(r * 20 + c)] = float(c);
  v[3] = nan;
  v[20 + 18] = nan;
  const Tensor x = Tensor::from_vector(v, {3, 20});
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    const std::vector<float> y = reduce(op, x, {1}, 0).to_vector<float>();
    EXPECT_TRUE(std::isnan(y[0])) << op;
    EXPECT_TRUE(std::isnan(y[1])) << op;
    EXPECT_EQ(y[2], std::string(op) == "ReduceMax" ? 19.0f : 0.0f) << op;
    // Over axis 0 (the row-accumulation loop): columns 3 and 18 see a NaN.
    const std::vector<float> cols = reduce(op, x, {0}, 0).to_vector<float>();
    for (int c = 0; c < 20; ++c) EXPECT_EQ(std::isnan(cols[size_t(c)]), c == 3 || c == 18) << op << " col " << c;
  }
}

TEST(Reduce, IntegerSumAndMean) {
  // int64 [2,3] = 0..5: row sums 3 and 12, integer means 1 and 4.
  const Tensor x = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(reduce("ReduceSum", x, {1}, 0).to_vector<int64_t>(), (std::vector<int64_t>{3, 12}));
  EXPECT_EQ(reduce("ReduceMean", x, {1}, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 4}));
}

TEST(Reduce, BadAxesAreErrors) {
  const Tensor x = iota_f({2, 3});
  EXPECT_THROW(reduce("ReduceSum", x, {2}), Error);
  EXPECT_THROW(reduce("ReduceSum", x, {-3}), Error);
  EXPECT_THROW(reduce("ReduceMax", x, {1, -1}), Error);  // the same axis twice
}

TEST(ArgMax, TiesAndSelectLastIndex) {
  // Row 0 = [1, 3, 3]: first max at 1, last at 2. Row 1 = [5, 0, 5]: 0 and 2.
  const Tensor x = Tensor::from_vector<float>({1, 3, 3, 5, 0, 5}, {2, 3});
  Attributes first{{"axis", int64_t(-1)}, {"keepdims", int64_t(0)}};
  Attributes last = first;
  last["select_last_index"] = int64_t(1);
  EXPECT_EQ(ops::call("ArgMax", {x}, first).at(0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ops::call("ArgMax", {x}, last).at(0).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  // ArgMin over axis 0 with keepdims: column minima at rows 0, 1, 0.
  const Tensor mins = ops::call("ArgMin", {x}, {{"axis", int64_t(0)}}).at(0);
  EXPECT_EQ(mins.shape(), (Shape{1, 3}));
  EXPECT_EQ(mins.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
}

TEST(ArgMax, EmptyAxisIsAnError) {
  EXPECT_THROW(ops::call("ArgMax", {Tensor::zeros(DType::Float32, {2, 0})}, {{"axis", int64_t(1)}}), Error);
}

TEST(Einsum, MatmulShapedAndDirectPathsAgree) {
  // a = 0..5 as [2,3], b = 0..5 as [2,3]; a b^T = [[0*0+1*1+2*2, 0*3+1*4+2*5], [.., ..]] = [[5,14],[14,50]].
  const Tensor a = iota_f({2, 3});
  const Tensor b = iota_f({2, 3});
  const std::vector<float> expected{5, 14, 14, 50};
  EXPECT_EQ(ops::call("Einsum", {a, b}, {{"equation", "ij,kj->ik"}}).at(0).to_vector<float>(), expected);
  // The same product written so that operand b needs a permutation and the output a transpose.
  EXPECT_EQ(ops::call("Einsum", {a, b}, {{"equation", "ij,kj->ki"}}).at(0).to_vector<float>(), expected);
  // Integer inputs take the direct loop.
  const Tensor ai = a.cast(DType::Int32), bi = b.cast(DType::Int32);
  EXPECT_EQ(ops::call("Einsum", {ai, bi}, {{"equation", "ij,kj"}}).at(0).to_vector<int32_t>(),
            (std::vector<int32_t>{5, 14, 14, 50}));
}

TEST(Einsum, DiagonalTraceAndBroadcastEllipsis) {
  const Tensor m = iota_f({3, 3});  // diagonal 0, 4, 8
  EXPECT_EQ(ops::call("Einsum", {m}, {{"equation", "ii->i"}}).at(0).to_vector<float>(), (std::vector<float>{0, 4, 8}));
  const Tensor trace = ops::call("Einsum", {m}, {{"equation", "ii"}}).at(0);
  EXPECT_EQ(trace.shape(), Shape{});
  EXPECT_EQ(trace.to_vector<float>()[0], 12.0f);
  // '...' broadcasting: x [2,1 | 1,2] and y [3 | 2,1] have ellipsis dims [2,1] and [3] -> [2,3].
  // out[a,b] = x[a] . y[b] with x rows (1,2), (3,4) and y rows (1,0), (0,1), (1,1).
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 1, 1, 2});
  const Tensor y = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2, 1});
  const Tensor out = ops::call("Einsum", {x, y}, {{"equation", "...ij,...jk->...ik"}}).at(0);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2, 3, 3, 4, 7}));
}

TEST(Einsum, BadEquationIsAnError) {
  const Tensor a = iota_f({2, 3});
  EXPECT_THROW(ops::call("Einsum", {a}, {{"equation", "ijk->i"}}), Error);    // rank mismatch
  EXPECT_THROW(ops::call("Einsum", {a}, {{"equation", "ij->iz"}}), Error);    // unknown output label
  EXPECT_THROW(ops::call("Einsum", {a, a}, {{"equation", "ij->i"}}), Error);  // too few terms
}

TEST(Det, KnownValuesAndSingular) {
  // det [[2,0,1],[1,3,2],[1,1,1]] = 2(3-2) - 0 + 1(1-3) = 0; det [[0,1],[1,0]] = -1 (needs a pivot swap).
  const Tensor a = Tensor::from_vector<float>({2, 0, 1, 1, 3, 2, 1, 1, 1}, {3, 3});
  EXPECT_NEAR(ops::call("Det", {a}).at(0).to_vector<float>()[0], 0.0f, 1e-6f);
  const Tensor b = Tensor::from_vector<double>({0, 1, 1, 0, 4, 1, 2, 3}, {2, 2, 2});  // second: 12 - 2 = 10
  const std::vector<double> dets = ops::call("Det", {b}).at(0).to_vector<double>();
  EXPECT_DOUBLE_EQ(dets[0], -1.0);
  EXPECT_DOUBLE_EQ(dets[1], 10.0);
  EXPECT_THROW(ops::call("Det", {iota_f({2, 3})}), Error);
}

TEST(Loss, NllWeightedMeanAndBadTarget) {
  // input [2,3] log-probs, target [2, 0], weight [1, 2, 3]:
  // losses -(x[0,2] * 3) = -(2*3) = -6 and -(x[1,0] * 1) = -3; mean = -9 / (3 + 1) = -2.25.
  const Tensor x = iota_f({2, 3});
  const Tensor w = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor t = Tensor::from_vector<int64_t>({2, 0}, {2});
  const Tensor mean = ops::call("NegativeLogLikelihoodLoss", {x, t, w}).at(0);
  EXPECT_EQ(mean.shape(), Shape{});
  EXPECT_FLOAT_EQ(mean.to_vector<float>()[0], -2.25f);
  // ignore_index 2 drops the first element: -3 / 1.
  const Tensor ignored = ops::call("NegativeLogLikelihoodLoss", {x, t, w}, {{"ignore_index", int64_t(2)}}).at(0);
  EXPECT_FLOAT_EQ(ignored.to_vector<float>()[0], -3.0f);
  const Tensor bad = Tensor::from_vector<int64_t>({3, 0}, {2});
  EXPECT_THROW(ops::call("NegativeLogLikelihoodLoss", {x, bad, w}), Error);
}

TEST(Loss, SoftmaxCrossEntropyUniformScores) {
  // Equal scores over C = 4 classes: log_prob = -log 4 everywhere, so each loss is log 4.
  const Tensor x = Tensor::zeros(DType::Float32, {2, 4});
  const Tensor t = Tensor::from_vector<int64_t>({1, 3}, {2});
  const auto outs = ops::call("SoftmaxCrossEntropyLoss", {x, t}, {{"reduction", "none"}}, 2);
  EXPECT_EQ(outs.at(0).shape(), (Shape{2}));
  for (float v : outs.at(0).to_vector<float>()) EXPECT_FLOAT_EQ(v, std::log(4.0f));
  EXPECT_EQ(outs.at(1).shape(), (Shape{2, 4}));
  for (float v : outs.at(1).to_vector<float>()) EXPECT_FLOAT_EQ(v, -std::log(4.0f));
}

}  // namespace
}  // namespace ingot
