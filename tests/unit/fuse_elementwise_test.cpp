// Elementwise-chain fusion: the fuse_elementwise pass (which chains become one
// ai.ingot.FusedElementwise node and which values must stay), its program IR
// (ops/semantics/fused_elementwise.h: text form, parse errors, digest), the CPU kernel (every op of
// the IR against a float64 reference, broadcasting, chunking and the parallel split on large
// tensors, float16) and the to_half_precision rule for fused chains. Numerical tests run the same
// model through a session with the optimization pipeline (optimize=true) and without it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <ingot/error.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <set>

#include "compiler/compile.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "ops/semantics/fused_elementwise.h"
#include "passes/pass.h"
#include "test_util.h"

using namespace ingot;

using ingot::testing::add_scalar;
using ingot::testing::add_random_initializer;
using ingot::testing::make_node;

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kHalf = onnx::TensorProto::FLOAT16;
constexpr int kInt64 = onnx::TensorProto::INT64;

onnx::ValueInfoProto info(const std::string& name, const std::vector<int64_t>& dims, int elem = kFloat) {
  return ingot::testing::static_tensor_info(name, elem, dims);
}

// A float16 initializer of uniform random values in [lo, hi); returns the values it holds.
std::vector<float> add_random_half_initializer(onnx::GraphProto& g, const std::string& name,
                                               const std::vector<int64_t>& dims, std::mt19937& rng, float lo,
                                               float hi) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(kHalf);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t bits = float_to_half(dist(rng));
    t->add_int32_data(bits);
    values.push_back(half_to_float(bits));
  }
  return values;
}

void set_float(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

std::string save(onnx::GraphProto g, const std::string& file, int opset = 17) {
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g), opset), file);
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

const Node* producer_of(const Graph& g, const std::string& value) {
  for (const Node& n : g.nodes) {
    if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end()) return &n;
  }
  return nullptr;
}

std::vector<const Node*> fused_nodes(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes) {
    if (n.op_type == "FusedElementwise") out.push_back(&n);
  }
  return out;
}

fused::Program program_of(const Node& n) {
  return fused::Program::parse(n.attrs.at("program").s, int(n.inputs.size()));
}

std::vector<std::string> program_ops(const fused::Program& p) {
  std::vector<std::string> ops;
  for (const fused::Instr& in : p.instrs) ops.emplace_back(fused::op_name(in.op));
  return ops;
}

// Imports the model and runs the pass alone; `changed` is what the pass reported.
std::shared_ptr<Model> after_pass(const std::string& path, bool* changed = nullptr) {
  auto model = import_onnx(path);
  const bool c = fuse_elementwise(*model);
  if (changed) *changed = c;
  verify(*model);
  return model;
}

// FusedElementwise nodes the whole pipeline leaves in the model (what an optimized session runs).
size_t fused_after_pipeline(const std::string& path) {
  auto model = import_onnx(path);
  compile(*model, {});
  verify(*model);
  return fused_nodes(*model->graph).size();
}

std::vector<float> as_floats(const Tensor& t) {
  return t.dtype() == DType::Float32 ? t.to_vector<float>() : t.cast(DType::Float32).to_vector<float>();
}

// One random tensor per session input, of its declared dtype (float32 or float16), uniform in [lo, hi).
std::vector<Tensor> random_inputs(const Session& s, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<Tensor> inputs;
  for (const TensorInfo& in : s.inputs()) {
    Shape shape;
    for (const auto& d : in.dims) shape.push_back(std::stoll(d));
    std::vector<float> v(size_t(shape_numel(shape)));
    for (float& x : v) x = dist(rng);
    Tensor t = Tensor::from_vector(v, shape);
    inputs.push_back(in.dtype == DType::Float32 ? t : t.cast(in.dtype));
  }
  return inputs;
}

// Runs the model with and without the pipeline on the same random inputs (twice: the second run
// uses the static memory plan) and compares every output within tol * max(1, |unfused|). The
// pipeline must have fused something, or the comparison would prove nothing.
void expect_fused_matches_unfused(const std::string& path, float tol, float lo = -1.0f, float hi = 1.0f) {
  ASSERT_GE(fused_after_pipeline(path), 1u) << path << ": nothing was fused";
  SessionOptions fused_options, plain_options;
  plain_options.optimize = false;
  Session fused = Session::load(path, fused_options);
  Session plain = Session::load(path, plain_options);
  std::mt19937 rng(17);
  for (int run = 0; run < 2; ++run) {
    const std::vector<Tensor> inputs = random_inputs(plain, rng, lo, hi);
    const std::vector<Tensor> a = fused.run(inputs), b = plain.run(inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) {
      ASSERT_EQ(a[o].dtype(), b[o].dtype()) << "output " << o;
      ASSERT_EQ(a[o].shape(), b[o].shape()) << "output " << o;
      const std::vector<float> av = as_floats(a[o]), bv = as_floats(b[o]);
      for (size_t i = 0; i < av.size(); ++i) {
        ASSERT_TRUE(std::isfinite(bv[i])) << path << " output " << o << " element " << i << ": test data out of range";
        ASSERT_NEAR(av[i], bv[i], tol * std::max(1.0f, std::fabs(bv[i])))
            << path << " output " << o << " element " << i;
      }
    }
  }
}

// Float32 fused vs unfused: the fused kernel evaluates each op with the unfused kernel's formula
// (the same exp_of/tanh_of/softplus_of helpers, the same libm calls, one float32 rounding per op),
// so the results are bit-identical in this build. The slack allows for a compiler contracting
// a*b+c into an FMA in one kernel and not the other (-march=native builds): one rounding step of a
// few ops, amplified by at most a small factor along these chains.
constexpr float kFloat32Tol = 1e-6f;

// x [dims] -> y = Mul(Mul(x, Add(Erf(Div(x, 1.4142135)), 1)), 0.5), scalar initializers.
onnx::GraphProto gelu_graph(int elem, const std::vector<int64_t>& dims) {
  onnx::GraphProto g;
  g.set_name("gelu");
  *g.add_input() = info("x", dims, elem);
  add_scalar(g, "sqrt2", 1.4142135f, elem);
  add_scalar(g, "one", 1.0f, elem);
  add_scalar(g, "half", 0.5f, elem);
  *g.add_node() = make_node("Div", {"x", "sqrt2"}, {"d"});
  *g.add_node() = make_node("Erf", {"d"}, {"e"});
  *g.add_node() = make_node("Add", {"e", "one"}, {"a"});
  *g.add_node() = make_node("Mul", {"x", "a"}, {"m"});
  *g.add_node() = make_node("Mul", {"m", "half"}, {"y"});
  *g.add_output() = info("y", dims, elem);
  return g;
}

// x [2,16] -> y = x * Sigmoid(x)
onnx::GraphProto swish_graph() {
  onnx::GraphProto g;
  g.set_name("swish");
  *g.add_input() = info("x", {2, 16});
  *g.add_node() = make_node("Sigmoid", {"x"}, {"s"});
  *g.add_node() = make_node("Mul", {"x", "s"}, {"y"});
  *g.add_output() = info("y", {2, 16});
  return g;
}

// x [2,4,5,5] + bias [4,1,1] (an initializer) -> Relu -> y
onnx::GraphProto bias_relu_graph() {
  std::mt19937 rng(3);
  onnx::GraphProto g;
  g.set_name("bias_relu");
  *g.add_input() = info("x", {2, 4, 5, 5});
  add_random_initializer(g, "bias", {4, 1, 1}, rng);
  *g.add_node() = make_node("Add", {"x", "bias"}, {"b"});
  *g.add_node() = make_node("Relu", {"b"}, {"y"});
  *g.add_output() = info("y", {2, 4, 5, 5});
  return g;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The rewrite

TEST(FuseElementwise, GeluBecomesOneNodeOfFiveInstructions) {
  const std::string path = save(gelu_graph(kFloat, {2, 3, 8}), "fe_gelu.onnx");
  bool changed = false;
  auto model = after_pass(path, &changed);
  EXPECT_TRUE(changed);
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedElementwise"}));
  const Node& n = g.nodes[0];
  EXPECT_EQ(n.domain, "ai.ingot");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(n.outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(model->opset("ai.ingot"), 1);
  const fused::Program p = program_of(n);
  EXPECT_EQ(p.num_inputs, 1);
  ASSERT_EQ(p.instrs.size(), 5u) << n.attrs.at("program").s;
  EXPECT_EQ(program_ops(p), (std::vector<std::string>{"Div", "Erf", "Add", "Mul", "Mul"}));
  // The scalar initializers became immediates with their exact float32 values.
  EXPECT_EQ(p.instrs[0].b.kind, fused::Operand::Kind::Const);
  EXPECT_EQ(p.instrs[0].b.value, 1.4142135f);
  EXPECT_EQ(p.instrs[2].b.value, 1.0f);
  EXPECT_EQ(p.instrs[4].b.value, 0.5f);
  EXPECT_FALSE(fuse_elementwise(*model));  // the fused node is not fused again
  // The whole pipeline ends with the same single node (and drops the unread scalars).
  auto full = import_onnx(path);
  EXPECT_TRUE(compile(*full, {}));
  EXPECT_EQ(op_types(*full->graph), (std::vector<std::string>{"FusedElementwise"}));
  EXPECT_TRUE(full->graph->initializers.empty());
}

TEST(FuseElementwise, SwishBecomesOneNode) {
  auto model = after_pass(save(swish_graph(), "fe_swish.onnx"));
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedElementwise"}));
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  const fused::Program p = program_of(g.nodes[0]);
  EXPECT_EQ(program_ops(p), (std::vector<std::string>{"Sigmoid", "Mul"}));
  // Both operands of the Mul read the one input: x0 and the Sigmoid's result.
  EXPECT_EQ(p.instrs[1].a.kind, fused::Operand::Kind::Input);
  EXPECT_EQ(p.instrs[1].b.kind, fused::Operand::Kind::Temp);
}

TEST(FuseElementwise, PerChannelBiasIsAnInputOfTheFusedNode) {
  auto model = after_pass(save(bias_relu_graph(), "fe_bias.onnx"));
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedElementwise"}));
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"x", "bias"}));
  const fused::Program p = program_of(g.nodes[0]);
  EXPECT_EQ(p.num_inputs, 2);
  EXPECT_EQ(program_ops(p), (std::vector<std::string>{"Add", "Relu"}));
  EXPECT_TRUE(g.initializers.count("bias"));
}

TEST(FuseElementwise, DiamondBecomesOneNode) {
  // e = Exp(x) read by two members that meet again: y = Sub(Mul(e, x), Add(e, 1)).
  onnx::GraphProto g;
  g.set_name("diamond");
  *g.add_input() = info("x", {3, 7});
  add_scalar(g, "one", 1.0f);
  *g.add_node() = make_node("Exp", {"x"}, {"e"});
  *g.add_node() = make_node("Mul", {"e", "x"}, {"m"});
  *g.add_node() = make_node("Add", {"e", "one"}, {"a"});
  *g.add_node() = make_node("Sub", {"m", "a"}, {"y"});
  *g.add_output() = info("y", {3, 7});
  const std::string path = save(std::move(g), "fe_diamond.onnx");
  auto model = after_pass(path);
  ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedElementwise"}));
  EXPECT_EQ(program_of(model->graph->nodes[0]).instrs.size(), 4u);
  expect_fused_matches_unfused(path, kFloat32Tol);
}

// ---------------------------------------------------------------------------------------------
// What must not be fused

TEST(FuseElementwise, IntermediateGraphOutputStays) {
  // a = Neg(x) is also a graph output: it must still be computed; Exp and Add fuse after it.
  onnx::GraphProto g;
  g.set_name("exposed");
  *g.add_input() = info("x", {3, 4});
  *g.add_node() = make_node("Neg", {"x"}, {"a"});
  *g.add_node() = make_node("Exp", {"a"}, {"e"});
  *g.add_node() = make_node("Add", {"e", "x"}, {"y"});
  *g.add_output() = info("y", {3, 4});
  *g.add_output() = info("a", {3, 4});
  const std::string path = save(std::move(g), "fe_exposed.onnx");
  auto model = after_pass(path);
  const Graph& mg = *model->graph;
  EXPECT_EQ(op_types(mg), (std::vector<std::string>{"Neg", "FusedElementwise"}));
  const Node* a = producer_of(mg, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->op_type, "Neg");
  const auto fused = fused_nodes(mg);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0]->inputs, (std::vector<std::string>{"a", "x"}));
  EXPECT_EQ(program_ops(program_of(*fused[0])), (std::vector<std::string>{"Exp", "Add"}));
  expect_fused_matches_unfused(path, kFloat32Tol);
}

TEST(FuseElementwise, IntermediateReadByNonElementwiseNodeStays) {
  // s = Sigmoid(x) is read by a Transpose and by the chain Tanh(Mul(s, x)); r = Exp(x) by a MatMul
  // and by Sqrt(Add(r, 1)). s and r must stay values of their own; each chain after them fuses.
  std::mt19937 rng(5);
  onnx::GraphProto g;
  g.set_name("shared");
  *g.add_input() = info("x", {4, 4});
  add_random_initializer(g, "w", {4, 4}, rng);
  add_scalar(g, "one", 1.0f);
  *g.add_node() = make_node("Sigmoid", {"x"}, {"s"});
  *g.add_node() = make_node("Transpose", {"s"}, {"st"});
  *g.add_node() = make_node("Mul", {"s", "x"}, {"sm"});
  *g.add_node() = make_node("Tanh", {"sm"}, {"y1"});
  *g.add_node() = make_node("Exp", {"x"}, {"r"});
  *g.add_node() = make_node("MatMul", {"r", "w"}, {"mm"});
  *g.add_node() = make_node("Add", {"r", "one"}, {"r1"});
  *g.add_node() = make_node("Sqrt", {"r1"}, {"y2"});
  *g.add_output() = info("st", {4, 4});
  *g.add_output() = info("y1", {4, 4});
  *g.add_output() = info("mm", {4, 4});
  *g.add_output() = info("y2", {4, 4});
  const std::string path = save(std::move(g), "fe_shared.onnx");
  auto model = after_pass(path);
  const Graph& mg = *model->graph;
  for (const char* value : {"s", "r"}) {
    const Node* p = producer_of(mg, value);
    ASSERT_NE(p, nullptr) << value << " is no longer computed";
    EXPECT_NE(p->op_type, "FusedElementwise") << value;
  }
  EXPECT_EQ(producer_of(mg, "s")->op_type, "Sigmoid");
  EXPECT_EQ(producer_of(mg, "r")->op_type, "Exp");
  EXPECT_EQ(producer_of(mg, "st")->inputs, (std::vector<std::string>{"s"}));
  EXPECT_EQ(producer_of(mg, "mm")->inputs[0], "r");
  const auto fused = fused_nodes(mg);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(program_ops(program_of(*producer_of(mg, "y1"))), (std::vector<std::string>{"Mul", "Tanh"}));
  EXPECT_EQ(program_ops(program_of(*producer_of(mg, "y2"))), (std::vector<std::string>{"Add", "Sqrt"}));
  // The intermediates the fused nodes swallowed are gone.
  EXPECT_EQ(producer_of(mg, "sm"), nullptr);
  EXPECT_EQ(producer_of(mg, "r1"), nullptr);
  expect_fused_matches_unfused(path, kFloat32Tol);
}

TEST(FuseElementwise, IntermediateReadInsideSubgraphStays) {
  // e = Exp(x) is read by the chain Sqrt(e + 1) * o and inside an If branch (o = If(cond, -e, |x|)).
  onnx::GraphProto g;
  g.set_name("subgraph_read");
  *g.add_input() = info("x", {2, 3});
  *g.add_input() = ingot::testing::static_tensor_info("cond", onnx::TensorProto::BOOL, {});
  add_scalar(g, "one", 1.0f);
  *g.add_node() = make_node("Exp", {"x"}, {"e"});
  onnx::GraphProto then_g, else_g;
  then_g.set_name("then");
  *then_g.add_node() = make_node("Neg", {"e"}, {"t"});
  *then_g.add_output() = info("t", {2, 3});
  else_g.set_name("else");
  *else_g.add_node() = make_node("Abs", {"x"}, {"u"});
  *else_g.add_output() = info("u", {2, 3});
  *g.add_node() = ingot::testing::make_if("cond", {"o"}, then_g, else_g);
  *g.add_node() = make_node("Add", {"e", "one"}, {"a"});
  *g.add_node() = make_node("Sqrt", {"a"}, {"s"});
  *g.add_node() = make_node("Mul", {"s", "o"}, {"y"});
  *g.add_output() = info("y", {2, 3});
  const std::string path = save(std::move(g), "fe_subgraph.onnx");
  auto model = after_pass(path);
  const Graph& mg = *model->graph;
  EXPECT_EQ(op_types(mg), (std::vector<std::string>{"Exp", "If", "FusedElementwise"}));
  ASSERT_NE(producer_of(mg, "e"), nullptr);
  EXPECT_EQ(producer_of(mg, "e")->op_type, "Exp");
  EXPECT_EQ(program_ops(program_of(*producer_of(mg, "y"))), (std::vector<std::string>{"Add", "Sqrt", "Mul"}));
  SessionOptions plain_options;
  plain_options.optimize = false;
  Session fused = Session::load(path), plain = Session::load(path, plain_options);
  const Tensor x = Tensor::from_vector(std::vector<float>{-1.5f, -0.25f, 0.0f, 0.5f, 1.0f, 2.0f}, {2, 3});
  for (bool c : {true, false}) {
    const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"cond", Tensor::scalar<bool>(c)}};
    EXPECT_EQ(fused.run(feeds)[0].to_vector<float>(), plain.run(feeds)[0].to_vector<float>()) << "cond " << c;
  }
}

TEST(FuseElementwise, SingleOpIsNotRewritten) {
  onnx::GraphProto g;
  g.set_name("single");
  *g.add_input() = info("x", {2, 3});
  *g.add_node() = make_node("Relu", {"x"}, {"y"});
  *g.add_output() = info("y", {2, 3});
  bool changed = true;
  auto model = after_pass(save(std::move(g), "fe_single.onnx"), &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(op_types(*model->graph), (std::vector<std::string>{"Relu"}));
  EXPECT_EQ(model->opset("ai.ingot"), 0);
}

TEST(FuseElementwise, IntegerChainIsNotFused) {
  // int64: y = (a + b + c) * c with c an int64 initializer.
  onnx::GraphProto g;
  g.set_name("ints");
  *g.add_input() = info("a", {5}, kInt64);
  *g.add_input() = info("b", {5}, kInt64);
  ingot::testing::add_int64_initializer(g, "c", {3, -2, 7, 0, 11});
  *g.add_node() = make_node("Add", {"a", "b"}, {"s"});
  *g.add_node() = make_node("Add", {"s", "c"}, {"t"});
  *g.add_node() = make_node("Mul", {"t", "c"}, {"y"});
  *g.add_output() = info("y", {5}, kInt64);
  const std::string path = save(std::move(g), "fe_ints.onnx");
  bool changed = true;
  auto model = after_pass(path, &changed);
  EXPECT_FALSE(changed);
  EXPECT_EQ(op_types(*model->graph), (std::vector<std::string>{"Add", "Add", "Mul"}));
  EXPECT_EQ(fused_after_pipeline(path), 0u);
  // And the optimized session still computes the integer result exactly.
  const std::vector<int64_t> a{1, -5, 1LL << 40, 9, -1}, b{2, 8, 3, -9, 0}, c{3, -2, 7, 0, 11};
  Session s = Session::load(path);
  auto out = s.run({Tensor::from_vector(a, {5}), Tensor::from_vector(b, {5})});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<int64_t> y = out[0].to_vector<int64_t>();
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(y[i], (a[i] + b[i] + c[i]) * c[i]) << i;
}

// A one-element initializer of higher rank than the other operands broadens the output's shape
// ([3] + [1,1] is [1,3]): it must stay an input of the fused node, not become an immediate.
TEST(FuseElementwise, ScalarInitializerOfHigherRankKeepsTheOutputShape) {
  onnx::GraphProto g;
  g.set_name("rank_up");
  *g.add_input() = info("x", {3});
  add_scalar(g, "c", 0.5f, kFloat, {1, 1});
  *g.add_node() = make_node("Add", {"x", "c"}, {"a"});
  *g.add_node() = make_node("Relu", {"a"}, {"y"});
  *g.add_output() = info("y", {1, 3});
  const std::string path = save(std::move(g), "fe_rank_up.onnx");
  SessionOptions plain_options;
  plain_options.optimize = false;
  Session fused = Session::load(path), plain = Session::load(path, plain_options);
  const Tensor x = Tensor::from_vector(std::vector<float>{-1.0f, 0.25f, 2.0f}, {3});
  const Tensor a = fused.run({x})[0], b = plain.run({x})[0];
  EXPECT_EQ(b.shape(), (Shape{1, 3}));
  EXPECT_EQ(a.shape(), (Shape{1, 3})) << "fused output shape differs from the unfused graph's";
  if (a.shape() == b.shape()) {
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  }
}

// ---------------------------------------------------------------------------------------------
// Fused vs unfused on random inputs

TEST(FuseElementwise, GeluSwishBiasMatchUnfused) {
  expect_fused_matches_unfused(save(gelu_graph(kFloat, {2, 3, 40}), "fe_m_gelu.onnx"), kFloat32Tol, -3.0f, 3.0f);
  expect_fused_matches_unfused(save(swish_graph(), "fe_m_swish.onnx"), kFloat32Tol, -6.0f, 6.0f);
  expect_fused_matches_unfused(save(bias_relu_graph(), "fe_m_bias.onnx"), kFloat32Tol);
}

TEST(FuseElementwise, GeluMatchesFloat64Formula) {
  // Independent of both kernels: 0.5 x (1 + erf(x / 1.4142135f)) in float64. Float32 erf is within
  // about an ulp of its value near +-1 (6e-8 absolute), which 1 + erf keeps as an absolute error
  // (it cancels for x near -3) and 0.5 x scales by at most 1.5: ~1e-7 absolute. The other four
  // roundings add a few 1e-7 relative.
  const std::string path = save(gelu_graph(kFloat, {1000}), "fe_gelu64.onnx");
  Session s = Session::load(path);
  std::mt19937 rng(23);
  const std::vector<Tensor> inputs = random_inputs(s, rng, -3.0f, 3.0f);
  const std::vector<float> x = inputs[0].to_vector<float>(), y = s.run(inputs)[0].to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = 0.5 * x[i] * (1.0 + std::erf(double(x[i]) / double(1.4142135f)));
    ASSERT_NEAR(y[i], ref, 1.5e-7 + 2e-6 * std::fabs(ref)) << "x = " << x[i];
  }
}

TEST(FuseElementwise, HardSigmoidClipLeakyReluMatchUnfused) {
  // y = x * HardSigmoid(x, alpha 0.25, beta 0.4)
  {
    onnx::GraphProto g;
    g.set_name("hsig");
    *g.add_input() = info("x", {3, 50});
    onnx::NodeProto hs = make_node("HardSigmoid", {"x"}, {"h"});
    set_float(hs, "alpha", 0.25f);
    set_float(hs, "beta", 0.4f);
    *g.add_node() = hs;
    *g.add_node() = make_node("Mul", {"x", "h"}, {"y"});
    *g.add_output() = info("y", {3, 50});
    const std::string path = save(std::move(g), "fe_hsig.onnx");
    auto model = after_pass(path);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedElementwise"}));
    EXPECT_EQ(program_ops(program_of(model->graph->nodes[0])),
              (std::vector<std::string>{"Mul", "Add", "Max", "Min", "Mul"}));
    expect_fused_matches_unfused(path, kFloat32Tol, -5.0f, 5.0f);
  }
  // Opset 13: y = LeakyRelu(Clip(x * 2, lo, hi), alpha 0.1) + Clip(x, "", hi) (no lower bound).
  {
    onnx::GraphProto g;
    g.set_name("clip13");
    *g.add_input() = info("x", {4, 25});
    add_scalar(g, "two", 2.0f);
    add_scalar(g, "lo", -0.5f);
    add_scalar(g, "hi", 0.8f);
    *g.add_node() = make_node("Mul", {"x", "two"}, {"x2"});
    *g.add_node() = make_node("Clip", {"x2", "lo", "hi"}, {"c"});
    onnx::NodeProto lr = make_node("LeakyRelu", {"c"}, {"l"});
    set_float(lr, "alpha", 0.1f);
    *g.add_node() = lr;
    *g.add_node() = make_node("Clip", {"x", "", "hi"}, {"c2"});
    *g.add_node() = make_node("Add", {"l", "c2"}, {"y"});
    *g.add_output() = info("y", {4, 25});
    const std::string path = save(std::move(g), "fe_clip13.onnx", 13);
    auto model = after_pass(path);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedElementwise"}));
    const fused::Program p = program_of(model->graph->nodes[0]);
    EXPECT_EQ(p.num_inputs, 1);
    EXPECT_EQ(std::count_if(p.instrs.begin(), p.instrs.end(), [](const fused::Instr& in) { return in.op == fused::Op::LeakyRelu; }), 1);
    expect_fused_matches_unfused(path, kFloat32Tol);
  }
  // Opset 10: Clip's bounds are attributes; LeakyRelu with its default alpha.
  {
    onnx::GraphProto g;
    g.set_name("clip10");
    *g.add_input() = info("x", {4, 25});
    add_scalar(g, "three", 3.0f);
    *g.add_node() = make_node("Mul", {"x", "three"}, {"x3"});
    onnx::NodeProto clip = make_node("Clip", {"x3"}, {"c"});
    set_float(clip, "min", -1.5f);
    set_float(clip, "max", 2.0f);
    *g.add_node() = clip;
    *g.add_node() = make_node("LeakyRelu", {"c"}, {"y"});
    *g.add_output() = info("y", {4, 25});
    const std::string path = save(std::move(g), "fe_clip10.onnx", 10);
    auto model = after_pass(path);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedElementwise"}));
    expect_fused_matches_unfused(path, kFloat32Tol);
  }
}

TEST(FuseElementwise, BroadcastingChainMatchesUnfused) {
  // x [2,3,4,5] with a [3,1,1] (initializer), b [5] (a graph input) and a scalar:
  // y = Relu(Sub(Mul(Add(x, a), b), s)) / Add(Abs(b), 0.5)
  std::mt19937 rng(29);
  onnx::GraphProto g;
  g.set_name("bcast");
  *g.add_input() = info("x", {2, 3, 4, 5});
  *g.add_input() = info("b", {5});
  add_random_initializer(g, "a", {3, 1, 1}, rng);
  add_scalar(g, "s", 0.25f);
  add_scalar(g, "h", 0.5f);
  *g.add_node() = make_node("Add", {"x", "a"}, {"t0"});
  *g.add_node() = make_node("Mul", {"t0", "b"}, {"t1"});
  *g.add_node() = make_node("Sub", {"t1", "s"}, {"t2"});
  *g.add_node() = make_node("Relu", {"t2"}, {"t3"});
  *g.add_node() = make_node("Abs", {"b"}, {"ab"});
  *g.add_node() = make_node("Add", {"ab", "h"}, {"den"});
  *g.add_node() = make_node("Div", {"t3", "den"}, {"y"});
  *g.add_output() = info("y", {2, 3, 4, 5});
  const std::string path = save(std::move(g), "fe_bcast.onnx");
  auto model = after_pass(path);
  // The denominator [5] is broadcast into the [2,3,4,5] chain: it is fused on its own (computed
  // once per element of its own), not recomputed inside the main chain.
  ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedElementwise", "FusedElementwise"}));
  const Node& den = model->graph->nodes[0];
  EXPECT_EQ(den.outputs, (std::vector<std::string>{"den"}));
  EXPECT_EQ(program_of(den).instrs.size(), 2u);
  const Node& n = model->graph->nodes[1];
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "a", "b", "den"}));  // the scalars are immediates
  EXPECT_EQ(program_of(n).instrs.size(), 5u);
  expect_fused_matches_unfused(path, kFloat32Tol);

  // A [4,1,1] initializer raises the output's rank: x [2,3] -> [4,2,3].
  onnx::GraphProto g2;
  g2.set_name("bcast_rank");
  *g2.add_input() = info("x", {2, 3});
  add_random_initializer(g2, "k", {4, 1, 1}, rng);
  *g2.add_node() = make_node("Mul", {"x", "k"}, {"m"});
  *g2.add_node() = make_node("Tanh", {"m"}, {"y"});
  *g2.add_output() = info("y", {4, 2, 3});
  expect_fused_matches_unfused(save(std::move(g2), "fe_bcast_rank.onnx"), kFloat32Tol);
}

TEST(FuseElementwise, EveryMathOpMatchesUnfused) {
  // One chain with the rest of the IR's ops (x, z in [-1, 1); every intermediate stays finite):
  //   a = Abs(x); sq = Sqrt(a); ez = Exp(z); l = Log(a + 1); p = Pow(sq + 0.5, z);
  //   n = Min(Max(p, l), ez); d = Neg(n - x); r = Reciprocal(Abs(d) + 1); t = Tanh(r * z);
  //   sp = Softplus(t); fl = Floor(sp * 4); ce = Ceil(t * 3); y = HardSwish((Sin(fl + ce) + Cos(sp)) * 3)
  onnx::GraphProto g;
  g.set_name("math");
  *g.add_input() = info("x", {4, 5, 6});
  *g.add_input() = info("z", {4, 5, 6});
  add_scalar(g, "one", 1.0f);
  add_scalar(g, "half", 0.5f);
  add_scalar(g, "three", 3.0f);
  add_scalar(g, "four", 4.0f);
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    *g.add_node() = make_node(op, in, {out});
  };
  node("Abs", {"x"}, "a");
  node("Sqrt", {"a"}, "sq");
  node("Exp", {"z"}, "ez");
  node("Add", {"a", "one"}, "a1");
  node("Log", {"a1"}, "l");
  node("Add", {"sq", "half"}, "sqh");
  node("Pow", {"sqh", "z"}, "p");
  node("Max", {"p", "l"}, "mx");
  node("Min", {"mx", "ez"}, "n");
  node("Sub", {"n", "x"}, "dn");
  node("Neg", {"dn"}, "d");
  node("Abs", {"d"}, "ad");
  node("Add", {"ad", "one"}, "ad1");
  node("Reciprocal", {"ad1"}, "r");
  node("Mul", {"r", "z"}, "rz");
  node("Tanh", {"rz"}, "t");
  node("Softplus", {"t"}, "sp");
  node("Mul", {"sp", "four"}, "sp4");
  node("Floor", {"sp4"}, "fl");
  node("Mul", {"t", "three"}, "t3");
  node("Ceil", {"t3"}, "ce");
  node("Add", {"fl", "ce"}, "fc");
  node("Sin", {"fc"}, "si");
  node("Cos", {"sp"}, "co");
  node("Add", {"si", "co"}, "sc");
  node("Mul", {"sc", "three"}, "sc3");
  node("HardSwish", {"sc3"}, "y");
  *g.add_output() = info("y", {4, 5, 6});
  const std::string path = save(std::move(g), "fe_math.onnx");
  auto model = after_pass(path);
  ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedElementwise"}));
  const fused::Program p = program_of(model->graph->nodes[0]);
  EXPECT_EQ(p.instrs.size(), 27u);
  EXPECT_EQ(p.num_inputs, 2);
  expect_fused_matches_unfused(path, kFloat32Tol);
}

TEST(FuseElementwise, ChainOverTheInstructionLimitIsLeftAlone) {
  // 33 Neg/Abs alternations: one more instruction than a program holds. The pass must not emit an
  // invalid program (the group is left unfused) and the model still runs correctly.
  onnx::GraphProto g;
  g.set_name("long");
  *g.add_input() = info("x", {8});
  std::string prev = "x";
  for (int i = 0; i <= fused::kMaxInstrs; ++i) {
    const std::string out = i == fused::kMaxInstrs ? "y" : fmt::format("v{}", i);
    *g.add_node() = make_node(i % 2 ? "Abs" : "Neg", {prev}, {out});
    prev = out;
  }
  *g.add_output() = info("y", {8});
  const std::string path = save(std::move(g), "fe_long.onnx");
  auto model = after_pass(path);
  for (const Node* n : fused_nodes(*model->graph)) EXPECT_LE(program_of(*n).instrs.size(), size_t(fused::kMaxInstrs));
  Session s = Session::load(path);
  const std::vector<float> x{-3, -1, -0.5f, 0, 0.5f, 1, 2, 7};
  const std::vector<float> y = s.run({Tensor::from_vector(x, {8})})[0].to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], -std::fabs(x[i])) << i;  // ends on Neg (i = 32)
}

// ---------------------------------------------------------------------------------------------
// float16

namespace {

// The spacing of float16 numbers at |v| (2^-24 in the subnormal range).
double half_ulp(double v) {
  const double a = std::fabs(v);
  if (a < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, int(std::floor(std::log2(a))) - 10);
}

// Runs a float16 model (optimized and not) on random float16 inputs and checks the optimized
// result against `reference` (float64, from the float16 inputs' values). Tolerances: the fused
// kernel keeps float32 between the ops and rounds to float16 once, so its error is the final
// rounding (half an ulp of float16, ~2.4e-4 relative) plus float32 noise (~1e-6): within
// 2e-3 + 2e-3 * |ref| for these order-1 values, and in fact within one float16 ulp of the exact
// value, which the unfused graph (rounding after every op) need not be.
void expect_half_model_matches(const std::string& path, float lo, float hi,
                               const std::function<double(const std::vector<double>&, size_t)>& reference) {
  ASSERT_GE(fused_after_pipeline(path), 1u) << path;
  SessionOptions plain_options;
  plain_options.optimize = false;
  Session fused = Session::load(path), plain = Session::load(path, plain_options);
  std::mt19937 rng(31);
  const std::vector<Tensor> inputs = random_inputs(fused, rng, lo, hi);
  ASSERT_EQ(inputs[0].dtype(), DType::Float16);
  const std::vector<Tensor> a = fused.run(inputs), b = plain.run(inputs);
  ASSERT_EQ(a[0].dtype(), DType::Float16);
  ASSERT_EQ(a[0].shape(), b[0].shape());
  std::vector<std::vector<float>> in;
  for (const Tensor& t : inputs) in.push_back(as_floats(t));
  const std::vector<float> av = as_floats(a[0]), bv = as_floats(b[0]);
  double worst_ulps = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    std::vector<double> args;
    for (const auto& v : in) args.push_back(v.size() == av.size() ? v[i] : v[i % v.size()]);
    const double ref = reference(args, i);
    ASSERT_NEAR(av[i], ref, 2e-3 + 2e-3 * std::fabs(ref)) << "fused, element " << i;
    ASSERT_NEAR(bv[i], ref, 2e-3 + 2e-3 * std::fabs(ref)) << "unfused, element " << i;
    worst_ulps = std::max(worst_ulps, std::fabs(av[i] - ref) / half_ulp(ref));
  }
  EXPECT_LE(worst_ulps, 1.0) << "the fused float16 result is not within one float16 ulp of the exact value";
}

}  // namespace

TEST(FuseElementwise, Float16GeluAndSwishMatchFloat64Reference) {
  // GELU on x [4,250] float16: the constants are float16 too (1.4142135 is 1.4140625 there).
  const double sqrt2_h = half_to_float(float_to_half(1.4142135f));
  expect_half_model_matches(save(gelu_graph(kHalf, {4, 250}), "fe_gelu16.onnx"), -2.0f, 2.0f,
                            [&](const std::vector<double>& v, size_t) {
                              return 0.5 * v[0] * (1.0 + std::erf(v[0] / sqrt2_h));
                            });
  // y = u * Sigmoid(u), u = x + b with b [250] a float16 initializer.
  std::mt19937 rng(37);
  onnx::GraphProto g;
  g.set_name("swish16");
  *g.add_input() = info("x", {4, 250}, kHalf);
  const std::vector<float> b = add_random_half_initializer(g, "b", {250}, rng, -1.0f, 1.0f);
  *g.add_node() = make_node("Add", {"x", "b"}, {"u"});
  *g.add_node() = make_node("Sigmoid", {"u"}, {"s"});
  *g.add_node() = make_node("Mul", {"u", "s"}, {"y"});
  *g.add_output() = info("y", {4, 250}, kHalf);
  expect_half_model_matches(save(std::move(g), "fe_swish16.onnx"), -4.0f, 4.0f,
                            [&](const std::vector<double>& v, size_t i) {
                              const double u = v[0] + double(b[i % 250]);
                              return u / (1.0 + std::exp(-u));
                            });
}

// ---------------------------------------------------------------------------------------------
// Large tensors: several parallel tasks, chunks that end inside rows, broadcast operands

namespace {

// x [3,70001] (odd, many chunks, > kElementwiseGrain elements), b [70001], c [3,1], d [3,1]:
// y = Tanh((x + b) * (c * d) + x) * 0.5. c * d is broadcast along the rows.
std::string large_model(int elem, const std::string& file) {
  onnx::GraphProto g;
  g.set_name("large");
  *g.add_input() = info("x", {3, 70001}, elem);
  *g.add_input() = info("b", {70001}, elem);
  *g.add_input() = info("c", {3, 1}, elem);
  *g.add_input() = info("d", {3, 1}, elem);
  add_scalar(g, "half", 0.5f, elem);
  *g.add_node() = make_node("Add", {"x", "b"}, {"s"});
  *g.add_node() = make_node("Mul", {"c", "d"}, {"cd"});
  *g.add_node() = make_node("Mul", {"s", "cd"}, {"m"});
  *g.add_node() = make_node("Add", {"m", "x"}, {"a"});
  *g.add_node() = make_node("Tanh", {"a"}, {"t"});
  *g.add_node() = make_node("Mul", {"t", "half"}, {"y"});
  *g.add_output() = info("y", {3, 70001}, elem);
  return save(std::move(g), file);
}

}  // namespace

TEST(FuseElementwise, LargeBroadcastTensorsMatchReference) {
  for (int elem : {kFloat, kHalf}) {
    SCOPED_TRACE(elem == kFloat ? "float32" : "float16");
    const std::string path = large_model(elem, elem == kFloat ? "fe_large32.onnx" : "fe_large16.onnx");
    auto model = after_pass(path);
    // c * d ([3, 1]) is broadcast into the chain, so it stays a node of its own.
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"Mul", "FusedElementwise"}));
    EXPECT_EQ(model->graph->nodes[1].inputs, (std::vector<std::string>{"x", "b", "cd"}));
    if (elem == kFloat) expect_fused_matches_unfused(path, kFloat32Tol, -2.0f, 2.0f);
    // Against float64: float32 arithmetic and fast_tanhf stay within ~1e-6 of it; float16 adds
    // the final rounding (<= 2^-11 relative of a value below 0.5 in magnitude).
    Session s = Session::load(path);
    std::mt19937 rng(41);
    const std::vector<Tensor> inputs = random_inputs(s, rng, -2.0f, 2.0f);
    const std::vector<float> x = as_floats(inputs[0]), b = as_floats(inputs[1]), c = as_floats(inputs[2]),
                             d = as_floats(inputs[3]);
    const std::vector<Tensor> out = s.run(inputs);
    ASSERT_EQ(out[0].shape(), (Shape{3, 70001}));
    const std::vector<float> y = as_floats(out[0]);
    const double tol = elem == kFloat ? 2e-6 : 3e-4;
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t k = 0; k < 70001; ++k) {
        const size_t i = size_t(r * 70001 + k);
        const double ref =
            0.5 * std::tanh((double(x[i]) + b[size_t(k)]) * (double(c[size_t(r)]) * d[size_t(r)]) + x[i]);
        ASSERT_NEAR(y[i], ref, tol) << "row " << r << " column " << k;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The program IR

namespace {

using fused::Instr;
using fused::Op;
using fused::Operand;
using fused::Program;

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

void expect_same_program(const Program& a, const Program& b) {
  ASSERT_EQ(a.num_inputs, b.num_inputs);
  ASSERT_EQ(a.instrs.size(), b.instrs.size());
  for (size_t i = 0; i < a.instrs.size(); ++i) {
    const Instr &x = a.instrs[i], &y = b.instrs[i];
    EXPECT_EQ(x.op, y.op) << i;
    const int n = fused::arity(x.op);
    for (int k = 0; k < n; ++k) {
      const Operand &u = k ? x.b : x.a, &v = k ? y.b : y.a;
      EXPECT_EQ(u.kind, v.kind) << i << "/" << k;
      if (u.kind == Operand::Kind::Const) {
        EXPECT_TRUE(same_bits(u.value, v.value)) << i << "/" << k << ": " << u.value << " vs " << v.value;
      } else {
        EXPECT_EQ(u.index, v.index) << i << "/" << k;
      }
    }
  }
}

// parse() must throw ingot::Error with `word` in the message.
void expect_parse_error(const std::string& text, int num_inputs, const std::string& word) {
  try {
    Program::parse(text, num_inputs);
    ADD_FAILURE() << "'" << text.substr(0, 80) << "' parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos)
        << "'" << text.substr(0, 80) << "': message '" << e.what() << "' lacks '" << word << "'";
  }
}

}  // namespace

TEST(FusedProgram, TextRoundTripsExactly) {
  Program p;
  p.num_inputs = 2;
  p.instrs = {
      {Op::Div, Operand::input(0), Operand::constant(1.41421354f)},
      {Op::Add, Operand::temp(0), Operand::constant(-0.0f)},
      {Op::Mul, Operand::temp(1), Operand::constant(1e-30f)},
      {Op::Min, Operand::temp(2), Operand::constant(3.4e38f)},
      {Op::Max, Operand::input(1), Operand::temp(3)},
      {Op::LeakyRelu, Operand::temp(4), Operand::constant(0.01f)},
      {Op::Erf, Operand::temp(5), {}},
      {Op::Pow, Operand::constant(0.1f), Operand::temp(6)},
      {Op::Max, Operand::temp(7), Operand::constant(-std::numeric_limits<float>::infinity())},
      {Op::Sub, Operand::temp(8), Operand::constant(std::numeric_limits<float>::denorm_min())},
  };
  const std::string text = p.str();
  const Program q = Program::parse(text, 2);
  expect_same_program(p, q);
  EXPECT_EQ(q.str(), text);
  EXPECT_EQ(q.digest(), p.digest());
  EXPECT_TRUE(std::signbit(q.instrs[1].b.value));  // -0 stays -0
  Program r = p;
  r.instrs[1].b.value = 0.0f;
  EXPECT_NE(r.str(), text);  // the text tells the sign of a zero apart
  // The digest keys generated kernels by structure(): the constants are not part of it (the kernel
  // reads them as arguments), the ops, operands and the input count are.
  EXPECT_EQ(r.structure(), p.structure());
  EXPECT_EQ(r.digest(), p.digest());
  r.instrs[3].b.value = 7.0f;
  EXPECT_EQ(r.digest(), p.digest());
  EXPECT_EQ(p.structure().find("1.41421354"), std::string::npos) << p.structure();
  EXPECT_NE(Program::parse(text, 3).digest(), p.digest());
  Program other_op = p;
  other_op.instrs[3].op = Op::Max;
  EXPECT_NE(other_op.structure(), p.structure());
  EXPECT_NE(other_op.digest(), p.digest());
  Program other_operand = p;
  other_operand.instrs[4].a = Operand::input(0);
  EXPECT_NE(other_operand.digest(), p.digest());
  Program immediate_vs_input = p;
  immediate_vs_input.instrs[0].b = Operand::input(1);
  EXPECT_NE(immediate_vs_input.digest(), p.digest());
  // The documented form reads back as itself, and spacing does not matter.
  const std::string gelu = "Div(x0, 1.41421354); Erf(t0); Add(t1, 1); Mul(x0, t2); Mul(t3, 0.5)";
  EXPECT_EQ(Program::parse(gelu, 1).str(), gelu);
  EXPECT_EQ(Program::parse("Div( x0 ,1.41421354 );Erf(t0);  Add(t1,1) ;Mul(x0,t2);Mul(t3, 0.5)", 1).str(), gelu);
}

TEST(FusedProgram, RandomImmediatesRoundTripBitExactly) {
  std::mt19937 rng(43);
  std::uniform_int_distribution<uint32_t> bits;
  for (int trial = 0; trial < 200; ++trial) {
    Program p;
    p.num_inputs = 1;
    p.instrs.push_back({Op::Neg, Operand::input(0), {}});
    for (int i = 0; i < 8; ++i) {
      float v;
      do v = std::bit_cast<float>(bits(rng));
      while (!std::isfinite(v));
      p.instrs.push_back({Op::Add, Operand::temp(int(p.instrs.size()) - 1), Operand::constant(v)});
    }
    const Program q = Program::parse(p.str(), 1);
    expect_same_program(p, q);
    ASSERT_EQ(q.digest(), p.digest());
  }
}

TEST(FusedProgram, ParseErrorsNameTheProblem) {
  expect_parse_error("Foo(x0)", 1, "unknown op");
  expect_parse_error("Neg(x0); Gelu(t0)", 1, "instruction 1");
  expect_parse_error("Add(x0)", 1, "operand");
  expect_parse_error("Neg(x0, x0)", 1, "operand");
  expect_parse_error("Neg(t0)", 1, "earlier");
  expect_parse_error("Neg(x0); Add(t0, t1)", 1, "earlier");
  expect_parse_error("Add(x0, x1)", 1, "x1");
  expect_parse_error("Add(x0, x1)", 1, "inputs");
  expect_parse_error("", 1, "no instructions");
  expect_parse_error("Neg(x0", 1, "expected");
  expect_parse_error("Add(x0, abc)", 1, "bad operand");
  expect_parse_error("Neg(x0)", 0, "inputs");
  expect_parse_error("Neg(x0)", fused::kMaxInputs + 1, "inputs");
  // 32 instructions are the limit; 33 are too many.
  std::string text = "Neg(x0)";
  for (int i = 1; i < fused::kMaxInstrs; ++i) text += fmt::format("; Neg(t{})", i - 1);
  EXPECT_EQ(Program::parse(text, 1).instrs.size(), size_t(fused::kMaxInstrs));
  text += fmt::format("; Neg(t{})", fused::kMaxInstrs - 1);
  expect_parse_error(text, 1, "more than 32");
}

// ---------------------------------------------------------------------------------------------
// The kernel on hand-built FusedElementwise nodes

namespace {

struct NodeInput {
  int elem;
  std::vector<int64_t> dims;
};

// A model with one ai.ingot.FusedElementwise node y = program(x0, x1, ...).
std::string fused_node_model(const std::string& program, const std::vector<NodeInput>& inputs,
                             const std::vector<int64_t>& out_dims, const std::string& file) {
  onnx::GraphProto g;
  g.set_name("fused_node");
  std::vector<std::string> names;
  for (size_t k = 0; k < inputs.size(); ++k) {
    names.push_back(fmt::format("x{}", k));
    *g.add_input() = info(names.back(), inputs[k].dims, inputs[k].elem);
  }
  onnx::NodeProto node = make_node("FusedElementwise", names, {"y"}, "fe");
  node.set_domain("ai.ingot");
  auto* a = node.add_attribute();
  a->set_name("program");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(program);
  *g.add_node() = node;
  *g.add_output() = info("y", out_dims, inputs[0].elem);
  onnx::ModelProto m = ingot::testing::model_with(std::move(g));
  auto* op = m.add_opset_import();
  op->set_domain("ai.ingot");
  op->set_version(1);
  return ingot::testing::save_model(m, file);
}

// The same with inputs of the given elem types, [n] each.
std::string fused_node_model(const std::string& program, const std::vector<int>& elems, int64_t n,
                             const std::string& file) {
  std::vector<NodeInput> inputs;
  for (int e : elems) inputs.push_back({e, {n}});
  return fused_node_model(program, inputs, {n}, file);
}

}  // namespace

TEST(FusedElementwiseKernel, EveryOpMatchesFloat64Reference) {
  // x0 in [0.1, 3) (positive: Log, Sqrt, Pow's base), x1 in [-3, 3). Tolerance: one float32
  // rounding of a correctly rounded or few-ulp function (libm, fast_expf, the tanh/sigmoid built on
  // it): 2e-6 relative with a 1e-6 absolute floor.
  struct Case {
    const char* program;
    std::function<double(double, double)> ref;
  };
  const std::vector<Case> cases = {
      {"Neg(x1)", [](double, double b) { return -b; }},
      {"Abs(x1)", [](double, double b) { return std::fabs(b); }},
      {"Exp(x1)", [](double, double b) { return std::exp(b); }},
      {"Log(x0)", [](double a, double) { return std::log(a); }},
      {"Sqrt(x0)", [](double a, double) { return std::sqrt(a); }},
      {"Reciprocal(x1)", [](double, double b) { return 1.0 / b; }},
      {"Sigmoid(x1)", [](double, double b) { return 1.0 / (1.0 + std::exp(-b)); }},
      {"Tanh(x1)", [](double, double b) { return std::tanh(b); }},
      {"Relu(x1)", [](double, double b) { return std::max(b, 0.0); }},
      {"Erf(x1)", [](double, double b) { return std::erf(b); }},
      {"Floor(x1)", [](double, double b) { return std::floor(b); }},
      {"Ceil(x1)", [](double, double b) { return std::ceil(b); }},
      {"Sin(x1)", [](double, double b) { return std::sin(b); }},
      {"Cos(x1)", [](double, double b) { return std::cos(b); }},
      {"Softplus(x1)", [](double, double b) { return std::log1p(std::exp(b)); }},
      {"HardSwish(x1)", [](double, double b) { return b * std::clamp(b / 6 + 0.5, 0.0, 1.0); }},
      {"Add(x0, x1)", [](double a, double b) { return a + b; }},
      {"Sub(x0, x1)", [](double a, double b) { return a - b; }},
      {"Mul(x0, x1)", [](double a, double b) { return a * b; }},
      {"Div(x1, x0)", [](double a, double b) { return b / a; }},
      {"Pow(x0, x1)", [](double a, double b) { return std::pow(a, b); }},
      {"Max(x0, x1)", [](double a, double b) { return std::max(a, b); }},
      {"Min(x0, x1)", [](double a, double b) { return std::min(a, b); }},
      {"LeakyRelu(x1, 0.3)", [](double, double b) { return b < 0 ? 0.3 * b : b; }},
      // An immediate as the first operand, and an instruction of two immediates.
      {"Sub(0.5, x1)", [](double, double b) { return 0.5 - b; }},
      {"Div(2, x0)", [](double a, double) { return 2.0 / a; }},
      {"Pow(2, x1)", [](double, double b) { return std::pow(2.0, b); }},
      {"Neg(x0); Mul(1.5, 4)", [](double, double) { return 6.0; }},
  };
  // Every op of the IR is covered.
  std::set<std::string> covered;
  for (const Case& c : cases) {
    for (const Instr& in : Program::parse(c.program, 2).instrs) covered.insert(std::string(fused::op_name(in.op)));
  }
  int ops = 0;
#define INGOT_COUNT(name) ++ops;
  INGOT_FUSED_UNARY_OPS(INGOT_COUNT) INGOT_FUSED_BINARY_OPS(INGOT_COUNT)
#undef INGOT_COUNT
  EXPECT_EQ(int(covered.size()), ops);

  const int64_t n = 1000;
  std::mt19937 rng(47);
  std::uniform_real_distribution<float> pos(0.1f, 3.0f), any(-3.0f, 3.0f);
  std::vector<float> x0(n), x1(n);
  for (auto& v : x0) v = pos(rng);
  for (auto& v : x1) v = any(rng);
  x1[0] = 0.0f;
  x1[1] = -0.0f;
  x1[2] = -2.0f;  // an integer for Floor/Ceil
  const std::vector<Tensor> inputs = {Tensor::from_vector(x0, {n}), Tensor::from_vector(x1, {n})};
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(cases[c].program);
    if (std::string(cases[c].program).rfind("Reciprocal", 0) == 0) continue;  // below, away from 0
    Session s = Session::load(fused_node_model(cases[c].program, {kFloat, kFloat}, n, fmt::format("fek_{}.onnx", c)));
    const std::vector<float> y = s.run(inputs)[0].to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      const double ref = cases[c].ref(x0[size_t(i)], x1[size_t(i)]);
      ASSERT_NEAR(y[size_t(i)], ref, 1e-6 + 2e-6 * std::fabs(ref)) << "x0 " << x0[size_t(i)] << " x1 " << x1[size_t(i)];
    }
  }
  // Reciprocal on x0 (away from 0).
  Session s = Session::load(fused_node_model("Reciprocal(x0)", {kFloat}, n, "fek_recip.onnx"));
  const std::vector<float> y = s.run({inputs[0]})[0].to_vector<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[size_t(i)], 1.0 / x0[size_t(i)], 2e-6 / x0[size_t(i)]);
}

TEST(FusedElementwiseKernel, MaxMinPropagateNaNFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{nan, 1.0f, 2.0f}, b{1.0f, nan, 0.5f};
  const std::vector<Tensor> in = {Tensor::from_vector(a, {3}), Tensor::from_vector(b, {3})};
  for (const char* program : {"Max(x0, x1)", "Min(x0, x1)"}) {
    SCOPED_TRACE(program);
    Session s = Session::load(fused_node_model(program, {kFloat, kFloat}, 3, "fek_nan.onnx"));
    const std::vector<float> y = s.run(in)[0].to_vector<float>();
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_TRUE(std::isnan(y[1]));
    EXPECT_EQ(y[2], program[1] == 'a' ? 2.0f : 0.5f);
  }
}

TEST(FusedElementwiseKernel, BroadcastsScalarRowAndColumnInputsInEveryFloatDtype) {
  // y = (x0 [3,700] * x1 [] + x2 [3,1]) * x3 [700], with rows longer than a chunk (512) so that a
  // chunk ends inside a row. float16/bfloat16 are loaded to float32, computed there and rounded
  // once: the error is the final rounding (2^-11 resp. 2^-8 relative) plus float32 noise.
  const std::string program = "Mul(x0, x1); Add(t0, x2); Mul(t1, x3)";
  for (int elem : {kFloat, kHalf, int(onnx::TensorProto::BFLOAT16)}) {
    const DType dt = DType(elem);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const std::string path = fused_node_model(program, {{elem, {3, 700}}, {elem, {}}, {elem, {3, 1}}, {elem, {700}}},
                                              {3, 700}, fmt::format("fek_bcast_{}.onnx", elem));
    Session s = Session::load(path);
    std::mt19937 rng(61);
    const std::vector<Tensor> inputs = random_inputs(s, rng, -2.0f, 2.0f);
    const std::vector<float> x0 = as_floats(inputs[0]), x1 = as_floats(inputs[1]), x2 = as_floats(inputs[2]),
                             x3 = as_floats(inputs[3]);
    const std::vector<Tensor> out = s.run(inputs);
    ASSERT_EQ(out[0].dtype(), dt);
    ASSERT_EQ(out[0].shape(), (Shape{3, 700}));
    const std::vector<float> y = as_floats(out[0]);
    const double rel = dt == DType::Float32 ? 1e-6 : dt == DType::Float16 ? 1e-3 : 8e-3;
    for (size_t r = 0; r < 3; ++r) {
      for (size_t k = 0; k < 700; ++k) {
        const double ref = (double(x0[r * 700 + k]) * x1[0] + x2[r]) * x3[k];
        ASSERT_NEAR(y[r * 700 + k], ref, 1e-6 + rel * std::fabs(ref)) << "row " << r << " column " << k;
      }
    }
  }
  // Empty tensors: an empty output, no error.
  Session empty = Session::load(fused_node_model("Exp(x0); Add(t0, x1)", {{kFloat, {0, 3}}, {kFloat, {3}}}, {0, 3},
                                                 "fek_empty.onnx"));
  const std::vector<Tensor> out = empty.run({Tensor::empty(DType::Float32, {0, 3}),
                                             Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})});
  EXPECT_EQ(out[0].shape(), (Shape{0, 3}));
}

TEST(FusedElementwiseKernel, RejectsMismatchedInputDtypes) {
  const std::string path = fused_node_model("Add(x0, x1)", {kFloat, kHalf}, 4, "fek_dtypes.onnx");
  SessionOptions options;
  options.optimize = false;
  const std::vector<Tensor> in = {Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}),
                                  Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}).cast(DType::Float16)};
  try {
    Session s = Session::load(path, options);
    s.run(in);
    ADD_FAILURE() << "float32 + float16 inputs ran";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("input 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
  }
  // The same node with matching dtypes runs: a positive control for the model above.
  Session ok = Session::load(fused_node_model("Add(x0, x1)", {kFloat, kFloat}, 4, "fek_dtypes_ok.onnx"), options);
  EXPECT_EQ(ok.run({in[0], in[0]})[0].to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
}

TEST(FusedElementwiseKernel, RejectsABadProgram) {
  const std::string path = fused_node_model("Add(x0, x2)", {kFloat, kFloat}, 4, "fek_badprog.onnx");
  const Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  try {
    Session s = Session::load(path);
    s.run({t, t});
    ADD_FAILURE() << "a program reading x2 of 2 inputs ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x2"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Reduced precision

namespace {

DType dtype_in(const Graph& g, const std::string& name) {
  if (auto it = g.initializers.find(name); it != g.initializers.end()) return it->second.dtype();
  const ValueInfo* vi = g.find_value_info(name);
  return vi ? vi->type.dtype : DType::Undefined;
}

// x [4,16], x2 [4,16]: y = GELU(MatMul(x, w1)) * x2; z = Exp(MatMul(x, w2)) * 0.5 + 1.
onnx::ModelProto precision_model() {
  std::mt19937 rng(53);
  onnx::GraphProto g;
  g.set_name("fused_precision");
  *g.add_input() = info("x", {4, 16});
  *g.add_input() = info("x2", {4, 16});
  add_random_initializer(g, "w1", {16, 16}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "w2", {16, 16}, rng, -0.5f, 0.5f);
  add_scalar(g, "sqrt2", 1.4142135f);
  add_scalar(g, "one", 1.0f);
  add_scalar(g, "half", 0.5f);
  *g.add_node() = make_node("MatMul", {"x", "w1"}, {"h"});
  *g.add_node() = make_node("Div", {"h", "sqrt2"}, {"d"});
  *g.add_node() = make_node("Erf", {"d"}, {"e"});
  *g.add_node() = make_node("Add", {"e", "one"}, {"a"});
  *g.add_node() = make_node("Mul", {"h", "a"}, {"m"});
  *g.add_node() = make_node("Mul", {"m", "half"}, {"gelu"});
  *g.add_node() = make_node("Mul", {"gelu", "x2"}, {"y"});
  *g.add_node() = make_node("MatMul", {"x", "w2"}, {"k"});
  *g.add_node() = make_node("Exp", {"k"}, {"ek"});
  *g.add_node() = make_node("Mul", {"ek", "half"}, {"ekh"});
  *g.add_node() = make_node("Add", {"ekh", "one"}, {"z"});
  *g.add_output() = info("y", {4, 16});
  *g.add_output() = info("z", {4, 16});
  return ingot::testing::model_with(std::move(g));
}

}  // namespace

TEST(FuseElementwise, HalfPrecisionKeepsExpChainsInFloat32) {
  const std::string path = ingot::testing::save_model(precision_model(), "fe_precision.onnx");
  auto model = import_onnx(path);
  compile(*model, {});  // as Session::load does, before the conversion
  ASSERT_EQ(fused_nodes(*model->graph).size(), 2u);
  ASSERT_TRUE(to_half_precision(*model, DType::Float16));
  verify(*model);
  const Graph& g = *model->graph;
  const Node* gelu = producer_of(g, "y");
  const Node* exp = producer_of(g, "z");
  ASSERT_NE(gelu, nullptr);
  ASSERT_NE(exp, nullptr);
  // Graph outputs computed in half get a Cast back to float32: look through it.
  if (gelu->op_type == "Cast") gelu = producer_of(g, gelu->inputs[0]);
  if (exp->op_type == "Cast") exp = producer_of(g, exp->inputs[0]);
  ASSERT_EQ(gelu->op_type, "FusedElementwise");
  ASSERT_EQ(exp->op_type, "FusedElementwise");
  // The GELU chain (no Exp/Log/Pow) follows its half input, and every input is converted to it.
  for (const auto& in : gelu->inputs) EXPECT_EQ(dtype_in(g, in), DType::Float16) << in;
  EXPECT_EQ(dtype_in(g, gelu->outputs[0]), DType::Float16);
  // The Exp chain stays float32 although the MatMul feeding it runs in half.
  for (const auto& in : exp->inputs) EXPECT_EQ(dtype_in(g, in), DType::Float32) << in;
  EXPECT_EQ(dtype_in(g, exp->outputs[0]), DType::Float32);
  // And fp16/bf16 sessions compute what the float32 one does within precision_test.cpp's
  // tolerances (fp16: atol 1e-2 + rtol 1e-2; bf16: atol 5e-2 + rtol 5e-2).
  for (auto [precision, tol] : {std::pair{Precision::FP16, 1e-2f}, std::pair{Precision::BF16, 5e-2f}}) {
    SCOPED_TRACE(precision == Precision::FP16 ? "fp16" : "bf16");
    SessionOptions half_options;
    half_options.precision = precision;
    Session full = Session::load(path), half = Session::load(path, half_options);
    std::mt19937 rng(59);
    const std::vector<Tensor> inputs = random_inputs(full, rng, -1.0f, 1.0f);
    const std::vector<Tensor> a = full.run(inputs), b = half.run(inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) {
      ASSERT_EQ(b[o].dtype(), DType::Float32);
      const std::vector<float> av = a[o].to_vector<float>(), bv = b[o].to_vector<float>();
      for (size_t i = 0; i < av.size(); ++i) ASSERT_NEAR(bv[i], av[i], tol + tol * std::fabs(av[i])) << o << " " << i;
    }
  }
}
