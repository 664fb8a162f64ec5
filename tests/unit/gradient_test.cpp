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

// Each output of `grad` after the first (the gradients of sum(y) with respect to each input, in order)
// against central differences of sum(y) from `forward`.
void expect_finite_differences(Session& grad, Session& forward, const std::vector<Tensor>& inputs, double eps = 1e-6) {
  std::vector<Tensor> out = grad.run(inputs);
  ASSERT_EQ(out.size(), inputs.size() + 1);
  auto sum_y = [&](const std::vector<Tensor>& in) {
    double s = 0;
    const std::vector<Tensor> y = forward.run(in);  // (kept alive: a span into a temporary dangled, found by ASan)
    for (double v : y[0].span<double>()) s += v;
    return s;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_EQ(out[k + 1].shape(), inputs[k].shape()) << "gradient " << k;
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[k] = inputs[k].clone();
      minus[k] = inputs[k].clone();
      plus[k].data<double>()[i] += eps;
      minus[k].data<double>()[i] -= eps;
      double numeric = (sum_y(plus) - sum_y(minus)) / (2 * eps);
      EXPECT_NEAR(out[k + 1].data<double>()[i], numeric, 1e-6 * (1 + std::abs(numeric))) << "input " << k << " element " << i;
    }
  }
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
  expect_finite_differences(grad, forward, inputs);
}

// The rules through the lowering on what the old hand-written chain got wrong or lacked: a batched
// MatMul broadcasting its weight, Softmax over the last axis, LayerNormalization, a mean.
onnx::GraphProto batched_graph(bool with_gradient) {
  onnx::GraphProto g;
  g.set_name("batched");
  const int D = onnx::TensorProto::DOUBLE;
  *g.add_input() = static_tensor_info("X", D, {2, 3, 4});
  *g.add_input() = static_tensor_info("W", D, {4, 5});
  *g.add_input() = static_tensor_info("scale", D, {5});
  auto* axes = g.add_initializer();
  axes->set_name("axes");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(1);
  *g.add_node() = make_node("MatMul", {"X", "W"}, {"xw"});
  onnx::NodeProto sm = make_node("Softmax", {"xw"}, {"p"});
  *g.add_node() = sm;
  *g.add_node() = make_node("LayerNormalization", {"p", "scale"}, {"n"});
  onnx::NodeProto mean = make_node("ReduceMean", {"n"}, {"y"});
  auto* keep = mean.add_attribute();
  keep->set_name("axes");
  keep->set_type(onnx::AttributeProto::INTS);
  keep->add_ints(1);
  *g.add_node() = mean;
  *g.add_output() = static_tensor_info("y", D, {2, 1, 5});
  if (with_gradient) {
    onnx::NodeProto grad = make_node("Gradient", {"X", "W", "scale"}, {"dX", "dW", "dscale"});
    grad.set_domain("ai.onnx.preview.training");
    auto* xs = grad.add_attribute();
    xs->set_name("xs");
    xs->set_type(onnx::AttributeProto::STRINGS);
    for (const char* x : {"X", "W", "scale"}) xs->add_strings(x);
    auto* y = grad.add_attribute();
    y->set_name("y");
    y->set_type(onnx::AttributeProto::STRING);
    y->set_s("y");
    *g.add_node() = grad;
    *g.add_output() = static_tensor_info("dX", D, {2, 3, 4});
    *g.add_output() = static_tensor_info("dW", D, {4, 5});
    *g.add_output() = static_tensor_info("dscale", D, {5});
  }
  return g;
}

TEST(Gradient, BatchedMatMulSoftmaxAndNormsMatchFiniteDifferences) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  auto random = [&](Shape shape) {
    Tensor t = Tensor::empty(DType::Float64, shape);
    for (double& v : t.span<double>()) v = dist(rng);
    return t;
  };
  std::vector<Tensor> inputs = {random({2, 3, 4}), random({4, 5}), random({5})};
  Session grad = Session::load(save_model(with_training_domain(batched_graph(true)), "batched_grad.onnx"));
  Session forward = Session::load(save_model(with_training_domain(batched_graph(false)), "batched_forward.onnx"));
  expect_finite_differences(grad, forward, inputs);
}

TEST(Gradient, UnsupportedOpIsNamed) {
  onnx::GraphProto g;
  g.set_name("f");
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {});
  onnx::NodeProto cast = make_node("Cast", {"x"}, {"q"});
  auto* to = cast.add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::INT8);
  *g.add_node() = cast;
  *g.add_node() = make_node("DequantizeLinear", {"q", "x"}, {"y"});  // x as the scale: no rule yet
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
  *g.add_output() = static_tensor_info("dx", onnx::TensorProto::FLOAT, {});
  try {
    Session::load(save_model(with_training_domain(g), "dequantize_grad.onnx"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule for DequantizeLinear"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ingot
