// The .ingot package (src/package): round trips through save/load and Session, zero-copy weights,
// every attribute kind, and the clear failures for corrupted, truncated, wrong-version and
// wrong-device packages.
#include <gtest/gtest.h>
#include <ingot/convert.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <random>
#include <sstream>

#include "core/tuning.h"
#include "graph/graph.h"
#include "package/package.h"
#include "test_util.h"

using namespace ingot;
namespace fs = std::filesystem;

using ingot::testing::make_node;
using ingot::testing::model_with;
using ingot::testing::tensor_info;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// y = If(cond, then: Relu(x @ W + B) * c, else: x @ W - B), z = Transpose(x @ W);
// x: float32[N,4], W: float32[4,8] and B: float32[8] initializers, c a Constant (tensor attribute).
onnx::ModelProto test_model() {
  std::mt19937 rng(3);
  onnx::GraphProto then_g;
  then_g.set_name("then");
  *then_g.add_node() = make_node("Add", {"xw", "B"}, {"t0"}, "then_add");
  *then_g.add_node() = make_node("Relu", {"t0"}, {"t1"}, "then_relu");
  onnx::NodeProto c = make_node("Constant", {}, {"c"}, "then_const");
  auto* value = c.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_float_data(2.5f);
  *then_g.add_node() = c;
  *then_g.add_node() = make_node("Mul", {"t1", "c"}, {"then_out"}, "then_mul");
  *then_g.add_output() = tensor_info("then_out", onnx::TensorProto::FLOAT, {"N", "8"});
  onnx::GraphProto else_g;
  else_g.set_name("else");
  *else_g.add_node() = make_node("Sub", {"xw", "B"}, {"else_out"}, "else_sub");
  *else_g.add_output() = tensor_info("else_out", onnx::TensorProto::FLOAT, {"N", "8"});

  onnx::GraphProto g;
  g.set_name("package_test");
  *g.add_input() = tensor_info("cond", onnx::TensorProto::BOOL, {});
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N", "4"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N", "8"});
  *g.add_output() = tensor_info("z", onnx::TensorProto::FLOAT, {"8", "N"});
  ingot::testing::add_random_initializer(g, "W", {4, 8}, rng);
  ingot::testing::add_random_initializer(g, "B", {8}, rng);
  *g.add_node() = make_node("MatMul", {"x", "W"}, {"xw"}, "matmul");
  *g.add_node() = ingot::testing::make_if("cond", {"y"}, then_g, else_g, "choose");
  onnx::NodeProto tr = make_node("Transpose", {"xw"}, {"z"}, "transpose");
  auto* perm = tr.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  *g.add_node() = tr;
  return model_with(g);
}

std::string onnx_path() { return ingot::testing::save_model(test_model(), "package_test.onnx"); }

std::string convert(const std::string& file, ConvertOptions options = {}) {
  std::string path = (ingot::testing::temp_dir() / file).string();
  auto model = convert_model(onnx_path(), options);
  PackageMetadata meta;
  meta.precision = std::string(precision_name(options.precision));
  save_package(*model, meta, path);
  return path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

// The address range of the mapping of `path` in this process (/proc/self/maps), or {0, 0}.
std::pair<uintptr_t, uintptr_t> mapping_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line, want = fs::canonical(path).string();
  while (std::getline(maps, line)) {
    if (!line.ends_with(want)) continue;
    uintptr_t lo = 0, hi = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi);
    return {lo, hi};
  }
  return {0, 0};
}

}  // namespace

TEST(PackageHash, IsXXH64) {
  EXPECT_EQ(package_hash("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(package_hash("abc", 3), 0x44BC2CF5AD770999ULL);
  std::string long_text(1000, 'x');
  EXPECT_NE(package_hash(long_text.data(), 1000), package_hash(long_text.data(), 999));
}

TEST(Package, RoundTripGivesTheOnnxSessionsOutputs) {
  std::string package = convert("round_trip.ingot");
  Session from_onnx = Session::load(onnx_path());
  Session from_package = Session::load(package);
  EXPECT_EQ(from_package.model_name(), "round_trip.ingot");
  ASSERT_EQ(from_package.inputs().size(), 2u);
  EXPECT_EQ(from_package.inputs()[1].str(), "x: float32[N,4]");
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> x(3 * 4);
  for (float& v : x) v = dist(rng);
  for (bool cond : {true, false}) {
    std::vector<Tensor> inputs = {Tensor::scalar(cond), Tensor::from_vector(x, {3, 4})};
    auto want = from_onnx.run(inputs);
    auto got = from_package.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape());
      EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << "output " << i << " cond " << cond;
    }
  }
}

TEST(Package, WeightsWrapTheMappedFile) {
  std::string package = convert("zero_copy.ingot");
  auto model = load_package(package, Device::cpu());
  auto [lo, hi] = mapping_of(package);
  ASSERT_NE(lo, 0u) << "the package is not mapped";
  const Tensor& w = model->graph->initializers.at("W");
  auto p = reinterpret_cast<uintptr_t>(w.raw_data());
  EXPECT_GE(p, lo);
  EXPECT_LT(p + w.nbytes(), hi + 1);
  EXPECT_EQ(p % kPackageAlignment, 0u);
  // The weights keep the mapping alive after the model's other parts are gone.
  Tensor kept = w;
  model.reset();
  EXPECT_NE(mapping_of(package).first, 0u);
  EXPECT_EQ(kept.numel(), 32);
  kept = Tensor();
  EXPECT_EQ(mapping_of(package).first, 0u) << "the mapping outlived its last tensor";
}

TEST(Package, EveryAttributeKindSurvives) {
  auto sub = std::make_shared<Graph>();
  sub->name = "body";
  sub->inputs.push_back({"a", {ValueKind::Tensor, DType::Float32, std::vector<Dim>{{-1, "N"}, {3, ""}}}});
  sub->outputs.push_back({"b", {ValueKind::Sequence, DType::Int64, std::nullopt}});
  sub->value_info["m"] = {"m", {ValueKind::Optional, DType::Float16, std::vector<Dim>{{-1, ""}}}};
  sub->initializers["k"] = Tensor::from_vector<int64_t>({7, 8, 9}, {3});
  sub->nodes.push_back(Node{"inner", "Identity", "", {"a"}, {"b"}, {}});
  sub->nodes.push_back(Node{"optional", "Optional", "", {"a"}, {"m"}, {}});
  // A type of a value no node names any more (a fused pass's leftover): not written.
  sub->value_info["gone"] = {"gone", {ValueKind::Tensor, DType::Float32, std::vector<Dim>{{4, ""}}}};
  Node n{"all_kinds", "Custom", "example.domain", {"x", ""}, {"y"}, {}};
  n.attrs["i"] = Attribute(int64_t(-42));
  n.attrs["f"] = Attribute(1.5f);
  n.attrs["s"] = Attribute(std::string("bytes\0with nul", 14));
  n.attrs["t"] = Attribute(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  n.attrs["g"] = Attribute::graph(sub);
  n.attrs["ints"] = Attribute(std::vector<int64_t>{1, -2, 3});
  n.attrs["floats"] = Attribute(std::vector<float>{0.25f, -0.5f});
  n.attrs["strings"] = Attribute(std::vector<std::string>{"a", "", "ccc"});
  Attribute tensors;
  tensors.kind = AttrKind::Tensors;
  tensors.tensors = {Tensor::from_vector<uint8_t>({1, 2}, {2}), Tensor::zeros(DType::Float32, {0, 4})};
  n.attrs["tensors"] = tensors;
  Attribute graphs;
  graphs.kind = AttrKind::Graphs;
  graphs.graphs = {sub, sub};
  n.attrs["graphs"] = graphs;
  Attribute strings_tensor(Tensor::empty(DType::String, {2}));
  static_cast<std::string*>(strings_tensor.t.raw_data())[0] = "hello";
  static_cast<std::string*>(strings_tensor.t.raw_data())[1] = "world";
  n.attrs["string_tensor"] = strings_tensor;

  Model model;
  model.name = "kinds";
  model.ir_version = 9;
  model.producer = "hand";
  model.opsets = {{"", 17}, {"example.domain", 1}};
  model.graph = std::make_shared<Graph>();
  model.graph->name = "main";
  model.graph->nodes.push_back(n);
  model.graph->inputs.push_back({"x", {ValueKind::Tensor, DType::Float32, std::vector<Dim>{{2, ""}}}});
  model.graph->outputs.push_back({"y", {ValueKind::Tensor, DType::Float32, std::nullopt}});
  std::string path = (ingot::testing::temp_dir() / "kinds.ingot").string();
  save_package(model, {}, path);

  PackageMetadata meta;
  auto loaded = inspect_package(path, meta);
  EXPECT_EQ(meta.format_version, kPackageFormatVersion);
  EXPECT_TRUE(meta.producer.starts_with("ingot ")) << meta.producer;
  EXPECT_EQ(meta.device, "cpu");
  EXPECT_EQ(meta.arch, current_arch(Device::cpu()));
  EXPECT_EQ(meta.source_model, "kinds");
  EXPECT_GT(meta.created_unix, 0);
  ASSERT_EQ(meta.inputs.size(), 1u);
  EXPECT_EQ(meta.inputs[0].type.str(), "float32[2]");
  EXPECT_EQ(loaded->ir_version, 9);
  EXPECT_EQ(loaded->producer, "hand");
  EXPECT_EQ(loaded->opsets, model.opsets);
  EXPECT_EQ(print_graph(*loaded->graph), print_graph(*model.graph));
  const Node& m = loaded->graph->nodes.at(0);
  EXPECT_EQ(m.domain, "example.domain");
  EXPECT_EQ(m.inputs, (std::vector<std::string>{"x", ""}));
  EXPECT_EQ(m.attrs.at("i").i, -42);
  EXPECT_EQ(m.attrs.at("f").f, 1.5f);
  EXPECT_EQ(m.attrs.at("s").s, std::string("bytes\0with nul", 14));
  EXPECT_EQ(m.attrs.at("t").t.describe(), "float32[2,3]");
  EXPECT_EQ(m.attrs.at("t").t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(m.attrs.at("ints").ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(m.attrs.at("floats").floats, (std::vector<float>{0.25f, -0.5f}));
  EXPECT_EQ(m.attrs.at("strings").strings, (std::vector<std::string>{"a", "", "ccc"}));
  ASSERT_EQ(m.attrs.at("tensors").tensors.size(), 2u);
  EXPECT_EQ(m.attrs.at("tensors").tensors[0].to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(m.attrs.at("tensors").tensors[1].describe(), "float32[0,4]");
  const Tensor& st = m.attrs.at("string_tensor").t;
  ASSERT_EQ(st.dtype(), DType::String);
  EXPECT_EQ(static_cast<const std::string*>(st.raw_data())[1], "world");
  for (const Graph* g : {m.attrs.at("g").g.get(), m.attrs.at("graphs").graphs.at(1).get()}) {
    EXPECT_EQ(g->name, "body");
    EXPECT_EQ(g->inputs.at(0).type.str(), sub->inputs[0].type.str());
    EXPECT_EQ(g->outputs.at(0).type.kind, ValueKind::Sequence);
    EXPECT_FALSE(g->outputs.at(0).type.shape.has_value());
    EXPECT_EQ(g->value_info.at("m").type.kind, ValueKind::Optional);
    EXPECT_EQ(g->value_info.at("m").type.dtype, DType::Float16);
    EXPECT_EQ(g->value_info.count("gone"), 0u);
    EXPECT_EQ(g->initializers.at("k").to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  }
}

TEST(Package, CorruptedByteFailsTheChecksum) {
  std::string path = convert("corrupt.ingot");
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 5] ^= 0x10;  // in the weights
  write_bytes(path, bytes);
  std::string e = error_of([&] { load_package(path, Device::cpu()); });
  EXPECT_NE(e.find("package 'corrupt.ingot' is corrupted: checksum mismatch"), std::string::npos) << e;
  e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
  bytes = read_bytes(convert("corrupt2.ingot"));
  bytes[kPackageHeaderSize + 20] ^= 0x01;  // in the structure
  write_bytes(path, bytes);
  e = error_of([&] { load_package(path, Device::cpu()); });
  EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
}

TEST(Package, TruncatedFileFailsClearly) {
  std::string path = convert("truncated.ingot");
  std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() / 2));
  std::string e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("package 'truncated.ingot' is truncated:"), std::string::npos) << e;
  write_bytes(path, bytes.substr(0, 10));
  e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("is truncated: 10 bytes, shorter than the 64-byte header"), std::string::npos) << e;
  write_bytes(path, "");
  e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("is truncated"), std::string::npos) << e;
}

TEST(Package, OtherFormatVersionIsRefused) {
  std::string path = convert("version.ingot");
  std::string bytes = read_bytes(path);
  uint32_t version = 2;
  std::memcpy(bytes.data() + 8, &version, 4);
  write_bytes(path, bytes);
  std::string e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("package format version 2, this Ingot reads version 1"), std::string::npos) << e;
}

TEST(Package, NotAPackageIsRefused) {
  std::string path = (ingot::testing::temp_dir() / "text.ingot").string();
  write_bytes(path, std::string(200, 'a'));
  std::string e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("is not an Ingot package (bad magic)"), std::string::npos) << e;
  e = error_of([&] { Session::load((ingot::testing::temp_dir() / "nope.ingot").string()); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
}

TEST(Package, WrongDeviceOrArchIsRefused) {
  auto model = convert_model(onnx_path(), {});
  std::string path = (ingot::testing::temp_dir() / "cuda.ingot").string();
  PackageMetadata meta;
  meta.device = "cuda";
  meta.arch = "sm_90";
  save_package(*model, meta, path);
  std::string e = error_of([&] { Session::load(path); });
  EXPECT_NE(e.find("package 'cuda.ingot' was built for cuda sm_90, this session runs on cpu"), std::string::npos)
      << e;
  meta.device = "cpu";
  meta.arch = "x86_64-imaginary";
  save_package(*model, meta, path);
  e = error_of([&] { load_package(path, Device::cpu()); });
  EXPECT_NE(e.find("was built for cpu x86_64-imaginary, this session runs on cpu " + current_arch(Device::cpu())),
            std::string::npos)
      << e;
}

TEST(Package, PrecisionIsFixedAtConversion) {
  std::string path = convert("fp32.ingot");
  SessionOptions options;
  options.precision = Precision::FP16;
  std::string e = error_of([&] { Session::load(path, options); });
  EXPECT_NE(e.find("was converted for precision fp32, not fp16"), std::string::npos) << e;
}

TEST(Package, InputShapesFixSymbolicDims) {
  ConvertOptions options;
  options.input_shapes = {{"x", {5, 4}}};
  std::string path = convert("fixed.ingot", options);
  Session s = Session::load(path);
  EXPECT_EQ(s.inputs()[1].str(), "x: float32[5,4]");
  EXPECT_EQ(s.outputs()[1].str(), "z: float32[8,5]");
  std::string e = error_of([&] { s.run({Tensor::scalar(true), Tensor::zeros(DType::Float32, {3, 4})}); });
  EXPECT_NE(e.find("dimension 0 must be 5"), std::string::npos) << e;
  options.input_shapes = {{"x", {5, 3}}};
  e = error_of([&] { convert_model(onnx_path(), options); });
  EXPECT_NE(e.find("dimension 1 of input 'x' is fixed at 4"), std::string::npos) << e;
  options.input_shapes = {{"q", {5, 4}}};
  e = error_of([&] { convert_model(onnx_path(), options); });
  EXPECT_NE(e.find("no input named 'q' (inputs: cond, x)"), std::string::npos) << e;
}

TEST(Package, SessionRecognizesThePackageByItsMagic) {
  std::string path = convert("renamed.ingot");
  std::string other = (ingot::testing::temp_dir() / "renamed.bin").string();
  fs::copy_file(path, other, fs::copy_options::overwrite_existing);
  EXPECT_TRUE(is_package_file(other));
  EXPECT_FALSE(is_package_file(onnx_path()));
  Session s = Session::load(other);
  EXPECT_EQ(s.outputs().size(), 2u);
}

TEST(Package, AlgorithmChoicesReachTheTuningTable) {
  std::string path = (ingot::testing::temp_dir() / "tuned.ingot").string();
  auto model = convert_model(onnx_path(), {});
  PackageMetadata meta;
  meta.algorithms = {{"test.conv|x=[1,3,8,8]", {'7', ' ', '1'}}, {"test.conv|x=[2,3,8,8]", {'2', ' ', '0'}}};
  save_package(*model, meta, path);
  tuning::algorithms().clear();
  EXPECT_FALSE(tuning::algorithms().find("test.conv|x=[1,3,8,8]"));
  // Inspecting reads them as metadata without installing them; loading installs them.
  PackageMetadata read;
  inspect_package(path, read);
  ASSERT_EQ(read.algorithms.size(), 2u);
  EXPECT_FALSE(tuning::algorithms().find("test.conv|x=[2,3,8,8]"));
  load_package(path, Device::cpu());
  EXPECT_EQ(tuning::algorithms().find("test.conv|x=[1,3,8,8]"), std::optional<std::string>("7 1"));
  EXPECT_EQ(tuning::algorithms().find("test.conv|x=[2,3,8,8]"), std::optional<std::string>("2 0"));
  tuning::Stats s = tuning::algorithms().stats();
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.misses, 2);
  tuning::algorithms().clear();
}

// Tuning shapes name the shapes a GPU package will run at; a CPU package has nothing to tune, and
// says so rather than ignoring them (tests/gpu/graph_test.cpp runs them on a GPU).
TEST(Package, TuningShapesAreForGpuPackages) {
  ConvertSettings settings;
  settings.tuning_shapes = {{{"x", {2, 4}}}};
  const std::string path = (ingot::testing::temp_dir() / "tuning_cpu.ingot").string();
  try {
    convert(onnx_path(), path, settings);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GPU packages (--device cuda)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

namespace ingot {
namespace {

// A constant whose elements are all equal is stored as one element (a splat) and comes back whole.
TEST(Package, ConstantOfEqualElementsIsStoredOnce) {
  Model model;
  model.name = "splat";
  model.opsets[""] = 17;
  model.graph = std::make_shared<Graph>();
  Graph& g = *model.graph;
  g.inputs.push_back({"x", {ValueKind::Tensor, DType::Float32, std::vector<Dim>{{64, ""}, {64, ""}}}});
  g.outputs.push_back({"y", {ValueKind::Tensor, DType::Float32, std::vector<Dim>{{64, ""}, {64, ""}}}});
  g.initializers["pad"] = Tensor::from_vector(std::vector<float>(64 * 64, 2.5f), {64, 64});
  Node add;
  add.op_type = "Add";
  add.name = "add";
  add.inputs = {"x", "pad"};
  add.outputs = {"y"};
  g.nodes.push_back(add);
  const std::string path = (testing::temp_dir() / "splat.ingot").string();
  save_package(model, PackageMetadata{}, path);
  EXPECT_LT(std::filesystem::file_size(path), 64u * 64u * 4u / 4) << "the 16 KB constant was stored whole";
  auto loaded = load_package(path, Device::cpu());
  const Tensor& pad = loaded->graph->initializers.at("pad");
  ASSERT_EQ(pad.shape(), (Shape{64, 64}));
  for (float v : pad.to_vector<float>()) ASSERT_EQ(v, 2.5f);
  Session s = Session::load(path);
  Tensor y = s.run({Tensor::from_vector(std::vector<float>(64 * 64, 1.0f), {64, 64})})[0];
  for (float v : y.to_vector<float>()) ASSERT_EQ(v, 3.5f);
}

}  // namespace
}  // namespace ingot
