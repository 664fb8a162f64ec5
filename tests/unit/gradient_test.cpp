// ai.onnx.preview.training.Gradient, lowered to ordinary nodes (src/passes/lower_gradient.cpp),
// against central finite differences of the forward graph in float64.
#include <gtest/gtest.h>
#include <ingot/session.h>

#include <random>

#include "test_util.h"

namespace ingot {
namespace {

using ingot::testing::make_node;
using ingot::testing::model_with;
using ingot::testing::save_model;
using ingot::testing::static_tensor_info;

// y = Sigmoid(MatMul(A, B) + bias) * Tanh(A2) - Exp(c) / d, with bias broadcast over rows and c
// broadcast over everything: every rule, including the broadcast reductions, is on the path.
onnx::GraphProto forward_graph(bool with_gradient) {
  onnx::GraphProto g;
  g.set_name("f");
  const int D = onnx::TensorProto::DOUBLE;
  *g.add_input() = static_tensor_info("A", D, {3, 4});
  *g.add_input() = static_tensor_info("B", D, {4, 2});
  *g.add_input() = static_tensor_info("bias", D, {2});
  *g.add_input() = static_tensor_info("c", D, {1, 1});
  *g.add_input() = static_tensor_info("d", D, {3, 2});
  *g.add_node() = make_node("MatMul", {"A", "B"}, {"ab"});
  *g.add_node() = make_node("Add", {"ab", "bias"}, {"z"});
  *g.add_node() = make_node("Sigmoid", {"z"}, {"s"});
  *g.add_node() = make_node("Exp", {"c"}, {"e"});
  *g.add_node() = make_node("Div", {"e", "d"}, {"q"});
  *g.add_node() = make_node("Relu", {"d"}, {"r"});
  *g.add_node() = make_node("Mul", {"s", "r"}, {"m"});
  *g.add_node() = make_node("Sub", {"m", "q"}, {"y"});
  *g.add_output() = static_tensor_info("y", D, {3, 2});
  if (with_gradient) {
    onnx::NodeProto grad = make_node("Gradient", {"A", "B", "bias", "c", "d"}, {"dA", "dB", "dbias", "dc", "dd"});
    grad.set_domain("ai.onnx.preview.training");
    auto* xs = grad.add_attribute();
    xs->set_name("xs");
    xs->set_type(onnx::AttributeProto::STRINGS);
    for (const char* x : {"A", "B", "bias", "c", "d"}) xs->add_strings(x);
    auto* y = grad.add_attribute();
    y->set_name("y");
    y->set_type(onnx::AttributeProto::STRING);
    y->set_s("y");
    *g.add_node() = grad;
    for (auto [name, dims] : std::vector<std::pair<const char*, std::vector<int64_t>>>{
             {"dA", {3, 4}}, {"dB", {4, 2}}, {"dbias", {2}}, {"dc", {1, 1}}, {"dd", {3, 2}}}) {
      *g.add_output() = static_tensor_info(name, D, dims);
    }
  }
  return g;
}

onnx::ModelProto with_training_domain(onnx::GraphProto g) {
  onnx::ModelProto m = model_with(std::move(g), 17);
  auto* op = m.add_opset_import();
  op->set_domain("ai.onnx.preview.training");
  op->set_version(1);
  return m;
}

TEST(Gradient, MatchesFiniteDifferencesThroughBroadcasts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1.5, 1.5);
  auto random = [&](Shape shape) {
    Tensor t = Tensor::empty(DType::Float64, shape);
    for (double& v : t.span<double>()) v = dist(rng);
    return t;
  };
  std::vector<Tensor> inputs = {random({3, 4}), random({4, 2}), random({2}), random({1, 1}), random({3, 2})};
  for (double& v : inputs[4].span<double>()) v += v > 0 ? 0.5 : -0.5;  // keep Relu and Div away from 0
  Session grad = Session::load(save_model(with_training_domain(forward_graph(true)), "grad.onnx"));
  Session forward = Session::load(save_model(with_training_domain(forward_graph(false)), "forward.onnx"));
  std::vector<Tensor> out = grad.run(inputs);
  ASSERT_EQ(out.size(), 6u);
  // d(sum of y)/dx by central differences: the seed of Gradient is all ones, i.e. the gradient of sum(y).
  auto sum_y = [&](const std::vector<Tensor>& in) {
    double s = 0;
    for (double v : forward.run(in)[0].span<double>()) s += v;
    return s;
  };
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& analytic = out[k + 1];
    ASSERT_EQ(analytic.shape(), inputs[k].shape()) << "gradient " << k;
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      std::vector<Tensor> plus, minus;
      for (const Tensor& t : inputs) {
        plus.push_back(t.clone());
        minus.push_back(t.clone());
      }
      plus[k].data<double>()[i] += h;
      minus[k].data<double>()[i] -= h;
      double numeric = (sum_y(plus) - sum_y(minus)) / (2 * h);
      EXPECT_NEAR(analytic.data<double>()[i], numeric, 1e-6 * (1 + std::abs(numeric))) << "input " << k << " element " << i;
    }
  }
}

TEST(Gradient, UnsupportedOpIsNamed) {
  onnx::GraphProto g;
  g.set_name("f");
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {2});
  *g.add_node() = make_node("Softmax", {"x"}, {"y"});
  onnx::NodeProto grad = make_node("Gradient", {"x"}, {"dx"});
  grad.set_domain("ai.onnx.preview.training");
  auto* xs = grad.add_attribute();
  xs->set_name("xs");
  xs->set_type(onnx::AttributeProto::STRINGS);
  xs->add_strings("x");
  auto* y = grad.add_attribute();
  y->set_name("y");
  y->set_type(onnx::AttributeProto::STRING);
  y->set_s("y");
  *g.add_node() = grad;
  *g.add_output() = static_tensor_info("dx", onnx::TensorProto::FLOAT, {2});
  try {
    Session::load(save_model(with_training_domain(g), "softmax_grad.onnx"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule for Softmax"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ingot
