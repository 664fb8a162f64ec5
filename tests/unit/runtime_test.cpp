// Importer, verifier, printer, executor and Session, on small models built here with ONNX's
// protobuf classes; expected values are computed independently in double precision.
#include <gtest/gtest.h>
#include <ingot/ops.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "ops/kernel.h"
#include "test_util.h"

using namespace ingot;
namespace fs = std::filesystem;

using ingot::testing::make_node;
using ingot::testing::model_with;
using ingot::testing::tensor_info;

namespace {

std::string save(const onnx::ModelProto& m, const std::string& file) { return ingot::testing::save_model(m, file); }

// y = (x + w) * x with w an initializer; x: float32[N,3].
onnx::ModelProto add_mul_model() {
  onnx::GraphProto g;
  g.set_name("add_mul");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N", "3"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N", "3"});
  auto* w = g.add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  for (float v : {1.0f, -2.0f, 0.5f}) w->add_float_data(v);
  *g.add_node() = make_node("Add", {"x", "w"}, {"s"});
  *g.add_node() = make_node("Mul", {"s", "x"}, {"y"});
  return model_with(g);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Importer, ReadsGraphInitializersOpsetsAndSymbolicShapes) {
  auto model = import_onnx(save(add_mul_model(), "add_mul.onnx"));
  EXPECT_EQ(model->name, "add_mul.onnx");
  EXPECT_EQ(model->opset(""), 17);
  const Graph& g = *model->graph;
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].type.str(), "float32[N,3]");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.initializers.at("w").to_vector<float>(), (std::vector<float>{1, -2, 0.5f}));
  EXPECT_EQ(g.parameter_count(), 3);
  // ONNX shape inference recorded the intermediate value with the symbolic batch dim.
  const ValueInfo* s = g.find_value_info("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->type.str(), "float32[N,3]");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%s = Add(%x, %w)"), std::string::npos) << text;
  EXPECT_NE(text.find("%y = Mul(%s, %x)"), std::string::npos) << text;
}

TEST(Session, RunsAndMatchesADoubleReference) {
  Session session = Session::load(save(add_mul_model(), "add_mul.onnx"));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-3, 3);
  std::vector<float> x(4 * 3);
  for (float& v : x) v = dist(rng);
  auto out = session.run({{"x", Tensor::from_vector(x, {4, 3})}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), (Shape{4, 3}));
  const double w[3] = {1, -2, 0.5};
  for (int i = 0; i < 12; ++i) {
    double ref = (double(x[i]) + w[i % 3]) * double(x[i]);
    EXPECT_NEAR(out[0].data<float>()[i], ref, 1e-5 * std::max(1.0, std::abs(ref)));
  }
}

TEST(Session, ChecksInputsAndNamesTheProblem) {
  Session session = Session::load(save(add_mul_model(), "add_mul.onnx"));
  EXPECT_EQ(error_of([&] { session.run(std::vector<Tensor>{}); }), "model 'add_mul.onnx': input 'x' is missing");
  EXPECT_EQ(error_of([&] {
              session.run({{"x", Tensor::zeros(DType::Int64, {2, 3})}});
            }),
            "model 'add_mul.onnx': input 'x': expected dtype float32, got int64");
  EXPECT_EQ(error_of([&] {
              session.run({{"x", Tensor::zeros(DType::Float32, {2, 4})}});
            }),
            "model 'add_mul.onnx': input 'x': expected shape [N,3], got float32[2,4] (dimension 1 must be 3)");
  EXPECT_NE(error_of([&] {
              session.run({{"q", Tensor::zeros(DType::Float32, {2, 3})}});
            }).find("no input named 'q'"),
            std::string::npos);
}

TEST(Session, SymbolicDimsMustAgreeAcrossInputs) {
  onnx::GraphProto g;
  g.set_name("two_inputs");
  *g.add_input() = tensor_info("a", onnx::TensorProto::FLOAT, {"batch", "2"});
  *g.add_input() = tensor_info("b", onnx::TensorProto::FLOAT, {"batch", "2"});
  *g.add_output() = tensor_info("c", onnx::TensorProto::FLOAT, {"batch", "2"});
  *g.add_node() = make_node("Add", {"a", "b"}, {"c"});
  Session session = Session::load(save(model_with(g), "two_inputs.onnx"));
  std::string err = error_of([&] {
    session.run({{"a", Tensor::zeros(DType::Float32, {3, 2})}, {"b", Tensor::zeros(DType::Float32, {4, 2})}});
  });
  EXPECT_NE(err.find("'batch'"), std::string::npos) << err;
}

TEST(Importer, MalformedFilesGiveErrorsNamingTheFile) {
  auto dir = ingot::testing::temp_dir();
  fs::create_directories(dir);
  std::string full = save(add_mul_model(), "full.onnx");
  std::string bytes((std::istreambuf_iterator<char>(std::ifstream(full, std::ios::binary).rdbuf())), {});
  std::string truncated = (dir / "truncated.onnx").string();
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_NE(error_of([&] { import_onnx(truncated); }).find("model 'truncated.onnx': not a valid ONNX model"),
            std::string::npos);
  EXPECT_NE(error_of([&] { import_onnx((dir / "absent.onnx").string()); }).find("does not exist"), std::string::npos);
  std::string empty = (dir / "empty.onnx").string();
  std::ofstream(empty).close();
  EXPECT_NE(error_of([&] { import_onnx(empty); }).find("file is empty"), std::string::npos);
}

// (Nodes listed before the ones computing their inputs are sorted, not refused: tests/python/test_model_quirks.py.)
TEST(Verifier, RejectsUndefinedValuesAndUnknownOps) {
  onnx::GraphProto g;
  g.set_name("bad");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"2"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"2"});
  *g.add_node() = make_node("Relu", {"nowhere"}, {"y"}, "early");
  *g.add_node() = make_node("Relu", {"x"}, {"later"}, "late");
  EXPECT_NE(error_of([&] {
              import_onnx(save(model_with(g), "order.onnx"));
            }).find("node 'early' (Relu): input 0 ('nowhere') is not defined before this node"),
            std::string::npos);

  onnx::GraphProto u;
  u.set_name("unknown");
  *u.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"2"});
  *u.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"2"});
  *u.add_node() = make_node("NoSuchOp", {"x"}, {"y"}, "n1");
  EXPECT_NE(error_of([&] { import_onnx(save(model_with(u), "unknown.onnx")); }).find("unsupported op NoSuchOp"),
            std::string::npos);
}

TEST(Importer, ReadsExternalData) {
  auto dir = ingot::testing::temp_dir();
  fs::create_directories(dir);
  std::vector<float> w = {4, 5, 6};
  {
    std::ofstream out(dir / "weights.bin", std::ios::binary);
    out.write("padding!", 8);
    out.write(reinterpret_cast<const char*>(w.data()), 12);
  }
  onnx::ModelProto m = add_mul_model();
  auto* init = m.mutable_graph()->mutable_initializer(0);
  init->clear_float_data();
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const std::string& v) {
    auto* e = init->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "8");
  add_kv("length", "12");
  auto model = import_onnx(save(m, "external.onnx"));
  EXPECT_EQ(model->graph->initializers.at("w").to_vector<float>(), w);
}

TEST(Executor, SubgraphsSeeOuterValuesAndBranchesRun) {
  // y = If(cond) then (x + x) else (x * x): both branches read x from the enclosing graph.
  auto branch = [](const std::string& op, const std::string& name) {
    onnx::GraphProto b;
    b.set_name(name);
    *b.add_node() = make_node(op, {"x", "x"}, {name + "_out"}, name + "_node");
    *b.add_output() = tensor_info(name + "_out", onnx::TensorProto::FLOAT, {"2"});
    return b;
  };
  onnx::GraphProto g;
  g.set_name("if_graph");
  *g.add_input() = tensor_info("cond", onnx::TensorProto::BOOL, {});
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"2"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"2"});
  *g.add_node() = ingot::testing::make_if("cond", {"y"}, branch("Add", "then"), branch("Mul", "else"), "choose");
  Session session = Session::load(save(model_with(g), "if.onnx"));
  Tensor x = Tensor::from_vector<float>({3, -2}, {2});
  EXPECT_EQ(session.run({Tensor::scalar(true), x})[0].to_vector<float>(), (std::vector<float>{6, -4}));
  EXPECT_EQ(session.run({Tensor::scalar(false), x})[0].to_vector<float>(), (std::vector<float>{9, 4}));
}

TEST(Registry, KernelsAreFoundByOpsetRange) {
  const auto& reg = KernelRegistry::instance();
  EXPECT_NE(reg.find("", "Add", DeviceType::CPU, 14), nullptr);
  EXPECT_EQ(reg.find("", "NoSuchOp", DeviceType::CPU, 14), nullptr);
  EXPECT_EQ(reg.find("", "Add", DeviceType::CPU, 0), nullptr);  // below every registered range
  // Every kernel implements an op that the catalogue defines.
  for (const KernelDef* k : reg.all()) {
    EXPECT_NE(OpCatalogue::instance().find(k->domain, k->op), nullptr) << k->op;
  }
}

TEST(Eager, CallsUseCatalogueDefaults) {
  // Conv with all defaults (stride 1, no padding, group 1) against a direct double computation.
  std::vector<float> x(1 * 1 * 4 * 4), w(1 * 1 * 3 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3;
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 3) - 1;
  Tensor y = ops::conv(Tensor::from_vector(x, {1, 1, 4, 4}), Tensor::from_vector(w, {1, 1, 3, 3}));
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  for (int oh = 0; oh < 2; ++oh)
    for (int ow = 0; ow < 2; ++ow) {
      double ref = 0;
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) ref += double(x[(oh + kh) * 4 + ow + kw]) * w[kh * 3 + kw];
      EXPECT_NEAR(y.data<float>()[oh * 2 + ow], ref, 1e-5);
    }
  Tensor s = ops::add(Tensor::from_vector<float>({1, 2}, {2}), Tensor::scalar<float>(10));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{11, 12}));
  EXPECT_NE(error_of([] { ops::call("NoSuchOp", {}); }).find("unsupported op NoSuchOp"), std::string::npos);
}

TEST(Executor, RejectsDtypesTheKernelDoesNotTakeAtLoadTime) {
  onnx::GraphProto g;
  g.set_name("relu_u8");
  *g.add_input() = tensor_info("x", onnx::TensorProto::UINT8, {"2"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::UINT8, {"2"});
  *g.add_node() = make_node("Relu", {"x"}, {"y"}, "r");
  std::string err = error_of([&] { Session::load(save(model_with(g), "relu_u8.onnx")); });
  EXPECT_NE(err.find("model 'relu_u8.onnx': node 'r' (Relu): input 0 ('x') has dtype uint8, which the CPU kernel of "
                     "Relu does not support"),
            std::string::npos)
      << err;
}
