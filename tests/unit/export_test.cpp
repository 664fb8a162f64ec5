// nn::export_onnx and nn::export_package: every model of tests/export/cases.h exported, loaded back
// by Session (the ONNX file and the package) and compared with the module's eager outputs, at the
// traced batch size and, for a dynamic batch, at another. The same models run through onnxruntime
// in ctest export.onnxruntime. Also: state_dict names as initializers, the module's mode restored,
// and the errors (a batch-dependent graph, Ingot-only ops, bad names, an unwritable path).
#include <gtest/gtest.h>
#include <ingot/autograd.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/session.h>

#include <filesystem>

#include "../export/cases.h"
#include "onnx/onnx_import.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("ingot_export_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

void expect_near_all(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  const auto w = want.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) / (1 + std::abs(w[i])));
  EXPECT_LE(worst, 1e-5) << what;
}

std::vector<Tensor> eager(export_cases::Case& c, const std::vector<Tensor>& in) {
  autograd::NoGradGuard no_grad;
  return c.forward(in);
}

void expect_session_matches(const std::string& path, export_cases::Case& c, int64_t batch, const std::string& what) {
  Session session = Session::load(path);
  std::vector<Tensor> in = c.inputs(batch);
  std::vector<Tensor> want = eager(c, in), got = session.run(in);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) expect_near_all(got[i], want[i], what + " output " + std::to_string(i));
}

TEST(Export, EveryModuleKindRoundTripsThroughOnnxAndPackages) {
  manual_seed(7);
  for (export_cases::Case& c : export_cases::cases()) {
    SCOPED_TRACE(c.name);
    export_cases::randomize_buffers(*c.module, 100);
    c.module->eval();
    nn::ExportOptions options;
    options.dynamic_batch = c.other_batch > 0;
    const std::string onnx = temp_path(c.name + ".onnx"), package = temp_path(c.name + ".ingot");
    nn::export_onnx(*c.module, c.forward, c.inputs(c.batch), onnx, options);
    expect_session_matches(onnx, c, c.batch, "onnx");
    if (c.other_batch) expect_session_matches(onnx, c, c.other_batch, "onnx, other batch");
    nn::export_package(*c.module, c.forward, c.inputs(c.batch), package, options);
    expect_session_matches(package, c, c.batch, "package");
    if (c.other_batch) expect_session_matches(package, c, c.other_batch, "package, other batch");
    fs::remove(onnx);
    fs::remove(package);
  }
}

TEST(Export, InitializersKeepStateDictNamesAndTheModeIsRestored) {
  manual_seed(1);
  nn::Sequential net{std::make_shared<nn::Conv2d>(1, 2, 3), std::make_shared<nn::BatchNorm2d>(2), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(2 * 4 * 4, 3)};
  const std::string path = temp_path("names.onnx");
  nn::ExportOptions options;
  options.dynamic_batch = true;
  options.input_names = {"images"};
  options.output_names = {"logits"};
  ASSERT_TRUE(net.is_training());
  nn::export_onnx(net, Tensor::zeros(DType::Float32, {2, 1, 6, 6}), path, options);
  EXPECT_TRUE(net.is_training());  // exported in eval mode, then put back
  auto model = import_onnx(path);
  const Graph& g = *model->graph;
  for (const char* name : {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "4.weight", "4.bias"})
    EXPECT_TRUE(g.initializers.count(name)) << name;
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].name, "images");
  EXPECT_EQ(g.inputs[0].type.str(), "float32[batch,1,6,6]");
  EXPECT_EQ(g.outputs[0].name, "logits");
  EXPECT_EQ(g.outputs[0].type.str(), "float32[batch,3]");
  for (const Node& n : g.nodes) EXPECT_NE(n.op_type, "Dropout");
  fs::remove(path);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Export, BadExportsAreErrorsNamingTheCause) {
  nn::Linear fc(4, 3);
  const std::string path = temp_path("bad.onnx");
  auto contains = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  // A forward that makes a constant of its example's batch size cannot be exported with a dynamic
  // batch; one that reshapes to it fails when traced at the other batch size.
  nn::ExportOptions dynamic;
  dynamic.dynamic_batch = true;
  auto per_row = [&](const std::vector<Tensor>& in) {
    Tensor ones = Tensor::empty(DType::Float32, {in[0].dim(0), 1});
    for (float& v : ones.span<float>()) v = 1.0f;
    return std::vector<Tensor>{fc.forward(ops::mul(in[0], ones))};
  };
  std::string e = error_of([&] { nn::export_onnx(fc, per_row, {Tensor::zeros(DType::Float32, {2, 4})}, path, dynamic); });
  EXPECT_TRUE(contains(e, "(Mul) depends on the batch size")) << e;
  auto baked = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fc.forward(ops::reshape(in[0], {2, 4}))}; };
  e = error_of([&] { nn::export_onnx(fc, baked, {Tensor::zeros(DType::Float32, {2, 2, 2})}, path, dynamic); });
  EXPECT_TRUE(contains(e, "tracing again at batch size 3") && contains(e, "Reshape")) << e;
  // Both export with a fixed batch.
  EXPECT_NO_THROW(nn::export_onnx(fc, per_row, {Tensor::zeros(DType::Float32, {2, 4})}, path));
  EXPECT_NO_THROW(nn::export_onnx(fc, baked, {Tensor::zeros(DType::Float32, {2, 2, 2})}, path));
  // An op of Ingot's own domain that has no ONNX form.
  auto own = [&](const std::vector<Tensor>& in) {
    return ops::call("Dropout", {in[0]}, {{"ratio", 0.5f}, {"seed", int64_t(1)}}, 2, "ai.ingot");
  };
  e = error_of([&] { nn::export_onnx(fc, own, {Tensor::zeros(DType::Float32, {2, 4})}, path); });
  EXPECT_TRUE(contains(e, "ai.ingot.Dropout") && contains(e, "cannot be exported")) << e;
  // Names: as many as there are inputs, none repeated.
  nn::ExportOptions names;
  names.input_names = {"a", "b"};
  e = error_of([&] { nn::export_onnx(fc, Tensor::zeros(DType::Float32, {2, 4}), path, names); });
  EXPECT_TRUE(contains(e, "2 input names given for 1 input")) << e;
  // An unwritable path names itself.
  e = error_of([&] { nn::export_onnx(fc, Tensor::zeros(DType::Float32, {2, 4}), "/nonexistent/dir/model.onnx"); });
  EXPECT_TRUE(contains(e, "/nonexistent/dir/model.onnx")) << e;
  // Wrong example shapes fail in the module's own check, with the export named.
  e = error_of([&] { nn::export_onnx(fc, Tensor::zeros(DType::Float32, {2, 5}), path); });
  EXPECT_TRUE(contains(e, "Linear(4, 3)") && contains(e, "export_onnx")) << e;
  fs::remove(path);
}

}  // namespace
}  // namespace ingot
