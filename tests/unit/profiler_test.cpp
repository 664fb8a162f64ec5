// The profiler on small real graphs (built with ONNX's protobuf classes): events per node and run,
// nesting of If bodies, allocation counters, and exports that follow the trace-event format rules.
#include <gtest/gtest.h>
#include <ingot/profiler.h>
#include <ingot/session.h>
#include <onnx/onnx_pb.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <nlohmann/json.hpp>

#include "package/package.h"
#include "test_util.h"

using namespace ingot;
namespace fs = std::filesystem;

using ingot::testing::make_node;
using ingot::testing::static_tensor_info;

namespace {

// These graphs test the profiler node by node; the passes would fuse their elementwise chains.
SessionOptions node_by_node() {
  SessionOptions o;
  o.optimize = false;
  return o;
}

std::string save(onnx::GraphProto graph, const std::string& file) {
  return ingot::testing::save_model(ingot::testing::model_with(std::move(graph)), file);
}

// y = Relu(x + x) * x; x: float32[2,3].
std::string three_op_model() {
  onnx::GraphProto g;
  g.set_name("three_ops");
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {2, 3});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {2, 3});
  *g.add_node() = make_node("Add", {"x", "x"}, {"s"}, "add");
  *g.add_node() = make_node("Relu", {"s"}, {"r"}, "relu");
  *g.add_node() = make_node("Mul", {"r", "x"}, {"y"}, "mul");
  return save(g, "three_ops.onnx");
}

// y = If(cond) then (x + x) else (x * x).
std::string if_model() {
  auto branch = [](const std::string& op, const std::string& name) {
    onnx::GraphProto b;
    b.set_name(name);
    *b.add_node() = make_node(op, {"x", "x"}, {name + "_out"}, name + "_node");
    *b.add_output() = static_tensor_info(name + "_out", onnx::TensorProto::FLOAT, {2});
    return b;
  };
  onnx::GraphProto g;
  g.set_name("if_graph");
  *g.add_input() = static_tensor_info("cond", onnx::TensorProto::BOOL, {});
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {2});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {2});
  *g.add_node() = ingot::testing::make_if("cond", {"y"}, branch("Add", "then"), branch("Mul", "else"), "choose");
  return save(g, "if.onnx");
}

std::vector<const profiler::Event*> of_kind(const profiler::Trace& t, profiler::EventKind kind) {
  std::vector<const profiler::Event*> out;
  for (const auto& e : t.events) {
    if (e.kind == kind) out.push_back(&e);
  }
  return out;
}

// Checks a Chrome trace against the trace-event format rules the viewers rely on; returns the
// first violation ("" if none).
std::string trace_format_violation(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) return "no traceEvents array";
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> x_by_thread;
  for (const auto& e : doc["traceEvents"]) {
    for (const char* key : {"ph", "name", "pid", "tid"}) {
      if (!e.contains(key)) return "event without '" + std::string(key) + "': " + e.dump();
    }
    if (!e["pid"].is_number_integer() || !e["tid"].is_number_integer()) return "pid/tid not integers: " + e.dump();
    std::string ph = e["ph"];
    if (ph == "M") {
      if (!e.contains("args") || !e["args"].contains("name")) return "M event without args.name: " + e.dump();
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) return "bad ts: " + e.dump();
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) return "bad dur: " + e.dump();
      if (!e.contains("cat") || !e["cat"].is_string()) return "X without cat: " + e.dump();
      x_by_thread[{e["pid"], e["tid"]}].emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) return "C without args: " + e.dump();
      for (const auto& [k, v] : e["args"].items()) {
        if (!v.is_number()) return "C arg not numeric: " + e.dump();
      }
    } else {
      return "unexpected phase " + ph;
    }
  }
  // X events of one thread must nest: each starts after the enclosing one and ends within it.
  for (auto& [thread, xs] : x_by_thread) {
    std::stable_sort(xs.begin(), xs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<double> ends;
    for (auto [ts, dur] : xs) {
      while (!ends.empty() && ts >= ends.back()) ends.pop_back();
      if (!ends.empty() && ts + dur > ends.back() + 1e-9) return "X events overlap without nesting";
      ends.push_back(ts + dur);
    }
  }
  return "";
}

}  // namespace

TEST(Profiler, RecordsEveryNodeOfEveryRunWithShapes) {
  Session session = Session::load(three_op_model(), node_by_node());
  Tensor x = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  session.run({x});  // warm-up outside the profile
  EXPECT_FALSE(profiler::enabled());
  profiler::start();
  EXPECT_TRUE(profiler::enabled());
  const int runs = 4;
  for (int i = 0; i < runs; ++i) session.run({x});
  profiler::Trace t = profiler::stop();
  EXPECT_FALSE(profiler::enabled());

  auto ops = of_kind(t, profiler::EventKind::Op);
  auto sessions = of_kind(t, profiler::EventKind::SessionRun);
  ASSERT_EQ(ops.size(), size_t(3 * runs));
  ASSERT_EQ(sessions.size(), size_t(runs));
  const char* names[] = {"add", "relu", "mul"};
  const char* types[] = {"Add", "Relu", "Mul"};
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& e = *ops[i];
    EXPECT_EQ(e.name, names[i % 3]);
    EXPECT_EQ(e.op_type, types[i % 3]);
    EXPECT_EQ(e.backend, "cpu");
    EXPECT_LE(e.start_ns, e.end_ns);
    // Each op lies inside its run, one level deeper.
    const auto& run = *sessions[i / 3];
    EXPECT_GE(e.start_ns, run.start_ns);
    EXPECT_LE(e.end_ns, run.end_ns);
    EXPECT_EQ(e.depth, run.depth + 1);
    ASSERT_EQ(e.inputs.size(), i % 3 == 1 ? 1u : 2u);
    EXPECT_EQ(e.inputs[0].str(), "float32[2,3]");
  }
  EXPECT_EQ(t.summary.op_events, 3 * runs);
  EXPECT_EQ(t.summary.session_runs, runs);
  ASSERT_EQ(t.summary.ops.size(), 3u);
  double share = 0;
  for (const auto& s : t.summary.ops) {
    EXPECT_EQ(s.count, runs);
    share += s.share;
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  // Each run allocates its 24-byte result (s and r live in the arena the warm-up run planned);
  // everything freed was allocated here.
  EXPECT_GE(t.summary.alloc_count, runs);
  EXPECT_GE(t.summary.alloc_bytes, runs * 24);
  EXPECT_LE(t.summary.freed_bytes, t.summary.alloc_bytes);
  EXPECT_GE(t.summary.peak_live_bytes, 24);
  std::string table = t.summary_table();
  EXPECT_NE(table.find("Relu"), std::string::npos);
  EXPECT_NE(table.find("peak live"), std::string::npos);
}

// Phases of one name on several threads: one line with the count, the span from the first start
// to the last end, and each thread once, named.
TEST(Profiler, PhasesOnSeveralThreadsSpanTheirFirstStartToTheirLastEnd) {
  auto phase = [](int64_t start_ms, int64_t end_ms, uint32_t tid) {
    profiler::Event e;
    e.kind = profiler::EventKind::Phase;
    e.name = "cuDNN plan loaded";
    e.start_ns = start_ms * 1000000;
    e.end_ns = end_ms * 1000000;
    e.tid = tid;
    return e;
  };
  profiler::Trace t;
  t.events = {phase(10, 12, 0), phase(11, 20, 4), phase(13, 15, 0)};
  t.threads = {{0, "main"}, {4, "thread 4"}};
  t.summary = profiler::summarize(t.events);
  ASSERT_EQ(t.summary.phases.size(), 1u);
  const profiler::PhaseStats& p = t.summary.phases[0];
  EXPECT_EQ(p.count, 3);
  EXPECT_DOUBLE_EQ(p.total_ms, 2 + 9 + 2);
  EXPECT_DOUBLE_EQ(p.first_start_ms, 10);
  EXPECT_DOUBLE_EQ(p.last_end_ms, 20);
  EXPECT_EQ(p.tids, (std::vector<uint32_t>{0, 4}));
  const std::string table = t.summary_table();
  EXPECT_NE(table.find("3 times"), std::string::npos) << table;
  EXPECT_NE(table.find("10.0-20.0"), std::string::npos) << table;
  EXPECT_NE(table.find("main, thread 4"), std::string::npos) << table;
}

// A profile started before Session::load shows the load's phases (a cold start's one-off steps),
// each once, in order, before the first run, in the summary and in the trace; a package's load has
// its own phase and no import or optimization.
TEST(Profiler, AProfileOfTheLoadShowsItsPhases) {
  const std::string onnx_path = three_op_model();
  const std::string package_path = (ingot::testing::temp_dir() / "profiler_phases.ingot").string();
  save_package(*convert_model(onnx_path, {}), {}, package_path);
  struct Case {
    std::string path;
    std::vector<std::string> phases;
  };
  for (const Case& c : {Case{onnx_path, {"import ONNX", "optimize", "build executor"}},
                        Case{package_path, {"load package", "build executor"}}}) {
    SCOPED_TRACE(c.path);
    profiler::start();
    Session session = Session::load(c.path);
    session.run({Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3})});
    profiler::Trace t = profiler::stop();
    auto phases = of_kind(t, profiler::EventKind::Phase);
    auto runs = of_kind(t, profiler::EventKind::SessionRun);
    ASSERT_EQ(runs.size(), 1u);
    std::vector<std::string> names;
    for (const auto* e : phases) {
      names.push_back(e->name);
      EXPECT_LE(e->start_ns, e->end_ns);
      EXPECT_LE(e->end_ns, runs[0]->start_ns) << e->name;  // all before the run
    }
    EXPECT_EQ(names, c.phases);
    ASSERT_EQ(t.summary.phases.size(), c.phases.size());
    for (size_t i = 0; i < c.phases.size(); ++i) {
      EXPECT_EQ(t.summary.phases[i].name, c.phases[i]);
      EXPECT_EQ(t.summary.phases[i].count, 1);
      EXPECT_NEAR(t.summary.phases[i].total_ms, phases[i]->duration_ms(), 1e-9);
      // Its place on the timeline: from its start to its end, on the thread that loaded.
      EXPECT_DOUBLE_EQ(t.summary.phases[i].first_start_ms, double(phases[i]->start_ns) * 1e-6);
      EXPECT_DOUBLE_EQ(t.summary.phases[i].last_end_ms, double(phases[i]->end_ns) * 1e-6);
      EXPECT_EQ(t.summary.phases[i].tids, std::vector<uint32_t>{phases[i]->tid});
    }
    EXPECT_NE(t.summary_table().find("build executor"), std::string::npos);
    EXPECT_NE(t.summary_table().find("main"), std::string::npos) << "the phases' thread";
    const auto doc = nlohmann::json::parse(t.chrome_json());
    EXPECT_EQ(trace_format_violation(doc), "");
    size_t in_trace = 0;
    for (const auto& e : doc["traceEvents"]) in_trace += e["ph"] == "X" && e["cat"] == "phase";
    EXPECT_EQ(in_trace, c.phases.size());
  }
  fs::remove(package_path);
}

// A node's records share the encoding of its input shapes while they repeat: each event must still
// show the shapes of its own run.
TEST(Profiler, EveryEventShowsTheShapesOfItsOwnRun) {
  onnx::GraphProto g;
  g.set_name("dynamic_rows");
  *g.add_input() = ingot::testing::tensor_info("x", onnx::TensorProto::FLOAT, {"N", "3"});
  *g.add_output() = ingot::testing::tensor_info("y", onnx::TensorProto::FLOAT, {"N", "3"});
  *g.add_node() = make_node("Add", {"x", "x"}, {"s"}, "add");
  *g.add_node() = make_node("Relu", {"s"}, {"y"}, "relu");
  Session session = Session::load(save(g, "dynamic_rows.onnx"), node_by_node());
  const std::vector<int64_t> rows = {2, 2, 4, 4, 2, 1};
  profiler::start();
  for (int64_t n : rows) session.run({Tensor::zeros(DType::Float32, {n, 3})});
  profiler::Trace t = profiler::stop();
  auto ops = of_kind(t, profiler::EventKind::Op);
  ASSERT_EQ(ops.size(), 2 * rows.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string want = "float32[" + std::to_string(rows[i / 2]) + ",3]";
    ASSERT_EQ(ops[i]->inputs.size(), i % 2 == 0 ? 2u : 1u) << i;
    for (const auto& in : ops[i]->inputs) EXPECT_EQ(in.str(), want) << "event " << i;
  }
}

TEST(Profiler, IfBodyOpsNestInsideTheirNode) {
  Session session = Session::load(if_model());
  Tensor x = Tensor::from_vector<float>({3, -2}, {2});
  profiler::Trace t;
  {
    profiler::ScopedProfile profile(&t);
    session.run({Tensor::scalar(true), x});
    session.run({Tensor::scalar(false), x});
  }
  EXPECT_FALSE(profiler::enabled());
  auto ops = of_kind(t, profiler::EventKind::Op);
  ASSERT_EQ(ops.size(), 4u);  // If, then_node, If, else_node (ordered by start, outer first)
  EXPECT_EQ(ops[0]->name, "choose");
  EXPECT_EQ(ops[1]->name, "then_node");
  EXPECT_EQ(ops[2]->name, "choose");
  EXPECT_EQ(ops[3]->name, "else_node");
  for (int i : {0, 2}) {
    const auto &parent = *ops[size_t(i)], &child = *ops[size_t(i) + 1];
    EXPECT_EQ(parent.op_type, "If");
    EXPECT_EQ(parent.inputs[0].str(), "bool[]");
    EXPECT_EQ(child.depth, parent.depth + 1);
    EXPECT_GE(child.start_ns, parent.start_ns);
    EXPECT_LE(child.end_ns, parent.end_ns);
  }
  // Shares count top-level time only: the If already contains its body.
  double share = 0;
  for (const auto& s : t.summary.ops) share += s.op_type == "If" ? s.share : 0;
  EXPECT_NEAR(share, 1.0, 1e-9);

  auto doc = nlohmann::json::parse(t.chrome_json());
  EXPECT_EQ(trace_format_violation(doc), "");
}

TEST(Profiler, ChromeTraceFollowsTheFormat) {
  Session session = Session::load(three_op_model(), node_by_node());
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  profiler::ScopedProfile profile;
  session.run({x});
  session.run({x});
  profiler::Trace t = profile.stop();
  auto doc = nlohmann::json::parse(t.chrome_json());
  EXPECT_EQ(trace_format_violation(doc), "");
  int x_events = 0, counters = 0, thread_names = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "Add") {
      ++x_events;
      EXPECT_EQ(e["name"], "add");
      EXPECT_EQ(e["args"]["input_shapes"], nlohmann::json::parse("[[2,3],[2,3]]"));
      EXPECT_EQ(e["args"]["input_dtypes"], nlohmann::json::parse(R"(["float32","float32"])"));
      EXPECT_EQ(e["args"]["backend"], "cpu");
    }
    if (e["ph"] == "C") {
      ++counters;
      EXPECT_GE(e["args"]["live_bytes"].get<int64_t>(), 0);
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
  }
  EXPECT_EQ(x_events, 2);
  EXPECT_GT(counters, 0);
  EXPECT_GE(thread_names, 1);

  // The report is one self-contained page: canvas timeline, summary, no external resources.
  std::string html = t.html_report("three <ops>");
  EXPECT_NE(html.find("<canvas id=\"timeline\">"), std::string::npos);
  EXPECT_NE(html.find("three &lt;ops&gt;"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
}

// Each thread records into a log of its own without a lock, and stop() waits for the writes in
// flight: profiles started and stopped while two threads run sessions non-stop hold, per thread,
// whole runs of three ops nested in them (a run cut by start() or stop() loses only its edges),
// and the records of a thread that ended before stop() are kept.
TEST(Profiler, ThreadsRecordTheirOwnRunsWhileProfilesStartAndStop) {
  const std::string model = three_op_model();
  Tensor x = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  std::atomic<bool> done{false};
  std::atomic<int> runs_done{0};
  auto worker = [&] {
    Session session = Session::load(model, node_by_node());
    while (!done.load()) {
      session.run({x});
      runs_done.fetch_add(1);
    }
  };
  std::thread a(worker), b(worker);
  while (runs_done.load() < 10) std::this_thread::yield();
  for (int round = 0; round < 20; ++round) {
    profiler::start();
    const int before = runs_done.load();
    while (runs_done.load() < before + 6) std::this_thread::yield();
    profiler::Trace t = profiler::stop();
    std::map<uint32_t, std::vector<const profiler::Event*>> runs, ops;
    for (const auto& e : t.events) {
      if (e.kind == profiler::EventKind::SessionRun) runs[e.tid].push_back(&e);
      if (e.kind == profiler::EventKind::Op) ops[e.tid].push_back(&e);
    }
    ASSERT_GE(runs.size(), 1u) << "round " << round;
    size_t whole_runs = 0;
    for (const auto& [tid, thread_runs] : runs) {
      for (const profiler::Event* run : thread_runs) {
        size_t inside = 0;
        for (const profiler::Event* op : ops[tid]) {
          if (op->start_ns >= run->start_ns && op->end_ns <= run->end_ns) {
            EXPECT_EQ(op->depth, run->depth + 1);
            ASSERT_FALSE(op->inputs.empty());
            EXPECT_EQ(op->inputs[0].str(), "float32[2,3]");
            ++inside;
          }
        }
        EXPECT_LE(inside, 3u) << "round " << round;
        whole_runs += inside == 3;
      }
    }
    EXPECT_GE(whole_runs, 1u) << "round " << round;
    EXPECT_LE(t.summary.freed_bytes, t.summary.alloc_bytes);
    std::set<uint32_t> named;
    for (const auto& [tid, name] : t.threads) named.insert(tid);
    for (const auto& [tid, thread_ops] : ops) EXPECT_TRUE(named.count(tid)) << "thread " << tid << " has no name";
  }
  done = true;
  a.join();
  b.join();

  profiler::start();
  std::thread([&] {
    Session session = Session::load(model, node_by_node());
    session.run({x});
  }).join();
  profiler::Trace t = profiler::stop();
  EXPECT_EQ(of_kind(t, profiler::EventKind::Op).size(), 3u);
  ASSERT_EQ(of_kind(t, profiler::EventKind::SessionRun).size(), 1u);
  const uint32_t tid = of_kind(t, profiler::EventKind::SessionRun)[0]->tid;
  std::map<uint32_t, std::string> names(t.threads.begin(), t.threads.end());
  ASSERT_TRUE(names.count(tid));
  EXPECT_NE(names[tid], "main");  // the thread that ended, on a track of its own
}

TEST(Profiler, OffRecordsNothingAndMisuseIsAnError) {
  Session session = Session::load(three_op_model(), node_by_node());
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_THROW(profiler::stop(), Error);
  profiler::start();
  EXPECT_THROW(profiler::start(), Error);
  profiler::Trace first = profiler::stop();
  EXPECT_TRUE(first.events.empty());
  session.run({x});  // off: nothing is recorded anywhere
  profiler::start();
  profiler::Trace second = profiler::stop();
  EXPECT_TRUE(second.events.empty());
  EXPECT_EQ(second.summary.alloc_count, 0);
}

TEST(Profiler, AnOpThatThrowsLeavesTheNestingDepthIntact) {
  // c = a + b with a: [N], b: [M]; N != M fails inside the Add kernel (not broadcastable).
  onnx::GraphProto g;
  g.set_name("bad_add");
  for (auto [name, dim] : {std::pair{"a", "N"}, std::pair{"b", "M"}}) {
    auto* in = g.add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param(dim);
  }
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {});
  g.mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  *g.add_node() = make_node("Add", {"a", "b"}, {"c"}, "add");
  *g.add_node() = make_node("Relu", {"c"}, {"y"}, "relu");
  Session session = Session::load(save(g, "bad_add.onnx"), node_by_node());
  profiler::ScopedProfile profile;
  Tensor two = Tensor::from_vector<float>({1, 2}, {2}), three = Tensor::from_vector<float>({1, 2, 3}, {3});
  EXPECT_THROW(session.run({two, three}), Error);
  session.run({two, two});
  profiler::Trace t = profile.stop();
  auto ops = of_kind(t, profiler::EventKind::Op);
  auto runs = of_kind(t, profiler::EventKind::SessionRun);
  ASSERT_EQ(ops.size(), 2u);  // the failed Add and its run record nothing
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]->depth, 0);
  EXPECT_EQ(ops[0]->depth, 1);
  EXPECT_EQ(ops[1]->depth, 1);
}

namespace {

profiler::Event make_event(profiler::EventKind kind, std::string name, std::string op_type, int64_t start_us,
                           int64_t end_us, uint32_t tid, int depth = 1) {
  profiler::Event e;
  e.kind = kind;
  e.name = std::move(name);
  e.op_type = std::move(op_type);
  e.backend = "cuda";
  e.start_ns = start_us * 1000;
  e.end_ns = end_us * 1000;
  e.tid = tid;
  e.depth = depth;
  return e;
}

// What a GPU session with one CPU fallback records (built by hand: CI has no GPU): Conv on the
// GPU, its output copied down for a Relu that runs on the CPU, the Relu's output copied back up
// for a Sigmoid on the GPU.
profiler::Trace gpu_trace_by_hand() {
  using profiler::EventKind;
  const uint32_t gpu = profiler::device_track(0);
  std::vector<profiler::Event> ev;
  ev.push_back(make_event(EventKind::SessionRun, "m", "", 0, 400, 0, 0));
  ev.push_back(make_event(EventKind::Op, "conv", "Conv", 10, 20, 0));
  auto conv_gpu = make_event(EventKind::Op, "conv", "Conv", 15, 90, gpu, 0);
  conv_gpu.stream = 1;
  ev.push_back(conv_gpu);
  auto fb = make_event(EventKind::Fallback, "relu", "Relu", 25, 200, 0);
  fb.backend = "cpu";
  fb.bytes = 2048;
  ev.push_back(fb);
  auto down = make_event(EventKind::Copy, "copy D2H", "", 25, 100, profiler::kCopiesTrack, 0);
  down.bytes = 1024;
  down.value = "c";
  down.blocking = true;
  down.fallback = "relu";
  ev.push_back(down);
  auto down_gpu = down;
  down_gpu.start_ns = 90'000;
  down_gpu.end_ns = 98'000;
  down_gpu.tid = gpu;
  down_gpu.stream = 1;
  ev.push_back(down_gpu);
  auto relu = make_event(EventKind::Op, "relu", "Relu", 110, 200, 0);
  relu.backend = "cpu";
  ev.push_back(relu);
  auto up = make_event(EventKind::Copy, "copy H2D", "", 210, 230, profiler::kCopiesTrack, 0);
  up.bytes = 1024;
  up.value = "r";
  up.fallback = "relu";
  ev.push_back(up);
  ev.push_back(make_event(EventKind::Op, "sigmoid", "Sigmoid", 240, 250, 0));
  auto sig_gpu = make_event(EventKind::Op, "sigmoid", "Sigmoid", 245, 260, gpu, 0);
  sig_gpu.stream = 1;
  ev.push_back(sig_gpu);
  profiler::Trace t;
  t.events = std::move(ev);
  t.threads = {{0, "main"}, {profiler::kCopiesTrack, "Copies"}, {gpu, "GPU 0 stream"}};
  t.summary = profiler::summarize(t.events);
  return t;
}

}  // namespace

TEST(Profiler, GpuEventsSummarizeCopiesAndFallbacks) {
  profiler::Trace t = gpu_trace_by_hand();
  const profiler::Summary& s = t.summary;
  EXPECT_EQ(s.op_events, 3);  // host ranges only
  EXPECT_EQ(s.device_events, 2);
  EXPECT_NEAR(s.device_ms, 0.075 + 0.015, 1e-9);
  EXPECT_EQ(s.copy_count, 2);
  EXPECT_EQ(s.copy_bytes, 2048);
  EXPECT_EQ(s.h2d_bytes, 1024);
  EXPECT_EQ(s.d2h_bytes, 1024);
  EXPECT_NEAR(s.copy_device_ms, 0.008, 1e-9);
  ASSERT_EQ(s.fallbacks.size(), 1u);
  EXPECT_EQ(s.fallbacks[0].op_type, "Relu");
  EXPECT_EQ(s.fallbacks[0].count, 1);
  EXPECT_EQ(s.fallbacks[0].bytes, 2048);
  EXPECT_EQ(s.fallbacks[0].nodes, std::vector<std::string>{"relu"});
  EXPECT_EQ(s.fallback_count, 1);
  auto conv = std::find_if(s.ops.begin(), s.ops.end(), [](const auto& o) { return o.op_type == "Conv"; });
  ASSERT_NE(conv, s.ops.end());
  EXPECT_EQ(conv->count, 1);
  EXPECT_EQ(conv->device_count, 1);
  EXPECT_NEAR(conv->device_ms, 0.075, 1e-9);

  std::string table = t.summary_table();
  EXPECT_NE(table.find("gpu ms"), std::string::npos) << table;
  EXPECT_NE(table.find("gpu: 2 kernels"), std::string::npos) << table;
  EXPECT_NE(table.find("copies: 2 (2.0 KiB; H2D 1.0 KiB, D2H 1.0 KiB"), std::string::npos) << table;
  EXPECT_NE(table.find("fallbacks (ran on the CPU): Relu x1"), std::string::npos) << table;
  EXPECT_NE(table.find("nodes: relu"), std::string::npos) << table;
}

TEST(Profiler, GpuTraceFollowsTheFormatWithTracksAndColours) {
  profiler::Trace t = gpu_trace_by_hand();
  auto doc = nlohmann::json::parse(t.chrome_json());
  EXPECT_EQ(trace_format_violation(doc), "");
  std::map<int64_t, std::string> track_names;
  int fallbacks = 0, copies = 0, gpu_kernels = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") track_names[e["tid"].get<int64_t>()] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    if (e["cat"] == "fallback") {
      ++fallbacks;
      EXPECT_EQ(e["cname"], "terrible");
      EXPECT_EQ(e["name"], "fallback relu (Relu)");
      EXPECT_EQ(e["args"]["bytes"], 2048);
      EXPECT_EQ(e["args"]["op_type"], "Relu");
      EXPECT_EQ(e["tid"], 0);  // on its thread, around its op
    } else if (e["cat"] == "copy") {
      ++copies;
      EXPECT_EQ(e["cname"], "yellow");
      EXPECT_EQ(e["args"]["fallback"], "relu");
      EXPECT_TRUE(e["name"] == "copy D2H c" || e["name"] == "copy H2D r") << e.dump();
      EXPECT_EQ(e["args"]["blocking"], e["name"] == "copy D2H c");
    } else if (e["tid"] == profiler::device_track(0)) {
      ++gpu_kernels;
      EXPECT_EQ(e["args"]["timed_on"], "device");
      EXPECT_EQ(e["args"]["backend"], "cuda");
      EXPECT_FALSE(e.contains("cname"));
    }
  }
  EXPECT_EQ(fallbacks, 1);
  EXPECT_EQ(copies, 3);  // two host-side, one also on the device
  EXPECT_EQ(gpu_kernels, 2);
  EXPECT_EQ(track_names[int64_t(profiler::kCopiesTrack)], "Copies");
  EXPECT_EQ(track_names[int64_t(profiler::device_track(0))], "GPU 0 stream");

  std::string html = t.html_report("gpu");
  EXPECT_NE(html.find("CPU fallbacks"), std::string::npos);
  EXPECT_NE(html.find("#ff0000"), std::string::npos);
  EXPECT_NE(html.find("#ff8c00"), std::string::npos);
  EXPECT_NE(html.find("copies: 2 (2048 bytes"), std::string::npos);
  EXPECT_NE(html.find("Relu x1"), std::string::npos);
  EXPECT_NE(html.find("<th>gpu ms</th>"), std::string::npos);
}

TEST(Profiler, CpuSessionsHaveNoGpuLines) {
  Session session = Session::load(three_op_model(), node_by_node());
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  profiler::ScopedProfile profile;
  session.run({x});
  profiler::Trace t = profile.stop();
  EXPECT_TRUE(of_kind(t, profiler::EventKind::Copy).empty());
  EXPECT_TRUE(of_kind(t, profiler::EventKind::Fallback).empty());
  std::string table = t.summary_table();
  EXPECT_EQ(table.find("copies:"), std::string::npos) << table;
  EXPECT_EQ(table.find("gpu ms"), std::string::npos) << table;
  for (const auto& [tid, name] : t.threads) EXPECT_LT(tid, profiler::kCopiesTrack) << name;
}
