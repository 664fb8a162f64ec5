#include "autograd/gradcheck.h"

#include <ingot/autograd.h>
#include <ingot/ops.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "core/strings.h"
#include "ops/gradient.h"

namespace ingot {
namespace {

// ---- sample cases: the inputs and attributes each op is checked on

struct Case {
  Case(std::vector<Tensor> in, Attributes a = {}, int outputs = 1, int version = 0, std::set<size_t> fixed = {},
       std::set<size_t> state = {})
      : inputs(std::move(in)), attrs(std::move(a)), num_outputs(outputs), opset(version), held(std::move(fixed)),
        state_outputs(std::move(state)) {}
  std::vector<Tensor> inputs;  // float64 inputs are differentiated, unless held; the rest are fixed
  Attributes attrs;
  int num_outputs = 1;
  int opset = 0;  // 0: the newest
  std::set<size_t> held;  // float inputs the op's rule does not differentiate (a loss's class weights)
  std::set<size_t> state_outputs;  // float outputs that are state, not differentiated (running statistics)
};

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}
  // Uniform in [lo, hi), float64.
  Tensor r(Shape shape, double lo = -1.0, double hi = 1.0) {
    Tensor t = Tensor::empty(DType::Float64, std::move(shape));
    std::uniform_real_distribution<double> d(lo, hi);
    for (double& v : t.span<double>()) v = d(rng_);
    return t;
  }
  Tensor positive(Shape shape) { return r(std::move(shape), 0.5, 2.0); }
  // Values at least `gap` apart in magnitude from each other (no ties for max/min/sort-like ops).
  Tensor distinct(Shape shape) {
    Tensor t = r(shape);
    auto s = t.span<double>();
    std::vector<size_t> order(s.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    for (size_t i = 0; i < order.size(); ++i) s[order[i]] = -1.0 + 2.0 * (double(i) + 0.5) / double(order.size());
    return t;
  }
  static Tensor ints(std::vector<int64_t> v, Shape shape = {}) {
    if (shape.empty() && v.size() != 1) shape = {int64_t(v.size())};
    return Tensor::from_vector<int64_t>(v, std::move(shape));
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

using CaseMaker = std::function<std::vector<Case>(Sampler&)>;

// Unary elementwise ops on a given domain: an odd size, a 3-D shape.
CaseMaker unary(double lo = -1.0, double hi = 1.0, Attributes attrs = {}) {
  return [=](Sampler& s) {
    return std::vector<Case>{{{s.r({5}, lo, hi)}, attrs}, {{s.r({2, 3, 4}, lo, hi)}, attrs}};
  };
}
// Binary broadcasting ops: equal shapes, a broadcast row, a scalar, broadcasting on both sides.
CaseMaker binary(double lo = -1.0, double hi = 1.0) {
  return [=](Sampler& s) {
    return std::vector<Case>{{{s.r({3, 4}, lo, hi), s.r({3, 4}, lo, hi)}},
                             {{s.r({2, 3, 4}, lo, hi), s.r({4}, lo, hi)}},
                             {{s.r({}, lo, hi), s.r({2, 3}, lo, hi)}},
                             {{s.r({3, 1}, lo, hi), s.r({1, 5}, lo, hi)}}};
  };
}
CaseMaker reduction() {
  return [](Sampler& s) {
    return std::vector<Case>{{{s.positive({3, 4, 5}), Sampler::ints({1})}, {{"keepdims", int64_t(1)}}},
                             {{s.positive({3, 4, 5}), Sampler::ints({0, 2})}, {{"keepdims", int64_t(0)}}},
                             {{s.positive({2, 3})}, {{"keepdims", int64_t(0)}}}};
  };
}

const std::map<std::string, CaseMaker>& cases() {
  static const std::map<std::string, CaseMaker> table = [] {
    std::map<std::string, CaseMaker> t;
    for (const char* op : {"Add", "Sub", "Mul", "Max", "Min"}) t[op] = binary();
    t["Div"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), s.positive({3, 4})}}, {{s.r({2, 3, 4}), s.positive({4})}},
                               {{s.r({3, 1}), s.positive({1, 5})}}};
    };
    t["Pow"] = [](Sampler& s) {
      return std::vector<Case>{{{s.positive({3, 4}), s.r({3, 4})}}, {{s.positive({2, 3}), s.r({3})}}};
    };
    for (const char* op : {"Sum", "Mean"}) {
      t[op] = [](Sampler& s) {
        return std::vector<Case>{{{s.r({3, 4})}}, {{s.r({3, 4}), s.r({4}), s.r({3, 1})}}};
      };
    }
    for (const char* op : {"Abs", "Neg", "Exp", "Relu", "Sigmoid", "Tanh", "Erf", "Sin", "Cos", "Atan", "Sinh",
                           "Cosh", "Asinh", "Softplus", "Softsign", "Mish", "Floor", "Ceil", "Round", "Sign",
                           "Identity"})
      t[op] = unary(-2.0, 2.0);
    t["Tan"] = unary(-1.0, 1.0);
    for (const char* op : {"Asin", "Acos", "Atanh"}) t[op] = unary(-0.9, 0.9);
    t["Acosh"] = unary(1.2, 3.0);
    for (const char* op : {"Log", "Sqrt", "Reciprocal"}) t[op] = unary(0.5, 2.0);
    t["HardSwish"] = unary(-4.0, 4.0);
    t["LeakyRelu"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({7})}}, {{s.r({2, 3})}, {{"alpha", 0.3f}}}};
    };
    for (const char* op : {"Elu", "Celu"}) t[op] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({7}, -2, 2)}}, {{s.r({2, 3}, -2, 2)}, {{"alpha", 0.5f}}}};
    };
    t["Selu"] = unary(-2.0, 2.0);
    t["HardSigmoid"] = unary(-4.0, 4.0);
    t["ThresholdedRelu"] = [](Sampler& s) { return std::vector<Case>{{{s.r({9}, -2, 2)}, {{"alpha", 0.5f}}}}; };
    t["Shrink"] = [](Sampler& s) { return std::vector<Case>{{{s.r({9}, -2, 2)}, {{"lambd", 0.5f}, {"bias", 0.2f}}}}; };
    t["PRelu"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4, 5}), s.r({3, 1, 1})}}, {{s.r({5}), s.r({5})}}};
    };
    t["Clip"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}, -2, 2), Tensor::scalar<double>(-0.5), Tensor::scalar<double>(0.7)}},
                               {{s.r({6}, -2, 2), Tensor(), Tensor::scalar<double>(0.3)}},
                               {{s.r({5}, -2, 2)}, {{"min", -0.4f}, {"max", 0.6f}}, 1, 6}};
    };
    t["Where"] = [](Sampler& s) {
      Tensor c = Tensor::from_vector<bool>({true, false, true, true, false, false}, {2, 3});
      return std::vector<Case>{{{c, s.r({2, 3}), s.r({2, 3})}}, {{c, s.r({3}), s.r({2, 1})}}};
    };
    t["Cast"] = [](Sampler& s) { return std::vector<Case>{{{s.r({4})}, {{"to", int64_t(DType::Float64)}}}}; };
    t["CastLike"] = [](Sampler& s) { return std::vector<Case>{{{s.r({4}), s.r({1})}}}; };
    // Reductions (axes as an input from opset 18; ReduceSum's from 13).
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                           "ReduceLogSumExp", "ReduceSumSquare"})
      t[op] = reduction();
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      t[op] = [](Sampler& s) {
        return std::vector<Case>{{{s.distinct({3, 4, 5}), Sampler::ints({1})}, {{"keepdims", int64_t(1)}}},
                                 {{s.distinct({3, 4}), Sampler::ints({0})}, {{"keepdims", int64_t(0)}}}};
      };
    }
    t["MatMul"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), s.r({4, 5})}},    {{s.r({2, 3, 4}), s.r({4, 5})}},
                               {{s.r({2, 1, 3, 4}), s.r({3, 4, 2})}}, {{s.r({4}), s.r({4, 3})}},
                               {{s.r({2, 3, 4}), s.r({4})}},    {{s.r({4}), s.r({4})}}};
    };
    t["Einsum"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), s.r({4, 5})}, {{"equation", "ij,jk->ik"}}},
                               {{s.r({2, 3, 4}), s.r({2, 4, 5})}, {{"equation", "bij,bjk"}}},  // implicit output
                               {{s.r({3, 4})}, {{"equation", "ij->i"}}},                        // a letter summed away
                               {{s.r({2, 3, 4}), s.r({4})}, {{"equation", "...j,j->..."}}},
                               {{s.r({3}), s.r({4})}, {{"equation", "i,j->ij"}}},
                               {{s.r({1, 3, 4}), s.r({2, 4, 3})}, {{"equation", "...ij,...jk->...ik"}}}};  // broadcast '...'
    };
    t["Gemm"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({3, 4}), s.r({4, 5}), s.r({5})}},
          {{s.r({4, 3}), s.r({5, 4}), s.r({3, 5})}, {{"transA", int64_t(1)}, {"transB", int64_t(1)}, {"alpha", 0.5f}, {"beta", 2.0f}}},
          {{s.r({3, 4}), s.r({5, 4})}, {{"transB", int64_t(1)}}},
          {{s.r({4, 3}), s.r({4, 5})}, {{"transA", int64_t(1)}, {"alpha", 2.0f}}}};
    };
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      t[op] = [](Sampler& s) {
        return std::vector<Case>{{{s.r({3, 5})}}, {{s.r({2, 3, 4})}, {{"axis", int64_t(1)}}},
                                 {{s.r({2, 3, 4})}, {{"axis", int64_t(1)}}, 1, 11}};
      };
    }
    t["MaxPool"] = [](Sampler& s) {
      return std::vector<Case>{{{s.distinct({2, 2, 5, 6})}, {{"kernel_shape", Ints{2, 2}}}},
                               {{s.distinct({1, 3, 7, 7})}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
                               {{s.distinct({1, 2, 9})}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}}, 2}};
    };
    t["AveragePool"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 2, 5, 6})}, {{"kernel_shape", Ints{2, 2}}}},
                               {{s.r({1, 3, 7, 7})}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
                               {{s.r({1, 3, 7, 7})},
                                {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", int64_t(1)}}},
                               {{s.r({1, 2, 9})}, {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}, {"auto_pad", "SAME_UPPER"}}}};
    };
    t["GlobalAveragePool"] = [](Sampler& s) { return std::vector<Case>{{{s.r({2, 3, 4, 5})}}}; };
    t["GlobalMaxPool"] = [](Sampler& s) { return std::vector<Case>{{{s.distinct({2, 3, 4, 5})}}}; };
    t["Conv"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({2, 3, 6, 5}), s.r({4, 3, 3, 3}), s.r({4})}},
          {{s.r({1, 2, 7, 7}), s.r({3, 2, 3, 2})},
           {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"dilations", Ints{1, 2}}}},
          {{s.r({1, 2, 5, 6}), s.r({2, 2, 3, 3})}, {{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2, 2}}}},
          {{s.r({2, 2, 9}), s.r({3, 2, 4}), s.r({3})}, {{"strides", Ints{3}}}},
          {{s.r({1, 4, 5, 5}), s.r({6, 2, 3, 3}), s.r({6})}, {{"group", int64_t(2)}, {"pads", Ints{1, 1, 1, 1}}}},
          {{s.r({2, 3, 6, 6}), s.r({3, 1, 3, 3})}, {{"group", int64_t(3)}, {"strides", Ints{2, 2}}}}};
    };
    t["ConvTranspose"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({2, 3, 4, 3}), s.r({3, 2, 3, 3}), s.r({2})}},
          {{s.r({1, 2, 4, 4}), s.r({2, 3, 3, 2})},
           {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"dilations", Ints{1, 2}}, {"output_padding", Ints{1, 0}}}},
          {{s.r({2, 2, 5}), s.r({2, 3, 4}), s.r({3})}, {{"strides", Ints{3}}}},
          {{s.r({1, 4, 3, 3}), s.r({4, 1, 3, 3}), s.r({4})}, {{"group", int64_t(4)}, {"strides", Ints{2, 2}}}}};
    };
    t["LSTM"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({3, 2, 4}), s.r({1, 12, 4}), s.r({1, 12, 3}), s.r({1, 24}), Tensor(), s.r({1, 2, 3}), s.r({1, 2, 3})}, {}, 3},
          {{s.r({2, 3, 2}), s.r({2, 8, 2}), s.r({2, 8, 2})}, {{"direction", "bidirectional"}}, 2},
          {{s.r({3, 1, 2}), s.r({1, 8, 2}), s.r({1, 8, 2}), s.r({1, 16})}, {{"direction", "reverse"}}, 1}};
    };
    t["RNN"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({3, 2, 4}), s.r({1, 3, 4}), s.r({1, 3, 3}), s.r({1, 6}), Tensor(), s.r({1, 2, 3})}, {}, 2},
          {{s.r({2, 3, 2}), s.r({2, 2, 2}), s.r({2, 2, 2})}, {{"direction", "bidirectional"}}, 2}};
    };
    t["GRU"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({3, 2, 4}), s.r({1, 9, 4}), s.r({1, 9, 3}), s.r({1, 18}), Tensor(), s.r({1, 2, 3})}, {}, 2},
          {{s.r({3, 2, 4}), s.r({1, 9, 4}), s.r({1, 9, 3}), s.r({1, 18}), Tensor(), s.r({1, 2, 3})},
           {{"linear_before_reset", int64_t(1)}}, 2},
          {{s.r({2, 3, 2}), s.r({2, 6, 2}), s.r({2, 6, 2})}, {{"direction", "bidirectional"}}, 1},
          {{s.r({3, 1, 2}), s.r({1, 6, 2}), s.r({1, 6, 2}), s.r({1, 12})}, {{"direction", "reverse"}, {"linear_before_reset", int64_t(1)}}, 2}};
    };
    t["LayerNormalization"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 5}), s.r({5}), s.r({5})}},
                               {{s.r({2, 3, 4}), s.r({3, 4}), s.r({3, 4})}, {{"axis", int64_t(1)}}}};
    };
    t["InstanceNormalization"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4, 5}), s.r({3}), s.r({3})}}, {{s.r({2, 2, 7}), s.r({2}), s.r({2})}, {{"epsilon", 1e-3f}}}};
    };
    t["BatchNormalization"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4, 2}), s.r({3}), s.r({3}), s.r({3}), s.positive({3})}},
                               {{s.r({4, 3}), s.r({3}), s.r({3}), s.r({3}), s.positive({3})}},
                               // training mode: batch statistics; the running ones are outputs 1 and 2
                               {{s.r({3, 2, 4}), s.r({2}), s.r({2}), s.r({2}), s.positive({2})}, {{"training_mode", int64_t(1)}}, 3,
                                0, {3, 4}, {1, 2}}};
    };
    t["Resize"] = [](Sampler& s) {
      auto scales = [](std::vector<float> v) { return Tensor::from_vector<float>(v, {int64_t(v.size())}); };
      return std::vector<Case>{
          {{s.r({1, 2, 3, 4}), Tensor(), scales({1, 1, 2, 1.5f})}, {{"mode", "nearest"}}},
          {{s.r({1, 2, 3, 4}), Tensor(), Tensor(), Sampler::ints({1, 2, 5, 3})},
           {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}},
          {{s.r({2, 1, 4, 4}), Tensor(), scales({1, 1, 0.5f, 1.75f})}, {{"mode", "cubic"}}},
          {{s.r({1, 2, 6, 4}), Tensor(), scales({1, 1, 0.5f, 0.5f})}, {{"mode", "linear"}}},
          {{s.r({1, 1, 4, 5}), Tensor(), Tensor(), Sampler::ints({1, 1, 3, 7})},
           {{"mode", "nearest"}, {"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}}}};
    };
    t["GroupNormalization"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 4, 3, 2}), s.r({4}), s.r({4})}, {{"num_groups", int64_t(2)}}, 1, 21},
                               {{s.r({2, 6, 5}), s.r({3}), s.r({3})}, {{"num_groups", int64_t(3)}, {"epsilon", 1e-3f}}, 1, 18}};
    };
    for (const char* op : {"Reshape"}) {
      t[op] = [](Sampler& s) { return std::vector<Case>{{{s.r({2, 3, 4}), Sampler::ints({4, -1})}}}; };
    }
    t["Flatten"] = [](Sampler& s) { return std::vector<Case>{{{s.r({2, 3, 4})}, {{"axis", int64_t(2)}}}}; };
    t["Squeeze"] = [](Sampler& s) { return std::vector<Case>{{{s.r({2, 1, 3}), Sampler::ints({1})}}}; };
    t["Unsqueeze"] = [](Sampler& s) { return std::vector<Case>{{{s.r({2, 3}), Sampler::ints({0, 3})}}}; };
    t["Transpose"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4})}, {{"perm", Ints{1, 2, 0}}}}, {{s.r({3, 5})}}};
    };
    t["Concat"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3}), s.r({2, 1}), s.r({2, 4})}, {{"axis", int64_t(1)}}},
                               {{s.r({1, 3}), s.r({2, 3})}, {{"axis", int64_t(-2)}}}};
    };
    t["Split"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({5, 3}), Sampler::ints({2, 3})}, {{"axis", int64_t(0)}}, 2},
                               {{s.r({2, 6})}, {{"axis", int64_t(1)}, {"num_outputs", int64_t(3)}}, 3}};
    };
    t["Slice"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({5, 4}), Sampler::ints({1, 0}), Sampler::ints({4, 3})}},
                               {{s.r({3, 6}), Sampler::ints({-4}), Sampler::ints({100}), Sampler::ints({1})}},
                               // strided and reversed
                               {{s.r({5, 7}), Sampler::ints({4, 1}), Sampler::ints({-100, 7}), Sampler::ints({0, 1}),
                                 Sampler::ints({-2, 3})}}};
    };
    t["Expand"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 1}), Sampler::ints({2, 3, 4})}}, {{s.r({4}), Sampler::ints({3, 4})}}};
    };
    t["Tile"] = [](Sampler& s) { return std::vector<Case>{{{s.r({2, 3}), Sampler::ints({2, 3})}}}; };
    t["Pad"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3}), Sampler::ints({1, 0, 2, 1})}},
                               {{s.r({2, 3}), Sampler::ints({0, 2, 1, 0}), Tensor::scalar<double>(0.5)}},
                               {{s.r({3, 4}), Sampler::ints({1, 2, 2, 1})}, {{"mode", "reflect"}}},
                               {{s.r({3, 4}), Sampler::ints({2, 0, 1, 3})}, {{"mode", "edge"}}},
                               {{s.r({3, 4}), Sampler::ints({1, 2, 0, 1})}, {{"mode", "wrap"}}}};
    };
    t["Dropout"] = [](Sampler& s) { return std::vector<Case>{{{s.r({3, 4})}}}; };
    t["CumSum"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), Sampler::ints({1})}},
                               {{s.r({5}), Sampler::ints({0})}, {{"reverse", int64_t(1)}, {"exclusive", int64_t(1)}}}};
    };
    t["GatherND"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), Sampler::ints({0, 1, 2, 3, 0, 1}, {3, 2})}},  // elements, one repeated
                               {{s.r({3, 4, 2}), Sampler::ints({2, 0}, {2, 1})}}};              // slices
    };
    t["ScatterND"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({4, 3}), Sampler::ints({1, 3}, {2, 1}), s.r({2, 3})}},
                               {{s.r({4, 3}), Sampler::ints({1, 1, 2, 0}, {2, 2}), s.r({2})}, {{"reduction", "add"}}, 1, 16}};
    };
    t["ScatterElements"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({3, 4}), Sampler::ints({1, 0, 2, 1}, {1, 4}), s.r({1, 4})}, {{"axis", int64_t(0)}}},
          {{s.r({3, 4}), Sampler::ints({0, 0, 3, 1, 2, 2}, {3, 2}), s.r({3, 2})}, {{"axis", int64_t(1)}, {"reduction", "add"}}}};
    };
    t["GatherElements"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), Sampler::ints({0, 2, 1, 2, 2, 0, 1, 1}, {2, 4})}, {{"axis", int64_t(0)}}}};
    };
    t["Gather"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({4, 3}), Sampler::ints({3, 0, 3}, {3})}, {{"axis", int64_t(0)}}},
                               {{s.r({2, 5}), Sampler::ints({1, -1, 1, 0}, {2, 2})}, {{"axis", int64_t(1)}}}};
    };
    t["NegativeLogLikelihoodLoss"] = [](Sampler& s) {
      Tensor t2 = Sampler::ints({2, 0, 1}, {3});
      Tensor t3 = Sampler::ints({1, 0, 2, 2, 1, 0}, {2, 3});
      return std::vector<Case>{{{s.r({3, 4}), t2}},
                               {{s.r({3, 4}), t2, s.positive({4})}, {{"reduction", "sum"}}, 1, 0, {2}},
                               {{s.r({2, 4, 3}), t3}, {{"reduction", "none"}}},
                               {{s.r({3, 4}), t2, s.positive({4})}, {{"ignore_index", int64_t(0)}}, 1, 0, {2}}};
    };
    t["SoftmaxCrossEntropyLoss"] = [](Sampler& s) {
      Tensor t2 = Sampler::ints({2, 0, 1}, {3});
      return std::vector<Case>{{{s.r({3, 4}), t2}},
                               {{s.r({3, 4}), t2, s.positive({4})}, {{"reduction", "sum"}}, 2, 0, {2}},
                               {{s.r({2, 4, 3}), Sampler::ints({1, 0, 2, 2, 1, 0}, {2, 3})}, {{"reduction", "none"}}},
                               {{s.r({3, 4}), t2}, {{"ignore_index", int64_t(1)}}, 2}};
    };
    t["DepthToSpace"] = [](Sampler& s) { return std::vector<Case>{{{s.r({1, 8, 2, 3})}, {{"blocksize", int64_t(2)}}}}; };
    t["SpaceToDepth"] = [](Sampler& s) { return std::vector<Case>{{{s.r({1, 2, 4, 6})}, {{"blocksize", int64_t(2)}}}}; };
    t["TopK"] = [](Sampler& s) {
      return std::vector<Case>{{{s.distinct({3, 5}), Sampler::ints({2})}, {{"axis", int64_t(1)}}, 2},
                               {{s.distinct({4, 3}), Sampler::ints({3})}, {{"axis", int64_t(0)}, {"largest", int64_t(0)}}, 2}};
    };
    t["Trilu"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4})}}, {{s.r({2, 4, 3}), Sampler::ints({1})}, {{"upper", int64_t(0)}}}};
    };
    t["ReverseSequence"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({4, 3, 2}), Sampler::ints({4, 2, 1})}},
                               {{s.r({2, 5}), Sampler::ints({3, 5})}, {{"batch_axis", int64_t(0)}, {"time_axis", int64_t(1)}}}};
    };
    t["Compress"] = [](Sampler& s) {
      Tensor keep = Tensor::from_vector<bool>({true, false, true, true}, {4});
      return std::vector<Case>{{{s.r({3, 4}), keep}, {{"axis", int64_t(1)}}}, {{s.r({2, 3}), keep}}};
    };
    t["Scatter"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), Sampler::ints({1, 0, 2, 1}, {1, 4}), s.r({1, 4})}, {{"axis", int64_t(0)}}, 1, 10}};
    };
    t["OneHot"] = [](Sampler& s) {
      return std::vector<Case>{{{Sampler::ints({1, 0, 2, -1}, {2, 2}), Sampler::ints({3}), s.r({2})}}};
    };
    t["Mod"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}, -3, 3), s.positive({3, 4})}, {{"fmod", int64_t(1)}}},
                               {{s.r({2, 3}, -3, 3), s.positive({3})}, {{"fmod", int64_t(1)}}}};
    };
    t["Det"] = [](Sampler& s) { return std::vector<Case>{{{s.r({3, 3})}}, {{s.r({2, 4, 4})}}, {{s.r({2, 1, 1})}}}; };
    t["LpPool"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({1, 2, 5, 5})}, {{"kernel_shape", Ints{2, 2}}}},
                               {{s.r({1, 2, 7})}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}, {"p", int64_t(3)}}},
                               {{s.r({1, 1, 4, 4})}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"p", int64_t(1)}}}};
    };
    t["GlobalLpPool"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4})}}, {{s.r({1, 2, 3, 3})}, {{"p", int64_t(3)}}}};
    };
    t["MaxUnpool"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({1, 1, 2, 2}), Sampler::ints({5, 3, 10, 15}, {1, 1, 2, 2})},
                                {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}}};
    };
    t["LRN"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 5, 3, 2})}, {{"size", int64_t(3)}, {"alpha", 0.5f}}},
                               {{s.r({1, 4, 3})}, {{"size", int64_t(2)}, {"alpha", 0.1f}, {"beta", 0.6f}, {"bias", 2.0f}}}};
    };
    t["MeanVarianceNormalization"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4, 2})}}, {{s.r({3, 4, 5})}, {{"axes", Ints{0, 2}}}}};
    };
    t["Upsample"] = [](Sampler& s) {
      Tensor scales = Tensor::from_vector<float>({1, 1, 2, 1.5f}, {4});
      return std::vector<Case>{{{s.r({1, 2, 2, 3}), scales}, {{"mode", "nearest"}}, 1, 9},
                               {{s.r({1, 2, 2, 3}), scales}, {{"mode", "linear"}}, 1, 9},
                               {{s.r({1, 1, 3, 2})}, {{"mode", "linear"}, {"scales", Floats{1, 1, 2, 2}}}, 1, 7}};
    };
    t["Hardmax"] = [](Sampler& s) { return std::vector<Case>{{{s.distinct({3, 4})}}}; };
    t["GridSample"] = [](Sampler& s) {
      std::vector<Case> c;
      for (const char* padding : {"zeros", "border", "reflection"}) {
        for (int64_t align : {0, 1}) {
          c.push_back({{s.r({1, 2, 3, 4}), s.r({1, 2, 3, 2}, -1.3, 1.3)}, {{"padding_mode", padding}, {"align_corners", align}}});
        }
      }
      c.push_back({{s.r({2, 1, 3, 3}), s.r({2, 2, 2, 2}, -1.2, 1.2)}, {{"mode", "nearest"}}});
      return c;
    };
    t["RoiAlign"] = [](Sampler& s) {
      Tensor rois = Tensor::from_vector<double>({0.5, 0.5, 3.2, 4.1, 1, 0, 4.5, 3, 0, 1, 2, 4}, {3, 4});
      return std::vector<Case>{
          {{s.r({2, 2, 5, 6}), rois, Sampler::ints({0, 1, 1})},
           {{"output_height", int64_t(2)}, {"output_width", int64_t(3)}, {"sampling_ratio", int64_t(2)}}, 1, 0, {1}},
          {{s.r({1, 1, 6, 6}), rois, Sampler::ints({0, 0, 0})},
           {{"output_height", int64_t(2)}, {"output_width", int64_t(2)}, {"spatial_scale", 0.8f}}, 1, 0, {1}}};
    };
    t["DFT"] = [](Sampler& s) {
      Tensor axis1 = Tensor::scalar<int64_t>(1);
      return std::vector<Case>{{{s.r({2, 5, 1}), Tensor(), axis1}},
                               {{s.r({1, 4, 2}), Tensor(), axis1}, {{"inverse", int64_t(1)}}},
                               {{s.r({2, 6, 1}), Tensor(), axis1}, {{"onesided", int64_t(1)}}},
                               {{s.r({1, 6, 2}), Tensor::scalar<int64_t>(8), axis1}},
                               {{s.r({3, 6, 1}), Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(-2)}, {{"onesided", int64_t(1)}}},
                               {{s.r({2, 3, 5, 2})}, {{"axis", int64_t(2)}}, 1, 17}};
    };
    t["STFT"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 9, 1}), Sampler::ints({3}), s.r({4})}},
                               {{s.r({1, 8, 2}), Sampler::ints({2}), s.r({4}), Sampler::ints({4})}, {{"onesided", int64_t(0)}}},
                               {{s.r({1, 10, 1}), Sampler::ints({4}), Tensor(), Sampler::ints({5})}}};
    };
    t["ai.ingot.Dropout"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({5, 7})}, {{"ratio", 0.3f}, {"seed", int64_t(9)}}, 2}};
    };
    // Ingot's own LayerNormalization and HardSwish are ONNX's for older models.
    t["ai.ingot.ConvWeightGrad"] = [](Sampler& s) {
      return std::vector<Case>{
          {{s.r({2, 3, 6, 5}), s.r({2, 4, 4, 3})}, {{"kernel_shape", Ints{3, 3}}}},
          {{s.r({1, 2, 7, 7}), s.r({1, 3, 4, 3})},
           {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"dilations", Ints{1, 2}}}},
          {{s.r({1, 4, 5, 5}), s.r({1, 6, 5, 5})}, {{"kernel_shape", Ints{3, 3}}, {"group", int64_t(2)}, {"pads", Ints{1, 1, 1, 1}}}},
          {{s.r({2, 2, 9}), s.r({2, 3, 2})}, {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}}}};
    };
    t["ai.ingot.BatchNormGrad"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 2, 4}), s.r({3, 2, 4}), s.r({2})}, {}, 3},
                               {{s.r({4, 3}), s.r({4, 3}), s.r({3})}, {{"epsilon", 0.1f}}, 3}};
    };
    t["ai.ingot.SoftmaxGrad"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 5}), s.positive({3, 5})}},
                               {{s.r({2, 3, 4}), s.positive({2, 3, 4})}, {{"axis", int64_t(1)}}},
                               {{s.r({2, 3, 4}), s.positive({2, 3, 4})}, {{"axis", int64_t(1)}, {"coerce_2d", int64_t(1)}}}};
    };
    t["ai.ingot.LayerNormalization"] = t["LayerNormalization"];
    t["ai.ingot.HardSwish"] = t["HardSwish"];
    t["ai.ingot.FusedMatMul"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({3, 4}), s.r({4, 5}), s.r({5}), s.r({3, 5})}, {{"activation", "Relu"}}},
                               {{s.r({2, 3, 4}), s.r({5, 4})}, {{"transB", int64_t(1)}, {"alpha", 0.5f}}}};
    };
    t["ai.ingot.Attention"] = [](Sampler& s) {
      return std::vector<Case>{{{s.r({2, 3, 4}), s.r({2, 5, 4}), s.r({2, 5, 3}), s.r({3, 5})}, {{"scale", 0.5f}}},
                               {{s.r({1, 3, 2, 4}), s.r({1, 5, 2, 4}), s.r({1, 5, 2, 4})},
                                {{"scale", 0.35f}, {"transposed", Ints{1, 1, 1, 1}}}}};
    };
    return t;
  }();
  return table;
}

std::string key(const OpDef& def) { return def.domain.empty() ? def.name : def.domain + "." + def.name; }

// <u, f(inputs)> over the float outputs, in float64.
double weighted_sum(const OpDef& def, const Case& c, const std::vector<Tensor>& inputs, const std::vector<Tensor>& us) {
  autograd::NoGradGuard off;
  std::vector<Tensor> outs = ops::call(def.name, inputs, c.attrs, c.num_outputs, def.domain, c.opset);
  double total = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!us[k].defined()) continue;
    Tensor o = outs[k].to(Device::cpu()).cast(DType::Float64);
    auto a = o.span<double>();
    auto u = us[k].span<double>();
    for (size_t i = 0; i < a.size(); ++i) total += a[i] * u[i];
  }
  return total;
}

// The rule's vjp at `inputs` (float64, on the CPU) for the cotangents `us`, with respect to the inputs
// at `wrt`.
std::vector<Tensor> vjp_at(const OpDef& def, const Case& c, const std::vector<Tensor>& inputs,
                           const std::vector<size_t>& wrt, const std::vector<Tensor>& us) {
  std::vector<Tensor> xs = inputs, leaves;
  for (size_t j : wrt) {
    xs[j] = inputs[j].clone();
    xs[j].set_requires_grad(true);
    leaves.push_back(xs[j]);
  }
  std::vector<Tensor> ys = ops::call(def.name, xs, c.attrs, c.num_outputs, def.domain, c.opset);
  std::vector<Tensor> roots, cots;
  for (size_t k = 0; k < ys.size(); ++k) {
    if (us[k].defined() && ys[k].requires_grad()) {
      roots.push_back(ys[k]);
      cots.push_back(us[k]);
    }
  }
  return autograd::grad(roots, leaves, cots);
}

constexpr double kStep = 1e-6, kAtol = 1e-6, kRtol = 1e-4;

double error_ratio(double analytic, double numeric) { return std::abs(analytic - numeric) / (kAtol + kRtol * std::abs(numeric)); }

}  // namespace

std::vector<const OpDef*> differentiable_ops() {
  std::vector<const OpDef*> ops;
  for (const OpDef* d : OpCatalogue::instance().all()) {
    if (d->vjp) ops.push_back(d);
  }
  return ops;
}

std::vector<std::pair<const OpDef*, std::string>> non_differentiable_ops() {
  std::vector<std::pair<const OpDef*, std::string>> out;
  for (const OpDef* d : OpCatalogue::instance().all()) {
    if (d->vjp) continue;
    const OpSignature& sig = d->signature();
    const ParamDef* o = sig.output(0);
    const TypeVar* var = o ? sig.type_var(o->type) : nullptr;
    bool float_output = var && std::any_of(var->allowed.begin(), var->allowed.end(), differentiable_dtype);
    if (float_output) out.emplace_back(d, d->no_gradient.empty() ? "no gradient rule yet" : "none by design: " + d->no_gradient);
  }
  return out;
}

bool second_order_checked(const OpDef& def) {
  static const std::set<std::string> ops = {"Add", "Mul", "Div", "Sub", "Exp", "Log", "Tanh", "Sigmoid", "Sqrt",
                                            "Pow", "MatMul", "Gemm", "Conv", "ConvTranspose", "Softmax", "LogSoftmax",
                                            "LayerNormalization", "InstanceNormalization", "BatchNormalization", "ReduceSum", "ReduceMean"};
  return def.domain.empty() && ops.count(def.name);
}

GradcheckResult gradcheck(const OpDef& def, const GradcheckOptions& options) {
  GradcheckResult r;
  r.op = key(def);
  r.device = options.device.str();
  // Rules whose op computes in float32 even for float64 tensors, too coarse for finite differences.
  static const std::map<std::string, std::string> elsewhere = {
      {"ai.ingot.FusedConv",
       "its CPU kernel accumulates in float32; Autograd.FusedConvGradientIsTheUnfusedChains checks the rule"},
      {"ai.ingot.FusedElementwise",
       "its kernels compute in float32 only; Autograd.FusedElementwiseGradientIsTheUnfusedChains checks the rule"}};
  if (auto e = elsewhere.find(key(def)); e != elsewhere.end()) {
    r.skipped = true;
    r.message = e->second;
    return r;
  }
  auto it = cases().find(key(def));
  if (it == cases().end()) {
    r.message = "no sample cases (add them to autograd/gradcheck.cpp)";
    return r;
  }
  Sampler sampler(std::hash<std::string>()(r.op));
  std::vector<Case> cs = it->second(sampler);
  r.passed = true;
  for (size_t ci = 0; ci < cs.size() && r.passed; ++ci) {
    const Case& c = cs[ci];
    try {
      // Cotangents: one random tensor per float output.
      std::vector<Tensor> outs;
      {
        autograd::NoGradGuard off;
        outs = ops::call(def.name, c.inputs, c.attrs, c.num_outputs, def.domain, c.opset);
      }
      std::vector<Tensor> us;
      for (size_t k = 0; k < outs.size(); ++k) {
        const bool cotangent = differentiable_dtype(outs[k].dtype()) && !c.state_outputs.count(k);
        us.push_back(cotangent ? sampler.r(outs[k].shape()) : Tensor());
      }
      std::vector<size_t> wrt;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        if (c.inputs[i].defined() && c.inputs[i].dtype() == DType::Float64 && !c.held.count(i)) wrt.push_back(i);
      }
      // Analytic: the rule's vjp (on the device asked for, in float32 there).
      const bool accel = options.device.type != DeviceType::CPU;
      std::vector<Tensor> xs = c.inputs, leaves;
      for (size_t i : wrt) {
        Tensor x = accel ? xs[i].cast(DType::Float32).to(options.device) : xs[i].clone();
        x.set_requires_grad(true);
        xs[i] = x;
        leaves.push_back(x);
      }
      for (size_t i = 0; i < xs.size(); ++i) {
        if (!accel || !xs[i].defined() || std::find(wrt.begin(), wrt.end(), i) != wrt.end()) continue;
        xs[i] = (xs[i].dtype() == DType::Float64 ? xs[i].cast(DType::Float32) : xs[i]).to(options.device);  // held floats too
      }
      std::vector<Tensor> ys = ops::call(def.name, xs, c.attrs, c.num_outputs, def.domain, c.opset);
      std::vector<Tensor> roots, cots;
      for (size_t k = 0; k < ys.size(); ++k) {
        if (!us[k].defined() || !ys[k].requires_grad()) continue;
        roots.push_back(ys[k]);
        cots.push_back(accel ? us[k].cast(DType::Float32).to(options.device) : us[k]);
      }
      if (roots.empty()) throw Error(fmt::format("case {}: no output requires a gradient", ci));
      const bool second = options.second_order;
      std::vector<Tensor> grads = autograd::grad(roots, leaves, cots, second, second);
      for (size_t w = 0; w < wrt.size(); ++w) {
        const size_t i = wrt[w];
        Tensor analytic = grads[w].defined() ? grads[w].detach().to(Device::cpu()).cast(DType::Float64)
                                             : Tensor::zeros(DType::Float64, c.inputs[i].shape());
        auto a = analytic.span<double>();
        if (accel) {
          // Against the CPU's float64 gradient, with float32's tolerance.
          Tensor ref = vjp_at(def, c, c.inputs, wrt, us)[w];
          auto e = ref.defined() ? ref.span<double>() : std::span<double>();
          for (size_t j = 0; j < a.size(); ++j) {
            double expected = ref.defined() ? e[j] : 0.0;
            double err = std::abs(a[j] - expected) / (1e-4 + 1e-3 * std::abs(expected));
            r.max_error = std::max(r.max_error, err);
            if (err > 1.0 && r.passed) {
              r.passed = false;
              r.message = fmt::format("case {}: d/d input {} [{}]: {} on {}, {} on the CPU", ci, i, j, a[j],
                                      options.device.str(), expected);
            }
          }
          continue;
        }
        // Numeric: central differences of <u, f(x)>.
        Tensor x = c.inputs[i].clone();
        auto xv = x.span<double>();
        std::vector<Tensor> probe = c.inputs;
        probe[i] = x;
        for (size_t j = 0; j < xv.size(); ++j) {
          const double saved = xv[j];
          xv[j] = saved + kStep;
          double plus = weighted_sum(def, c, probe, us);
          xv[j] = saved - kStep;
          double minus = weighted_sum(def, c, probe, us);
          xv[j] = saved;
          double numeric = (plus - minus) / (2 * kStep);
          double err = error_ratio(a[j], numeric);
          r.max_error = std::max(r.max_error, err);
          if (err > 1.0 && r.passed) {
            r.passed = false;
            r.message = fmt::format("case {}: d/d input {} [{}]: rule {}, finite differences {}", ci, i, j, a[j], numeric);
          }
        }
      }
      // Second order: x -> <w, vjp(x, u)> differentiated through the rule's own ops, against finite
      // differences of that function.
      if (second && !accel && r.passed) {
        std::vector<Tensor> ws;
        Tensor total;
        for (size_t w = 0; w < grads.size(); ++w) {
          if (!grads[w].defined() || !grads[w].requires_grad()) continue;
          Tensor wt = sampler.r(grads[w].shape());
          Tensor term = ops::call("ReduceSum", {ops::mul(grads[w], wt)}, {{"keepdims", int64_t(0)}}, 1).at(0);
          total = total.defined() ? ops::add(total, term) : term;
          ws.push_back(wt);
        }
        if (!total.defined()) continue;  // a gradient that does not depend on x (linear ops)
        std::vector<Tensor> second_grads = autograd::grad({total}, leaves);
        auto inner = [&](const std::vector<Tensor>& inputs) {
          std::vector<Tensor> g2 = vjp_at(def, c, inputs, wrt, us);
          double s = 0;
          size_t k = 0;
          for (size_t w = 0; w < g2.size(); ++w) {
            if (!grads[w].defined() || !grads[w].requires_grad()) continue;
            auto gv = g2[w].span<double>();
            auto wv = ws[k++].span<double>();
            for (size_t e = 0; e < gv.size(); ++e) s += gv[e] * wv[e];
          }
          return s;
        };
        for (size_t w = 0; w < wrt.size() && r.passed; ++w) {
          const size_t i = wrt[w];
          if (!second_grads[w].defined()) continue;
          auto a2 = second_grads[w].span<double>();
          std::vector<Tensor> probe = c.inputs;
          probe[i] = c.inputs[i].clone();
          auto xv = probe[i].span<double>();
          for (size_t j = 0; j < xv.size(); ++j) {
            const double saved = xv[j];
            xv[j] = saved + kStep;
            double plus = inner(probe);
            xv[j] = saved - kStep;
            double minus = inner(probe);
            xv[j] = saved;
            double numeric = (plus - minus) / (2 * kStep);
            double err = std::abs(a2[j] - numeric) / (1e-5 + 1e-3 * std::abs(numeric));
            if (err > 1.0) {
              r.passed = false;
              r.message = fmt::format("case {}: second order, d/d input {} [{}]: {} vs finite differences {}", ci, i, j,
                                      a2[j], numeric);
              break;
            }
          }
        }
      }
    } catch (const std::exception& e) {
      r.passed = false;
      r.message = fmt::format("case {}: {}", ci, e.what());
    }
    ++r.cases;
  }
  return r;
}

}  // namespace ingot
