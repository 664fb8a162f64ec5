// The graph passes of src/passes/pipeline.cpp (other than fuse_conv_add_relu: fusion_test.cpp): each
// test checks the rewrite (which nodes remain) and that a session with the passes (optimize=true)
// computes what the unoptimized graph computes on random inputs.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <ingot/ops.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>

#include "compiler/compile.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "runtime/executor.h"
#include "scoped_env.h"
#include "test_util.h"

using namespace ingot;

using ingot::testing::make_node;

namespace {

onnx::ValueInfoProto float_info(const std::string& name, const std::vector<int64_t>& dims) {
  return ingot::testing::static_tensor_info(name, onnx::TensorProto::FLOAT, dims);
}

using ingot::testing::add_int64_initializer;
using ingot::testing::add_random_initializer;
using ingot::testing::add_scalar;

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_attr(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

std::string save(onnx::GraphProto g, const std::string& file) {
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g)), file);
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

std::vector<std::string> ops_after(const std::string& path, bool (*pass)(Model&)) {
  auto model = import_onnx(path);
  pass(*model);
  verify(*model);
  return op_types(*model->graph);
}

std::vector<std::string> ops_after_pipeline(const std::string& path, DeviceType target = DeviceType::CPU) {
  auto model = import_onnx(path);
  compile(*model, {.target = target});
  verify(*model);
  return op_types(*model->graph);
}

// Runs the model with and without the passes on the same random inputs and compares every output.
void expect_optimized_matches_plain(const std::string& path, float tolerance = 1e-5f) {
  SessionOptions optimized_options, plain_options;
  plain_options.optimize = false;
  Session optimized = Session::load(path, optimized_options);
  Session plain = Session::load(path, plain_options);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Tensor> inputs;
  for (const TensorInfo& in : plain.inputs()) {
    Shape shape;
    for (const auto& d : in.dims) shape.push_back(std::stoll(d));
    std::vector<float> v(size_t(shape_numel(shape)));
    for (float& x : v) x = dist(rng);
    inputs.push_back(Tensor::from_vector(v, shape));
  }
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> a = optimized.run(inputs), b = plain.run(inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) {
      ASSERT_EQ(a[o].shape(), b[o].shape()) << "output " << o;
      std::vector<float> av = a[o].to_vector<float>(), bv = b[o].to_vector<float>();
      for (size_t i = 0; i < av.size(); ++i) {
        ASSERT_NEAR(av[i], bv[i], tolerance * std::max(1.0f, std::fabs(bv[i]))) << "output " << o << " element " << i;
      }
    }
  }
}

// x [2,3] -> Reshape(x, Shape(x)) + (c1 + c2) * c2 (+ a Constant), and a RandomUniform that must stay.
std::string constant_model() {
  std::mt19937 rng(3);
  onnx::GraphProto g;
  g.set_name("constants");
  *g.add_input() = float_info("x", {2, 3});
  add_random_initializer(g, "c1", {3}, rng);
  add_random_initializer(g, "c2", {3}, rng);
  *g.add_node() = make_node("Add", {"c1", "c2"}, {"s"});
  *g.add_node() = make_node("Mul", {"s", "c2"}, {"t"});
  onnx::NodeProto k = make_node("Constant", {}, {"k"});
  auto* value = k.add_attribute();
  value->set_name("value_float");
  value->set_type(onnx::AttributeProto::FLOAT);
  value->set_f(0.5f);
  *g.add_node() = k;
  *g.add_node() = make_node("Mul", {"t", "k"}, {"tk"});
  *g.add_node() = make_node("Shape", {"x"}, {"shape"});
  *g.add_node() = make_node("Reshape", {"x", "shape"}, {"xr"});
  *g.add_node() = make_node("Add", {"xr", "tk"}, {"y"});
  onnx::NodeProto random = make_node("RandomUniform", {}, {"noise"});
  set_ints(random, "shape", {2, 3});
  set_attr(random, "seed", 1.0f);
  *g.add_node() = random;
  *g.add_node() = make_node("Mul", {"noise", "c1"}, {"z"});
  *g.add_output() = float_info("y", {2, 3});
  *g.add_output() = float_info("z", {2, 3});
  return save(std::move(g), "constants.onnx");
}

}  // namespace

TEST(ConstantFolding, FoldsConstantSubgraphsAndStaticShapes) {
  const std::string path = constant_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(constant_folding(*model));
  verify(*model);
  EXPECT_EQ(op_types(*model->graph), (std::vector<std::string>{"Reshape", "Add", "RandomUniform", "Mul"}));
  const auto& inits = model->graph->initializers;
  ASSERT_TRUE(inits.count("shape"));
  EXPECT_EQ(inits.at("shape").to_int64_vector(), (std::vector<int64_t>{2, 3}));
  ASSERT_TRUE(inits.count("tk"));
  const std::vector<float> c1 = inits.at("c1").to_vector<float>(), c2 = inits.at("c2").to_vector<float>();
  const std::vector<float> tk = inits.at("tk").to_vector<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(tk[i], (c1[i] + c2[i]) * c2[i] * 0.5f);
  EXPECT_FALSE(constant_folding(*model));  // nothing constant left
  // The whole pipeline also drops the no-op Reshape and the initializers nothing reads any more.
  EXPECT_EQ(ops_after_pipeline(path), (std::vector<std::string>{"Add", "RandomUniform", "Mul"}));
  expect_optimized_matches_plain(path);
}

TEST(DeadCode, RemovesUnreadNodesAndInitializers) {
  std::mt19937 rng(5);
  onnx::GraphProto g;
  g.set_name("dead");
  *g.add_input() = float_info("x", {4});
  add_random_initializer(g, "unused", {4}, rng);
  add_random_initializer(g, "w", {4}, rng);
  *g.add_node() = make_node("Neg", {"x"}, {"a"});
  *g.add_node() = make_node("Exp", {"a"}, {"b"});  // a chain nobody reads
  *g.add_node() = make_node("Mul", {"x", "w"}, {"y"});
  *g.add_output() = float_info("y", {4});
  const std::string path = save(std::move(g), "dead.onnx");
  auto model = import_onnx(path);
  EXPECT_TRUE(dead_code(*model));
  verify(*model);
  EXPECT_EQ(op_types(*model->graph), (std::vector<std::string>{"Mul"}));
  EXPECT_FALSE(model->graph->initializers.count("unused"));
  EXPECT_TRUE(model->graph->initializers.count("w"));
  EXPECT_FALSE(dead_code(*model));
  expect_optimized_matches_plain(path);
}

TEST(RemoveIdentity, RemovesPassThroughNodesAndKeepsOutputNames) {
  onnx::GraphProto g;
  g.set_name("identities");
  *g.add_input() = float_info("x", {2, 3});
  add_int64_initializer(g, "same_shape", {2, 3});
  *g.add_node() = make_node("Identity", {"x"}, {"a"});
  *g.add_node() = make_node("Relu", {"a"}, {"b"});
  *g.add_node() = make_node("Dropout", {"b"}, {"c"});
  onnx::NodeProto cast = make_node("Cast", {"c"}, {"d"});
  set_attr(cast, "to", int64_t(onnx::TensorProto::FLOAT));
  *g.add_node() = cast;
  *g.add_node() = make_node("Reshape", {"d", "same_shape"}, {"e"});
  *g.add_node() = make_node("Identity", {"e"}, {"y"});
  *g.add_node() = make_node("Identity", {"x"}, {"passthrough"});  // input -> output: must stay
  *g.add_output() = float_info("y", {2, 3});
  *g.add_output() = float_info("passthrough", {2, 3});
  const std::string path = save(std::move(g), "identities.onnx");
  auto model = import_onnx(path);
  EXPECT_TRUE(remove_identity(*model));
  verify(*model);
  ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"Relu", "Identity"}));
  EXPECT_EQ(model->graph->nodes[0].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(model->graph->nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_FALSE(remove_identity(*model));
  expect_optimized_matches_plain(path);
}

TEST(RemoveIdentity, KeepsRealCastsAndReshapes) {
  onnx::GraphProto g;
  g.set_name("real");
  *g.add_input() = float_info("x", {2, 3});
  add_int64_initializer(g, "flat", {6});
  onnx::NodeProto cast = make_node("Cast", {"x"}, {"h"});
  set_attr(cast, "to", int64_t(onnx::TensorProto::FLOAT16));
  *g.add_node() = cast;
  onnx::NodeProto back = make_node("Cast", {"h"}, {"f"});
  set_attr(back, "to", int64_t(onnx::TensorProto::FLOAT));
  *g.add_node() = back;
  *g.add_node() = make_node("Reshape", {"f", "flat"}, {"y"});
  *g.add_output() = float_info("y", {6});
  const std::string path = save(std::move(g), "real_casts.onnx");
  EXPECT_EQ(ops_after(path, remove_identity), (std::vector<std::string>{"Cast", "Cast", "Reshape"}));
}

namespace {

// x [1,3,8,8] -> Conv(w, b?) -> BatchNormalization -> Relu -> y
std::string conv_bn_model(bool bias, bool conv_output_exposed = false) {
  std::mt19937 rng(9);
  onnx::GraphProto g;
  g.set_name("conv_bn");
  *g.add_input() = float_info("x", {1, 3, 8, 8});
  add_random_initializer(g, "w", {4, 3, 3, 3}, rng);
  std::vector<std::string> conv_in{"x", "w"};
  if (bias) {
    add_random_initializer(g, "b", {4}, rng);
    conv_in.push_back("b");
  }
  add_random_initializer(g, "scale", {4}, rng, 0.5f, 2.0f);
  add_random_initializer(g, "shift", {4}, rng);
  add_random_initializer(g, "mean", {4}, rng);
  add_random_initializer(g, "var", {4}, rng, 0.1f, 3.0f);
  onnx::NodeProto conv = make_node("Conv", conv_in, {"c"});
  set_ints(conv, "kernel_shape", {3, 3});
  set_ints(conv, "pads", {1, 1, 1, 1});
  *g.add_node() = conv;
  onnx::NodeProto bn = make_node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"});
  set_attr(bn, "epsilon", 1e-3f);
  *g.add_node() = bn;
  *g.add_node() = make_node("Relu", {"n"}, {"y"});
  *g.add_output() = float_info("y", {1, 4, 8, 8});
  if (conv_output_exposed) *g.add_output() = float_info("c", {1, 4, 8, 8});
  return save(std::move(g), bias ? "conv_bn_bias.onnx" : "conv_bn.onnx");
}

}  // namespace

TEST(FoldBatchNorm, FoldsIntoConvWeightsAndBias) {
  for (bool bias : {true, false}) {
    const std::string path = conv_bn_model(bias);
    auto model = import_onnx(path);
    EXPECT_TRUE(fold_batchnorm(*model));
    verify(*model);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"Conv", "Relu"}));
    const Node& conv = model->graph->nodes[0];
    ASSERT_EQ(conv.inputs.size(), 3u);
    EXPECT_NE(conv.inputs[1], "w");  // new weights: the originals may be shared
    EXPECT_EQ(conv.outputs, (std::vector<std::string>{"n"}));
    // With the fusion after it the whole chain is one FusedConv, and the old weights are gone.
    auto full = import_onnx(path);
    compile(*full, {});
    EXPECT_EQ(op_types(*full->graph), (std::vector<std::string>{"FusedConv"}));
    EXPECT_FALSE(full->graph->initializers.count("w"));
    EXPECT_FALSE(full->graph->initializers.count("mean"));
    expect_optimized_matches_plain(path, 1e-4f);
  }
}

// x [1,4,5,6] -> ConvTranspose(w [4, 3, 2, 2], group 2: 6 output channels, stride 2, b?) -> [Add(c
// [1,6,1,1]) ->] BatchNormalization -> Relu -> y [1,6,10,12] (PP-OCR det's upsampling head writes its
// bias as an Add).
std::string conv_transpose_bn_model(bool bias, bool add) {
  std::mt19937 rng(bias * 2 + add + 20);
  onnx::GraphProto g;
  g.set_name("conv_transpose_bn");
  *g.add_input() = float_info("x", {1, 4, 5, 6});
  add_random_initializer(g, "w", {4, 3, 2, 2}, rng);
  std::vector<std::string> in{"x", "w"};
  if (bias) {
    add_random_initializer(g, "b", {6}, rng);
    in.push_back("b");
  }
  add_random_initializer(g, "scale", {6}, rng, 0.5f, 2.0f);
  add_random_initializer(g, "shift", {6}, rng);
  add_random_initializer(g, "mean", {6}, rng);
  add_random_initializer(g, "var", {6}, rng, 0.1f, 3.0f);
  onnx::NodeProto ct = make_node("ConvTranspose", in, {"t"});
  set_ints(ct, "kernel_shape", {2, 2});
  set_ints(ct, "strides", {2, 2});
  auto* group = ct.add_attribute();
  group->set_name("group");
  group->set_type(onnx::AttributeProto::INT);
  group->set_i(2);
  *g.add_node() = ct;
  std::string bn_in = "t";
  if (add) {
    add_random_initializer(g, "c", {1, 6, 1, 1}, rng);
    *g.add_node() = make_node("Add", {"t", "c"}, {"a"});
    bn_in = "a";
  }
  onnx::NodeProto bn = make_node("BatchNormalization", {bn_in, "scale", "shift", "mean", "var"}, {"n"});
  set_attr(bn, "epsilon", 1e-3f);
  *g.add_node() = bn;
  *g.add_node() = make_node("Relu", {"n"}, {"y"});
  *g.add_output() = float_info("y", {1, 6, 10, 12});
  return save(std::move(g), fmt::format("conv_transpose_bn_{}_{}.onnx", int(bias), int(add)));
}

TEST(FoldBatchNorm, FoldsIntoConvTransposeWeightsAndBias) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "no bias");
    const std::string path = conv_transpose_bn_model(bias, false);
    auto model = import_onnx(path);
    EXPECT_TRUE(fold_batchnorm(*model));
    verify(*model);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"ConvTranspose", "Relu"}));
    EXPECT_EQ(model->graph->nodes[0].outputs, (std::vector<std::string>{"n"}));
    expect_optimized_matches_plain(path, 1e-5f);
  }
}

TEST(FoldScaleShift, FoldsBiasAddAndBatchNormIntoConvTranspose) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "no bias");
    const std::string path = conv_transpose_bn_model(bias, true);
    auto model = import_onnx(path);
    EXPECT_FALSE(fold_batchnorm(*model)) << "the Add stands between them";
    EXPECT_TRUE(fold_scale_shift(*model));
    verify(*model);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"ConvTranspose", "Relu"}));
    EXPECT_EQ(model->graph->nodes[0].outputs, (std::vector<std::string>{"n"}));
    expect_optimized_matches_plain(path, 1e-5f);
  }
}

// x[3,5] -> Gemm(x, W, [C], alpha 0.7, beta 0.5, transB) -> BatchNormalization -> y[3,4].
std::string gemm_bn_model(bool trans_b, bool with_c) {
  std::mt19937 rng(trans_b * 2 + with_c);
  onnx::GraphProto g;
  g.set_name("gemm_bn");
  *g.add_input() = float_info("x", {3, 5});
  add_random_initializer(g, "w", trans_b ? std::vector<int64_t>{4, 5} : std::vector<int64_t>{5, 4}, rng);
  std::vector<std::string> in{"x", "w"};
  if (with_c) {
    add_random_initializer(g, "c", {4}, rng);
    in.push_back("c");
  }
  add_random_initializer(g, "scale", {4}, rng, 0.5f, 2.0f);
  add_random_initializer(g, "shift", {4}, rng);
  add_random_initializer(g, "mean", {4}, rng);
  add_random_initializer(g, "var", {4}, rng, 0.1f, 3.0f);
  onnx::NodeProto gemm = make_node("Gemm", in, {"m"});
  set_attr(gemm, "alpha", 0.7f);
  set_attr(gemm, "beta", 0.5f);
  if (trans_b) {
    auto* a = gemm.add_attribute();
    a->set_name("transB");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(1);
  }
  *g.add_node() = gemm;
  *g.add_node() = make_node("BatchNormalization", {"m", "scale", "shift", "mean", "var"}, {"y"});
  *g.add_output() = float_info("y", {3, 4});
  return save(std::move(g), fmt::format("gemm_bn_{}_{}.onnx", int(trans_b), int(with_c)));
}

TEST(FoldBatchNorm, FoldsIntoGemmWeightsAndC) {
  for (bool trans_b : {true, false}) {
    for (bool with_c : {true, false}) {
      SCOPED_TRACE(fmt::format("transB {} C {}", trans_b, with_c));
      const std::string path = gemm_bn_model(trans_b, with_c);
      auto model = import_onnx(path);
      EXPECT_TRUE(fold_batchnorm(*model));
      verify(*model);
      ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"Gemm"}));
      EXPECT_EQ(model->graph->nodes[0].attrs.at("beta").f, 1.0f);
      expect_optimized_matches_plain(path, 1e-5f);
    }
  }
}

// x[2,5,16] -> layer normalization over the last axis, written out as PP-OCR rec's exporter does.
std::string layer_norm_model(int opset, bool bias) {
  std::mt19937 rng(opset);
  onnx::GraphProto g;
  g.set_name("ln");
  *g.add_input() = float_info("x", {2, 5, 16});
  add_random_initializer(g, "gamma", {16}, rng, 0.5f, 2.0f);
  add_random_initializer(g, "beta", {16}, rng);
  add_scalar(g, "two", 2.0f);
  add_scalar(g, "eps", 1e-5f);
  onnx::NodeProto m1 = make_node("ReduceMean", {"x"}, {"m1"});
  set_ints(m1, "axes", {-1});
  *g.add_node() = m1;
  *g.add_node() = make_node("Sub", {"x", "m1"}, {"d"});
  *g.add_node() = make_node("Pow", {"d", "two"}, {"p"});
  onnx::NodeProto m2 = make_node("ReduceMean", {"p"}, {"v"});
  set_ints(m2, "axes", {-1});
  *g.add_node() = m2;
  *g.add_node() = make_node("Add", {"v", "eps"}, {"ve"});
  *g.add_node() = make_node("Sqrt", {"ve"}, {"s"});
  *g.add_node() = make_node("Div", {"d", "s"}, {"n"});
  *g.add_node() = make_node("Mul", {"n", "gamma"}, {bias ? "ng" : "y"});
  if (bias) *g.add_node() = make_node("Add", {"ng", "beta"}, {"y"});
  *g.add_output() = float_info("y", {2, 5, 16});
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g), opset),
                                    fmt::format("ln_{}_{}.onnx", opset, int(bias)));
}

TEST(FuseLayerNorm, WrittenOutLayerNormBecomesOneNode) {
  for (int opset : {11, 17}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(fmt::format("opset {} bias {}", opset, bias));
      const std::string path = layer_norm_model(opset, bias);
      auto model = import_onnx(path);
      EXPECT_TRUE(fuse_layer_norm(*model));
      verify(*model);
      ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"LayerNormalization"}));
      const Node& ln = model->graph->nodes[0];
      EXPECT_EQ(ln.domain, opset >= 17 ? "" : "ai.ingot");  // ONNX's op exists from opset 17
      EXPECT_EQ(ln.inputs.size(), bias ? 3u : 2u);
      EXPECT_FLOAT_EQ(ln.attrs.at("epsilon").f, 1e-5f);
      expect_optimized_matches_plain(path, 1e-5f);
    }
  }
}

// x[2,8,5,5] -> x * Clip(x + 3, 0, 6) / 6 (Clip's bounds as attributes below opset 11).
std::string hard_swish_model(int opset, bool times_sixth) {
  onnx::GraphProto g;
  g.set_name("hs");
  *g.add_input() = float_info("x", {2, 8, 5, 5});
  add_scalar(g, "three", 3.0f);
  add_scalar(g, "zero", 0.0f);
  add_scalar(g, "six", 6.0f);
  add_scalar(g, "sixth", 1.0f / 6.0f);
  *g.add_node() = make_node("Add", {"three", "x"}, {"a"});
  onnx::NodeProto clip = make_node("Clip", opset < 11 ? std::vector<std::string>{"a"}
                                                      : std::vector<std::string>{"a", "zero", "six"}, {"c"});
  if (opset < 11) {
    set_attr(clip, "min", 0.0f);
    set_attr(clip, "max", 6.0f);
  }
  *g.add_node() = clip;
  *g.add_node() = make_node("Mul", {"x", "c"}, {"m"});
  *g.add_node() = times_sixth ? make_node("Mul", {"m", "sixth"}, {"y"}) : make_node("Div", {"m", "six"}, {"y"});
  *g.add_output() = float_info("y", {2, 8, 5, 5});
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g), opset),
                                    fmt::format("hs_{}_{}.onnx", opset, int(times_sixth)));
}

TEST(FuseHardSwish, WrittenOutHardSwishBecomesOneNode) {
  for (int opset : {9, 13, 14}) {
    for (bool times_sixth : {false, true}) {
      SCOPED_TRACE(fmt::format("opset {} times 1/6 {}", opset, times_sixth));
      const std::string path = hard_swish_model(opset, times_sixth);
      auto model = import_onnx(path);
      EXPECT_TRUE(fuse_hard_swish(*model));
      verify(*model);
      ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"HardSwish"}));
      EXPECT_EQ(model->graph->nodes[0].domain, opset >= 14 ? "" : "ai.ingot");
      expect_optimized_matches_plain(path, 1e-6f);
    }
  }
}

TEST(FuseHardSwish, LeavesOtherClipsAlone) {
  // Clip(x + 3, 0, 5): not hard-swish.
  onnx::GraphProto g;
  g.set_name("not_hs");
  *g.add_input() = float_info("x", {4});
  add_scalar(g, "three", 3.0f);
  add_scalar(g, "zero", 0.0f);
  add_scalar(g, "five", 5.0f);
  add_scalar(g, "six", 6.0f);
  *g.add_node() = make_node("Add", {"x", "three"}, {"a"});
  *g.add_node() = make_node("Clip", {"a", "zero", "five"}, {"c"});
  *g.add_node() = make_node("Mul", {"x", "c"}, {"m"});
  *g.add_node() = make_node("Div", {"m", "six"}, {"y"});
  *g.add_output() = float_info("y", {4});
  auto model = import_onnx(ingot::testing::save_model(ingot::testing::model_with(std::move(g), 13), "not_hs.onnx"));
  EXPECT_FALSE(fuse_hard_swish(*model));
}

// x [2,4,5] -> softmax written out over `axis`: Exp(x [- ReduceMax(x)]) / ReduceSum(.) (log-softmax:
// (x [- ReduceMax(x)]) - Log(ReduceSum(Exp(.)))), axes as
// attributes below opset 13, ReduceSum's as a constant input from 13 on (ReduceMax keeps the
// attribute until 18). Options break the pattern: the sum without keepdims, the exponentials also
// an output, the Div reversed, ReduceMax over another axis.
struct SoftmaxCase {
  int opset = 13;
  int64_t axis = -1;
  bool stable = true;
  bool sum_keepdims = true, exp_also_output = false, div_reversed = false;
  int64_t max_axis = 99;  // 99: the same as `axis`
  bool log = false;       // log-softmax: Sub(u, Log(sum)) instead of Div(e, sum)
};

std::string softmax_model(const SoftmaxCase& c, const std::string& file) {
  onnx::GraphProto g;
  g.set_name("softmax_written_out");
  *g.add_input() = float_info("x", {2, 4, 5});
  std::string in = "x";
  if (c.stable) {
    onnx::NodeProto max = make_node("ReduceMax", {"x"}, {"m"});
    set_ints(max, "axes", {c.max_axis == 99 ? c.axis : c.max_axis});
    *g.add_node() = max;
    *g.add_node() = make_node("Sub", {"x", "m"}, {"d"});
    in = "d";
  }
  *g.add_node() = make_node("Exp", {in}, {"e"});
  onnx::NodeProto sum = c.opset >= 13 ? make_node("ReduceSum", {"e", "axes"}, {"s"}) : make_node("ReduceSum", {"e"}, {"s"});
  if (c.opset >= 13) {
    add_int64_initializer(g, "axes", {c.axis});
  } else {
    set_ints(sum, "axes", {c.axis});
  }
  if (!c.sum_keepdims) set_attr(sum, "keepdims", int64_t(0));
  *g.add_node() = sum;
  if (!c.sum_keepdims) {  // s [2,4] or [2,5] etc.: unsqueeze back so the Div still broadcasts
    onnx::NodeProto un = make_node("Unsqueeze", {"s", "unsq_axes"}, {"s1"});
    add_int64_initializer(g, "unsq_axes", {c.axis});
    *g.add_node() = un;
  }
  const std::string s_name = c.sum_keepdims ? "s" : "s1";
  if (c.log) {
    *g.add_node() = make_node("Log", {s_name}, {"l"});
    *g.add_node() = make_node("Sub", {in, "l"}, {"y"});
  } else {
    *g.add_node() = c.div_reversed ? make_node("Div", {s_name, "e"}, {"y"}) : make_node("Div", {"e", s_name}, {"y"});
  }
  *g.add_output() = float_info("y", {2, 4, 5});
  if (c.exp_also_output) *g.add_output() = float_info("e", {2, 4, 5});
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g), c.opset), file);
}

TEST(FuseSoftmax, WrittenOutSoftmaxAndLogSoftmaxBecomeOneNode) {
  int i = 0;
  // Both forms; the last axis (any opset) and a middle one (opset 13: Softmax over one axis).
  for (auto [opset, axis, want_axis] : {std::tuple{11, int64_t(-1), int64_t(-1)}, std::tuple{11, int64_t(2), int64_t(-1)},
                                        std::tuple{13, int64_t(-1), int64_t(-1)}, std::tuple{13, int64_t(1), int64_t(1)},
                                        std::tuple{13, int64_t(-2), int64_t(1)}}) {
    for (auto [stable, log] : {std::pair{true, false}, std::pair{false, false}, std::pair{true, true}, std::pair{false, true}}) {
      SCOPED_TRACE(fmt::format("opset {} axis {} stable {} log {}", opset, axis, stable, log));
      SoftmaxCase c;
      c.opset = opset, c.axis = axis, c.stable = stable, c.log = log;
      const std::string path = softmax_model(c, fmt::format("softmax_{}.onnx", i++));
      auto model = import_onnx(path);
      EXPECT_TRUE(fuse_softmax(*model));
      verify(*model);
      ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{log ? "LogSoftmax" : "Softmax"}));
      const Node& n = model->graph->nodes[0];
      EXPECT_EQ(n.inputs, (std::vector<std::string>{"x"}));
      EXPECT_EQ(n.outputs, (std::vector<std::string>{"y"}));
      EXPECT_EQ(n.attrs.at("axis").i, want_axis);
      expect_optimized_matches_plain(path, 1e-6f);
    }
  }
}

TEST(FuseSoftmax, LeavesOtherPatternsAlone) {
  int i = 0;
  auto unchanged = [&](SoftmaxCase c, const char* what) {
    SCOPED_TRACE(what);
    const std::string path = softmax_model(c, fmt::format("not_softmax_{}.onnx", i++));
    auto model = import_onnx(path);
    const std::vector<std::string> before = op_types(*model->graph);
    EXPECT_FALSE(fuse_softmax(*model));
    EXPECT_EQ(op_types(*model->graph), before);
    expect_optimized_matches_plain(path, 1e-6f);
  };
  SoftmaxCase c;
  c.sum_keepdims = false;
  unchanged(c, "sum without keepdims");
  c = {};
  c.exp_also_output = true;
  unchanged(c, "exponentials also an output");
  c = {};
  c.div_reversed = true;
  unchanged(c, "sum / exponentials");
  c = {};
  c.opset = 11, c.axis = 1;
  unchanged(c, "a middle axis below opset 13");
  c.opset = 11, c.axis = 1, c.log = true;
  unchanged(c, "log-softmax over a middle axis below opset 13");
  c = {};
  c.log = true, c.exp_also_output = true;
  unchanged(c, "log-softmax with the exponentials also an output");
  // A maximum over another axis is no stabilizer: the Sub and ReduceMax stay, the rest is a
  // (plain-form) softmax of their result.
  c = {};
  c.max_axis = 1;
  const std::string path = softmax_model(c, "softmax_other_max.onnx");
  EXPECT_EQ(ops_after(path, fuse_softmax), (std::vector<std::string>{"ReduceMax", "Sub", "Softmax"}));
  expect_optimized_matches_plain(path, 1e-6f);
}

// x[1,3,8,8] -> Conv -> Mul(k) -> Add(c) -> Relu, k and c scalars ([1]) or per-channel ([1,4,1,1] / [4,1,1]).
std::string conv_scale_shift_model(bool per_channel) {
  std::mt19937 rng(per_channel);
  onnx::GraphProto g;
  g.set_name("conv_affine");
  *g.add_input() = float_info("x", {1, 3, 8, 8});
  add_random_initializer(g, "w", {4, 3, 3, 3}, rng);
  add_random_initializer(g, "b", {4}, rng);
  add_random_initializer(g, "k", per_channel ? std::vector<int64_t>{1, 4, 1, 1} : std::vector<int64_t>{1}, rng, 0.5f, 2.0f);
  add_random_initializer(g, "c", per_channel ? std::vector<int64_t>{4, 1, 1} : std::vector<int64_t>{1}, rng);
  onnx::NodeProto conv = make_node("Conv", {"x", "w", "b"}, {"y0"});
  set_ints(conv, "pads", {1, 1, 1, 1});
  *g.add_node() = conv;
  *g.add_node() = make_node("Mul", {"k", "y0"}, {"y1"});
  *g.add_node() = make_node("Add", {"y1", "c"}, {"y2"});
  *g.add_node() = make_node("Relu", {"y2"}, {"y"});
  *g.add_output() = float_info("y", {1, 4, 8, 8});
  return save(std::move(g), per_channel ? "conv_affine_c.onnx" : "conv_affine_s.onnx");
}

TEST(FoldScaleShift, FoldsConstantScaleAndShiftIntoConv) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per channel" : "scalar");
    const std::string path = conv_scale_shift_model(per_channel);
    auto model = import_onnx(path);
    EXPECT_TRUE(fold_scale_shift(*model));
    verify(*model);
    ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"Conv", "Relu"}));
    EXPECT_EQ(model->graph->nodes[0].outputs[0], "y2");
    expect_optimized_matches_plain(path, 1e-5f);
  }
}

TEST(FoldScaleShift, LeavesNonChannelConstantsAlone) {
  // A [1,1,8,1] scale varies along H, not along the channels: not foldable.
  std::mt19937 rng(5);
  onnx::GraphProto g;
  g.set_name("conv_rowscale");
  *g.add_input() = float_info("x", {1, 3, 8, 8});
  add_random_initializer(g, "w", {4, 3, 3, 3}, rng);
  add_random_initializer(g, "k", {1, 1, 8, 1}, rng);
  onnx::NodeProto conv = make_node("Conv", {"x", "w"}, {"y0"});
  set_ints(conv, "pads", {1, 1, 1, 1});
  *g.add_node() = conv;
  *g.add_node() = make_node("Mul", {"y0", "k"}, {"y"});
  *g.add_output() = float_info("y", {1, 4, 8, 8});
  auto model = import_onnx(save(std::move(g), "conv_rowscale.onnx"));
  EXPECT_FALSE(fold_scale_shift(*model));
}

// x[N,8,4] (N symbolic): y = Reshape(x, Concat(Gather(Shape(x), 0), Mul(Gather(Shape(x), 1), Gather(Shape(x), 2))))
// with the static dims also read through Cast(Shape) -> Slice; z = Slice(Shape(x), 0, 2) keeps N.
std::string symbolic_shape_model() {
  onnx::GraphProto g;
  g.set_name("symbolic_shapes");
  *g.add_input() = ingot::testing::tensor_info("x", onnx::TensorProto::FLOAT, {"N", "8", "4"});
  add_int64_initializer(g, "i0", {0});
  add_int64_initializer(g, "s1", {1});
  add_int64_initializer(g, "e3", {3});
  add_int64_initializer(g, "e2", {2});
  onnx::TensorProto one;
  one.set_name("one");
  one.set_data_type(onnx::TensorProto::INT64);
  one.add_int64_data(1);
  *g.add_initializer() = one;  // a scalar index: Gather gives a scalar
  *g.add_node() = make_node("Shape", {"x"}, {"shape"});
  *g.add_node() = make_node("Gather", {"shape", "i0"}, {"n"});    // N: symbolic, stays
  *g.add_node() = make_node("Gather", {"shape", "one"}, {"c"});   // 8: constant (a scalar)
  onnx::NodeProto cast = make_node("Cast", {"shape"}, {"shape32"});
  set_attr(cast, "to", int64_t(onnx::TensorProto::INT32));
  *g.add_node() = cast;
  *g.add_node() = make_node("Slice", {"shape32", "s1", "e3"}, {"cw32"});  // [8, 4] as int32: constant
  *g.add_node() = make_node("Slice", {"shape", "i0", "e2"}, {"nc"});      // [N, 8]: stays
  *g.add_node() = make_node("ReduceProd", {"cw32"}, {"cw_prod32"});
  onnx::NodeProto back = make_node("Cast", {"cw_prod32"}, {"cw_prod"});
  set_attr(back, "to", int64_t(onnx::TensorProto::INT64));
  *g.add_node() = back;
  *g.add_node() = make_node("Concat", {"n", "cw_prod"}, {"target"});
  set_attr(g.mutable_node(g.node_size() - 1)[0], "axis", int64_t(0));
  *g.add_node() = make_node("Reshape", {"x", "target"}, {"y"});
  *g.add_node() = make_node("Unsqueeze", {"c", "i0"}, {"c1"});
  *g.add_node() = make_node("Concat", {"nc", "c1"}, {"z"});
  set_attr(g.mutable_node(g.node_size() - 1)[0], "axis", int64_t(0));
  *g.add_output() = ingot::testing::tensor_info("y", onnx::TensorProto::FLOAT, {"N", "32"});
  *g.add_output() = ingot::testing::tensor_info("z", onnx::TensorProto::INT64, {"3"});
  return save(std::move(g), "symbolic_shapes.onnx");
}

TEST(SimplifyShapes, StaticDimsOfSymbolicShapesBecomeConstants) {
  const std::string path = symbolic_shape_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(simplify_shapes(*model));
  verify(*model);
  const Graph& g = *model->graph;
  ASSERT_TRUE(g.initializers.count("c"));
  EXPECT_EQ(g.initializers.at("c").rank(), 0);
  EXPECT_EQ(g.initializers.at("c").item_int(), 8);
  ASSERT_TRUE(g.initializers.count("cw32"));
  EXPECT_EQ(g.initializers.at("cw32").dtype(), DType::Int32);
  EXPECT_EQ(g.initializers.at("cw32").to_int64_vector(), (std::vector<int64_t>{8, 4}));
  EXPECT_FALSE(g.initializers.count("n"));   // N is symbolic
  EXPECT_FALSE(g.initializers.count("nc"));  // picks N too
  // The whole pipeline, against the unoptimized graph, at two batch sizes.
  SessionOptions plain;
  plain.optimize = false;
  Session optimized = Session::load(path), reference = Session::load(path, plain);
  for (int64_t n : {1, 3}) {
    std::vector<float> v(size_t(n * 32));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f;
    Tensor x = Tensor::from_vector(v, {n, 8, 4});
    auto a = optimized.run({x}), b = reference.run({x});
    EXPECT_EQ(a[0].shape(), (Shape{n, 32}));
    EXPECT_EQ(a[0].to_vector<float>(), b[0].to_vector<float>());
    EXPECT_EQ(a[1].to_int64_vector(), (std::vector<int64_t>{n, 8, 8}));
  }
}

TEST(FoldBatchNorm, LeavesExposedConvOutputAlone) {
  auto model = import_onnx(conv_bn_model(true, true));
  EXPECT_FALSE(fold_batchnorm(*model));
}

namespace {

// MatMul(x [2,5,8], w [8,6]) + b [6] -> Relu -> y; Gemm(x2 [4,8], w2 [6,8]^T, c [6]) -> Relu -> y2;
// MatMul(x, w) + m [5,6] (not a bias vector) -> y3; MatMul(x, w) -> Relu -> y4 (no bias).
std::string matmul_model() {
  std::mt19937 rng(13);
  onnx::GraphProto g;
  g.set_name("matmuls");
  *g.add_input() = float_info("x", {2, 5, 8});
  *g.add_input() = float_info("x2", {4, 8});
  add_random_initializer(g, "w", {8, 6}, rng);
  add_random_initializer(g, "b", {6}, rng);
  add_random_initializer(g, "w2", {6, 8}, rng);
  add_random_initializer(g, "c", {6}, rng);
  add_random_initializer(g, "m", {5, 6}, rng);
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"p"});
  *g.add_node() = make_node("Add", {"b", "p"}, {"pb"});
  *g.add_node() = make_node("Relu", {"pb"}, {"y"});
  onnx::NodeProto gemm = make_node("Gemm", {"x2", "w2", "c"}, {"q"});
  set_attr(gemm, "transB", int64_t(1));
  *g.add_node() = gemm;
  *g.add_node() = make_node("Relu", {"q"}, {"y2"});
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"r"});
  *g.add_node() = make_node("Add", {"r", "m"}, {"y3"});
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"s"});
  *g.add_node() = make_node("Relu", {"s"}, {"y4"});
  *g.add_output() = float_info("y", {2, 5, 6});
  *g.add_output() = float_info("y2", {4, 6});
  *g.add_output() = float_info("y3", {2, 5, 6});
  *g.add_output() = float_info("y4", {2, 5, 6});
  return save(std::move(g), "matmuls.onnx");
}

}  // namespace

TEST(FuseMatMulBiasAct, FusesBiasAndRelu) {
  const std::string path = matmul_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(fuse_matmul_bias_act(*model));
  verify(*model);
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedMatMul", "FusedMatMul", "MatMul", "Add", "FusedMatMul"}));
  EXPECT_EQ(g.nodes[0].domain, "ai.ingot");
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(g.nodes[0].attrs.at("activation").s, "Relu");
  EXPECT_EQ(g.nodes[1].inputs, (std::vector<std::string>{"x2", "w2", "c"}));
  EXPECT_EQ(g.nodes[1].attrs.at("transB").i, 1);
  EXPECT_EQ(g.nodes[4].inputs, (std::vector<std::string>{"x", "w", ""}));
  EXPECT_EQ(model->opset("ai.ingot"), 1);
  EXPECT_FALSE(fuse_matmul_bias_act(*model));
  expect_optimized_matches_plain(path);
}

// Residuals: MatMul(x [2,5,8], w) + b + r [2,5,6] -> Relu -> y; MatMul(x, w) + r -> y2 (no bias);
// MatMul(x, w) + b + r1 [1,5,6] -> y3 (r1 broadcasts: no residual, the Add stays).
std::string residual_matmul_model() {
  std::mt19937 rng(19);
  onnx::GraphProto g;
  g.set_name("residual_matmuls");
  *g.add_input() = float_info("x", {2, 5, 8});
  *g.add_input() = float_info("r", {2, 5, 6});
  *g.add_input() = float_info("r1", {1, 5, 6});
  add_random_initializer(g, "w", {8, 6}, rng);
  add_random_initializer(g, "b", {6}, rng);
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"p"});
  *g.add_node() = make_node("Add", {"p", "b"}, {"pb"});
  *g.add_node() = make_node("Add", {"r", "pb"}, {"pr"});
  *g.add_node() = make_node("Relu", {"pr"}, {"y"});
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"q"});
  *g.add_node() = make_node("Add", {"q", "r"}, {"y2"});
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"s"});
  *g.add_node() = make_node("Add", {"s", "b"}, {"sb"});
  *g.add_node() = make_node("Add", {"sb", "r1"}, {"y3"});
  for (const char* y : {"y", "y2", "y3"}) *g.add_output() = float_info(y, {2, 5, 6});
  return save(std::move(g), "residual_matmuls.onnx");
}

TEST(FuseMatMulBiasAct, TakesAResidualOfTheProductsShape) {
  const std::string path = residual_matmul_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(fuse_matmul_bias_act(*model));
  verify(*model);
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedMatMul", "FusedMatMul", "FusedMatMul", "Add"}));
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"x", "w", "b", "r"}));
  EXPECT_EQ(g.nodes[0].attrs.at("activation").s, "Relu");
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(g.nodes[1].inputs, (std::vector<std::string>{"x", "w", "", "r"}));
  EXPECT_EQ(g.nodes[2].inputs, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(g.nodes[3].inputs, (std::vector<std::string>{"sb", "r1"}));
  expect_optimized_matches_plain(path);
}

// Attention-style scores: batched Q [2, 3, 5, 4] times K^T [2, 3, 4, 5], then * 0.5 (or / 2) and
// + a bias row; a Div by the product (2 / p) is no scale and stays.
std::string scaled_matmul_model() {
  std::mt19937 rng(17);
  onnx::GraphProto g;
  g.set_name("scaled_matmuls");
  *g.add_input() = float_info("q", {2, 3, 5, 4});
  *g.add_input() = float_info("k", {2, 3, 4, 5});
  add_scalar(g, "half", 0.5f);
  add_scalar(g, "two", 2.0f);
  add_random_initializer(g, "b", {5}, rng);
  *g.add_node() = make_node("MatMul", {"q", "k"}, {"s"});
  *g.add_node() = make_node("Mul", {"half", "s"}, {"y"});
  *g.add_node() = make_node("MatMul", {"q", "k"}, {"t"});
  *g.add_node() = make_node("Div", {"t", "two"}, {"td"});
  *g.add_node() = make_node("Add", {"td", "b"}, {"y2"});
  *g.add_node() = make_node("MatMul", {"q", "k"}, {"u"});
  *g.add_node() = make_node("Div", {"two", "u"}, {"y3"});
  for (const char* y : {"y", "y2", "y3"}) *g.add_output() = float_info(y, {2, 3, 5, 5});
  return save(std::move(g), "scaled_matmuls.onnx");
}

TEST(FuseMatMulBiasAct, FoldsAScalarScaleIntoAlpha) {
  const std::string path = scaled_matmul_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(fuse_matmul_bias_act(*model));
  verify(*model);
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedMatMul", "FusedMatMul", "MatMul", "Div"}));
  EXPECT_EQ(g.nodes[0].attrs.at("alpha").f, 0.5f);
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(g.nodes[1].attrs.at("alpha").f, 0.5f);
  EXPECT_EQ(g.nodes[1].inputs, (std::vector<std::string>{"q", "k", "b"}));
  EXPECT_EQ(g.nodes[1].outputs, (std::vector<std::string>{"y2"}));
  // 0.5 and 1/2 are exact: the fused products equal the scaled ones up to the GEMM's rounding.
  expect_optimized_matches_plain(path);
}

// A scale after the bias, as transformers' q_proj(x) * scaling: (x w + b) * 0.125 + r -> y;
// (x w + b2) / 4 -> y2; (x w + bin) * 0.125 -> y3 with the bias an input (not known now: the Mul
// stays after a FusedMatMul of the bias).
std::string scale_after_bias_model() {
  std::mt19937 rng(23);
  onnx::GraphProto g;
  g.set_name("scale_after_bias");
  *g.add_input() = float_info("x", {2, 5, 8});
  *g.add_input() = float_info("r", {2, 5, 6});
  *g.add_input() = float_info("bin", {6});
  add_random_initializer(g, "w", {8, 6}, rng);
  add_random_initializer(g, "b", {6}, rng);
  add_random_initializer(g, "b2", {6}, rng);
  add_scalar(g, "eighth", 0.125f);
  add_scalar(g, "four", 4.0f);
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"p"});
  *g.add_node() = make_node("Add", {"p", "b"}, {"pb"});
  *g.add_node() = make_node("Mul", {"eighth", "pb"}, {"q"});
  *g.add_node() = make_node("Add", {"q", "r"}, {"y"});
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"p2"});
  *g.add_node() = make_node("Add", {"b2", "p2"}, {"pb2"});
  *g.add_node() = make_node("Div", {"pb2", "four"}, {"y2"});
  *g.add_node() = make_node("MatMul", {"x", "w"}, {"p3"});
  *g.add_node() = make_node("Add", {"p3", "bin"}, {"pb3"});
  *g.add_node() = make_node("Mul", {"pb3", "eighth"}, {"y3"});
  for (const char* y : {"y", "y2", "y3"}) *g.add_output() = float_info(y, {2, 5, 6});
  return save(std::move(g), "scale_after_bias.onnx");
}

// A transformer's projections of one x: q = (x wq + bq) * 0.125, k = x wk, v = x wv + bv, with
// `rows` rows of x. Few rows: one FusedMatMul over [wq*0.125 wk wv] and a Split; many: three products.
std::string projections_model(int64_t rows, int64_t n, const std::string& file) {
  std::mt19937 rng(29);
  onnx::GraphProto g;
  g.set_name("projections");
  *g.add_input() = float_info("x", {1, rows, 16});
  for (const char* w : {"wq", "wk", "wv"}) add_random_initializer(g, w, {16, n}, rng);
  add_random_initializer(g, "bq", {n}, rng);
  add_random_initializer(g, "bv", {n}, rng);
  add_scalar(g, "eighth", 0.125f);
  *g.add_node() = make_node("MatMul", {"x", "wq"}, {"pq"});
  *g.add_node() = make_node("Add", {"pq", "bq"}, {"bq_sum"});
  *g.add_node() = make_node("Mul", {"bq_sum", "eighth"}, {"q"});
  *g.add_node() = make_node("MatMul", {"x", "wk"}, {"k"});
  *g.add_node() = make_node("MatMul", {"x", "wv"}, {"pv"});
  *g.add_node() = make_node("Add", {"pv", "bv"}, {"v"});
  for (const char* y : {"q", "k", "v"}) *g.add_output() = float_info(y, {1, rows, n});
  return save(std::move(g), file);
}

// The merged graph a CUDA target compiles, run by the CPU's kernels, against the model as it was
// (the CPU target does not merge: Pass::cuda_only).
TEST(MergeSiblingMatMuls, SmallProjectionsOfOneInputBecomeOneProduct) {
  const std::string path = projections_model(50, 24, "projections_small.onnx");
  EXPECT_EQ(ops_after_pipeline(path, DeviceType::CUDA), (std::vector<std::string>{"FusedMatMul", "Split"}));
  auto model = import_onnx(path);
  compile(*model, {.target = DeviceType::CUDA});
  const Node& mm = model->graph->nodes.at(0);
  EXPECT_EQ(mm.attrs.at("alpha").f, 1.0f) << "0.125 folded into wq (exact), the others at 1";
  EXPECT_EQ(model->graph->initializers.at(mm.inputs.at(1)).shape(), (Shape{16, 72}));
  EXPECT_EQ(model->graph->nodes.at(1).outputs, (std::vector<std::string>{"q", "k", "v"}));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(size_t(50 * 16));
  for (float& v : x) v = dist(rng);
  const Tensor input = Tensor::from_vector(x, {1, 50, 16});
  auto run = [&](std::shared_ptr<Model> m) {
    Executor executor(std::move(m), Device::cpu());
    std::vector<Value> in{Value(input)};
    std::vector<Tensor> out;
    for (Value& v : executor.run(in).outputs) out.push_back(v.tensor);
    return out;
  };
  const std::vector<Tensor> ya = run(import_onnx(path)), yb = run(std::move(model));
  ASSERT_EQ(ya.size(), 3u);
  ASSERT_EQ(yb.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(ya[i].shape(), yb[i].shape());
    for (int64_t j = 0; j < ya[i].numel(); ++j) EXPECT_NEAR(ya[i].data<float>()[j], yb[i].data<float>()[j], 1e-5f) << i;
  }
  EXPECT_EQ(ops_after_pipeline(path), (std::vector<std::string>{"FusedMatMul", "MatMul", "FusedMatMul"}))
      << "a CPU target keeps the three products";
}

TEST(MergeSiblingMatMuls, LargeProductsStayApart) {
  // 20000 rows x 512 columns: 157 x 4 tiles of 128 x 128 each, enough to fill a GPU alone.
  const std::string path = projections_model(20000, 512, "projections_large.onnx");
  auto ops = ops_after_pipeline(path, DeviceType::CUDA);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Split"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "FusedMatMul") + std::count(ops.begin(), ops.end(), "MatMul"), 3);
}

TEST(MergeSiblingMatMuls, OnByDefaultAndOffWhenAsked) {
  const std::string path = projections_model(50, 24, "projections_default.onnx");
  auto ops = ops_after_pipeline(path, DeviceType::CUDA);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Split"), 1);
  const ingot::testing::ScopedEnv off("INGOT_MERGE_SIBLING_MATMULS", "0");
  ops = ops_after_pipeline(path, DeviceType::CUDA);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Split"), 0);
}

TEST(FuseMatMulBiasAct, FoldsAScaleAfterAConstantBias) {
  const std::string path = scale_after_bias_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(fuse_matmul_bias_act(*model));
  verify(*model);
  const Graph& g = *model->graph;
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"FusedMatMul", "FusedMatMul", "FusedMatMul", "Mul"}));
  EXPECT_EQ(g.nodes[0].attrs.at("alpha").f, 0.125f);
  EXPECT_EQ(g.nodes[0].inputs[3], "r");
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(g.nodes[1].attrs.at("alpha").f, 0.25f);
  EXPECT_EQ(g.nodes[1].outputs, (std::vector<std::string>{"y2"}));
  // The scaled biases are new initializers: b * 0.125 and b2 / 4, exactly (powers of two).
  for (auto [node, bias, factor] : {std::tuple{0, "b", 0.125f}, std::tuple{1, "b2", 0.25f}}) {
    const std::string& name = g.nodes[size_t(node)].inputs[2];
    ASSERT_NE(name, bias);
    const Tensor& scaled = g.initializers.at(name);
    const Tensor& original = g.initializers.at(bias);
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(scaled.data<float>()[i], original.data<float>()[i] * factor);
  }
  EXPECT_FALSE(g.nodes[2].attrs.count("alpha"));
  EXPECT_EQ(g.nodes[2].inputs[2], "bin");
  expect_optimized_matches_plain(path);
}

// Scores of a symbolic batch: K^T is a Transpose of an input whose shape is not static, so N is
// unknown; the scale still folds (no bias needs N).
TEST(FuseMatMulBiasAct, FoldsTheScaleOfAProductWithADynamicB) {
  onnx::GraphProto g;
  g.set_name("dynamic_scores");
  *g.add_input() = ingot::testing::tensor_info("q", onnx::TensorProto::FLOAT, {"N", "3", "5", "4"});
  *g.add_input() = ingot::testing::tensor_info("k", onnx::TensorProto::FLOAT, {"N", "3", "5", "4"});
  add_scalar(g, "scale", 0.5f);
  onnx::NodeProto t = make_node("Transpose", {"k"}, {"kt"});
  set_ints(t, "perm", {0, 1, 3, 2});
  *g.add_node() = t;
  *g.add_node() = make_node("MatMul", {"q", "kt"}, {"s"});
  *g.add_node() = make_node("Mul", {"s", "scale"}, {"y"});
  *g.add_output() = ingot::testing::tensor_info("y", onnx::TensorProto::FLOAT, {"N", "3", "5", "5"});
  auto model = import_onnx(save(std::move(g), "dynamic_scores.onnx"));
  EXPECT_TRUE(fuse_matmul_bias_act(*model));
  verify(*model);
  ASSERT_EQ(op_types(*model->graph), (std::vector<std::string>{"Transpose", "FusedMatMul"}));
  EXPECT_EQ(model->graph->nodes[1].attrs.at("alpha").f, 0.5f);
  EXPECT_EQ(model->graph->nodes[1].inputs, (std::vector<std::string>{"q", "kt", ""}));
}

// An If whose branches compute with their own constants: y = x + Unsqueeze(c, 0) * 2 in one branch
// (c a Constant node of the branch, two folds), x - 1 in the other; the branch reads x from the
// main graph, which is never folded into it.
std::string if_constants_model() {
  auto branch = [](const std::string& name, bool then) {
    onnx::GraphProto g;
    g.set_name(name);
    auto constant = [&](const std::string& out, std::vector<float> values, std::vector<int64_t> dims) {
      onnx::NodeProto c = make_node("Constant", {}, {out});
      auto* a = c.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : dims) a->mutable_t()->add_dims(d);
      for (float v : values) a->mutable_t()->add_float_data(v);
      *g.add_node() = c;
    };
    if (then) {
      constant(name + "_c", {1.f, 2.f, 3.f}, {3});
      constant(name + "_two", {2.f}, {});
      onnx::NodeProto axes = make_node("Constant", {}, {name + "_axes"});
      auto* a = axes.add_attribute();
      a->set_name("value_ints");
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(0);
      *g.add_node() = axes;
      *g.add_node() = make_node("Unsqueeze", {name + "_c", name + "_axes"}, {name + "_u"});
      *g.add_node() = make_node("Mul", {name + "_u", name + "_two"}, {name + "_m"});
      *g.add_node() = make_node("Add", {"x", name + "_m"}, {name + "_out"});
    } else {
      constant(name + "_one", {1.f}, {});
      *g.add_node() = make_node("Sub", {"x", name + "_one"}, {name + "_out"});
    }
    *g.add_output() = ingot::testing::tensor_info(name + "_out", onnx::TensorProto::FLOAT, {"2", "3"});
    return g;
  };
  onnx::GraphProto g;
  g.set_name("if_constants");
  *g.add_input() = float_info("x", {2, 3});
  *g.add_input() = ingot::testing::static_tensor_info("flag", onnx::TensorProto::BOOL, {});
  *g.add_node() = ingot::testing::make_if("flag", {"y"}, branch("then", true), branch("else", false));
  *g.add_output() = float_info("y", {2, 3});
  return save(std::move(g), "if_constants.onnx");
}

TEST(ConstantFolding, FoldsInsideSubgraphs) {
  const std::string path = if_constants_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(constant_folding(*model));
  verify(*model);
  const Node& if_node = model->graph->nodes.at(0);
  const Graph& then_g = *if_node.attrs.at("then_branch").g;
  const Graph& else_g = *if_node.attrs.at("else_branch").g;
  // then: only the Add reading the outer x is left; Unsqueeze(c) * 2 is one initializer [1, 3].
  ASSERT_EQ(op_types(then_g), (std::vector<std::string>{"Add"}));
  const Tensor& m = then_g.initializers.at("then_m");
  EXPECT_EQ(m.shape(), (Shape{1, 3}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{2.f, 4.f, 6.f}));
  ASSERT_EQ(op_types(else_g), (std::vector<std::string>{"Sub"}));
  EXPECT_FALSE(constant_folding(*model));
  // Both branches against float64 arithmetic on the same inputs.
  Session s = Session::load(path);
  const std::vector<float> x = {0.5f, -1.f, 2.f, 3.f, -4.f, 0.f};
  for (bool flag : {true, false}) {
    Tensor f = Tensor::empty(DType::Bool, {});
    f.data<bool>()[0] = flag;
    const std::vector<float> y = s.run({Tensor::from_vector(x, {2, 3}), f})[0].to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = flag ? double(x[i]) + 2.0 * double(i % 3 + 1) : double(x[i]) - 1.0;
      EXPECT_EQ(double(y[i]), want) << (flag ? "then " : "else ") << i;
    }
  }
}

TEST(Pipeline, ListsPassesAndReportsEachRun) {
  std::vector<std::string> names;  // what a CPU target runs: all but the CUDA-only passes
  for (const Pass& p : pipeline_passes()) {
    if (!p.cuda_only) names.emplace_back(p.name);
  }
  // Shape simplification feeds constant folding, which feeds everything else; the QDQ folding goes
  // before constant folding (which would turn the int8 weights into float ones); dead code goes last.
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "simplify-shapes");
  EXPECT_EQ(names[1], "fuse-qdq");
  EXPECT_EQ(names[2], "constant-folding");
  EXPECT_EQ(names.back(), "dead-code");
  // Both backends have the integer kernels: a CUDA target folds the Q/DQ pairs too.
  bool cuda_folds = false, cuda_merges = false;
  for (const CompileStep& s : compile_steps({true, DType::Float32, DeviceType::CUDA})) {
    cuda_folds |= s.name == "fuse-qdq";
    cuda_merges |= s.name == "merge-sibling-matmuls";
  }
  EXPECT_TRUE(cuda_folds);
  EXPECT_TRUE(cuda_merges) << "the CUDA-only merge runs for a CUDA target";
  auto model = import_onnx(conv_bn_model(true));
  std::vector<std::string> ran;
  bool changed = compile(*model, {}, [&](const CompileStep& s, bool, const Model&) {
    if (s.stage == "optimize") ran.emplace_back(s.name);
    return true;
  });
  EXPECT_TRUE(changed);
  EXPECT_EQ(ran, names);
}

// The one pipeline's steps for each target and precision: lowerings first, the optimization passes,
// then precision and (CUDA, optimized) layout; --no-optimize keeps the lowerings and precision.
TEST(Pipeline, StepsFollowTheOptions) {
  auto stages = [](const CompileOptions& o) {
    std::vector<std::string> out;
    for (const CompileStep& s : compile_steps(o)) {
      if (out.empty() || out.back() != s.stage) out.emplace_back(s.stage);
    }
    return out;
  };
  using V = std::vector<std::string>;
  // A CPU target's layout step moves the int8 convolutions (fuse-qdq's) to channels last.
  EXPECT_EQ(stages({}), (V{"lower", "optimize", "layout"}));
  EXPECT_EQ(stages({.optimize = false}), (V{"lower"}));
  EXPECT_EQ(stages({.compute = DType::Float16}), (V{"lower", "optimize", "precision", "layout"}));
  EXPECT_EQ(stages({.compute = DType::BFloat16, .target = DeviceType::CUDA}),
            (V{"lower", "optimize", "precision", "layout"}));
  EXPECT_EQ(stages({.optimize = false, .compute = DType::Float16, .target = DeviceType::CUDA}),
            (V{"lower", "precision"}));
  // Float32 on CUDA: the float convolutions stay channels first, the int8 ones move.
  EXPECT_EQ(stages({.target = DeviceType::CUDA}), (V{"lower", "optimize", "layout"}));
}

// The verifier runs after every step that changed the model: a step that leaves a dangling input is
// named in the error, and the steps after it do not run.
TEST(Pipeline, VerifierNamesTheStepThatBrokeTheGraph) {
  auto model = import_onnx(conv_bn_model(true));
  bool later_ran = false;
  std::vector<CompileStep> steps = {
      {"optimize", "break-an-input",
       [](Model& m) {
         m.graph->nodes.back().inputs[0] = "no_such_value";
         return true;
       }},
      {"optimize", "after", [&](Model&) { return later_ran = true; }},
  };
  try {
    run_steps(*model, steps);
    FAIL() << "the broken graph was accepted";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("after pass 'break-an-input'"), std::string::npos) << what;
    EXPECT_NE(what.find("no_such_value"), std::string::npos) << what;
  }
  EXPECT_FALSE(later_ran);
}

// ---- fuse_attention and the ai.ingot.Attention kernel ----

namespace {

// Attention as exporters write it. Default (Whisper's TorchScript export): q, k, v [B, T, H, D];
// Transpose(q, [0,2,1,3]) * 0.35, K^T = Transpose(k, [0,2,3,1]), Transpose(v, [0,2,1,3]); MatMul,
// Softmax(axis -1), MatMul: y [B, H, Tq, D].
struct AttentionCase {
  bool mask = false;         // + mask [B, 1, 1, Tk] (an input) after the scale
  bool div_scores = false;   // scores / 2 as well
  bool sdpa_scales = false;  // torch's scaled_dot_product_attention: sqrt(0.35) on Q and on K^T
  bool kt_input = false;     // K^T is an input [B, H, D, Tk] (no Transpose to compose)
  bool mqa = false;          // k, v with one head, broadcast over Q's three
  bool scores_output = false;  // the scores are also a graph output (the pattern must stay)
  bool y_transpose = false;    // y back to [B, Tq, H, D] (the heads' Transpose after the product)
  bool wide_mask = false;      // one head in q, k, v; the mask [B, 3, 1, Tk] widens the scores to 3
  int opset = 17;
  int64_t softmax_axis = -1;  // 0: attribute not set
  bool written_out_softmax = false;  // Exp(x - ReduceMax(x)) / ReduceSum(.) over the last axis
};

constexpr float kAttentionScale = 0.35f;

std::string attention_model(const AttentionCase& c, const std::string& file) {
  const int64_t b = 2, tq = 7, tk = 9, h = c.wide_mask ? 1 : 3, d = 8, kv_heads = c.mqa ? 1 : h;
  const int64_t out_heads = c.wide_mask ? 3 : h;
  onnx::GraphProto g;
  g.set_name("attention");
  *g.add_input() = float_info("q", {b, tq, h, d});
  if (c.kt_input) {
    *g.add_input() = float_info("kt", {b, kv_heads, d, tk});
  } else {
    *g.add_input() = float_info("k", {b, tk, kv_heads, d});
  }
  *g.add_input() = float_info("v", {b, tk, kv_heads, d});
  if (c.mask) *g.add_input() = float_info("mask", {b, out_heads, 1, tk});
  const float s = c.sdpa_scales ? std::sqrt(kAttentionScale) : kAttentionScale;
  add_scalar(g, "s", s);
  add_scalar(g, "two", 2.0f);
  auto transpose = [&](const std::string& in, const std::string& out, std::vector<int64_t> perm) {
    onnx::NodeProto t = make_node("Transpose", {in}, {out});
    set_ints(t, "perm", perm);
    *g.add_node() = t;
  };
  transpose("q", "qt", {0, 2, 1, 3});
  *g.add_node() = make_node("Mul", {"qt", "s"}, {"qs"});
  std::string kt = "kt";
  if (!c.kt_input) transpose("k", "kt", {0, 2, 3, 1});
  if (c.sdpa_scales) {
    *g.add_node() = make_node("Mul", {"s", kt}, {"kts"});
    kt = "kts";
  }
  *g.add_node() = make_node("MatMul", {"qs", kt}, {"scores"});
  std::string x = "scores";
  if (c.div_scores) {
    *g.add_node() = make_node("Div", {x, "two"}, {"scores_div"});
    x = "scores_div";
  }
  if (c.mask) {
    *g.add_node() = make_node("Add", {"mask", x}, {"scores_masked"});
    x = "scores_masked";
  }
  if (c.written_out_softmax) {
    for (const char* op : {"ReduceMax", "ReduceSum"}) {
      onnx::NodeProto r = make_node(op, {std::string(op) == "ReduceMax" ? x : "e"}, {op});
      set_ints(r, "axes", {-1});
      if (std::string(op) == "ReduceMax") {
        *g.add_node() = r;
        *g.add_node() = make_node("Sub", {x, "ReduceMax"}, {"d"});
        *g.add_node() = make_node("Exp", {"d"}, {"e"});
      } else {
        *g.add_node() = r;
      }
    }
    *g.add_node() = make_node("Div", {"e", "ReduceSum"}, {"p"});
  } else {
    onnx::NodeProto softmax = make_node("Softmax", {x}, {"p"});
    if (c.softmax_axis != 0) set_attr(softmax, "axis", c.softmax_axis);
    *g.add_node() = softmax;
  }
  transpose("v", "vt", {0, 2, 1, 3});
  if (c.y_transpose) {
    *g.add_node() = make_node("MatMul", {"p", "vt"}, {"yh"});
    transpose("yh", "y", {0, 2, 1, 3});
    *g.add_output() = float_info("y", {b, tq, out_heads, d});
  } else {
    *g.add_node() = make_node("MatMul", {"p", "vt"}, {"y"});
    *g.add_output() = float_info("y", {b, out_heads, tq, d});
  }
  if (c.scores_output) *g.add_output() = float_info("scores", {b, h, tq, tk});
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g), c.opset), file);
}

// The model's Attention nodes after fuse_attention (the model is verified).
std::vector<Node> fused_attention(const std::string& path) {
  auto model = import_onnx(path);
  fuse_attention(*model);
  verify(*model);
  std::vector<Node> out;
  for (const Node& n : model->graph->nodes) {
    if (n.op_type == "Attention" && n.domain == "ai.ingot") out.push_back(n);
  }
  return out;
}

}  // namespace

TEST(FuseAttention, RewritesWhisperStyleAttention) {
  const std::string path = attention_model({}, "attention_whisper.onnx");
  auto model = import_onnx(path);
  EXPECT_TRUE(fuse_attention(*model));
  verify(*model);
  const Graph& g = *model->graph;
  // One Attention reading q, k and v as [B, T, H, D]: the heads' Transposes (K^T's composed with
  // the swap of its last two axes) are its `transposed` flags.
  ASSERT_EQ(op_types(g), (std::vector<std::string>{"Attention"}));
  const Node& att = g.nodes[0];
  EXPECT_EQ(att.domain, "ai.ingot");
  EXPECT_EQ(att.inputs, (std::vector<std::string>{"q", "k", "v"}));
  EXPECT_EQ(att.outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(att.attrs.at("transposed").ints, (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_FLOAT_EQ(att.attrs.at("scale").f, kAttentionScale);
  EXPECT_EQ(model->opset("ai.ingot"), 1);
  EXPECT_FALSE(fuse_attention(*model));
  expect_optimized_matches_plain(path);
}

// A softmax written out in elementary ops (opset 11: the reductions' axes as attributes): the
// pipeline's fuse-softmax makes it a Softmax, which fuse-attention then takes.
TEST(FuseAttention, TakesAWrittenOutSoftmaxThroughThePipeline) {
  AttentionCase c;
  c.written_out_softmax = true;
  c.opset = 11;
  const std::string path = attention_model(c, "attention_written_out_softmax.onnx");
  EXPECT_EQ(ops_after(path, fuse_attention), (std::vector<std::string>{"Transpose", "Mul", "Transpose", "MatMul",
                                                                       "ReduceMax", "Sub", "Exp", "ReduceSum", "Div",
                                                                       "Transpose", "MatMul"}));
  EXPECT_EQ(ops_after_pipeline(path), (std::vector<std::string>{"Attention"}));
  expect_optimized_matches_plain(path);
}

TEST(FuseAttention, TakesTheMaskAndEveryPlacementOfTheScale) {
  AttentionCase masked;
  masked.mask = masked.div_scores = true;
  AttentionCase sdpa;
  sdpa.sdpa_scales = true;
  AttentionCase kt_input;
  kt_input.kt_input = true;
  AttentionCase mqa;
  mqa.mqa = mqa.mask = true;
  AttentionCase old_opset;  // before opset 13 Softmax coerces to 2-D at axis: the last axis is the same
  old_opset.opset = 11;
  old_opset.softmax_axis = 3;
  AttentionCase y_transpose;  // the result's Transpose too: all four operands [B, T, H, D]
  y_transpose.y_transpose = y_transpose.mask = true;
  const std::pair<AttentionCase, float> cases[] = {
      {masked, kAttentionScale / 2}, {sdpa, kAttentionScale},   {kt_input, kAttentionScale},
      {mqa, kAttentionScale},        {old_opset, kAttentionScale}, {y_transpose, kAttentionScale}};
  int i = 0;
  for (const auto& [c, scale] : cases) {
    SCOPED_TRACE(i);
    const std::string path = attention_model(c, fmt::format("attention_case{}.onnx", i++));
    std::vector<Node> fused = fused_attention(path);
    ASSERT_EQ(fused.size(), 1u);
    EXPECT_NEAR(fused[0].attrs.at("scale").f, scale, 1e-6f);
    EXPECT_EQ(fused[0].inputs.size(), c.mask ? 4u : 3u);
    if (c.mask) {
      EXPECT_EQ(fused[0].inputs[3], "mask");
    }
    if (c.kt_input) {
      EXPECT_NE(fused[0].inputs[1], "kt");  // a Transpose of it was inserted
    }
    const std::vector<int64_t> flags = {1, c.kt_input ? 0 : 1, 1, c.y_transpose ? 1 : 0};
    EXPECT_EQ(fused[0].attrs.at("transposed").ints, flags);
    expect_optimized_matches_plain(path);
  }
}

TEST(FuseAttention, LeavesOtherPatternsAlone) {
  AttentionCase old_default;  // opset 11's default axis 1 of a rank-4 input: not the last axis
  old_default.opset = 11;
  old_default.softmax_axis = 0;
  AttentionCase other_axis;
  other_axis.softmax_axis = 2;
  AttentionCase shared_scores;
  shared_scores.scores_output = true;
  AttentionCase wide_mask;  // the mask broadcasts the scores to more heads: not the op's semantics
  wide_mask.mask = wide_mask.wide_mask = true;
  int i = 0;
  for (const AttentionCase& c : {old_default, other_axis, shared_scores, wide_mask}) {
    SCOPED_TRACE(i);
    const std::string path = attention_model(c, fmt::format("attention_alone{}.onnx", i++));
    EXPECT_TRUE(fused_attention(path).empty());
    expect_optimized_matches_plain(path);
  }
}

namespace {

// Softmax(scale * Q K^T + mask) V in float64 for Q [B, Tq, D], K [B or 1, Tk, D], V [.., Tk, Dv]
// and a mask [Tq, Tk] (or none): the independent reference of the Attention kernel tests.
std::vector<double> attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                                        double scale) {
  const int64_t b = q.dim(0), tq = q.dim(1), d = q.dim(2), tk = k.dim(1), dv = v.dim(2);
  std::vector<float> qv = q.cast(DType::Float32).to_vector<float>(), kv = k.cast(DType::Float32).to_vector<float>(),
                     vv = v.cast(DType::Float32).to_vector<float>();
  std::vector<float> mv = mask ? mask->cast(DType::Float32).to_vector<float>() : std::vector<float>();
  std::vector<double> out(size_t(b * tq * dv), 0.0);
  for (int64_t n = 0; n < b; ++n) {
    const int64_t kb = k.dim(0) == 1 ? 0 : n, vb = v.dim(0) == 1 ? 0 : n;
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(static_cast<size_t>(tk));
      double best = -INFINITY, sum = 0;
      for (int64_t j = 0; j < tk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double(qv[size_t((n * tq + i) * d + c)]) * kv[size_t((kb * tk + j) * d + c)];
        s[size_t(j)] = scale * dot + (mask ? mv[size_t(i * tk + j)] : 0.0);
        best = std::max(best, s[size_t(j)]);
      }
      for (double& x : s) sum += (x = std::exp(x - best));
      for (int64_t j = 0; j < tk; ++j) {
        for (int64_t c = 0; c < dv; ++c) out[size_t((n * tq + i) * dv + c)] += s[size_t(j)] / sum * vv[size_t((vb * tk + j) * dv + c)];
      }
    }
  }
  return out;
}

Tensor uniform_tensor(DType dtype, const Shape& shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape).cast(dtype);
}

}  // namespace

TEST(AttentionKernel, MatchesAFloat64Reference) {
  std::mt19937 rng(5);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (bool masked : {false, true}) {
      for (bool shared_kv : {false, true}) {  // K and V broadcast over the batch
        SCOPED_TRACE(fmt::format("{} mask {} shared {}", dtype_name(dt), masked, shared_kv));
        const int64_t b = 3, tq = 5, tk = 11, d = 6, dv = 4;
        Tensor q = uniform_tensor(dt, {b, tq, d}, rng, -2, 2);
        Tensor k = uniform_tensor(dt, {shared_kv ? 1 : b, tk, d}, rng, -2, 2);
        Tensor v = uniform_tensor(dt, {shared_kv ? 1 : b, tk, dv}, rng);
        Tensor mask = uniform_tensor(dt, {tq, tk}, rng, -3, 0);
        std::vector<Tensor> inputs = {q, k, v};
        if (masked) inputs.push_back(mask);
        Tensor y = ops::call("Attention", inputs, {{"scale", Attribute(0.4f)}}, 1, "ai.ingot")[0];
        ASSERT_EQ(y.shape(), (Shape{b, tq, dv}));
        ASSERT_EQ(y.dtype(), dt);
        const std::vector<double> ref = attention_reference(q, k, v, masked ? &mask : nullptr, 0.4);
        const std::vector<float> got = y.cast(DType::Float32).to_vector<float>();
        const double tol = dt == DType::Float16 ? 2e-3 : dt == DType::BFloat16 ? 1.6e-2 : 1e-5;
        for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], tol) << "element " << i;
      }
    }
  }
}

TEST(AttentionKernel, RejectsOperandsThatDoNotFit) {
  Tensor q = Tensor::from_vector(std::vector<float>(2 * 3 * 4, 0.5f), {2, 3, 4});
  Tensor k = Tensor::from_vector(std::vector<float>(2 * 5 * 4, 0.5f), {2, 5, 4});
  Tensor v = Tensor::from_vector(std::vector<float>(2 * 5 * 2, 0.5f), {2, 5, 2});
  auto error_of = [](const std::vector<Tensor>& inputs) {
    try {
      ops::call("Attention", inputs, {}, 1, "ai.ingot");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor k_wide = Tensor::from_vector(std::vector<float>(2 * 5 * 3, 0.5f), {2, 5, 3});
  EXPECT_NE(error_of({q, k_wide, v}).find("input 1 (K)"), std::string::npos) << error_of({q, k_wide, v});
  Tensor v_short = Tensor::from_vector(std::vector<float>(2 * 4 * 2, 0.5f), {2, 4, 2});
  EXPECT_NE(error_of({q, k, v_short}).find("input 2 (V)"), std::string::npos);
  Tensor k_batch = Tensor::from_vector(std::vector<float>(3 * 5 * 4, 0.5f), {3, 5, 4});
  EXPECT_NE(error_of({q, k_batch, v}).find("do not broadcast"), std::string::npos);
  Tensor mask = Tensor::from_vector(std::vector<float>(3 * 4, 0.0f), {3, 4});
  EXPECT_NE(error_of({q, k, v, mask}).find("input 3 (mask)"), std::string::npos);
  EXPECT_NE(error_of({q, k.cast(DType::Float16), v}).find("input 1 (K)"), std::string::npos);
}

// ---- fusions inside If/Loop/Scan bodies ----

namespace {

// If(flag): then Relu(Conv(x, w, b)) with the weights the branch's own initializers; else
// Mul(Sigmoid(x), x) * 2 (an elementwise chain, its values typed in the branch's value_info) and a
// Slice. x [1, 2, 6, 6] from the main graph.
std::string branch_fusion_model() {
  std::mt19937 rng(23);
  onnx::GraphProto then_g;
  then_g.set_name("then");
  add_random_initializer(then_g, "w", {3, 2, 3, 3}, rng);
  add_random_initializer(then_g, "b", {3}, rng);
  onnx::NodeProto conv = make_node("Conv", {"x", "w", "b"}, {"c"});
  set_ints(conv, "pads", {1, 1, 1, 1});
  *then_g.add_node() = conv;
  *then_g.add_node() = make_node("Relu", {"c"}, {"then_out"});
  *then_g.add_output() = float_info("then_out", {1, 3, 6, 6});
  onnx::GraphProto else_g;
  else_g.set_name("else");
  add_scalar(else_g, "two", 2.0f);
  *else_g.add_node() = make_node("Sigmoid", {"x"}, {"s"});
  *else_g.add_node() = make_node("Mul", {"s", "x"}, {"sw"});
  *else_g.add_node() = make_node("Mul", {"sw", "two"}, {"m"});
  *else_g.add_node() = make_node("Slice", {"m", "starts", "ends", "axes"}, {"else_out"});
  *else_g.add_output() = float_info("else_out", {1, 2, 6, 6});
  for (const char* v : {"s", "sw", "m"}) *else_g.add_value_info() = float_info(v, {1, 2, 6, 6});
  onnx::GraphProto g;
  g.set_name("branch_fusions");
  *g.add_input() = float_info("x", {1, 2, 6, 6});
  *g.add_input() = ingot::testing::static_tensor_info("flag", onnx::TensorProto::BOOL, {});
  add_int64_initializer(g, "starts", {0});
  add_int64_initializer(g, "ends", {2});
  add_int64_initializer(g, "axes", {1});
  *g.add_node() = ingot::testing::make_if("flag", {"y"}, std::move(then_g), std::move(else_g));
  *g.add_output() = ingot::testing::tensor_info("y", onnx::TensorProto::FLOAT, {"1", "N", "6", "6"});
  return save(std::move(g), "branch_fusions.onnx");
}

}  // namespace

TEST(PipelineInBodies, FusesInsideIfBranchesAndComputesTheSame) {
  const std::string path = branch_fusion_model();
  auto model = import_onnx(path);
  EXPECT_TRUE(compile(*model, {}));
  verify(*model);
  const Node& iff = model->graph->nodes.back();
  ASSERT_EQ(iff.op_type, "If");
  EXPECT_EQ(op_types(*iff.attrs.at("then_branch").g), (std::vector<std::string>{"FusedConv"}));
  EXPECT_EQ(op_types(*iff.attrs.at("else_branch").g), (std::vector<std::string>{"FusedElementwise", "Slice"}));
  EXPECT_EQ(model->opset("ai.ingot"), 1);

  SessionOptions plain_options;
  plain_options.optimize = false;
  Session optimized = Session::load(path), plain = Session::load(path, plain_options);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> xs(72);
  for (float& v : xs) v = dist(rng);
  for (bool flag : {true, false}) {
    SCOPED_TRACE(flag);
    const std::vector<Tensor> in = {Tensor::from_vector(xs, {1, 2, 6, 6}), Tensor::from_vector(std::vector<bool>{flag}, {})};
    const std::vector<float> a = optimized.run(in)[0].to_vector<float>(), b = plain.run(in)[0].to_vector<float>();
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.size(), flag ? 108u : 72u);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * std::max(1.0f, std::fabs(b[i]))) << i;
  }
}
