// CUDA graphs and the static memory plan on the GPU: the second run with given input shapes is
// captured and later runs replay it; every run matches the CPU session (itself checked against
// ONNX's references), on new inputs and after a shape change; runs that cannot be replayed (a CPU
// fallback) are not captured and say why; a profile shows the replays.
#include <ingot/convert.h>
#include <ingot/profiler.h>
#include <ingot/session.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "../unit/channels_last_model.h"
#include "../unit/test_util.h"
#include "backends/cuda/cudnn_conv_graph.h"
#include "backends/cuda/cuda_runtime.h"
#include "core/backend.h"
#include "core/device_graph.h"
#include "core/tuning.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using ingot::testing::add_int64_initializer;
using ingot::testing::add_random_initializer;
using ingot::testing::make_node;
using ingot::testing::tensor_info;

// x[N,3,8,8] -> Conv(3x3, pad 1) -> Relu -> Resize(x2, linear) -> ReduceMean(H,W) -> MatMul -> y[N,5]:
// cuDNN, Ingot's kernels with uploaded tables, a reduction and cuBLASLt in one graph; plus
// z = Reshape(Relu output, Shape) (an output that is a view).
std::string conv_model() {
  std::mt19937 rng(5);
  onnx::GraphProto g;
  g.set_name("conv_graph");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N", "3", "8", "8"});
  add_random_initializer(g, "w", {4, 3, 3, 3}, rng);
  add_random_initializer(g, "b", {4}, rng);
  add_random_initializer(g, "w2", {4, 5}, rng);
  onnx::TensorProto scales;
  scales.set_name("scales");
  scales.set_data_type(onnx::TensorProto::FLOAT);
  scales.add_dims(4);
  for (float v : {1.f, 1.f, 2.f, 2.f}) scales.add_float_data(v);
  *g.add_initializer() = scales;
  add_int64_initializer(g, "axes", {2, 3});
  onnx::NodeProto conv = make_node("Conv", {"x", "w", "b"}, {"c"});
  auto* pads = conv.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  *g.add_node() = conv;
  *g.add_node() = make_node("Relu", {"c"}, {"r"});
  onnx::NodeProto resize = make_node("Resize", {"r", "", "scales"}, {"up"});
  auto* mode = resize.add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("linear");
  *g.add_node() = resize;
  onnx::NodeProto mean = make_node("ReduceMean", {"up"}, {"m"});
  auto* keep = mean.add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  auto* axes = mean.add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(2);
  axes->add_ints(3);
  *g.add_node() = mean;
  *g.add_node() = make_node("MatMul", {"m", "w2"}, {"y"});
  *g.add_node() = make_node("Shape", {"r"}, {"s"});
  *g.add_node() = make_node("Reshape", {"r", "s"}, {"z"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N", "5"});
  *g.add_output() = tensor_info("z", onnx::TensorProto::FLOAT, {"N", "4", "8", "8"});
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g)), "conv_graph.onnx");
}

SessionOptions on_gpu() {
  SessionOptions o;
  o.device = Device{DeviceType::CUDA, 0};
  return o;
}

// Compares a GPU session's (host) outputs with the CPU session's.
void expect_same(Session& cpu, const std::vector<Tensor>& gpu_out, const Tensor& x, const std::string& what) {
  std::vector<Tensor> ref = cpu.run({x});
  ASSERT_EQ(ref.size(), gpu_out.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    expect_close(ref[i], gpu_out[i].to(Device{DeviceType::CUDA, 0}), 1e-4, 1e-4, what + " output " + std::to_string(i));
  }
}

TEST(CudaGraph, ReplaysMatchTheCpuAcrossInputsAndShapes) {
  INGOT_REQUIRE_GPU();
  std::string path = conv_model();
  Session cpu = Session::load(path);
  Session gpu = Session::load(path, on_gpu());
  Tensor x1 = random_tensor(DType::Float32, {2, 3, 8, 8}, 1), x2 = random_tensor(DType::Float32, {2, 3, 8, 8}, 2);
  Tensor x3 = random_tensor(DType::Float32, {3, 3, 8, 8}, 3);

  expect_same(cpu, gpu.run({x1}), x1, "run 1 (records)");
  EXPECT_FALSE(gpu.last_run_stats().graph_replay);
  ASSERT_TRUE(gpu.memory_plan().planned);
  EXPECT_FALSE(gpu.memory_plan().cuda_graph);

  std::vector<Tensor> second = gpu.run({x2});
  expect_same(cpu, second, x2, "run 2 (captured, replayed)");
  MemoryPlanStats plan = gpu.memory_plan();
  ASSERT_TRUE(plan.cuda_graph) << plan.why_no_graph;
  EXPECT_GT(plan.graph_nodes, 4);
  EXPECT_TRUE(gpu.last_run_stats().graph_replay);

  expect_same(cpu, gpu.run({x1}), x1, "run 3 (replay)");
  TransferStats stats = gpu.last_run_stats();
  EXPECT_TRUE(stats.graph_replay);
  EXPECT_EQ(stats.host_to_device_bytes, int64_t(x1.nbytes()));  // the input, and nothing else
  EXPECT_EQ(stats.fallback_ops, 0);

  expect_same(cpu, gpu.run({x3}), x3, "run 4 (new shape: records)");
  EXPECT_FALSE(gpu.last_run_stats().graph_replay);
  expect_same(cpu, gpu.run({x3}), x3, "run 5 (new shape: captured)");
  EXPECT_TRUE(gpu.last_run_stats().graph_replay);
  expect_same(cpu, gpu.run({x2}), x2, "run 6 (first shape: its graph again)");
  EXPECT_TRUE(gpu.last_run_stats().graph_replay);
  expect_same(cpu, second, x2, "run 2's outputs after run 6");
}

TEST(CudaGraph, NotCapturedWhenANodeFallsBack) {
  INGOT_REQUIRE_GPU();
  setenv("INGOT_HIDE_CUDA_KERNELS", "ReduceMean", 1);  // (Relu fuses into the Conv)
  std::string path = conv_model();
  Session gpu = Session::load(path, on_gpu());
  unsetenv("INGOT_HIDE_CUDA_KERNELS");
  Session cpu = Session::load(path);
  Tensor x = random_tensor(DType::Float32, {2, 3, 8, 8}, 4);
  for (int i = 0; i < 3; ++i) expect_same(cpu, gpu.run({x}), x, "run " + std::to_string(i + 1));
  MemoryPlanStats plan = gpu.memory_plan();
  EXPECT_TRUE(plan.planned);
  EXPECT_FALSE(plan.cuda_graph);
  EXPECT_NE(plan.why_no_graph.find("ran on the CPU"), std::string::npos) << plan.why_no_graph;
  EXPECT_FALSE(gpu.last_run_stats().graph_replay);
}

TEST(CudaGraph, OffWhenAskedAndReplaysShowInAProfile) {
  INGOT_REQUIRE_GPU();
  std::string path = conv_model();
  Tensor x = random_tensor(DType::Float32, {2, 3, 8, 8}, 6);
  SessionOptions off = on_gpu();
  off.cuda_graphs = false;
  Session plain = Session::load(path, off);
  for (int i = 0; i < 3; ++i) plain.run({x});
  EXPECT_FALSE(plain.memory_plan().cuda_graph);
  EXPECT_NE(plain.memory_plan().why_no_graph.find("off"), std::string::npos);

  Session gpu = Session::load(path, on_gpu());
  gpu.run({x});
  gpu.run({x});  // captured
  profiler::start();
  gpu.run({x});
  profiler::Trace trace = profiler::stop();
  int host = 0, device = 0;
  for (const auto& e : trace.events) {
    if (e.kind == profiler::EventKind::Op && e.op_type == "CUDAGraphReplay") (e.on_device() ? device : host)++;
  }
  EXPECT_EQ(host, 1);
  EXPECT_EQ(device, 1);
}

// The pinned staging halves are allocated on a background thread after a process's first copy to
// the host; that thread once recorded their events on the device's stream, and when a run's graph
// capture was on meanwhile (a session's second run: 4 of the 6 real models under `ingot run
// --repeat 3`), the record joined the capture and every later staged copy failed ("invalid
// argument"). In a fresh process (the staging is allocated once per process): the first copy to
// the host, at once a capture held open for 200 ms, then staged copies both ways.
TEST(CudaGraph, StagingAllocatedDuringACaptureStaysUsable) {
  INGOT_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Device gpu{DeviceType::CUDA, 0};
  EXPECT_EXIT(
      {
        Tensor x = random_tensor(DType::Float32, {1024}, 7);
        Tensor d = x.to(gpu);
        Tensor first = d.to(Device::cpu());  // the first copy to the host: staging starts
        DeviceGraphs* graphs = find_backend(DeviceType::CUDA)->graphs();
        graphs->begin_capture(0);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::string why;
        std::unique_ptr<DeviceGraph> graph = graphs->end_capture(0, &why);
        bool ok = true;
        for (int i = 0; i < 4 && ok; ++i) {  // both halves, each way
          Tensor y = random_tensor(DType::Float32, {1024}, uint32_t(8 + i));
          ok = as_doubles(y.to(gpu).to(Device::cpu())) == as_doubles(y);
        }
        std::exit(ok && as_doubles(first) == as_doubles(x) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// SessionOptions::outputs_on_device: device tensors come back, device inputs are accepted, and a
// replayed run's outputs are the caller's (a later replay writes its own buffers, not them).
TEST(CudaGraph, OutputsCanStayOnTheDevice) {
  INGOT_REQUIRE_GPU();
  std::string path = conv_model();
  Session cpu = Session::load(path);
  SessionOptions options = on_gpu();
  options.outputs_on_device = true;
  Session gpu = Session::load(path, options);
  const Device cuda{DeviceType::CUDA, 0};
  Tensor x1 = random_tensor(DType::Float32, {2, 3, 8, 8}, 11), x2 = random_tensor(DType::Float32, {2, 3, 8, 8}, 12);
  std::vector<Tensor> kept;
  for (int run = 0; run < 4; ++run) {
    const Tensor& x = run % 2 ? x2 : x1;
    std::vector<Tensor> out = gpu.run({x.to(cuda)});
    for (const Tensor& t : out) EXPECT_EQ(t.device(), cuda) << "run " << run;
    expect_same(cpu, out, x, "run " + std::to_string(run));
    if (run == 2) kept = out;  // a replayed run (the graph is captured at run 1)
  }
  EXPECT_TRUE(gpu.last_run_stats().graph_replay);
  expect_same(cpu, kept, x1, "run 2's outputs after run 3");
}

// y = sr == 16000 ? x * 2 + sum(float(Shape(x))) : x + 1, the sample-rate switch of Silero VAD:
// the If's condition is computed on the host from the input `sr`; inside the then-branch a nested
// If (on the same condition) copies a host value of the branch (Shape(x)) to the device for a Cast.
std::string sample_rate_model() {
  auto sum_of_dims = [](const std::string& tag) {
    onnx::GraphProto b;
    b.set_name("sum_of_dims_" + tag);
    onnx::NodeProto cast = make_node("Cast", {"shape"}, {"shape_f_" + tag});
    auto* to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    *b.add_node() = cast;
    *b.add_node() = make_node("ReduceSum", {"shape_f_" + tag}, {"dims_sum_" + tag});
    *b.add_output() = tensor_info("dims_sum_" + tag, onnx::TensorProto::FLOAT, {"1"});
    return b;
  };
  onnx::GraphProto then_g;
  then_g.set_name("then");
  ingot::testing::add_scalar(then_g, "two", 2.0f);
  *then_g.add_node() = make_node("Mul", {"x", "two"}, {"x2"});
  *then_g.add_node() = make_node("Shape", {"x"}, {"shape"});
  *then_g.add_node() = ingot::testing::make_if("is_16k", {"dims_sum"}, sum_of_dims("a"), sum_of_dims("b"));
  *then_g.add_node() = make_node("Add", {"x2", "dims_sum"}, {"y_then"});
  *then_g.add_output() = tensor_info("y_then", onnx::TensorProto::FLOAT, {"N", "4"});
  onnx::GraphProto else_g;
  else_g.set_name("else");
  ingot::testing::add_scalar(else_g, "one", 1.0f);
  *else_g.add_node() = make_node("Add", {"x", "one"}, {"y_else"});
  *else_g.add_output() = tensor_info("y_else", onnx::TensorProto::FLOAT, {"N", "4"});

  onnx::GraphProto g;
  g.set_name("sample_rate_graph");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N", "4"});
  *g.add_input() = tensor_info("sr", onnx::TensorProto::INT64, {});
  onnx::TensorProto rate;
  rate.set_name("rate");
  rate.set_data_type(onnx::TensorProto::INT64);
  rate.add_int64_data(16000);
  *g.add_initializer() = rate;
  *g.add_node() = make_node("Equal", {"sr", "rate"}, {"is_16k"});
  *g.add_node() = ingot::testing::make_if("is_16k", {"y"}, std::move(then_g), std::move(else_g));
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N", "4"});
  return ingot::testing::save_model(ingot::testing::model_with(std::move(g)), "sample_rate_graph.onnx");
}

// A small input read on the host (an If's condition) specializes the plan: each value gets its
// own captured graph with its branch baked in, given on the host or on the device.
TEST(CudaGraph, HostReadScalarInputsSpecializeTheGraph) {
  INGOT_REQUIRE_GPU();
  std::string path = sample_rate_model();
  const Device cuda{DeviceType::CUDA, 0};
  for (bool device_io : {false, true}) {
    SCOPED_TRACE(device_io ? "inputs on the device" : "inputs on the host");
    SessionOptions options = on_gpu();
    options.outputs_on_device = device_io;
    Session gpu = Session::load(path, options);
    int run = 0;
    for (int64_t rate : {16000, 16000, 16000, 8000, 8000, 8000, 16000}) {
      Tensor x = random_tensor(DType::Float32, {3, 4}, uint32_t(40 + run));
      Tensor sr = Tensor::scalar<int64_t>(rate);
      std::vector<Tensor> out = device_io ? gpu.run({x.to(cuda), sr.to(cuda)}) : gpu.run({x, sr});
      ASSERT_EQ(out.size(), 1u);
      std::vector<double> got = as_doubles(out[0].to(Device::cpu())), in = as_doubles(x);
      ASSERT_EQ(got.size(), in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        double want = rate == 16000 ? in[i] * 2 + (3 + 4) : in[i] + 1;
        EXPECT_NEAR(got[i], want, 1e-5) << "run " << run << " (sr " << rate << ") element " << i;
      }
      // Runs 1-2 of each value record and capture; from the third on they replay.
      if (run == 2 || run == 5 || run == 6) {
        EXPECT_TRUE(gpu.last_run_stats().graph_replay) << "run " << run << ": " << gpu.memory_plan().why_no_graph;
      }
      ++run;
    }
    EXPECT_EQ(gpu.last_run_stats().fallback_ops, 0);
  }
}

// A float16 session on the GPU runs its convolutions channels last (passes/channels_last.cpp):
// the whole network against the float32 CPU session, with and without graph replay.
TEST(CudaChannelsLast, Float16NetworkMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  std::string path = ingot::testing::channels_last_model("channels_last_net.onnx");
  Session cpu = Session::load(path);
  for (Precision precision : {Precision::FP16, Precision::BF16}) {
    SessionOptions options = on_gpu();
    options.precision = precision;
    Session gpu = Session::load(path, options);
    for (int run = 0; run < 3; ++run) {
      Tensor x = random_tensor(DType::Float32, {4, 3, 8, 8}, uint32_t(60 + run), -1.0, 1.0);
      std::vector<Tensor> want = cpu.run({x}), got = gpu.run({x});
      ASSERT_EQ(want.size(), got.size());
      const double tol = precision == Precision::FP16 ? 2e-2 : 8e-2;
      for (size_t o = 0; o < want.size(); ++o) {
        expect_close(want[o], got[o].to(Device{DeviceType::CUDA, 0}), tol, tol,
                     fmt::format("{} run {} output {}", precision == Precision::FP16 ? "fp16" : "bf16", run, o));
      }
    }
    EXPECT_TRUE(gpu.last_run_stats().graph_replay) << gpu.memory_plan().why_no_graph;
    EXPECT_EQ(gpu.last_run_stats().fallback_ops, 0);
  }
}

// cuDNN algorithm choices: measured once, recorded (core/tuning.h), and reused by a new session
// (as after loading a package that stores them) without searching again.
TEST(CudaTuning, ConvolutionAlgorithmsAreRecordedAndReused) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");  // cuDNN's choices: not the split-K kernel
  std::string path = conv_model();
  Session cpu = Session::load(path);
  Tensor x = random_tensor(DType::Float32, {2, 3, 8, 8}, 7);
  tuning::algorithms().clear();
  {
    Session gpu = Session::load(path, on_gpu());
    expect_same(cpu, gpu.run({x}), x, "measuring run");
  }
  auto found = tuning::algorithms().entries();
  ASSERT_FALSE(found.empty());
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const auto& e) { return e.first.starts_with("cudnn"); }))
      << found[0].first;
  EXPECT_GE(tuning::algorithms().stats().misses, 1);
  tuning::algorithms().clear();
  for (const auto& [k, v] : found) tuning::algorithms().put(k, v);
  Session gpu = Session::load(path, on_gpu());
  const int64_t taken = cuda::ConvGraph::prebuilt_taken(), cold = cuda::cold_kernel_calls();
  expect_same(cpu, gpu.run({x}), x, "run with stored choices");
  EXPECT_EQ(tuning::algorithms().stats().misses, 0);
  // The stored choice was looked up, or a plan built ahead from it was taken, or (the cold tier) the
  // convolution ran on Ingot's kernel while a worker built that plan.
  EXPECT_TRUE(tuning::algorithms().stats().hits >= 1 || cuda::ConvGraph::prebuilt_taken() > taken ||
              cuda::cold_kernel_calls() > cold);
  tuning::algorithms().clear();
}

// A package loaded for the GPU copies its weights ahead (INGOT_UPLOAD_AHEAD): a first run right
// after the load races the uploads and must still be right; once they are done, a first run copies
// only its input; with the switch off, the first run copies the weights itself.
TEST(CudaPackage, WeightsUploadedAheadServeTheFirstRun) {
  INGOT_REQUIRE_GPU();
  const std::string model = conv_model(), package = ingot::testing::temp_dir().string() + "/ahead.ingot";
  ConvertSettings settings;
  settings.device = Device{DeviceType::CUDA, 0};
  convert(model, package, settings);
  Session cpu = Session::load(model);
  const Tensor x = random_tensor(DType::Float32, {2, 3, 8, 8}, 61);
  for (int i = 0; i < 3; ++i) {
    Session gpu = Session::load(package, on_gpu());
    expect_same(cpu, gpu.run({x}), x, fmt::format("first run right after the load, {}", i));
    expect_same(cpu, gpu.run({x}), x, "second run");
  }
  int64_t weights_copied_by_the_run = 0;
  for (const char* ahead : {"1", "0"}) {
    const ScopedEnv upload("INGOT_UPLOAD_AHEAD", ahead);  // read at every load
    Session gpu = Session::load(package, on_gpu());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a few KB: long done
    expect_same(cpu, gpu.run({x}), x, fmt::format("first run, INGOT_UPLOAD_AHEAD={}", ahead));
    const int64_t copied = gpu.last_run_stats().host_to_device_bytes - int64_t(x.nbytes());
    if (ahead[0] == '1') {
      EXPECT_EQ(copied, 0) << "the weights were on the device before the run";
    }
    weights_copied_by_the_run = copied;
  }
  EXPECT_GT(weights_copied_by_the_run, 0) << "without uploads ahead, the first run copies the weights";
}

// Tuning shapes (ConvertSettings::tuning_shapes): a package whose batch stays symbolic stores the
// choices measured for each named shape, and a launch that runs one of them searches nothing; a
// shape that does not fit the model is refused naming the input, and leaves no package behind.
TEST(CudaTuning, TuningShapesStoreChoicesForSymbolicInputs) {
  INGOT_REQUIRE_GPU();
  const std::string model = conv_model(), dir = ingot::testing::temp_dir().string();
  ConvertSettings settings;
  settings.device = Device{DeviceType::CUDA, 0};
  tuning::algorithms().clear();
  ConvertResult plain = convert(model, dir + "/untuned.ingot", settings);
  EXPECT_EQ(plain.algorithms, 0);
  EXPECT_NE(plain.tuning_note.find("--tune-shape"), std::string::npos) << plain.tuning_note;

  settings.tuning_shapes = {{{"x", {2, 3, 8, 8}}}, {{"x", {5, 3, 8, 8}}}};
  tuning::algorithms().clear();
  ConvertResult tuned = convert(model, dir + "/tuned.ingot", settings);
  EXPECT_GT(tuned.algorithms, 0);
  EXPECT_TRUE(tuned.tuning_note.empty()) << tuned.tuning_note;
  tuning::algorithms().clear();
  Session cpu = Session::load(model);
  Session gpu = Session::load(dir + "/tuned.ingot", on_gpu());
  for (int64_t n : {5, 2}) {
    Tensor x = random_tensor(DType::Float32, {n, 3, 8, 8}, uint32_t(80 + n));
    expect_same(cpu, gpu.run({x}), x, fmt::format("batch {}", n));
  }
  EXPECT_EQ(tuning::algorithms().stats().misses, 0) << "a tuned shape searched again";
  EXPECT_GE(tuning::algorithms().stats().hits, 1);
  tuning::algorithms().clear();

  auto refused = [&](InputShapes shapes, const std::string& expected) {
    settings.tuning_shapes = {shapes};
    const std::string path = dir + "/refused.ingot";
    try {
      convert(model, path, settings);
      ADD_FAILURE() << "expected an error mentioning " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(path));
  };
  refused({{"nope", {1, 3, 8, 8}}}, "'nope': the model has no such input");
  refused({{"x", {1, 3, 8}}}, "has rank 3");
  refused({{"x", {1, 4, 8, 8}}}, "does not fit input 'x'");
}

// cuBLASLt: the heuristic's candidates are timed once per problem and the fastest kept (core/tuning.h,
// so packages store it); a stored value cuBLASLt does not accept (an old or damaged package) is
// ignored and the product is still right.
TEST(CudaTuning, MatMulAlgorithmsAreMeasuredAndStored) {
  INGOT_REQUIRE_GPU();
  tuning::algorithms().clear();
  Tensor a = random_tensor(DType::Float32, {256, 512}, 21), b = random_tensor(DType::Float32, {512, 384}, 22);
  expect_cuda_matches_cpu("MatMul", {a, b}, {}, 1, 1e-4, 1e-4);
  const auto found = tuning::algorithms().entries();
  auto it = std::find_if(found.begin(), found.end(), [](const auto& e) { return e.first.starts_with("cublaslt"); });
  ASSERT_NE(it, found.end()) << "no cuBLASLt choice recorded (" << found.size() << " entries)";
  EXPECT_NE(it->first.find("m=256|n=384|k=512"), std::string::npos) << it->first;
  EXPECT_EQ(it->second.size(), 72u);  // the algorithm's 64 opaque bytes and its workspace size
  // A damaged value under the key of a problem not seen yet.
  std::string key = it->first;
  key.replace(key.find("m=256"), 5, "m=255");
  key.replace(key.find("ld="), key.find("|batch") - key.find("ld="), "ld=512,384,384");
  tuning::algorithms().put(key, std::string(72, '\x7f'));
  expect_cuda_matches_cpu("MatMul", {random_tensor(DType::Float32, {255, 512}, 23), b}, {}, 1, 1e-4, 1e-4);
  tuning::algorithms().clear();
}

}  // namespace
}  // namespace ingot::gpu_test
