// The profiler on a GPU session with a CPU fallback (INGOT_HIDE_CUDA_KERNELS=Relu):
// X -> Conv -> c -> Relu (CPU) -> r -> Sigmoid -> s -> Add(s, c) -> Y.
// Checks the Chrome trace (parsed back): the fallback event, the D2H copy before it and the H2D
// copy after it (attributed to it), device-timed kernels on the GPU track for the other ops with
// positive durations, an idle gap on the GPU track while the CPU runs the Relu, and the summary
// naming Relu as a fallback. Skips without a GPU.
#include <ingot/profiler.h>
#include <ingot/session.h>
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "../unit/test_util.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using ingot::testing::make_node;
using ingot::testing::model_with;
using ingot::testing::save_model;
using ingot::testing::static_tensor_info;
using nlohmann::json;

constexpr int64_t kC = 32, kH = 128, kW = 128;  // 2 MiB activations: the CPU Relu takes 100s of us
constexpr int64_t kActivationBytes = kC * kH * kW * 4;

std::string fallback_model() {
  onnx::GraphProto g;
  g.set_name("fallback_chain");
  *g.add_input() = static_tensor_info("X", onnx::TensorProto::FLOAT, {1, kC, kH, kW});
  auto* w = g.add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {kC, kC, int64_t(3), int64_t(3)}) w->add_dims(d);
  for (int64_t i = 0; i < kC * kC * 9; ++i) w->add_float_data(float((i * 37) % 17 - 8) / 64.0f);
  onnx::NodeProto conv = make_node("Conv", {"X", "W"}, {"c"}, "conv");
  auto* pads = conv.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  *g.add_node() = conv;
  *g.add_node() = make_node("Relu", {"c"}, {"r"}, "relu");
  *g.add_node() = make_node("Sigmoid", {"r"}, {"s"}, "sigmoid");
  *g.add_node() = make_node("Add", {"s", "c"}, {"Y"}, "add");
  *g.add_output() = static_tensor_info("Y", onnx::TensorProto::FLOAT, {1, kC, kH, kW});
  return save_model(model_with(g), "profiler_fallback.onnx");
}

struct X {  // one "X" event, times in us
  std::string name, cat;
  double ts = 0, dur = 0;
  int64_t tid = 0;
  json args;
  double end() const { return ts + dur; }
};

std::vector<X> x_events(const json& doc) {
  std::vector<X> out;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    out.push_back({e["name"], e["cat"], e["ts"].get<double>(), e["dur"].get<double>(), e["tid"].get<int64_t>(),
                   e.value("args", json::object())});
  }
  return out;
}

TEST(CudaProfiler, FallbackShowsAsCopiesAroundACpuOpAndAGpuGap) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv hide("INGOT_HIDE_CUDA_KERNELS", "Relu");
  SessionOptions options;
  options.device = Device{DeviceType::CUDA, 0};
  options.report_fallbacks = false;
  options.optimize = false;  // keep the Relu a node of its own (the passes fuse Conv+Relu)
  options.threads = 1;  // a slow enough CPU Relu for the gap to stand well above clock alignment
  Session session = Session::load(fallback_model(), options);
  ASSERT_EQ(session.fallbacks().size(), 1u);
  Tensor x = random_tensor(DType::Float32, {1, kC, kH, kW}, 7);
  session.run({x});  // warm-up: weights uploaded, cuDNN set up

  constexpr int kRuns = 3;
  profiler::Trace trace;
  {
    profiler::ScopedProfile profile(&trace);
    for (int i = 0; i < kRuns; ++i) session.run({x});
  }
  const int64_t gpu_tid = profiler::device_track(0);
  json doc = json::parse(trace.chrome_json());
  std::vector<X> xs = x_events(doc);
  std::map<int64_t, std::string> tracks;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[e["tid"].get<int64_t>()] = e["args"]["name"];
  }
  EXPECT_EQ(tracks[gpu_tid], "GPU 0 stream");
  EXPECT_EQ(tracks[int64_t(profiler::kCopiesTrack)], "Copies");

  // X events of one track nest (the GPU stream's never overlap).
  std::map<int64_t, std::vector<X>> by_track;
  for (const X& e : xs) by_track[e.tid].push_back(e);
  for (auto& [tid, list] : by_track) {
    std::stable_sort(list.begin(), list.end(), [](const X& a, const X& b) { return a.ts < b.ts; });
    std::vector<double> ends;
    for (const X& e : list) {
      while (!ends.empty() && e.ts >= ends.back()) ends.pop_back();
      EXPECT_TRUE(ends.empty() || e.end() <= ends.back() + 1e-3) << "track " << tid << ": " << e.name << " overlaps";
      ends.push_back(e.end());
    }
  }

  std::vector<X> fallbacks, relus, d2h, h2d, kernels;
  for (const X& e : xs) {
    if (e.cat == "fallback") fallbacks.push_back(e);
    if (e.cat == "Relu" && e.tid < int64_t(profiler::kCopiesTrack)) relus.push_back(e);
    if (e.cat == "copy" && e.tid == int64_t(profiler::kCopiesTrack) && e.name == "copy D2H c") d2h.push_back(e);
    if (e.cat == "copy" && e.tid == int64_t(profiler::kCopiesTrack) && e.name == "copy H2D r") h2d.push_back(e);
    if (e.tid == gpu_tid && e.cat != "copy") kernels.push_back(e);
  }
  ASSERT_EQ(fallbacks.size(), size_t(kRuns));
  ASSERT_EQ(relus.size(), size_t(kRuns));
  ASSERT_EQ(d2h.size(), size_t(kRuns));
  ASSERT_EQ(h2d.size(), size_t(kRuns));
  for (const X& f : fallbacks) {
    EXPECT_EQ(f.name, "fallback relu (Relu)");
    EXPECT_EQ(f.args["op_type"], "Relu");
    EXPECT_EQ(f.args["bytes"].get<int64_t>(), 2 * kActivationBytes);  // c down, r back up
  }
  for (const X& r : relus) EXPECT_EQ(r.args["backend"], "cpu");
  for (const X& c : d2h) {
    EXPECT_EQ(c.args["bytes"].get<int64_t>(), kActivationBytes);
    EXPECT_EQ(c.args["blocking"], true);
    EXPECT_EQ(c.args["fallback"], "relu");
  }
  for (const X& c : h2d) {
    EXPECT_EQ(c.args["bytes"].get<int64_t>(), kActivationBytes);
    EXPECT_EQ(c.args["fallback"], "relu");
  }

  // Kernels on the GPU track for every op but the Relu, each with a positive device duration.
  std::map<std::string, int> kernel_count;
  for (const X& k : kernels) {
    ++kernel_count[k.cat];
    EXPECT_GT(k.dur, 0) << k.name;
    EXPECT_EQ(k.args["backend"], "cuda");
  }
  EXPECT_EQ(kernel_count["Conv"], kRuns);
  EXPECT_EQ(kernel_count["Sigmoid"], kRuns);
  EXPECT_EQ(kernel_count["Add"], kRuns);
  EXPECT_EQ(kernel_count.count("Relu"), 0u);

  // Per run: the D2H copy ends before the Relu starts, the H2D copy starts after it ends, the
  // fallback range covers both the D2H copy and the Relu, and the GPU is idle while the CPU works:
  // the last kernel before the Relu (Conv) ended and the next (Sigmoid) had not started. The device
  // times are placed on the host clock by one reference event: allow some us for that.
  constexpr double kTolUs = 20;
  for (int i = 0; i < kRuns; ++i) {
    const X& relu = relus[size_t(i)];
    SCOPED_TRACE("run " + std::to_string(i));
    auto before = std::find_if(d2h.begin(), d2h.end(), [&](const X& c) { return c.end() <= relu.ts + 1e-3; });
    auto after = std::find_if(h2d.begin(), h2d.end(), [&](const X& c) { return c.ts >= relu.end() - 1e-3; });
    ASSERT_NE(before, d2h.end()) << "no D2H copy before the Relu";
    ASSERT_NE(after, h2d.end()) << "no H2D copy after the Relu";
    const X* fb = nullptr;
    for (const X& f : fallbacks) {
      if (f.ts <= relu.ts && f.end() >= relu.end() - 1e-3) fb = &f;
    }
    ASSERT_NE(fb, nullptr) << "no fallback range around the Relu";
    EXPECT_LE(fb->ts, relu.ts);
    const X* prev = nullptr;
    const X* next = nullptr;
    for (const X& k : kernels) {
      if (k.end() <= relu.ts + kTolUs && (!prev || k.end() > prev->end())) prev = &k;
      if (k.ts >= relu.end() - kTolUs && (!next || k.ts < next->ts)) next = &k;
      EXPECT_FALSE(k.ts < relu.end() - kTolUs && k.end() > relu.ts + kTolUs)
          << k.name << " ran on the GPU during the CPU Relu (" << k.ts << ".." << k.end() << " vs " << relu.ts << ".."
          << relu.end() << ")";
    }
    ASSERT_NE(prev, nullptr) << "no kernel before the fallback";
    ASSERT_NE(next, nullptr) << "no kernel after the fallback";
    EXPECT_EQ(prev->cat, "Conv");
    EXPECT_EQ(next->cat, "Sigmoid");
    double gap = next->ts - prev->end();
    EXPECT_GE(gap, relu.dur - 2 * kTolUs) << "GPU gap " << gap << " us, CPU Relu " << relu.dur << " us";
  }

  // The summary names the fallback; copies and device time are counted.
  const profiler::Summary& s = trace.summary;
  ASSERT_EQ(s.fallbacks.size(), 1u);
  EXPECT_EQ(s.fallbacks[0].op_type, "Relu");
  EXPECT_EQ(s.fallbacks[0].count, kRuns);
  EXPECT_EQ(s.fallback_bytes, kRuns * 2 * kActivationBytes);
  EXPECT_GE(s.copy_count, 2 * kRuns);  // + X up each run
  EXPECT_EQ(s.d2h_bytes, kRuns * kActivationBytes);
  EXPECT_EQ(s.device_events, 3 * kRuns);
  EXPECT_GT(s.device_ms, 0);
  std::string table = trace.summary_table();
  EXPECT_NE(table.find("fallbacks (ran on the CPU): Relu x3"), std::string::npos) << table;
  EXPECT_NE(table.find("nodes: relu"), std::string::npos) << table;
  EXPECT_NE(table.find("gpu ms"), std::string::npos) << table;
  std::string html = trace.html_report("fallback");
  EXPECT_NE(html.find("CPU fallbacks"), std::string::npos);
  EXPECT_NE(html.find("GPU 0 stream"), std::string::npos);
}

TEST(CudaProfiler, RepeatedProfilesReuseEventsAndOffRecordsNothing) {
  INGOT_REQUIRE_GPU();
  SessionOptions options;
  options.device = Device{DeviceType::CUDA, 0};
  options.optimize = false;
  Session session = Session::load(fallback_model(), options);
  SessionOptions cpu_options;
  cpu_options.optimize = false;
  Session cpu = Session::load(fallback_model(), cpu_options);
  Tensor x = random_tensor(DType::Float32, {1, kC, kH, kW}, 8);
  auto expected = cpu.run({x});
  for (int round = 0; round < 3; ++round) {
    profiler::ScopedProfile profile;
    session.run({x});
    profiler::Trace t = profile.stop();
    EXPECT_EQ(t.summary.device_events, 4) << "round " << round;  // Conv, Relu, Sigmoid, Add on the GPU
    EXPECT_EQ(t.summary.fallback_count, 0);
    for (const auto& e : t.events) {
      if (e.on_device()) {
        EXPECT_GE(e.end_ns, e.start_ns);
      }
    }
  }
  // Off again: results still right (no CUDA error left behind by the timer), nothing recorded.
  auto actual = session.run({x});
  expect_close(expected[0], actual[0].to(Device{DeviceType::CUDA, 0}), 1e-4, 1e-4, "Y");
  profiler::start();
  profiler::Trace empty = profiler::stop();
  EXPECT_TRUE(empty.events.empty());
}

}  // namespace
}  // namespace ingot::gpu_test
