// Extensions (src/extension, include/ingot/extension.h): tests/extension/softshrink.cpp compiled
// just in time, its ops run eagerly, under autograd (against finite differences, first and second
// order), in an ONNX model of its domain (shape inference through the op), in a package that embeds
// the library; the JIT's cache, lock and errors (compile error, insecure cache, stale lock, bad
// library, bad kernel input).
#include <gtest/gtest.h>
#include <ingot/autograd.h>
#include <ingot/load_extension.h>
#include <ingot/ops.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/backend.h"
#include "onnx/onnx_import.h"
#include "ops/kernel.h"
#include "package/package.h"
#include "test_util.h"

using namespace ingot;
namespace fs = std::filesystem;

namespace {

const std::string kSource = std::string(INGOT_SOURCE_DIR) + "/tests/extension/softshrink.cpp";

// One cache for every test process of this binary (ctest runs each test as a process of its own):
// the first load compiles, the others find the library, and concurrent first loads meet at the lock.
ExtensionOptions shared_cache() {
  ExtensionOptions o;
  o.build_directory = (fs::temp_directory_path() / ("ingot_ext_cache_" + std::to_string(getuid()))).string();
  return o;
}

ExtensionInfo load_test_extension() { return load_extension("test_softshrink", {kSource}, shared_cache()); }

using ingot::testing::error_of;

Tensor random_tensor(Shape shape, uint32_t seed, DType dt = DType::Float64) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape).cast(dt);
}

double softshrink_ref(double x, double l) { return x > l ? x - l : x < -l ? x + l : 0.0; }

}  // namespace

TEST(Extension, LoadsAndRunsEagerlyAgainstTheFormula) {
  const ExtensionInfo info = load_test_extension();
  EXPECT_EQ(info.name, "test_softshrink");
  EXPECT_EQ(info.digest.size(), 16u);
  EXPECT_EQ(info.ops, (std::vector<std::string>{"test.ext::Softshrink", "test.ext::SoftshrinkGrad",
                                                "test.ext::SoftshrinkGradGrad", "test.ext::RepeatRows"}));
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor x = random_tensor({7, 33}, 1, dt);
    const Tensor y = ops::call("Softshrink", {x}, {{"lambd", 0.75f}}, 1, "test.ext").at(0);
    ASSERT_EQ(y.dtype(), dt);
    ASSERT_EQ(y.shape(), x.shape());
    const Tensor x64 = x.cast(DType::Float64), y64 = y.cast(DType::Float64);
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_NEAR(y64.data<double>()[i], softshrink_ref(x64.data<double>()[i], 0.75), dt == DType::Float32 ? 1e-6 : 0);
  }
  // The default attribute comes from the op's declaration (0.5).
  const Tensor x = Tensor::from_vector<double>({-1.0, -0.25, 0.25, 2.0}, {4});
  EXPECT_EQ(ops::call("Softshrink", {x}, {}, 1, "test.ext").at(0).to_vector<double>(),
            (std::vector<double>{-0.5, 0, 0, 1.5}));
}

TEST(Extension, ASecondLoadOfTheSameBuildIsALookup) {
  const ExtensionInfo first = load_test_extension();
  const ExtensionInfo second = load_test_extension();
  EXPECT_FALSE(second.compiled);
  EXPECT_EQ(second.digest, first.digest);
  EXPECT_LT(second.seconds, 0.3);
}

TEST(Extension, GradientsMatchFiniteDifferences) {
  load_test_extension();
  // Points away from the kinks at +-lambd, where the function is smooth.
  std::vector<double> xs = {-2.1, -1.3, -0.4, 0.1, 0.45, 0.9, 1.7, 2.6};
  const double lambd = 0.7, h = 1e-6;
  Tensor x = Tensor::from_vector(xs, {2, 4});
  x.set_requires_grad(true);
  const Tensor w = random_tensor({2, 4}, 3);
  auto f = [&](const Tensor& in) {
    return ops::reduce_sum(ops::mul(ops::call("Softshrink", {in}, {{"lambd", float(lambd)}}, 1, "test.ext").at(0), w), {}, false);
  };
  f(x).backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<double> p = xs, m = xs;
    p[i] += h, m[i] -= h;
    const double numeric = (f(Tensor::from_vector(p, {2, 4})).item_double() - f(Tensor::from_vector(m, {2, 4})).item_double()) / (2 * h);
    EXPECT_NEAR(g[i], numeric, 1e-8) << "element " << i;
  }
  // Second order: d/dw of <grad_x f, v> is mask * v, through SoftshrinkGrad's own gradient op.
  Tensor wv = w.clone();
  wv.set_requires_grad(true);
  Tensor x2 = Tensor::from_vector(xs, {2, 4});
  x2.set_requires_grad(true);
  Tensor y = ops::reduce_sum(ops::mul(ops::call("Softshrink", {x2}, {{"lambd", float(lambd)}}, 1, "test.ext").at(0), wv), {}, false);
  Tensor gx = autograd::grad({y}, {x2}, {}, true, true).at(0);
  const Tensor v = random_tensor({2, 4}, 4);
  Tensor gw = autograd::grad({ops::reduce_sum(ops::mul(gx, v), {}, false)}, {wv}).at(0);
  const std::vector<double> got = gw.to_vector<double>(), vv = v.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_DOUBLE_EQ(got[i], std::fabs(xs[i]) > lambd ? vv[i] : 0.0);
}

namespace {

// x: float32[3,4] -> test.ext::RepeatRows(repeats=3) -> Relu -> test.ext::Softshrink(lambd=0.25) -> y,
// with the extension's domain in the model's opset imports and no type given for y.
std::string extension_model_path() {
  onnx::GraphProto g;
  g.set_name("ext");
  *g.add_input() = ingot::testing::static_tensor_info("x", onnx::TensorProto::FLOAT, {3, 4});
  onnx::NodeProto rep = ingot::testing::make_node("RepeatRows", {"x"}, {"r"});
  rep.set_domain("test.ext");
  auto* a = rep.add_attribute();
  a->set_name("repeats"), a->set_type(onnx::AttributeProto::INT), a->set_i(3);
  *g.add_node() = rep;
  *g.add_node() = ingot::testing::make_node("Relu", {"r"}, {"h"});
  onnx::NodeProto s = ingot::testing::make_node("Softshrink", {"h"}, {"y"});
  s.set_domain("test.ext");
  auto* l = s.add_attribute();
  l->set_name("lambd"), l->set_type(onnx::AttributeProto::FLOAT), l->set_f(0.25f);
  *g.add_node() = s;
  g.add_output()->set_name("y");
  onnx::ModelProto m = ingot::testing::model_with(g);
  auto* op = m.add_opset_import();
  op->set_domain("test.ext"), op->set_version(1);
  return ingot::testing::save_model(m, "extension_model.onnx");
}

void expect_model_outputs(Session& session) {
  const Tensor x = random_tensor({3, 4}, 9, DType::Float32);
  const Tensor y = session.run({{"x", x}}).at(0);
  ASSERT_EQ(y.shape(), (Shape{9, 4}));
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_FLOAT_EQ(yv[size_t(r * 4 + c)], float(softshrink_ref(std::max(0.0, double(xv[size_t(r / 3 * 4 + c)])), 0.25)));
}

}  // namespace

TEST(Extension, OnnxModelsOfItsDomainInferShapesThroughItAndRun) {
  load_test_extension();
  const std::string path = extension_model_path();
  std::shared_ptr<Model> model = import_onnx(path);
  // libonnx's inference ran through the extension's shape rule: Relu after it has a type.
  ASSERT_TRUE(model->graph->value_info.count("h"));
  EXPECT_EQ(model->graph->value_info.at("h").type.str(), "float32[9,4]");
  EXPECT_EQ(model->graph->outputs.at(0).type.str(), "float32[9,4]");
  for (bool optimize : {false, true}) {
    Session session = Session::load(path, {.optimize = optimize});
    expect_model_outputs(session);
  }
}

TEST(Extension, PackagesEmbedTheLibraryAndRunWithoutItsSources) {
  const ExtensionInfo info = load_test_extension();
  const std::string package = (ingot::testing::temp_dir() / "extension_model.ingot").string();
  save_package(*convert_model(extension_model_path(), {}), {}, package);
  const PackageMetadata meta = read_package_metadata(package);
  ASSERT_EQ(meta.extensions.size(), 1u);
  EXPECT_EQ(meta.extensions[0].name, "test_softshrink");
  EXPECT_EQ(meta.extensions[0].digest, info.digest);
  EXPECT_EQ(meta.extensions[0].ops, info.ops);
  EXPECT_EQ(meta.extensions[0].nbytes, fs::file_size(info.library));
  Session session = Session::load(package);
  expect_model_outputs(session);
  // A process that never built the extension runs the package from the embedded copy (the CLI,
  // which loads no extension of its own): tests/cli/extension_test.sh.
}

TEST(Extension, KernelErrorsNameTheExtensionAndTheirMessage) {
  load_test_extension();
  const std::string e = error_of([] { ops::call("Softshrink", {random_tensor({4}, 1)}, {{"lambd", -1.0f}}, 1, "test.ext"); });
  EXPECT_NE(e.find("extension 'test_softshrink' CPU kernel: lambd must be >= 0"), std::string::npos) << e;
  const std::string dt = error_of([] { ops::call("Softshrink", {random_tensor({4}, 1, DType::Int32)}, {}, 1, "test.ext"); });
  EXPECT_NE(dt.find("int32"), std::string::npos) << dt;
  const std::string shape = error_of([] { ops::call("RepeatRows", {Tensor::scalar(1.0f)}, {}, 1, "test.ext"); });
  EXPECT_NE(shape.find("rank >= 1"), std::string::npos) << shape;
}

TEST(Extension, CompileErrorsShowTheCompilersMessageWithFileAndLine) {
  const fs::path dir = ingot::testing::temp_dir() / "bad_ext";
  fs::create_directories(dir);
  std::ofstream(dir / "bad.cpp") << "#include <ingot/extension.h>\nint f() { return undefined_name; }\n";
  ExtensionOptions o;
  o.build_directory = (dir / "cache").string();
  const std::string e = error_of([&] { load_extension("bad", {(dir / "bad.cpp").string()}, o); });
  EXPECT_NE(e.find("extension 'bad': compiling bad.cpp failed"), std::string::npos) << e;
  EXPECT_NE(e.find("bad.cpp:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("undefined_name"), std::string::npos) << e;
}

TEST(Extension, RefusesAGroupOrWorldWritableCache) {
  const fs::path cache = ingot::testing::temp_dir() / "open_cache";
  fs::create_directories(cache);
  chmod(cache.c_str(), 0777);
  ExtensionOptions o;
  o.build_directory = cache.string();
  const std::string e = error_of([&] { load_extension("test_softshrink", {kSource}, o); });
  EXPECT_NE(e.find("refusing the extension cache '" + cache.string() + "': it is writable by everyone (mode 0777)"),
            std::string::npos) << e;
  chmod(cache.c_str(), 0775);
  EXPECT_NE(error_of([&] { load_extension("test_softshrink", {kSource}, o); }).find("writable by its group"), std::string::npos);
}

TEST(Extension, ALockLeftByAKilledBuildDoesNotBlock) {
  // A process that holds the build lock, as a build in progress does, is killed: its lock dies with it.
  const ExtensionOptions o = shared_cache();
  fs::create_directories(o.build_directory);
  chmod(o.build_directory.c_str(), 0700);
  const fs::path lock = fs::path(o.build_directory) / "test_softshrink.lock";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    const int fd = open(lock.c_str(), O_RDWR | O_CREAT, 0600);
    flock(fd, LOCK_EX);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const auto start = std::chrono::steady_clock::now();
  const ExtensionInfo info = load_test_extension();
  EXPECT_EQ(info.ops.size(), 4u);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0);
}

TEST(Extension, SourcesAndLibrariesThatAreNotExtensionsAreRefusedByName) {
  EXPECT_NE(error_of([] { load_extension("x", {"/nonexistent/x.cpp"}); }).find("source '/nonexistent/x.cpp' cannot be read"),
            std::string::npos);
  EXPECT_NE(error_of([] { load_extension("x", {"notes.txt"}); }).find("expected .cpp"), std::string::npos);
  EXPECT_NE(error_of([] { load_extension("bad name", {kSource}); }).find("letters, digits"), std::string::npos);
  const std::string e = error_of([] { load_extension_library("/lib/x86_64-linux-gnu/libz.so.1"); });
  EXPECT_NE(e.find("extension library '/lib/x86_64-linux-gnu/libz.so.1': not an Ingot extension"), std::string::npos) << e;
  EXPECT_NE(error_of([] { load_extension_library("/nonexistent/libx.so"); }).find("no such file"), std::string::npos);
}

TEST(Extension, CudaSourcesBuildWithNvccAndRegisterCudaKernels) {
  // The custom-op example with its .cu source: nvcc compiles it for the GPU (no GPU needed to build),
  // and a build with the CUDA backend registers its CUDA kernels beside the CPU ones.
  if (!find_backend(DeviceType::CUDA) || access("/usr/local/cuda/bin/nvcc", X_OK) != 0)
    GTEST_SKIP() << "a build without the CUDA backend, or no nvcc";
  const std::string ex = std::string(INGOT_SOURCE_DIR) + "/examples/custom-op/";
  ExtensionOptions o = shared_cache();
  o.extra_cflags = {"-DWITH_CUDA"};
  const ExtensionInfo info = load_extension("example_softshrink_cuda", {ex + "softshrink.cpp", ex + "softshrink.cu"}, o);
  EXPECT_EQ(info.ops, (std::vector<std::string>{"example.custom::Softshrink", "example.custom::SoftshrinkGrad"}));
  for (const char* op : {"Softshrink", "SoftshrinkGrad"}) {
    EXPECT_NE(KernelRegistry::instance().find("example.custom", op, DeviceType::CUDA, 1), nullptr) << op;
    EXPECT_NE(KernelRegistry::instance().find("example.custom", op, DeviceType::CPU, 1), nullptr) << op;
  }
  // Its CPU kernel against the formula.
  const Tensor x = Tensor::from_vector<float>({-2.0f, -0.25f, 0.0f, 0.75f, 3.0f}, {5});
  EXPECT_EQ(ops::call("Softshrink", {x}, {{"lambd", 0.5f}}, 1, "example.custom").at(0).to_vector<float>(),
            (std::vector<float>{-1.5f, 0, 0, 0.25f, 2.5f}));
}

TEST(Extension, SessionsKeepRunningWhileTheCatalogueGrows) {
  // A session made before the extension is loaded runs on another thread throughout the load.
  onnx::GraphProto g;
  g.set_name("tanh");
  *g.add_input() = ingot::testing::static_tensor_info("x", onnx::TensorProto::FLOAT, {64});
  *g.add_node() = ingot::testing::make_node("Tanh", {"x"}, {"y"});
  *g.add_output() = ingot::testing::static_tensor_info("y", onnx::TensorProto::FLOAT, {64});
  Session session = Session::load(ingot::testing::save_model(ingot::testing::model_with(g), "tanh_while_loading.onnx"));
  const Tensor x = random_tensor({64}, 11, DType::Float32);
  const std::vector<float> want = session.run({{"x", x}}).at(0).to_vector<float>();
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0}, wrong{0};
  std::thread runner([&] {
    while (!stop) {
      if (session.run({{"x", x}}).at(0).to_vector<float>() != want) ++wrong;
      ++runs;
    }
  });
  load_test_extension();
  const Tensor y = ops::call("Softshrink", {x}, {{"lambd", 0.1f}}, 1, "test.ext").at(0);
  while (runs < 10) std::this_thread::yield();
  stop = true;
  runner.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(y.shape(), x.shape());
}
