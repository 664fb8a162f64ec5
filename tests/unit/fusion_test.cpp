// The fuse_conv_add_relu pass: which patterns it rewrites (and which it must leave alone), and that a
// session with the pass (optimize=true) computes what the unfused graph computes.
#include <gtest/gtest.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <random>

#include "compiler/compile.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "test_util.h"

using namespace ingot;

using ingot::testing::make_node;

namespace {

onnx::ValueInfoProto float_info(const std::string& name, const std::vector<int64_t>& dims) {
  return ingot::testing::static_tensor_info(name, onnx::TensorProto::FLOAT, dims);
}

std::string save(const onnx::ModelProto& m, const std::string& file) { return ingot::testing::save_model(m, file); }

using ingot::testing::add_random_initializer;

void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// How the test graph continues after the Conv.
enum Tail { kAddRelu, kRelu, kAdd, kAddResidualFirst, kAddHardSwish };

struct ConvCase {
  int64_t channels = 4, out_channels = 8, kernel = 3, group = 1, size = 9, stride = 1;
  bool bias = true;
  Tail tail = kAddRelu;
  std::vector<int64_t> residual_dims;   // empty: the conv output's shape
  bool conv_out_is_output = false;      // also expose the Conv's output
  bool conv_out_second_reader = false;  // a Neg node also reads the Conv's output
};

// Inputs x [1,C,S,S] and (when there is an Add) r; outputs y (and extra ones the case asks for).
onnx::ModelProto conv_model(const ConvCase& c) {
  std::mt19937 rng(7);
  onnx::GraphProto g;
  g.set_name("conv_tail");
  const int64_t pad = c.kernel / 2, out = (c.size + 2 * pad - c.kernel) / c.stride + 1;
  const std::vector<int64_t> y_dims{1, c.out_channels, out, out};
  *g.add_input() = float_info("x", {1, c.channels, c.size, c.size});
  const bool has_add = c.tail != kRelu;
  if (has_add) *g.add_input() = float_info("r", c.residual_dims.empty() ? y_dims : c.residual_dims);
  add_random_initializer(g, "w", {c.out_channels, c.channels / c.group, c.kernel, c.kernel}, rng);
  std::vector<std::string> conv_inputs{"x", "w"};
  if (c.bias) {
    add_random_initializer(g, "b", {c.out_channels}, rng);
    conv_inputs.push_back("b");
  }
  onnx::NodeProto conv = make_node("Conv", conv_inputs, {"c"});
  set_ints(conv, "kernel_shape", {c.kernel, c.kernel});
  set_ints(conv, "pads", {pad, pad, pad, pad});
  set_ints(conv, "strides", {c.stride, c.stride});
  set_int(conv, "group", c.group);
  *g.add_node() = conv;
  std::string last = "c";
  if (has_add) {
    *g.add_node() = make_node(
        "Add", c.tail == kAddResidualFirst ? std::vector<std::string>{"r", "c"} : std::vector<std::string>{"c", "r"},
        {"s"});
    last = "s";
  }
  if (c.tail == kAddRelu || c.tail == kRelu) {
    *g.add_node() = make_node("Relu", {last}, {"y"});
  } else if (c.tail == kAddHardSwish) {
    *g.add_node() = make_node("HardSwish", {last}, {"y"});
  } else {
    *g.add_node() = make_node("Identity", {last}, {"y"});
  }
  *g.add_output() = float_info("y", {});
  g.mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  if (c.conv_out_is_output) *g.add_output() = float_info("c", y_dims);
  if (c.conv_out_second_reader) {
    *g.add_node() = make_node("Neg", {"c"}, {"n"});
    *g.add_output() = float_info("n", y_dims);
  }
  return ingot::testing::model_with(std::move(g));
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

std::vector<std::string> rewritten_ops(const ConvCase& c, const std::string& file) {
  auto model = import_onnx(save(conv_model(c), file));
  fuse_conv_add_relu(*model);
  return op_types(*model->graph);
}

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

// Runs the model with and without the passes on the same random inputs and compares every output.
void expect_fused_matches_unfused(const ConvCase& c, const std::string& file) {
  const std::string path = save(conv_model(c), file);
  SessionOptions fused_options, plain_options;
  plain_options.optimize = false;
  Session fused = Session::load(path, fused_options);
  Session plain = Session::load(path, plain_options);
  std::mt19937 rng(11);
  std::vector<Tensor> inputs;
  for (const TensorInfo& in : plain.inputs()) {
    Shape shape;
    for (const auto& d : in.dims) shape.push_back(std::stoll(d));
    inputs.push_back(random_tensor(shape, rng));
  }
  for (int run = 0; run < 2; ++run) {  // the second run reuses the cached oneDNN plan
    std::vector<Tensor> a = fused.run(inputs), b = plain.run(inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) {
      ASSERT_EQ(a[o].shape(), b[o].shape());
      std::vector<float> av = a[o].to_vector<float>(), bv = b[o].to_vector<float>();
      int64_t negatives = 0;
      for (size_t i = 0; i < av.size(); ++i) {
        ASSERT_NEAR(av[i], bv[i], 1e-5f * std::max(1.0f, std::fabs(bv[i]))) << "output " << o << " element " << i;
        negatives += bv[i] < 0;
      }
      if (c.tail == kAddRelu || c.tail == kRelu) {
        EXPECT_EQ(negatives, 0);
      } else {
        EXPECT_GT(negatives, 0);  // the random data does exercise signs
      }
    }
  }
}

}  // namespace

TEST(FuseConvAddRelu, RewritesConvAddReluIntoOneNode) {
  auto model = import_onnx(save(conv_model({}), "car.onnx"));
  EXPECT_TRUE(compile(*model, {}));
  const Graph& g = *model->graph;
  ASSERT_EQ(g.nodes.size(), 1u);
  const Node& n = g.nodes[0];
  EXPECT_EQ(n.op_type, "FusedConv");
  EXPECT_EQ(n.domain, "ai.ingot");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "w", "b", "r"}));
  EXPECT_EQ(n.outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(n.attrs.at("activation").s, "Relu");
  EXPECT_EQ(n.attrs.at("group").i, 1);
  EXPECT_EQ(model->opset("ai.ingot"), 1);
  EXPECT_FALSE(compile(*model, {}));  // nothing left to fuse
}

TEST(FuseConvAddRelu, AbsorbsHardSwish) {
  // oneDNN's post-op path (dense) and the epilogue loop (depthwise), with and without the residual.
  for (int64_t group : {1, 4}) {
    ConvCase c;
    c.tail = kAddHardSwish;
    c.group = group;
    c.out_channels = group == 1 ? 8 : 4;
    auto model = import_onnx(save(conv_model(c), "chs.onnx"));
    compile(*model, {});
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedConv"}));
    EXPECT_EQ(model->graph->nodes[0].attrs.at("activation").s, "HardSwish");
    expect_fused_matches_unfused(c, group == 1 ? "chs_dense.onnx" : "chs_dw.onnx");
  }
}

TEST(FuseConvAddRelu, RewritesPartialPatterns) {
  ConvCase relu_only;
  relu_only.tail = kRelu;
  relu_only.bias = false;
  EXPECT_EQ(rewritten_ops(relu_only, "cr.onnx"), (std::vector<std::string>{"FusedConv"}));
  ConvCase add_only;
  add_only.tail = kAddResidualFirst;
  auto model = import_onnx(save(conv_model(add_only), "ca.onnx"));
  fuse_conv_add_relu(*model);
  ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"FusedConv", "Identity"}));
  const Node& n = model->graph->nodes[0];
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "w", "b", "r"}));
  EXPECT_EQ(n.attrs.at("activation").s, "");
}

TEST(FuseConvAddRelu, LeavesSharedOrBroadcastIntermediatesAlone) {
  ConvCase exposed;
  exposed.conv_out_is_output = true;
  EXPECT_EQ(rewritten_ops(exposed, "exposed.onnx"), (std::vector<std::string>{"Conv", "Add", "Relu"}));
  ConvCase shared;
  shared.conv_out_second_reader = true;
  EXPECT_EQ(rewritten_ops(shared, "shared.onnx"), (std::vector<std::string>{"Conv", "Add", "Relu", "Neg"}));
  ConvCase broadcast;
  broadcast.residual_dims = {1, 8, 1, 1};
  EXPECT_EQ(rewritten_ops(broadcast, "broadcast.onnx"), (std::vector<std::string>{"Conv", "Add", "Relu"}));
}

TEST(FuseConvAddRelu, FusedMatchesUnfused) {
  ConvCase blocked;  // enough channels that oneDNN picks a blocked layout (sum through a reorder)
  blocked.channels = 16;
  blocked.out_channels = 32;
  expect_fused_matches_unfused(blocked, "m_blocked.onnx");
  ConvCase relu;
  relu.tail = kRelu;
  expect_fused_matches_unfused(relu, "m_relu.onnx");
  ConvCase add;
  add.tail = kAdd;
  add.bias = false;
  expect_fused_matches_unfused(add, "m_add.onnx");
  ConvCase add_first;
  add_first.tail = kAddResidualFirst;
  add_first.stride = 2;
  expect_fused_matches_unfused(add_first, "m_add_first.onnx");
  ConvCase pointwise;  // BlazeFace's pattern: 1x1 conv + residual + Relu (the GEMM path)
  pointwise.channels = 24;
  pointwise.out_channels = 24;
  pointwise.kernel = 1;
  pointwise.size = 16;
  expect_fused_matches_unfused(pointwise, "m_pointwise.onnx");
  for (int64_t k : {3, 5}) {
    for (Tail tail : {kAddRelu, kRelu, kAdd}) {
      ConvCase depthwise;  // the hand-written depthwise path
      depthwise.channels = depthwise.out_channels = depthwise.group = 8;
      depthwise.kernel = k;
      depthwise.tail = tail;
      expect_fused_matches_unfused(depthwise, "m_depthwise.onnx");
    }
  }
}
