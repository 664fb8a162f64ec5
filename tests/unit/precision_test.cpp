// Reduced precision (SessionOptions::precision, the to_half_precision pass): which nodes run in
// float16/bfloat16 and which stay float32, that the graph's interface stays float32 and every value's
// static dtype is consistent, and that fp16/bf16 sessions compute what the float32 session computes
// within the documented tolerances (fp16: atol 1e-2 + rtol 1e-2; bf16: atol 5e-2 + rtol 5e-2).
#include <gtest/gtest.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>
#include <set>

#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "test_util.h"

using namespace ingot;
using ingot::testing::make_node;

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

onnx::ValueInfoProto float_info(const std::string& name, const std::vector<int64_t>& dims) {
  return ingot::testing::static_tensor_info(name, kFloat, dims);
}

using ingot::testing::add_random_initializer;

void add_values(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<float>& values) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(kFloat);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

onnx::AttributeProto* attr(onnx::NodeProto& n, const std::string& name, onnx::AttributeProto::AttributeType type) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// x [1,3,8,8] -> Conv(3x3, pad 1) -> Relu -> r; prob = Softmax(r, axis 1); m = ReduceMean(r, [2,3]);
// y = Add(Add(r, m) (broadcast), bias [4,1,1]); z = Clip(MaxPool(r), -0.5, 2) -> Resize x2 (scales).
onnx::ModelProto conv_model() {
  std::mt19937 rng(1);
  onnx::GraphProto g;
  g.set_name("conv_softmax");
  *g.add_input() = float_info("x", {1, 3, 8, 8});
  add_random_initializer(g, "w", {4, 3, 3, 3}, rng);
  add_random_initializer(g, "b", {4}, rng);
  add_random_initializer(g, "bias", {4, 1, 1}, rng);
  add_values(g, "lo", {}, {-0.5f});
  add_values(g, "hi", {}, {2.0f});
  add_values(g, "scales", {4}, {1, 1, 2, 2});
  auto conv = make_node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  set_ints(conv, "pads", {1, 1, 1, 1});
  *g.add_node() = conv;
  *g.add_node() = make_node("Relu", {"c"}, {"r"}, "relu");
  auto softmax = make_node("Softmax", {"r"}, {"prob"}, "softmax");
  set_int(softmax, "axis", 1);
  *g.add_node() = softmax;
  auto mean = make_node("ReduceMean", {"r"}, {"m"}, "mean");
  set_ints(mean, "axes", {2, 3});
  *g.add_node() = mean;
  *g.add_node() = make_node("Add", {"r", "m"}, {"rm"}, "add_mean");
  *g.add_node() = make_node("Add", {"rm", "bias"}, {"y"}, "add_bias");
  auto pool = make_node("MaxPool", {"r"}, {"p"}, "pool");
  set_ints(pool, "kernel_shape", {2, 2});
  set_ints(pool, "strides", {2, 2});
  *g.add_node() = pool;
  *g.add_node() = make_node("Clip", {"p", "lo", "hi"}, {"pc"}, "clip");
  *g.add_node() = make_node("Resize", {"pc", "", "scales"}, {"z"}, "resize");
  *g.add_output() = float_info("prob", {1, 4, 8, 8});
  *g.add_output() = float_info("y", {1, 4, 8, 8});
  *g.add_output() = float_info("z", {1, 4, 8, 8});
  return ingot::testing::model_with(g, 17);
}

// x [4,16] -> MatMul(w1) -> Add(b1) -> h (also an output) -> Gemm(w2, c2, transB) -> Tanh -> out.
onnx::ModelProto matmul_model() {
  std::mt19937 rng(2);
  onnx::GraphProto g;
  g.set_name("matmul_gemm");
  *g.add_input() = float_info("x", {4, 16});
  add_random_initializer(g, "w1", {16, 32}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b1", {32}, rng);
  add_random_initializer(g, "w2", {8, 32}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "c2", {8}, rng);
  *g.add_node() = make_node("MatMul", {"x", "w1"}, {"mm"}, "matmul");
  *g.add_node() = make_node("Add", {"mm", "b1"}, {"h"}, "add");
  auto gemm = make_node("Gemm", {"h", "w2", "c2"}, {"g"}, "gemm");
  set_int(gemm, "transB", 1);
  *g.add_node() = gemm;
  *g.add_node() = make_node("Tanh", {"g"}, {"out"}, "tanh");
  *g.add_output() = float_info("out", {4, 8});
  *g.add_output() = float_info("h", {4, 32});
  return ingot::testing::model_with(g, 17);
}

// x [2,10]: e = Exp(x * half) (half: a Constant node); l = Log(e + 1); lws = MatMul(l, w) + shift
// (shift: a Constant node); out = Pow(lws, 2) + lws (the float32 result meets the half path again).
onnx::ModelProto exp_log_model() {
  std::mt19937 rng(3);
  onnx::GraphProto g;
  g.set_name("exp_log");
  *g.add_input() = float_info("x", {2, 10});
  add_random_initializer(g, "w", {10, 10}, rng, -0.3f, 0.3f);
  add_values(g, "one", {}, {1.0f});
  add_values(g, "two", {}, {2.0f});
  auto half = make_node("Constant", {}, {"half"}, "const_half");
  attr(half, "value_float", onnx::AttributeProto::FLOAT)->set_f(0.5f);
  *g.add_node() = half;
  *g.add_node() = make_node("Mul", {"x", "half"}, {"xh"}, "mul");
  *g.add_node() = make_node("Exp", {"xh"}, {"e"}, "exp");
  *g.add_node() = make_node("Add", {"e", "one"}, {"e1"}, "add_one");
  *g.add_node() = make_node("Log", {"e1"}, {"l"}, "log");
  *g.add_node() = make_node("MatMul", {"l", "w"}, {"lw"}, "matmul");
  auto shift = make_node("Constant", {}, {"shift"}, "const_shift");
  auto* value = attr(shift, "value", onnx::AttributeProto::TENSOR)->mutable_t();
  value->set_data_type(kFloat);
  value->add_dims(10);
  for (int i = 0; i < 10; ++i) value->add_float_data(0.1f * float(i) - 0.4f);
  *g.add_node() = shift;
  *g.add_node() = make_node("Add", {"lw", "shift"}, {"lws"}, "add_shift");
  *g.add_node() = make_node("Pow", {"lws", "two"}, {"q"}, "pow");
  *g.add_node() = make_node("Add", {"q", "lws"}, {"out"}, "add_out");
  *g.add_output() = float_info("out", {2, 10});
  return ingot::testing::model_with(g, 17);
}

// A half value (MatMul's output) read inside an If branch: the subgraph keeps float32.
onnx::ModelProto if_model() {
  std::mt19937 rng(4);
  onnx::GraphProto g;
  g.set_name("with_if");
  *g.add_input() = float_info("x", {3, 4});
  *g.add_input() = ingot::testing::static_tensor_info("cond", onnx::TensorProto::BOOL, {});
  add_random_initializer(g, "w", {4, 4}, rng);
  add_random_initializer(g, "k", {4}, rng);
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"h"}, "matmul");
  onnx::GraphProto then_g, else_g;
  then_g.set_name("then");
  *then_g.add_node() = make_node("Add", {"h", "k"}, {"t"}, "then_add");
  *then_g.add_output() = float_info("t", {3, 4});
  else_g.set_name("else");
  *else_g.add_node() = make_node("Neg", {"h"}, {"e"}, "else_neg");
  *else_g.add_output() = float_info("e", {3, 4});
  *g.add_node() = ingot::testing::make_if("cond", {"o"}, then_g, else_g, "if");
  *g.add_node() = make_node("Relu", {"h"}, {"r"}, "relu");
  *g.add_node() = make_node("Mul", {"o", "r"}, {"out"}, "mul");
  *g.add_output() = float_info("out", {3, 4});
  return ingot::testing::model_with(g, 17);
}

// The static dtype of a value after the pass, as the executor sees it.
DType dtype_of(const Graph& g, const std::string& name) {
  if (auto it = g.initializers.find(name); it != g.initializers.end()) return it->second.dtype();
  const ValueInfo* vi = g.find_value_info(name);
  return vi ? vi->type.dtype : DType::Undefined;
}

const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes) {
    if (n.name == name) return n;
  }
  throw std::runtime_error("no node " + name);
}

// Every node's float inputs agree with each other (binary ops) and no value lacks a dtype.
void expect_consistent(const Graph& g) {
  const std::set<std::string> same_dtype = {"Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Conv", "Clip"};
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs) {
      if (!in.empty()) {
        EXPECT_NE(dtype_of(g, in), DType::Undefined) << n.label() << " input " << in;
      }
    }
    for (const auto& out : n.outputs) EXPECT_NE(dtype_of(g, out), DType::Undefined) << n.label() << " output " << out;
    if (!same_dtype.count(n.op_type)) continue;
    for (const auto& in : n.inputs) {
      if (!in.empty()) {
        EXPECT_EQ(dtype_of(g, in), dtype_of(g, n.inputs[0])) << n.label() << " input " << in;
      }
    }
  }
  for (const ValueInfo& out : g.outputs) EXPECT_EQ(out.type.dtype, DType::Float32) << out.name;
  for (const ValueInfo& in : g.inputs) {
    if (in.name != "cond") {
      EXPECT_EQ(in.type.dtype, DType::Float32) << in.name;
    }
  }
}

std::shared_ptr<Model> converted(const onnx::ModelProto& m, const std::string& file, DType dtype) {
  auto model = import_onnx(ingot::testing::save_model(m, file));
  EXPECT_TRUE(to_half_precision(*model, dtype));
  verify(*model);
  return model;
}

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::Float32, shape);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

// Runs the model in float32 and in `precision` on the same random inputs; every output must be
// float32 and within atol + rtol * |reference|.
void expect_close(const onnx::ModelProto& m, const std::string& file, Precision precision, float tol,
                  std::vector<std::pair<std::string, Tensor>> extra_feeds = {}) {
  const std::string path = ingot::testing::save_model(m, file);
  SessionOptions full, reduced;
  reduced.precision = precision;
  Session a = Session::load(path, full);
  Session b = Session::load(path, reduced);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<std::pair<std::string, Tensor>> feeds = extra_feeds;
    for (const TensorInfo& in : a.inputs()) {
      if (in.dtype != DType::Float32) continue;
      Shape shape;
      for (const auto& d : in.dims) shape.push_back(std::stoll(d));
      feeds.emplace_back(in.name, random_tensor(shape, rng));
    }
    auto ref = a.run(feeds);
    auto got = b.run(feeds);
    ASSERT_EQ(ref.size(), got.size());
    for (size_t o = 0; o < ref.size(); ++o) {
      ASSERT_EQ(got[o].dtype(), DType::Float32) << "output " << o;
      ASSERT_EQ(got[o].shape(), ref[o].shape()) << "output " << o;
      auto r = ref[o].span<float>();
      auto v = got[o].span<float>();
      double worst = 0;
      for (size_t i = 0; i < r.size(); ++i) {
        ASSERT_TRUE(std::isfinite(v[i])) << "output " << o << " element " << i;
        worst = std::max(worst, std::fabs(double(v[i]) - r[i]) / (tol + tol * std::fabs(r[i])));
        ASSERT_NEAR(v[i], r[i], tol + tol * std::fabs(r[i])) << "output " << o << " element " << i;
      }
      EXPECT_GT(worst, 0.0) << "output " << o << ": identical to float32, so nothing ran in reduced precision?";
    }
  }
}

constexpr float kFp16Tol = 1e-2f, kBf16Tol = 5e-2f;

}  // namespace

TEST(Precision, ConvGraphDtypes) {
  auto model = converted(conv_model(), "prec_conv.onnx", DType::Float16);
  const Graph& g = *model->graph;
  expect_consistent(g);
  const Node& conv = node_named(g, "conv");
  EXPECT_EQ(dtype_of(g, conv.inputs[0]), DType::Float16);
  EXPECT_NE(conv.inputs[0], "x");  // a Cast after the graph input
  EXPECT_EQ(dtype_of(g, conv.inputs[1]), DType::Float16);
  EXPECT_EQ(dtype_of(g, conv.inputs[2]), DType::Float16);
  EXPECT_EQ(dtype_of(g, "r"), DType::Float16);  // Relu follows its half input
  // Softmax follows its half input (its kernels compute in float32 inside); ReduceMean stays float32.
  EXPECT_EQ(dtype_of(g, node_named(g, "softmax").inputs[0]), DType::Float16);
  EXPECT_EQ(dtype_of(g, node_named(g, "mean").inputs[0]), DType::Float32);
  EXPECT_EQ(dtype_of(g, "m"), DType::Float32);
  const Node& add = node_named(g, "add_mean");  // half + float32 mean -> the mean is cast to half
  EXPECT_EQ(dtype_of(g, add.inputs[0]), DType::Float16);
  EXPECT_EQ(dtype_of(g, add.inputs[1]), DType::Float16);
  EXPECT_EQ(dtype_of(g, node_named(g, "add_bias").inputs[1]), DType::Float16);  // converted initializer
  const Node& clip = node_named(g, "clip");
  for (const auto& in : clip.inputs) EXPECT_EQ(dtype_of(g, in), DType::Float16) << in;
  const Node& resize = node_named(g, "resize");
  EXPECT_EQ(dtype_of(g, resize.inputs[0]), DType::Float16);
  EXPECT_EQ(resize.inputs[2], "scales");  // scales stay float32
  EXPECT_EQ(dtype_of(g, "scales"), DType::Float32);
  // The converted initializers replaced the float32 originals that nothing reads any more.
  EXPECT_FALSE(g.initializers.count("w"));
  EXPECT_FALSE(g.initializers.count("bias"));
  // The outputs keep their names and float32; computed in half, each gets a Cast back.
  for (const char* name : {"y", "z", "prob"}) {
    const Node* producer = nullptr;
    for (const Node& n : g.nodes) {
      if (!n.outputs.empty() && n.outputs[0] == name) producer = &n;
    }
    ASSERT_NE(producer, nullptr) << name;
    EXPECT_EQ(producer->op_type, "Cast") << name;
    EXPECT_EQ(producer->attrs.at("to").i, int64_t(DType::Float32)) << name;
  }
}

TEST(Precision, MatMulGemmGraphDtypes) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    auto model = converted(matmul_model(), "prec_matmul.onnx", dt);
    const Graph& g = *model->graph;
    expect_consistent(g);
    for (const char* name : {"matmul", "gemm"}) {
      for (const auto& in : node_named(g, name).inputs) EXPECT_EQ(dtype_of(g, in), dt) << name << " " << in;
    }
    EXPECT_EQ(dtype_of(g, node_named(g, "tanh").inputs[0]), dt);
    // h is an output and read by Gemm: Gemm reads the half copy, the output is a Cast to float32.
    EXPECT_NE(node_named(g, "gemm").inputs[0], "h");
  }
}

TEST(Precision, ExpLogStayFloat32) {
  auto model = converted(exp_log_model(), "prec_explog.onnx", DType::Float16);
  const Graph& g = *model->graph;
  expect_consistent(g);
  // Mul(x, 0.5) has no half input: it stays float32, and so do Exp, Add(+1) and Log.
  EXPECT_EQ(dtype_of(g, node_named(g, "mul").inputs[0]), DType::Float32);
  EXPECT_EQ(dtype_of(g, node_named(g, "exp").inputs[0]), DType::Float32);
  EXPECT_EQ(dtype_of(g, node_named(g, "log").inputs[0]), DType::Float32);
  EXPECT_EQ(dtype_of(g, node_named(g, "matmul").inputs[0]), DType::Float16);
  EXPECT_EQ(dtype_of(g, node_named(g, "matmul").inputs[1]), DType::Float16);
  // The Constant read in half became a float16 initializer; the one read in float32 stays.
  EXPECT_EQ(dtype_of(g, node_named(g, "add_shift").inputs[1]), DType::Float16);
  EXPECT_THROW(node_named(g, "const_shift"), std::runtime_error);
  EXPECT_EQ(node_named(g, "mul").inputs[1], "half");
  EXPECT_EQ(dtype_of(g, node_named(g, "pow").inputs[0]), DType::Float32);
  EXPECT_EQ(dtype_of(g, node_named(g, "pow").inputs[1]), DType::Float32);
  const Node& add = node_named(g, "add_out");  // float32 Pow result + half MatMul result -> half
  EXPECT_EQ(dtype_of(g, add.inputs[0]), DType::Float16);
  EXPECT_EQ(dtype_of(g, add.inputs[1]), DType::Float16);
}

TEST(Precision, SubgraphReadsKeepFloat32) {
  auto model = converted(if_model(), "prec_if.onnx", DType::Float16);
  const Graph& g = *model->graph;
  expect_consistent(g);
  EXPECT_EQ(dtype_of(g, "h"), DType::Float32);  // the name the branches read is still float32
  EXPECT_EQ(dtype_of(g, node_named(g, "matmul").outputs[0]), DType::Float16);
  EXPECT_EQ(dtype_of(g, node_named(g, "relu").inputs[0]), DType::Float16);
}

TEST(Precision, Float16MatchesFloat32) {
  expect_close(conv_model(), "prec_conv16.onnx", Precision::FP16, kFp16Tol);
  expect_close(matmul_model(), "prec_mm16.onnx", Precision::FP16, kFp16Tol);
  expect_close(exp_log_model(), "prec_el16.onnx", Precision::FP16, kFp16Tol);
  for (bool cond : {true, false}) {
    expect_close(if_model(), "prec_if16.onnx", Precision::FP16, kFp16Tol, {{"cond", Tensor::scalar<bool>(cond)}});
  }
}

TEST(Precision, BFloat16MatchesFloat32) {
  expect_close(conv_model(), "prec_convbf.onnx", Precision::BF16, kBf16Tol);
  expect_close(matmul_model(), "prec_mmbf.onnx", Precision::BF16, kBf16Tol);
  expect_close(exp_log_model(), "prec_elbf.onnx", Precision::BF16, kBf16Tol);
  expect_close(if_model(), "prec_ifbf.onnx", Precision::BF16, kBf16Tol, {{"cond", Tensor::scalar<bool>(true)}});
}

TEST(Precision, Float32IsUnchanged) {
  // The default leaves the model alone: the same numbers as a session without the option.
  const std::string path = ingot::testing::save_model(matmul_model(), "prec_fp32.onnx");
  SessionOptions options;
  EXPECT_EQ(options.precision, Precision::FP32);
  Session s = Session::load(path, options);
  for (const TensorInfo& out : s.outputs()) EXPECT_EQ(out.dtype, DType::Float32);
}
