// Post-training quantization (include/ingot/quantize.h) on a small convolutional model built here:
// the QDQ model it writes, what a session makes of it (fuse-qdq's integer kernels against the same
// model run with its Q/DQ as float ops), an int8 package, and the errors for bad calibration input.
#include <gtest/gtest.h>
#include <ingot/convert.h>
#include <ingot/ops.h>
#include <ingot/quantize.h>
#include <ingot/session.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "compiler/compile.h"
#include "core/npy.h"
#include "onnx/onnx_import.h"
#include "test_util.h"

namespace ingot {
namespace {

using namespace ingot::testing;

// x [1,4,12,12] -> Conv 3x3 (8) -> Relu -> Conv 1x1 (8) + residual -> Relu -> MaxPool -> Flatten -> Gemm (5).
std::string small_cnn(int opset = 13) {
  onnx::GraphProto g;
  g.set_name("small_cnn");
  std::mt19937 rng(1);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {1, 4, 12, 12});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {1, 5});
  add_random_initializer(g, "w1", {8, 4, 3, 3}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b1", {8}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w2", {8, 8, 1, 1}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b2", {8}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w3", {5, 288}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "b3", {5}, rng, -0.1f, 0.1f);
  auto conv1 = make_node("Conv", {"x", "w1", "b1"}, {"c1"});
  auto* pads = conv1.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  *g.add_node() = conv1;
  *g.add_node() = make_node("Relu", {"c1"}, {"r1"});
  *g.add_node() = make_node("Conv", {"r1", "w2", "b2"}, {"c2"});
  *g.add_node() = make_node("Add", {"c2", "r1"}, {"s2"});
  *g.add_node() = make_node("Relu", {"s2"}, {"r2"});
  auto pool = make_node("MaxPool", {"r2"}, {"p"});
  for (const char* name : {"kernel_shape", "strides"}) {
    auto* a = pool.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(2);
    a->add_ints(2);
  }
  *g.add_node() = pool;
  *g.add_node() = make_node("Flatten", {"p"}, {"f"});
  auto gemm = make_node("Gemm", {"f", "w3", "b3"}, {"y"});
  auto* tb = gemm.add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  *g.add_node() = gemm;
  return save_model(model_with(g, opset), opset == 13 ? "small_cnn.onnx" : "small_cnn_" + std::to_string(opset) + ".onnx");
}

Tensor random_input(uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(4 * 12 * 12);
  for (float& x : v) x = dist(gen);
  return Tensor::from_vector(v, {1, 4, 12, 12});
}

std::string calibration_dir() {
  auto dir = temp_dir() / "calib";
  std::filesystem::create_directories(dir);
  for (uint32_t i = 0; i < 8; ++i) save_npy((dir / (std::to_string(i) + ".npy")).string(), random_input(100 + i));
  return dir.string();
}

double cosine(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double dot = 0, nx = 0, ny = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    dot += double(x[i]) * y[i];
    nx += double(x[i]) * x[i];
    ny += double(y[i]) * y[i];
  }
  return dot / std::sqrt(nx * ny);
}

// Raising a model's opset (quantization asks for 13) runs ONNX's version converter in a child process:
// the converted model comes back whole (its opset, every initializer); a conversion the converter
// refuses, or dies in, leaves the model as it was with the reason in the note.
TEST(Quantize, OpsetIsRaisedByTheVersionConverterInAChildProcess) {
  const std::string path = small_cnn(11);
  std::string note;
  auto original = import_onnx(path);
  auto raised = import_onnx(path, 13, note);
  EXPECT_NE(note.find("opset 11 raised to 13"), std::string::npos) << note;
  EXPECT_EQ(raised->opsets.at(""), 13);
  EXPECT_EQ(raised->graph->initializers.size(), original->graph->initializers.size());
  EXPECT_EQ(raised->graph->nodes.size(), original->graph->nodes.size());
  std::string refused;
  auto kept = import_onnx(path, 99, refused);
  EXPECT_NE(refused.find("opset 11 could not be raised to 99: "), std::string::npos) << refused;
  EXPECT_EQ(kept->opsets.at(""), 11);
}

TEST(Quantize, WritesAQdqModelWhoseIntegerKernelsMatchItsFloatReading) {
  const std::string model = small_cnn(), qdq = (temp_dir() / "small_cnn.qdq.onnx").string();
  QuantizeSettings s;
  s.calibration = {calibration_dir()};
  QuantizeReport r = quantize(model, qdq, s);
  EXPECT_EQ(r.quantized, 3);  // both convolutions and the Gemm
  EXPECT_EQ(r.samples, 8);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_GT(r.outputs[0].cosine, 0.99) << r.text();

  // The written model holds int8 weights behind DequantizeLinear, and no float weights.
  auto m = import_onnx(qdq);
  int dq = 0, q = 0;
  for (const Node& n : m->graph->nodes) {
    dq += n.op_type == "DequantizeLinear";
    q += n.op_type == "QuantizeLinear";
  }
  EXPECT_GE(dq, 6);
  EXPECT_GE(q, 3);
  for (const auto& [name, t] : m->graph->initializers) EXPECT_FALSE(t.dtype() == DType::Float32 && t.numel() > 8) << name;

  // A session folds the Q/DQ into integer kernels; the same model with its Q/DQ run as float ops is
  // the reference of the quantized math (they may differ by a requantization step).
  Session fused = Session::load(qdq);
  Tensor x = random_input(7);
  Tensor y = fused.run({x})[0];
  SessionOptions plain;
  plain.optimize = false;
  Tensor y_ref = Session::load(qdq, plain).run({x})[0];
  EXPECT_GT(cosine(y, y_ref), 0.999);
  Tensor y_float = Session::load(model).run({x})[0];
  EXPECT_GT(cosine(y, y_float), 0.99);
}

// x [1,4,12,12] -> Conv 3x3 (8) -> Relu -> Conv 1x1 (16), plus the shortcut Conv 1x1 (4 -> 16) of x,
// -> Add -> Relu -> y: a downsampling block's two convolutions summed.
std::string two_branch_block() {
  onnx::GraphProto g;
  g.set_name("two_branch_block");
  std::mt19937 rng(5);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {1, 4, 12, 12});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {1, 16, 12, 12});
  add_random_initializer(g, "w1", {8, 4, 3, 3}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "w2", {16, 8, 1, 1}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b2", {16}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "ws", {16, 4, 1, 1}, rng, -0.5f, 0.5f);
  auto conv1 = make_node("Conv", {"x", "w1"}, {"c1"});
  auto* pads = conv1.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  *g.add_node() = conv1;
  *g.add_node() = make_node("Relu", {"c1"}, {"r1"});
  *g.add_node() = make_node("Conv", {"r1", "w2", "b2"}, {"c2"});
  *g.add_node() = make_node("Conv", {"x", "ws"}, {"shortcut"});
  *g.add_node() = make_node("Add", {"c2", "shortcut"}, {"s"});
  *g.add_node() = make_node("Relu", {"s"}, {"y"});
  return save_model(model_with(g, 13), "two_branch_block.onnx");
}

// Where an Add sums two convolutions, one of them takes it as its residual: the quantizer quantizes
// only the other's output, so fuse-qdq folds the Add and the Relu into the first one's integer
// kernel (no float32 round trip of both outputs through DequantizeLinear and a float Add).
TEST(Quantize, TwoConvolutionsSummedFoldTheAddIntoOne) {
  const std::string model = two_branch_block(), qdq = (temp_dir() / "two_branch_block.qdq.onnx").string();
  QuantizeSettings s;
  s.calibration = {calibration_dir()};
  QuantizeReport r = quantize(model, qdq, s);
  EXPECT_EQ(r.quantized, 3);
  auto m = import_onnx(qdq);
  std::map<std::string, std::string> producer;
  for (const Node& n : m->graph->nodes)
    for (const std::string& o : n.outputs) producer[o] = n.op_type;
  int adds = 0;
  for (const Node& n : m->graph->nodes) {
    if (n.op_type != "Add") continue;
    ++adds;
    ASSERT_EQ(n.inputs.size(), 2u);
    const int from_conv = (producer[n.inputs[0]] == "Conv") + (producer[n.inputs[1]] == "Conv");
    const int from_dq = (producer[n.inputs[0]] == "DequantizeLinear") + (producer[n.inputs[1]] == "DequantizeLinear");
    EXPECT_EQ(from_conv, 1) << n.inputs[0] << " + " << n.inputs[1];
    EXPECT_EQ(from_dq, 1) << n.inputs[0] << " + " << n.inputs[1];
  }
  EXPECT_EQ(adds, 1);

  // Compiled: three integer convolutions, the Add and Relu inside one of them, no float Add and no
  // DequantizeLinear of an activation left.
  auto compiled = import_onnx(qdq);
  run_steps(*compiled, compile_steps({}));
  std::map<std::string, int> ops;
  for (const Node& n : compiled->graph->nodes) ++ops[n.op_type];
  EXPECT_EQ(ops["QuantizedConv"], 3);
  EXPECT_EQ(ops["Add"], 0);
  EXPECT_EQ(ops["Relu"], 0);
  EXPECT_EQ(ops["DequantizeLinear"], 0);

  // The fused kernels against the QDQ model read as float ops (they differ by the main path's
  // requantization step the fusion skips), and against the float model.
  Tensor x = random_input(11);
  Tensor y = Session::load(qdq).run({x})[0];
  SessionOptions plain;
  plain.optimize = false;
  EXPECT_GT(cosine(y, Session::load(qdq, plain).run({x})[0]), 0.999);
  EXPECT_GT(cosine(y, Session::load(model).run({x})[0]), 0.99);
}

// x [1,4,12,12] -> Conv 3x3 (8) -> Relu -> d; a squeeze-excitation block on d (GlobalAveragePool ->
// Conv 1x1 (8 -> 4) -> Relu -> Conv 1x1 (4 -> 8) -> HardSigmoid -> Mul with d) -> Conv 1x1 (8) ->
// GlobalAveragePool -> Flatten -> Gemm (5) -> y: MobileNetV3's blocks and a classifier head.
std::string squeeze_excitation_net() {
  onnx::GraphProto g;
  g.set_name("squeeze_excitation_net");
  std::mt19937 rng(9);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {1, 4, 12, 12});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {1, 5});
  add_random_initializer(g, "w1", {8, 4, 3, 3}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b1", {8}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "ws1", {4, 8, 1, 1}, rng, -0.8f, 0.8f);
  add_random_initializer(g, "bs1", {4}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "ws2", {8, 4, 1, 1}, rng, -0.8f, 0.8f);
  add_random_initializer(g, "bs2", {8}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w2", {8, 8, 1, 1}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b2", {8}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w3", {5, 8}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b3", {5}, rng, -0.1f, 0.1f);
  auto conv1 = make_node("Conv", {"x", "w1", "b1"}, {"c1"});
  auto* pads = conv1.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  *g.add_node() = conv1;
  *g.add_node() = make_node("Relu", {"c1"}, {"d"});
  *g.add_node() = make_node("GlobalAveragePool", {"d"}, {"m"});
  *g.add_node() = make_node("Conv", {"m", "ws1", "bs1"}, {"s1"});
  *g.add_node() = make_node("Relu", {"s1"}, {"r1"});
  *g.add_node() = make_node("Conv", {"r1", "ws2", "bs2"}, {"s2"});
  *g.add_node() = make_node("HardSigmoid", {"s2"}, {"gate"});
  *g.add_node() = make_node("Mul", {"gate", "d"}, {"e"});
  *g.add_node() = make_node("Conv", {"e", "w2", "b2"}, {"c2"});
  *g.add_node() = make_node("GlobalAveragePool", {"c2"}, {"p"});
  *g.add_node() = make_node("Flatten", {"p"}, {"f"});
  auto gemm = make_node("Gemm", {"f", "w3", "b3"}, {"y"});
  auto* tb = gemm.add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  *g.add_node() = gemm;
  return save_model(model_with(g, 13), "squeeze_excitation_net.onnx");
}

// The means and the gate's product whose outputs are quantized get quantized inputs (d, read by
// both, and the gate), so that after the layout step fuse-qdq-pointwise runs them as integer
// kernels: no float32 value between the first convolution and the classifier.
TEST(Quantize, SqueezeExcitationBlocksRunInInt8) {
  const std::string model = squeeze_excitation_net(), qdq = (temp_dir() / "squeeze_excitation_net.qdq.onnx").string();
  QuantizeSettings s;
  s.calibration = {calibration_dir()};
  QuantizeReport r = quantize(model, qdq, s);
  EXPECT_EQ(r.quantized, 5);
  auto compiled = import_onnx(qdq);
  run_steps(*compiled, compile_steps({}));
  std::map<std::string, int> ops;
  for (const Node& n : compiled->graph->nodes) ++ops[n.op_type];
  EXPECT_EQ(ops["QuantizedConv"], 4);
  EXPECT_EQ(ops["QuantizedMatMul"], 1);
  EXPECT_EQ(ops["QuantizedReduceMean"], 2);
  EXPECT_EQ(ops["QuantizedMul"], 1);
  EXPECT_EQ(ops["QuantizeLinear"], 1);  // the model's input
  for (const char* op : {"DequantizeLinear", "Mul", "ReduceMean", "GlobalAveragePool", "HardSigmoid"})
    EXPECT_EQ(ops[op], 0) << op;

  Tensor x = random_input(13);
  Tensor y = Session::load(qdq).run({x})[0];
  SessionOptions plain;
  plain.optimize = false;
  EXPECT_GT(cosine(y, Session::load(qdq, plain).run({x})[0]), 0.999);
  EXPECT_GT(cosine(y, Session::load(model).run({x})[0]), 0.99);

  // With the gate's product kept in float, neither it nor d's mean takes d (d would need a
  // DequantizeLinear for the product anyway); the head's mean still runs in int8.
  QuantizeSettings keep = s;
  keep.keep_float = {"Mul"};
  quantize(model, qdq, keep);
  auto partial = import_onnx(qdq);
  run_steps(*partial, compile_steps({}));
  ops.clear();
  for (const Node& n : partial->graph->nodes) ++ops[n.op_type];
  EXPECT_EQ(ops["QuantizedReduceMean"], 1);
  EXPECT_EQ(ops["QuantizedMul"], 0);
  EXPECT_EQ(ops["Mul"], 1);
}

// A depthwise Conv node (`channels` groups) without bias, padded by `pad` on every side.
onnx::NodeProto depthwise_conv(const std::string& x, const std::string& w, const std::string& y, int64_t channels,
                               int64_t pad) {
  auto dw = make_node("Conv", {x, w}, {y});
  auto* group = dw.add_attribute();
  group->set_name("group");
  group->set_type(onnx::AttributeProto::INT);
  group->set_i(channels);
  auto* pads = dw.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(pad);
  return dw;
}

// x [1,8,10,10] -> depthwise Conv 3x3 whose channel c is scaled by 2^c (output ranges spread 128x)
// [-> Relu when `relu_between`] -> Conv 1x1 (8 -> 8) -> y; `second_reader`: y = Conv 1x1(d) + d.
std::string depthwise_block(bool relu_between, bool second_reader = false) {
  onnx::GraphProto g;
  g.set_name("depthwise_block");
  std::mt19937 rng(3);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {1, 8, 10, 10});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {1, 8, 10, 10});
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  auto* w1 = g.add_initializer();
  w1->set_name("w1");
  w1->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {8, 1, 3, 3}) w1->add_dims(d);
  for (int c = 0; c < 8; ++c)
    for (int k = 0; k < 9; ++k) w1->add_float_data(dist(rng) * float(1 << c));
  add_random_initializer(g, "w2", {8, 8, 1, 1}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b2", {8}, rng, -0.1f, 0.1f);
  *g.add_node() = depthwise_conv("x", "w1", "d", 8, 1);
  if (relu_between) *g.add_node() = make_node("Relu", {"d"}, {"r"});
  if (second_reader) {  // y = Conv1x1(d) + d: d read twice
    *g.add_node() = make_node("Conv", {"d", "w2", "b2"}, {"c"});
    *g.add_node() = make_node("Add", {"c", "d"}, {"y"});
    return save_model(model_with(g, 13), "depthwise_shared_block.onnx");
  }
  *g.add_node() = make_node("Conv", {relu_between ? "r" : "d", "w2", "b2"}, {"y"});
  return save_model(model_with(g, 13), relu_between ? "depthwise_relu_block.onnx" : "depthwise_block.onnx");
}

// Cross-layer equalization (QuantizeSettings::equalize, on by default) of a depthwise -> 1x1 pair:
// the channels the widest one crowded out of the shared activation scale get their steps back, so
// the int8 model is closer to the float one than without it; also through a Relu between the two
// (it commutes with the positive scales); not when the depthwise output has a second reader.
TEST(Quantize, EqualizesDepthwiseAndPointwisePairs) {
  const std::string model = depthwise_block(false);
  std::vector<std::string> calib;
  auto dir = temp_dir() / "calib_dw";
  std::filesystem::create_directories(dir);
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int i = 0; i < 6; ++i) {
    std::vector<float> v(8 * 10 * 10);
    for (float& x : v) x = dist(gen);
    save_npy((dir / (std::to_string(i) + ".npy")).string(), Tensor::from_vector(v, {1, 8, 10, 10}));
  }
  auto quantized_cosine = [&](const std::string& path, bool equalize, std::string* notes) {
    QuantizeSettings s;
    s.calibration = {dir.string()};
    s.equalize = equalize;
    const std::string qdq = (temp_dir() / (equalize ? "dw_eq.qdq.onnx" : "dw_plain.qdq.onnx")).string();
    QuantizeReport r = quantize(path, qdq, s);
    if (notes) *notes = r.text();
    EXPECT_EQ(r.quantized, 2);
    return r.outputs.at(0).cosine;
  };
  std::string with_notes, without_notes;
  const double with = quantized_cosine(model, true, &with_notes);
  const double without = quantized_cosine(model, false, &without_notes);
  EXPECT_NE(with_notes.find("equalized the channels of 1 depthwise -> 1x1 convolution pairs"), std::string::npos)
      << with_notes;
  EXPECT_EQ(without_notes.find("equalized"), std::string::npos) << without_notes;
  EXPECT_GT(with, without) << "equalized " << with << ", plain " << without;
  EXPECT_LT(1.0 - with, 0.5 * (1.0 - without)) << "equalized " << with << ", plain " << without;

  std::string relu_notes, relu_plain_notes;
  const double relu_with = quantized_cosine(depthwise_block(true), true, &relu_notes);
  const double relu_without = quantized_cosine(depthwise_block(true), false, &relu_plain_notes);
  EXPECT_NE(relu_notes.find("equalized the channels of 1 "), std::string::npos) << relu_notes;
  EXPECT_GT(relu_with, relu_without);

  std::string shared_notes;
  quantized_cosine(depthwise_block(false, /*second_reader=*/true), true, &shared_notes);
  EXPECT_EQ(shared_notes.find("equalized"), std::string::npos) << shared_notes;
}

// x [1,8,10,10] -> depthwise Conv 3x3 -> Conv 1x1 (8 -> 8) -> y, the depthwise weights made so that
// int8 rounding takes each channel's eight smaller weights down by 0.45 of a step: on inputs with a
// positive mean its output's mean drops per channel, a shift bias correction takes back.
std::string rounding_down_block() {
  onnx::GraphProto g;
  g.set_name("rounding_down_block");
  std::mt19937 rng(7);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {1, 8, 10, 10});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {1, 8, 10, 10});
  std::uniform_int_distribution<int> level(5, 60);
  auto* w1 = g.add_initializer();
  w1->set_name("w1");
  w1->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {8, 1, 3, 3}) w1->add_dims(d);
  for (int c = 0; c < 8; ++c) {
    const float step = 0.01f * float(c + 1);  // the channel's int8 step: its largest weight is 127 steps
    w1->add_float_data(127 * step);
    for (int k = 1; k < 9; ++k) w1->add_float_data((float(level(rng)) + 0.45f) * step);
  }
  add_random_initializer(g, "w2", {8, 8, 1, 1}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b2", {8}, rng, -0.1f, 0.1f);
  *g.add_node() = depthwise_conv("x", "w1", "d", 8, 1);
  *g.add_node() = make_node("Conv", {"d", "w2", "b2"}, {"y"});
  return save_model(model_with(g, 13), "rounding_down_block.onnx");
}

// Bias correction (QuantizeSettings::bias_correction, on by default): the systematic shift of the
// depthwise output's mean is measured on the calibration samples and taken off through the biases
// (the depthwise convolution has none: it gets one), so the int8 model's error against the float
// model drops, on the calibration samples (the report) and on inputs it has not seen.
TEST(Quantize, BiasCorrectionRemovesTheShiftOfTheMeans) {
  const std::string model = rounding_down_block();
  auto dir = temp_dir() / "calib_positive";
  std::filesystem::create_directories(dir);
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  auto positive_input = [&] {
    std::vector<float> v(8 * 10 * 10);
    for (float& x : v) x = dist(gen);
    return Tensor::from_vector(v, {1, 8, 10, 10});
  };
  for (int i = 0; i < 6; ++i) save_npy((dir / (std::to_string(i) + ".npy")).string(), positive_input());
  const Tensor unseen = positive_input();
  const Tensor expected = Session::load(model).run({unseen})[0];
  auto quantized = [&](bool correct, double* unseen_error) {
    QuantizeSettings s;
    s.calibration = {dir.string()};
    s.equalize = false;  // keeps the weights' rounding as built
    s.bias_correction = correct;
    const std::string qdq = (temp_dir() / (correct ? "rd_corrected.qdq.onnx" : "rd_plain.qdq.onnx")).string();
    QuantizeReport r = quantize(model, qdq, s);
    EXPECT_EQ(r.quantized, 2);
    const std::vector<float> a = Session::load(qdq).run({unseen})[0].to_vector<float>(), b = expected.to_vector<float>();
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += std::abs(double(a[i]) - b[i]);
    *unseen_error = sum / double(a.size());
    return r;
  };
  double corrected_unseen = 0, plain_unseen = 0;
  const QuantizeReport corrected = quantized(true, &corrected_unseen);
  const QuantizeReport plain = quantized(false, &plain_unseen);
  EXPECT_NE(corrected.text().find("corrected the biases of 2 products"), std::string::npos) << corrected.text();
  EXPECT_EQ(plain.text().find("corrected the biases"), std::string::npos) << plain.text();
  EXPECT_LT(corrected.outputs[0].mean_abs, 0.5 * plain.outputs[0].mean_abs)
      << "corrected " << corrected.outputs[0].mean_abs << ", plain " << plain.outputs[0].mean_abs;
  EXPECT_GT(corrected.outputs[0].cosine, plain.outputs[0].cosine);
  EXPECT_LT(corrected_unseen, 0.5 * plain_unseen) << "corrected " << corrected_unseen << ", plain " << plain_unseen;
}

TEST(Quantize, Int8PackageMatchesTheFloatModel) {
  const std::string model = small_cnn();
  const std::string pkg = (temp_dir() / "small_cnn.int8.ingot").string();
  ConvertSettings s;
  s.precision = Precision::INT8;
  s.quantize.calibration = {calibration_dir()};
  ConvertResult r = convert(model, pkg, s);
  ASSERT_TRUE(r.quantization.has_value());
  EXPECT_EQ(r.precision, "int8");
  Session session = Session::load(pkg);
  Tensor x = random_input(9);
  EXPECT_GT(cosine(session.run({x})[0], Session::load(model).run({x})[0]), 0.99);
  // (Sizes: this model's scales and alignment outweigh its 2 KB of weights; the real models' packages
  // are measured by tests/quant/accuracy_test.py.)
}

// --min-cosine: the products whose quantization costs most stay float32 until the output is close
// enough (here: closer than any int8 model of it can be, so every round keeps some).
TEST(Quantize, MinCosineKeepsTheMostSensitiveProductsInFloat) {
  const std::string model = small_cnn(), qdq = (temp_dir() / "small_cnn.mixed.onnx").string();
  QuantizeSettings s;
  s.calibration = {calibration_dir()};
  const QuantizeReport all = quantize(model, qdq, s);
  s.min_cosine = 0.999999;
  const QuantizeReport mixed = quantize(model, qdq, s);
  EXPECT_LT(mixed.quantized, all.quantized);
  ASSERT_FALSE(mixed.kept_float.empty());
  EXPECT_NE(mixed.kept_float[0].find("sensitive"), std::string::npos) << mixed.kept_float[0];
  EXPECT_GE(mixed.outputs[0].cosine, all.outputs[0].cosine);
}

// Dynamic quantization: no calibration; the Gemm's activations quantized per call
// (DynamicQuantizeLinear), the convolutions left in float32.
TEST(Quantize, DynamicQuantizesMatrixProductsWithoutCalibration) {
  const std::string model = small_cnn(), qdq = (temp_dir() / "small_cnn.dynamic.onnx").string();
  QuantizeSettings s;
  s.dynamic = true;
  const QuantizeReport r = quantize(model, qdq, s);
  EXPECT_EQ(r.quantized, 1);
  EXPECT_EQ(r.kept_float.size(), 2u);
  EXPECT_TRUE(r.outputs.empty()) << "no samples, no accuracy";
  auto m = import_onnx(qdq);
  int dynamic = 0;
  for (const Node& n : m->graph->nodes) dynamic += n.op_type == "DynamicQuantizeLinear";
  EXPECT_EQ(dynamic, 1);
  Session fused = Session::load(qdq);
  SessionOptions plain;
  plain.optimize = false;
  for (uint32_t seed : {11u, 12u}) {  // a different activation range each call
    Tensor x = random_input(seed);
    if (seed == 12u) x = ops::mul(x, Tensor::scalar(3.0f));
    EXPECT_GT(cosine(fused.run({x})[0], Session::load(qdq, plain).run({x})[0]), 0.9999);
    EXPECT_GT(cosine(fused.run({x})[0], Session::load(model).run({x})[0]), 0.999);
  }
}

TEST(Quantize, BadCalibrationInputNamesTheFileOrFolder) {
  const std::string model = small_cnn(), out = (temp_dir() / "bad.qdq.onnx").string();
  auto error = [&](std::vector<std::string> calib) {
    QuantizeSettings s;
    s.calibration = std::move(calib);
    return error_of([&] { quantize(model, out, s); });
  };
  auto empty = temp_dir() / "empty_calib";
  std::filesystem::create_directories(empty);
  EXPECT_NE(error({empty.string()}).find("holds no .npy files"), std::string::npos) << error({empty.string()});
  EXPECT_NE(error({(temp_dir() / "missing").string()}).find("does not exist"), std::string::npos);
  EXPECT_NE(error({}).find("needs calibration inputs"), std::string::npos);
  const std::string wrong = (temp_dir() / "wrong_shape.npy").string();
  save_npy(wrong, Tensor::zeros(DType::Float32, {1, 3, 12, 12}));
  const std::string e = error({wrong});
  EXPECT_NE(e.find("wrong_shape.npy"), std::string::npos) << e;
  EXPECT_NE(e.find("does not fit input 'x'"), std::string::npos) << e;
  const std::string wrong_dtype = (temp_dir() / "wrong_dtype.npy").string();
  save_npy(wrong_dtype, Tensor::zeros(DType::Float64, {1, 4, 12, 12}));
  EXPECT_NE(error({wrong_dtype}).find("float64"), std::string::npos);
}

TEST(Quantize, OnnxFileWithInt8PrecisionNeedsCalibration) {
  SessionOptions o;
  o.precision = Precision::INT8;
  const std::string e = error_of([&] { Session::load(small_cnn(), o); });
  EXPECT_NE(e.find("--calib"), std::string::npos) << e;
}

}  // namespace
}  // namespace ingot
