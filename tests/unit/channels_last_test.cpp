// The channels-last pass (src/passes/channels_last.cpp): which nodes it rewrites, where Transposes
// remain, and that the rewritten graph computes what the plain graph computes (on the CPU, whose
// FusedConv runs the NHWC layout through transposed copies; cuDNN's NHWC path is checked in
// tests/gpu/nn_test.cpp and graph_test.cpp).
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <cmath>
#include <random>
#include <tuple>

#include "compiler/compile.h"
#include "channels_last_model.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "runtime/executor.h"

using namespace ingot;

namespace {

std::string attr_s(const Node& n, const char* name) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? "" : it->second.s;
}

std::vector<Tensor> run(std::shared_ptr<Model> model, const std::vector<Tensor>& inputs) {
  Executor executor(std::move(model), Device::cpu());
  std::vector<Value> in(inputs.begin(), inputs.end());
  std::vector<Tensor> out;
  for (Value& v : executor.run(in).outputs) out.push_back(v.tensor);
  return out;
}

Tensor random_input(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape);
}

TEST(ChannelsLast, ConvolutionsAndWhatIsBetweenThemGoChannelsLast) {
  const std::string path = ingot::testing::channels_last_model("channels_last_net.onnx");
  auto model = import_onnx(path);
  compile(*model, {});
  ASSERT_TRUE(to_channels_last(*model));
  verify(*model);
  int transposes = 0, nhwc_convs = 0, nchw_convs = 0, global_pools = 0;
  for (const Node& n : model->graph->nodes) {
    if (n.op_type == "Transpose") ++transposes;
    if (n.op_type == "GlobalAveragePool") ++global_pools;
    if (n.op_type == "FusedConv" || n.op_type == "Conv") (attr_s(n, "layout") == "NHWC" ? nhwc_convs : nchw_convs)++;
  }
  // Channels last: the six convolutions with symmetric pads; the asymmetric one stays.
  EXPECT_EQ(nhwc_convs, 6);
  EXPECT_EQ(nchw_convs, 1);
  EXPECT_EQ(global_pools, 0);  // ReduceMean over H and W of the channels-last copies
  // x to channels last, the MaxPool's input back and its output forth again, the last pool's
  // output back for Flatten; every other view was dropped as unread.
  EXPECT_EQ(transposes, 4) << print_graph(*model->graph);
  const std::string before = print_graph(*model->graph);
  EXPECT_FALSE(to_channels_last(*model)) << "a second run changes nothing";
  EXPECT_EQ(print_graph(*model->graph), before);
  verify(*model);
}

// A model without convolutions (MatMul and an activation) is left exactly as it was.
TEST(ChannelsLast, LeavesModelsWithoutConvolutionsAlone) {
  std::mt19937 rng(4);
  onnx::GraphProto g;
  g.set_name("no_convs");
  *g.add_input() = ingot::testing::tensor_info("x", onnx::TensorProto::FLOAT, {"N", "4", "14"});
  ingot::testing::add_random_initializer(g, "m", {14, 5}, rng);
  *g.add_node() = ingot::testing::make_node("Relu", {"x"}, {"r"});
  *g.add_node() = ingot::testing::make_node("MatMul", {"r", "m"}, {"y"});
  *g.add_output() = ingot::testing::tensor_info("y", onnx::TensorProto::FLOAT, {"N", "4", "5"});
  auto model = import_onnx(ingot::testing::save_model(ingot::testing::model_with(std::move(g)), "no_convs.onnx"));
  const std::string before = print_graph(*model->graph);
  EXPECT_FALSE(to_channels_last(*model));
  EXPECT_EQ(print_graph(*model->graph), before);
  verify(*model);
}

// Whisper's encoder stem: Conv1d -> GELU -> Conv1d (stride 2) -> GELU -> Transpose [N, C, T] ->
// [N, T, C] -> + positions. Both convolutions and the elementwise nodes between them go channels
// last ([N, T, C]); the model's own Transpose becomes the channels-last copy itself, so the only
// Transpose left is the input's; outputs equal the plain graph's.
TEST(ChannelsLast, OneDimensionalConvolutionsGoChannelsLast) {
  std::mt19937 rng(5);
  onnx::GraphProto g;
  g.set_name("stem_1d");
  *g.add_input() = ingot::testing::tensor_info("x", onnx::TensorProto::FLOAT, {"N", "6", "20"});
  ingot::testing::add_random_initializer(g, "w1", {8, 6, 3}, rng);
  ingot::testing::add_random_initializer(g, "b1", {8}, rng);
  ingot::testing::add_random_initializer(g, "w2", {8, 8, 3}, rng);
  ingot::testing::add_random_initializer(g, "b2", {8}, rng);
  ingot::testing::add_random_initializer(g, "scale", {8, 1}, rng);  // a per-channel constant (rank 2)
  ingot::testing::add_random_initializer(g, "pos", {10, 8}, rng);
  auto conv = [&](const char* x, const char* w, const char* b, const char* y, int64_t stride) {
    onnx::NodeProto n = ingot::testing::make_node("Conv", {x, w, b}, {y});
    auto* pads = n.add_attribute();
    pads->set_name("pads");
    pads->set_type(onnx::AttributeProto::INTS);
    pads->add_ints(1);
    pads->add_ints(1);
    auto* strides = n.add_attribute();
    strides->set_name("strides");
    strides->set_type(onnx::AttributeProto::INTS);
    strides->add_ints(stride);
    *g.add_node() = n;
  };
  conv("x", "w1", "b1", "c1", 1);
  *g.add_node() = ingot::testing::make_node("Sigmoid", {"c1"}, {"s1"});
  *g.add_node() = ingot::testing::make_node("Mul", {"c1", "s1"}, {"a1"});
  *g.add_node() = ingot::testing::make_node("Mul", {"a1", "scale"}, {"m1"});
  conv("m1", "w2", "b2", "c2", 2);
  *g.add_node() = ingot::testing::make_node("Relu", {"c2"}, {"a2"});
  onnx::NodeProto t = ingot::testing::make_node("Transpose", {"a2"}, {"t"});
  auto* perm = t.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  *g.add_node() = t;
  *g.add_node() = ingot::testing::make_node("Add", {"t", "pos"}, {"y"});
  *g.add_output() = ingot::testing::tensor_info("y", onnx::TensorProto::FLOAT, {"N", "10", "8"});
  const std::string path = ingot::testing::save_model(ingot::testing::model_with(std::move(g)), "stem_1d.onnx");
  auto plain = import_onnx(path);
  auto model = import_onnx(path);
  compile(*model, {});
  ASSERT_TRUE(to_channels_last(*model));
  verify(*model);
  int transposes = 0, nhwc_convs = 0;
  for (const Node& n : model->graph->nodes) {
    if (n.op_type == "Transpose") ++transposes;
    if (n.op_type == "FusedConv" && attr_s(n, "layout") == "NHWC") ++nhwc_convs;
    EXPECT_NE(n.op_type, "Conv") << print_graph(*model->graph);
  }
  EXPECT_EQ(nhwc_convs, 2) << print_graph(*model->graph);
  EXPECT_EQ(transposes, 1) << "the input's only\n" << print_graph(*model->graph);
  const std::string before = print_graph(*model->graph);
  EXPECT_FALSE(to_channels_last(*model)) << "a second run changes nothing";
  EXPECT_EQ(print_graph(*model->graph), before);
  for (int64_t batch : {1, 3}) {
    Tensor x = random_input({batch, 6, 20}, uint32_t(10 + batch));
    std::vector<Tensor> want = run(plain, {x}), got = run(model, {x});
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(want[0].shape(), got[0].shape());
    std::vector<float> a = got[0].to_vector<float>(), b = want[0].to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-4f * std::max(1.0f, std::fabs(b[i]))) << "batch " << batch << " element " << i;
    }
  }
}

TEST(ChannelsLast, ComputesWhatThePlainGraphComputes) {
  const std::string path = ingot::testing::channels_last_model("channels_last_net.onnx");
  auto plain = import_onnx(path);
  auto rewritten = import_onnx(path);
  compile(*rewritten, {});
  to_channels_last(*rewritten);
  verify(*rewritten);
  for (int64_t batch : {1, 3}) {
    Tensor x = random_input({batch, 3, 8, 8}, uint32_t(batch));
    std::vector<Tensor> want = run(plain, {x}), got = run(rewritten, {x});
    ASSERT_EQ(want.size(), got.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
      std::vector<float> a = got[o].to_vector<float>(), b = want[o].to_vector<float>();
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], 1e-4f * std::max(1.0f, std::fabs(b[i]))) << "batch " << batch << " output " << o << " element " << i;
      }
    }
  }
}

// FusedConv layout "NHWC" against the NCHW op on permuted tensors, and its errors.
TEST(ChannelsLast, FusedConvNhwcMatchesNchw) {
  Tensor x = random_input({2, 4, 6, 5}, 3), w = random_input({6, 2, 3, 3}, 4), b = random_input({6}, 5);
  Tensor r = random_input({2, 6, 3, 3}, 6);
  Attributes attrs{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}},
                   {"group", int64_t(2)}, {"activation", std::string("Relu")}};
  Tensor want = ops::call("FusedConv", {x, w, b, r}, attrs, 1, "ai.ingot").at(0);
  Attributes nhwc = attrs;
  nhwc["layout"] = std::string("NHWC");
  const std::vector<int64_t> last{0, 2, 3, 1}, first{0, 3, 1, 2};
  Tensor got = ops::call("FusedConv", {ops::transpose(x, last), ops::transpose(w, last), b, ops::transpose(r, last)},
                         nhwc, 1, "ai.ingot")
                   .at(0);
  ASSERT_EQ(got.shape(), (Shape{2, 3, 3, 6}));
  std::vector<float> a = ops::transpose(got, first).to_vector<float>(), e = want.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 1e-5f) << i;

  nhwc["layout"] = std::string("NCWH");
  try {
    ops::call("FusedConv", {x, w}, nhwc, 1, "ai.ingot");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attribute 'layout'"), std::string::npos) << e.what();
  }
  nhwc["layout"] = std::string("NHWC");
  try {  // W in channels-first order given to an NHWC node: 5 input channels per group do not match
    ops::call("FusedConv", {ops::transpose(x, last), w}, nhwc, 1, "ai.ingot");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(NHWC)"), std::string::npos) << e.what();
  }
}

}  // namespace

// With pool dtypes (a CPU target's) the model's MaxPool runs channels last too (ai.ingot.MaxPool NHWC):
// the two Transposes around it go, and the outputs stay those of the plain graph.
TEST(ChannelsLast, MaxPoolsFollowOnCpuTargets) {
  const std::string path = ingot::testing::channels_last_model("channels_last_net.onnx");
  auto plain = import_onnx(path);
  auto rewritten = import_onnx(path);
  compile(*rewritten, {});
  ASSERT_TRUE(to_channels_last(*rewritten, ChannelsLastScope::AllConvolutions, {DType::Float32}));
  verify(*rewritten);
  int transposes = 0, nhwc_pools = 0;
  for (const Node& n : rewritten->graph->nodes) {
    if (n.op_type == "Transpose") ++transposes;
    if (n.op_type == "MaxPool" && n.domain == kIngotDomain && attr_s(n, "layout") == "NHWC") ++nhwc_pools;
  }
  EXPECT_EQ(nhwc_pools, 1);
  EXPECT_EQ(transposes, 2) << print_graph(*rewritten->graph);  // x in, the last pool's output out
  Tensor x = random_input({2, 3, 8, 8}, 11);
  std::vector<Tensor> want = run(plain, {x}), got = run(rewritten, {x});
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    std::vector<float> a = got[o].to_vector<float>(), b = want[o].to_vector<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * std::max(1.0f, std::fabs(b[i]))) << i;
  }
}

// ai.ingot.MaxPool layout "NHWC" against ONNX's MaxPool (the reference loop) on the permuted tensor:
// float32 (with a NaN) and 8-bit, channel counts that are and are not multiples of the 16- and 8-byte
// steps, the 2x2 stride-2 path and the general one (pads, ceil_mode, dilations); then its errors.
TEST(ChannelsLast, MaxPoolNhwcMatchesNchw) {
  const std::vector<int64_t> last{0, 2, 3, 1};
  using A = Attributes;
  const std::vector<A> windows = {
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
      {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
       {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
      {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"strides", std::vector<int64_t>{2, 1}}, {"ceil_mode", int64_t(1)},
       {"pads", std::vector<int64_t>{0, 1, 1, 0}}},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"dilations", std::vector<int64_t>{2, 2}}},
  };
  for (int64_t channels : {5, 24, 40}) {
    Tensor xf = random_input({2, channels, 7, 9}, uint32_t(channels));
    std::vector<float> values = xf.to_vector<float>();
    values[3] = NAN;
    xf = Tensor::from_vector(values, xf.shape());
    std::vector<uint8_t> u(values.size());
    std::vector<int8_t> s(values.size());
    std::mt19937 rng{uint32_t(channels)};
    for (size_t i = 0; i < u.size(); ++i) {
      u[i] = uint8_t(rng() % 256);
      s[i] = int8_t(int(rng() % 256) - 128);
    }
    for (const Tensor& x : {xf, Tensor::from_vector(u, xf.shape()), Tensor::from_vector(s, xf.shape())}) {
      for (const A& window : windows) {
        Tensor want = ops::call("MaxPool", {x}, window, 1).at(0);
        A nhwc = window;
        nhwc["layout"] = std::string("NHWC");
        Tensor got = ops::call("MaxPool", {ops::transpose(x, last)}, nhwc, 1, "ai.ingot").at(0);
        Tensor want_last = ops::transpose(want, last);
        ASSERT_EQ(got.shape(), want_last.shape()) << x.describe();
        ASSERT_EQ(got.dtype(), x.dtype());
        std::vector<double> a = got.cast(DType::Float64).to_vector<double>();
        std::vector<double> b = want_last.cast(DType::Float64).to_vector<double>();
        for (size_t i = 0; i < a.size(); ++i) {
          if (std::isnan(b[i])) {
            ASSERT_TRUE(std::isnan(a[i])) << i;
          } else {
            ASSERT_EQ(a[i], b[i]) << x.describe() << " channels " << channels << " element " << i;
          }
        }
      }
    }
  }
  A bad = windows[0];
  bad["layout"] = std::string("NCWH");
  Tensor x = random_input({1, 4, 4, 3}, 1);
  for (const auto& [attrs, input, message] :
       std::vector<std::tuple<A, Tensor, std::string>>{{bad, x, "attribute 'layout'"},
                                                      {windows[0], random_input({1, 4, 3}, 2), "[N, H, W, C]"}}) {
    A a = attrs;
    if (!a.count("layout")) a["layout"] = std::string("NHWC");
    try {
      ops::call("MaxPool", {input}, a, 1, "ai.ingot");
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}
