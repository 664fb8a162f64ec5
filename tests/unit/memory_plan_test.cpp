// The static memory plan: the layout algorithm (compiler/memory_plan.h) and planned runs of a
// session (intermediates in one arena from the second run with given input shapes on).
#include <gtest/gtest.h>
#include <ingot/profiler.h>
#include <ingot/session.h>

#include <cmath>
#include <random>

#include "compiler/memory_plan.h"
#include "test_util.h"

namespace ingot {
namespace {

// The plan is tested on the graph as written; the passes would fuse its elementwise chain.
SessionOptions node_by_node() {
  SessionOptions o;
  o.optimize = false;
  return o;
}

using testing::make_node;
using testing::tensor_info;

TEST(MemoryPlan, BuffersAliveTogetherNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLife> buffers;
    int n = 1 + int(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int first = int(rng() % 50);
      int last = first + int(rng() % 10);
      buffers.push_back({size_t(1 + rng() % 5000), first, last});
    }
    MemoryPlan plan = plan_memory(buffers);
    ASSERT_EQ(plan.offsets.size(), buffers.size());
    auto size = [](const BufferLife& b) { return (b.bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; };
    for (size_t i = 0; i < buffers.size(); ++i) {
      EXPECT_EQ(plan.offsets[i] % kArenaAlignment, 0u);
      EXPECT_LE(plan.offsets[i] + size(buffers[i]), plan.arena_bytes);
      for (size_t j = i + 1; j < buffers.size(); ++j) {
        bool together = buffers[i].first <= buffers[j].last && buffers[j].first <= buffers[i].last;
        bool apart = plan.offsets[i] + size(buffers[i]) <= plan.offsets[j] ||
                     plan.offsets[j] + size(buffers[j]) <= plan.offsets[i];
        if (together) {
          EXPECT_TRUE(apart) << "trial " << trial << ": buffers " << i << " and " << j;
        }
      }
    }
    EXPECT_GE(plan.arena_bytes, plan.lower_bound);
    EXPECT_LE(plan.arena_bytes, plan.total_bytes);
  }
}

TEST(MemoryPlan, AChainReusesMemory) {
  // Five 1 KiB buffers, each alive for two steps: two slots' worth at any time.
  std::vector<BufferLife> chain;
  for (int i = 0; i < 5; ++i) chain.push_back({1024, i, i + 1});
  MemoryPlan plan = plan_memory(chain);
  EXPECT_EQ(plan.lower_bound, 2048u);
  EXPECT_EQ(plan.arena_bytes, 2048u);
  EXPECT_EQ(plan.total_bytes, 5 * 1024u);
}

// x[N,8] -> a = Exp(x); b = Neg(a); c = Sigmoid(b); d = c + a (a skips ahead); e = Tanh(d);
// f = e * e; y = Reshape(f, Shape(x)) (an output that is a view of an intermediate); z = Abs(e).
std::string skip_model() {
  onnx::GraphProto g;
  g.set_name("skip");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N", "8"});
  *g.add_node() = make_node("Exp", {"x"}, {"a"});
  *g.add_node() = make_node("Neg", {"a"}, {"b"});
  *g.add_node() = make_node("Sigmoid", {"b"}, {"c"});
  *g.add_node() = make_node("Add", {"c", "a"}, {"d"});
  *g.add_node() = make_node("Tanh", {"d"}, {"e"});
  *g.add_node() = make_node("Mul", {"e", "e"}, {"f"});
  *g.add_node() = make_node("Shape", {"x"}, {"s"});
  *g.add_node() = make_node("Reshape", {"f", "s"}, {"y"});
  *g.add_node() = make_node("Abs", {"e"}, {"z"});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N", "8"});
  *g.add_output() = tensor_info("z", onnx::TensorProto::FLOAT, {"N", "8"});
  return testing::save_model(testing::model_with(std::move(g)), "skip.onnx");
}

Tensor random_input(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> v(size_t(n * 8));
  for (float& f : v) f = u(rng);
  return Tensor::from_vector(v, {n, 8});
}

// The float64 reference of both outputs.
void expect_matches(const Tensor& x, const std::vector<Tensor>& out, const std::string& what) {
  ASSERT_EQ(out.size(), 2u);
  auto xs = x.span<float>();
  auto y = out[0].span<float>(), z = out[1].span<float>();
  ASSERT_EQ(y.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    double a = std::exp(double(xs[i]));
    double e = std::tanh(1.0 / (1.0 + std::exp(a)) + a);
    EXPECT_NEAR(y[i], e * e, 1e-5) << what << " y[" << i << "]";
    EXPECT_NEAR(z[i], std::abs(e), 1e-5) << what << " z[" << i << "]";
  }
}

TEST(MemoryPlan, PlannedRunsMatchTheReferenceAcrossShapes) {
  Session session = Session::load(skip_model(), node_by_node());
  EXPECT_FALSE(session.memory_plan().planned);
  Tensor x1 = random_input(3, 1), x2 = random_input(3, 2), x3 = random_input(7, 3);
  expect_matches(x1, session.run({x1}), "run 1 (records)");
  MemoryPlanStats plan = session.memory_plan();
  ASSERT_TRUE(plan.planned);
  // a, b, c, d, e and Shape's s are planned; f is the output y's storage and z an output: neither is.
  EXPECT_EQ(plan.tensors, 6);
  EXPECT_LT(plan.arena_bytes, plan.total_bytes);  // b, c die early: their memory is reused
  EXPECT_GE(plan.arena_bytes, plan.lower_bound);
  std::vector<Tensor> second = session.run({x2});
  expect_matches(x2, second, "run 2 (arena)");
  expect_matches(x3, session.run({x3}), "run 3 (new shape: records)");
  expect_matches(x3, session.run({x3}), "run 4 (new shape: arena)");
  expect_matches(x1, session.run({x1}), "run 5 (first shape again)");
  // Outputs of an earlier run are not overwritten by later ones.
  expect_matches(x2, second, "run 2's outputs after run 5");
}

// x[4] -> a = Neg(x); b = Exp(a); y = If(ReduceSum(x) > 0) then a else Abs(b); z = Sigmoid(b) + y.
// The then-branch hands back the outer value `a`, which the recording run (else-branch) never saw
// as y: the plan must keep a's buffer alive anyway, or z would read a reused slice.
std::string if_model() {
  auto branch = [](const std::string& name, bool then) {
    onnx::GraphProto g;
    g.set_name(name);
    if (then) {
      *g.add_node() = make_node("Identity", {"a"}, {name + "_out"});
    } else {
      *g.add_node() = make_node("Abs", {"b"}, {name + "_out"});
    }
    *g.add_output() = tensor_info(name + "_out", onnx::TensorProto::FLOAT, {"4"});
    return g;
  };
  onnx::GraphProto g;
  g.set_name("if_alias");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"4"});
  *g.add_node() = make_node("Neg", {"x"}, {"a"});
  *g.add_node() = make_node("Exp", {"a"}, {"b"});
  *g.add_node() = make_node("ReduceSum", {"x"}, {"sum"});
  testing::add_scalar(g, "zero", 0.0f);
  *g.add_node() = make_node("Greater", {"sum", "zero"}, {"cond"});
  *g.add_node() = ingot::testing::make_if("cond", {"y"}, branch("then", true), branch("else", false));
  *g.add_node() = make_node("Sigmoid", {"b"}, {"s"});
  *g.add_node() = make_node("Mul", {"s", "s"}, {"s2"});
  *g.add_node() = make_node("Add", {"s2", "y"}, {"z"});
  *g.add_output() = tensor_info("z", onnx::TensorProto::FLOAT, {"4"});
  return testing::save_model(testing::model_with(std::move(g)), "if_alias.onnx");
}

TEST(MemoryPlan, ValuesABranchMayReturnStayAlive) {
  SessionOptions plain;
  plain.memory_plan = false;
  Session planned = Session::load(if_model()), reference = Session::load(if_model(), plain);
  Tensor negative = Tensor::from_vector<float>({-1, -2, 0.5f, -0.25f}, {4});  // else-branch
  Tensor positive = Tensor::from_vector<float>({1, 2, -0.5f, 0.25f}, {4});    // then-branch: y = a
  for (const Tensor& x : {negative, positive, positive, negative, positive}) {
    auto got = planned.run({x}), want = reference.run({x});
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[0].data<float>()[i], want[0].data<float>()[i]) << i;
  }
  EXPECT_TRUE(planned.memory_plan().planned);
}

// x[N] -> y = If(ReduceSum(x) > 0) then Relu((x + 1) * 2) * x else Neg(x): the then-branch's
// intermediates (x + 1, its double, their Relu) get a plan of their own from its second execution;
// only its output is allocated then. Checked against the formula, alternating branches and sizes.
std::string branch_work_model() {
  onnx::GraphProto then_g;
  then_g.set_name("then_work");
  testing::add_scalar(then_g, "one", 1.0f);
  testing::add_scalar(then_g, "two", 2.0f);
  *then_g.add_node() = make_node("Add", {"x", "one"}, {"p1"});
  *then_g.add_node() = make_node("Mul", {"p1", "two"}, {"p2"});
  *then_g.add_node() = make_node("Relu", {"p2"}, {"p3"});
  *then_g.add_node() = make_node("Mul", {"p3", "x"}, {"then_out"});
  *then_g.add_output() = tensor_info("then_out", onnx::TensorProto::FLOAT, {"N"});
  onnx::GraphProto else_g;
  else_g.set_name("else_work");
  *else_g.add_node() = make_node("Neg", {"x"}, {"else_out"});
  *else_g.add_output() = tensor_info("else_out", onnx::TensorProto::FLOAT, {"N"});
  onnx::GraphProto g;
  g.set_name("branch_work");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N"});
  testing::add_scalar(g, "zero", 0.0f);
  *g.add_node() = make_node("ReduceSum", {"x"}, {"sum"});
  *g.add_node() = make_node("Greater", {"sum", "zero"}, {"cond"});
  *g.add_node() = ingot::testing::make_if("cond", {"y"}, std::move(then_g), std::move(else_g));
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N"});
  return testing::save_model(testing::model_with(std::move(g)), "branch_work.onnx");
}

TEST(MemoryPlan, BranchIntermediatesArePlannedToo) {
  Session session = Session::load(branch_work_model(), node_by_node());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int run = 0;
  for (int64_t n : {64, 64, 64, 5, 64, 5, 5, 64}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = dist(rng);
    const bool then = run % 3 != 2;  // mostly the then-branch, sometimes the else-branch
    float sum = 0;
    for (float e : v) sum += e;
    if ((sum > 0) != then) v[0] += (then ? 1.0f : -1.0f) * (std::fabs(sum) + 1.0f);
    Tensor x = Tensor::from_vector(v, {n});
    profiler::start();
    std::vector<Tensor> out = session.run({x});
    profiler::Trace trace = profiler::stop();
    ASSERT_EQ(out[0].numel(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = v[size_t(i)];
      const double want = then ? std::max(0.0, (x + 1) * 2) * x : -x;
      EXPECT_NEAR(out[0].data<float>()[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << "run " << run << " element " << i;
    }
    if (then && run >= 2) {
      // The branch's output (also y) and the top-level ReduceSum/Greater results were planned at
      // run 1: one allocation is left, the output's (the first 5-element run records its plan).
      if (!(n == 5 && run == 3)) {
        EXPECT_EQ(trace.summary.alloc_count, 1) << "run " << run;
      }
    }
    ++run;
  }
}

TEST(MemoryPlan, CanBeTurnedOff) {
  SessionOptions options;
  options.memory_plan = false;
  Session session = Session::load(skip_model(), options);
  Tensor x = random_input(4, 9);
  for (int i = 0; i < 3; ++i) expect_matches(x, session.run({x}), "unplanned run");
  EXPECT_FALSE(session.memory_plan().planned);
}

}  // namespace
}  // namespace ingot
