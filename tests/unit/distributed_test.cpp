// The pieces of data-parallel training that one process can check (docs/TRAINING.md,
// "Data-parallel training"): autograd's post-accumulate-grad hooks and queued callbacks, the file
// store, the launcher's environment and failure handling, a one-rank group and its errors. Two
// ranks: ctest `distributed.ddp_cpu` (tests/distributed/ddp_worker.cpp).
#include <gtest/gtest.h>
#include <ingot/autograd.h>
#include <ingot/distributed.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/profiler.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>

#include "distributed/store.h"
#include "test_util.h"

namespace ingot {
namespace {
namespace fs = std::filesystem;

std::string fresh_folder(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ingot_distributed_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

Tensor leaf(std::vector<double> v) {
  Tensor t = Tensor::from_vector(v, {int64_t(v.size())});
  t.set_requires_grad();
  return t;
}

Tensor op(const char* name, std::vector<Tensor> in) { return ops::call(name, std::move(in)).at(0); }

TEST(Autograd, PostAccumulateGradHookSeesTheWholeGradientOnce) {
  Tensor w = leaf({2.0, -3.0});
  Tensor x = Tensor::from_vector(std::vector<double>{5.0, 7.0}, {2});
  std::vector<std::vector<double>> seen;
  auto handle = autograd::register_post_accumulate_grad_hook(w, [&](Tensor& t) { seen.push_back(t.grad().to_vector<double>()); });
  // loss = sum(w * x + w * w): w reaches the loss along two paths; d/dw = x + 2w.
  op("ReduceSum", {op("Add", {op("Mul", {w, x}), op("Mul", {w, w})})}).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{9.0, 1.0}));
  // A second backward adds into grad(); the hook sees the sum.
  op("ReduceSum", {op("Mul", {w, x})}).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{14.0, 8.0}));
  // autograd::grad leaves grad() alone, and so calls no hook.
  autograd::grad({op("ReduceSum", {op("Mul", {w, x})})}, {w});
  EXPECT_EQ(seen.size(), 2u);
  handle.remove();
  op("ReduceSum", {op("Mul", {w, x})}).backward();
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Autograd, HooksRunAsTheBackwardFinishesEachLeafAndCallbacksAfterAll) {
  // y = w2 * relu(w1 * x): w2's gradient is complete before w1's is computed.
  Tensor w1 = leaf({1.0, 2.0}), w2 = leaf({3.0, 4.0});
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, 1.0}, {2});
  std::vector<std::string> events;
  auto h1 = autograd::register_post_accumulate_grad_hook(w1, [&](Tensor&) { events.push_back("w1"); });
  auto h2 = autograd::register_post_accumulate_grad_hook(w2, [&](Tensor&) {
    events.push_back("w2");
    autograd::queue_callback([&] { events.push_back("callback"); });
  });
  op("ReduceSum", {op("Mul", {w2, op("Relu", {op("Mul", {w1, x})})})}).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w2", "w1", "callback"}));
  EXPECT_NE(testing::error_of([] { autograd::queue_callback([] {}); }).find("no backward pass is running"), std::string::npos);
  Tensor not_leaf = op("Mul", {w1, x});
  EXPECT_NE(testing::error_of([&] { (void)autograd::register_post_accumulate_grad_hook(not_leaf, [](Tensor&) {}); }).find("not a leaf"),
            std::string::npos);
}

TEST(Distributed, FileStoreRoundTripsBytesAndNamesAMissingKey) {
  distributed::FileStore store(fresh_folder("store"));
  std::vector<char> bytes{'\0', 'a', '\xff', '/'};
  store.set("group0/nccl/unique id", bytes);
  EXPECT_EQ(store.get("group0/nccl/unique id", std::chrono::milliseconds(10)), bytes);
  store.set("k", {'1'});
  store.set("k", {'2'});  // a later set replaces
  EXPECT_EQ(store.get("k", std::chrono::milliseconds(10)), std::vector<char>{'2'});
  auto start = std::chrono::steady_clock::now();
  std::string e = testing::error_of([&] { store.get("group0/rank1", std::chrono::milliseconds(100)); });
  EXPECT_NE(e.find("no key 'group0/rank1'"), std::string::npos) << e;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(store.wait({"k", "x", "y"}, std::chrono::milliseconds(20)), (std::vector<std::string>{"x", "y"}));
  fs::remove_all(store.folder());
}

TEST(Distributed, LaunchSetsEachRanksEnvironment) {
  std::string dir = fresh_folder("launch");
  fs::create_directories(dir);
  int rc = distributed::launch(
      {"sh", "-c", "echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE ${INGOT_RENDEZVOUS%%/ingot-rendezvous-*} > " + dir + "/$RANK"},
      {.nproc = 3});
  EXPECT_EQ(rc, 0);
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir + "/" + std::to_string(r));
    std::string rank, local, world, local_world, rendezvous;
    in >> rank >> local >> world >> local_world >> rendezvous;
    EXPECT_EQ(rank, std::to_string(r));
    EXPECT_EQ(local, std::to_string(r));
    EXPECT_EQ(world, "3");
    EXPECT_EQ(local_world, "3");
    EXPECT_EQ(rendezvous.rfind("file://", 0), 0u) << rendezvous;
  }
  fs::remove_all(dir);
}

TEST(Distributed, LaunchStopsTheOtherRanksWhenOneFails) {
  auto start = std::chrono::steady_clock::now();
  int rc = distributed::launch({"sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; sleep 60"}, {.nproc = 2, .prefix_output = false});
  EXPECT_EQ(rc, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(distributed::launch({"/nonexistent/ingot-no-such-program"}, {.nproc = 1, .prefix_output = false}), 127);
}

// Run by RanksStopWhenTheLauncherIsKilled in a process of its own (this test binary again): a
// launcher of two ranks that each write their pid and sleep.
TEST(Distributed, LauncherForTheKillTest) {
  const char* dir = std::getenv("INGOT_TEST_KILLED_LAUNCHER");
  if (!dir) GTEST_SKIP() << "run by Distributed.RanksStopWhenTheLauncherIsKilled";
  distributed::launch({"sh", "-c", std::string("echo $$ > ") + dir + "/$RANK.tmp && mv " + dir + "/$RANK.tmp " + dir +
                                       "/$RANK.pid && exec sleep 60"},
                      {.nproc = 2, .prefix_output = false});
}

// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs no more).
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

TEST(Distributed, RanksStopWhenTheLauncherIsKilled) {
  std::string dir = fresh_folder("killed");
  fs::create_directories(dir);
  // The launcher's environment, built before fork: this one's, less gtest's sharding (a shard of
  // the run would select no test in the child), plus the folder.
  std::vector<std::string> env{"INGOT_TEST_KILLED_LAUNCHER=" + dir};
  for (char** e = environ; *e; ++e) {
    if (std::string_view(*e).substr(0, 12) != "GTEST_SHARD_" && std::string_view(*e).substr(0, 12) != "GTEST_TOTAL_")
      env.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "ingot-tests", arg1[] = "--gtest_filter=Distributed.LauncherForTheKillTest";
  char* argv[] = {arg0, arg1, nullptr};
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  std::vector<pid_t> ranks;
  for (auto start = std::chrono::steady_clock::now(); ranks.size() < 2;) {
    ranks.clear();
    for (int r = 0; r < 2; ++r) {
      std::ifstream in(dir + "/" + std::to_string(r) + ".pid");
      pid_t pid = 0;
      if (in >> pid) ranks.push_back(pid);
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(ranks.size(), 2u) << "the ranks did not start";
  EXPECT_FALSE(gone(ranks[0]) || gone(ranks[1]));
  kill(launcher, SIGKILL);  // no chance to stop them itself
  int status = 0;
  waitpid(launcher, &status, 0);
  auto start = std::chrono::steady_clock::now();
  while (!(gone(ranks[0]) && gone(ranks[1])) && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (pid_t pid : ranks) {
    EXPECT_TRUE(gone(pid)) << "rank process " << pid << " outlived its launcher";
    if (!gone(pid)) kill(pid, SIGKILL);
  }
  fs::remove_all(dir);
}

distributed::InitOptions options(std::string backend, std::string method = "", int rank = -1, int world_size = -1) {
  distributed::InitOptions o;
  o.backend = std::move(backend);
  o.init_method = std::move(method);
  o.rank = rank;
  o.world_size = world_size;
  return o;
}

TEST(Distributed, InitNamesWhatIsMissing) {
  auto init = [](distributed::InitOptions o) { return testing::error_of([&] { distributed::init_process_group(o); }); };
  EXPECT_NE(init(options("mpi")).find("backend 'mpi'"), std::string::npos);
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  EXPECT_NE(init(options("gloo")).find("set RANK and WORLD_SIZE"), std::string::npos);
  EXPECT_NE(init(options("gloo", "tcp://localhost:1", 0, 1)).find("file:///folder"), std::string::npos);
  EXPECT_NE(init(options("gloo", "", 2, 2)).find("rank 2 of a world of 2"), std::string::npos);
  // A rank that never comes is named, after the timeout.
  distributed::InitOptions alone = options("gloo", "file://" + fresh_folder("alone"), 0, 3);
  alone.timeout = std::chrono::milliseconds(200);
  std::string e = init(alone);
  EXPECT_NE(e.find("rank(s) 1, 2 of 3 did not join within 0.2 s"), std::string::npos) << e;
  EXPECT_FALSE(distributed::is_initialized());
  EXPECT_EQ(distributed::get_world_size(), 1);
}

TEST(Distributed, OneRankGroupReducesAndBucketsInReverseOrder) {
  std::string folder = fresh_folder("one");
  distributed::init_process_group(options("gloo", "file://" + folder, 0, 1));
  EXPECT_NE(testing::error_of([&] { distributed::init_process_group(options("gloo", "", 0, 1)); }).find("already"),
            std::string::npos);
  Tensor t = Tensor::from_vector(std::vector<float>{1.5f, -2.0f}, {2});
  distributed::all_reduce(t, ReduceOp::Avg);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_NE(testing::error_of([&] { distributed::all_reduce(Tensor::from_vector(std::vector<bool>{true}, {1})); }).find("bool"),
            std::string::npos);

  // Linear(4, 300) then Linear(300, 2): with a 2 KB cap every parameter gets a bucket of its own, the
  // last layer's first (the backward's order); DDP on one rank leaves the gradients as they were.
  auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(4, 300), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(300, 2)});
  auto reference = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Linear>(4, 300), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(300, 2)});
  reference->load_state_dict(net->state_dict());
  distributed::DDP ddp(net, {.bucket_cap_mb = 2.0 / 1024});
  EXPECT_EQ(ddp.buckets(), (std::vector<std::vector<std::string>>{{"2.bias"}, {"2.weight"}, {"0.bias"}, {"0.weight"}}));
  Tensor x = Tensor::from_vector(std::vector<float>{0.5f, -1, 2, 0.25f, 1, 1, -1, 0}, {2, 4});
  profiler::start();
  op("ReduceSum", {ddp.forward(x)}).backward();
  const profiler::Trace trace = profiler::stop();
  // The timeline shows each bucket's all-reduce (on the communicator's thread) and DDP's wait.
  auto phases = [&](const std::string& name) {
    return std::count_if(trace.events.begin(), trace.events.end(),
                         [&](const profiler::Event& e) { return e.kind == profiler::EventKind::Phase && e.name == name; });
  };
  EXPECT_EQ(phases("gloo all-reduce"), 4);
  EXPECT_EQ(phases("DDP: wait for the gradients' all-reduce"), 1);
  op("ReduceSum", {reference->forward(x)}).backward();
  auto mine = net->named_parameters(), ref = reference->named_parameters();
  for (size_t i = 0; i < mine.size(); ++i)
    EXPECT_EQ(mine[i].second.grad().to_vector<float>(), ref[i].second.grad().to_vector<float>()) << mine[i].first;
  // The reduced gradients are views of the buckets (the same storage after every reduced backward).
  std::vector<const Storage*> buckets;
  for (auto& [name, p] : mine) buckets.push_back(p.grad().storage().get());
  // A backward that fails after every bucket was queued (Unique has no gradient rule, and its node,
  // made first, runs last) leaves DDP ready for the next backward.
  Tensor xg = Tensor::from_vector(std::vector<float>{0.5f, -1, 2, 0.25f, 1, 1.5f, -2, 0}, {8});
  xg.set_requires_grad();
  Tensor unique = ops::call("Reshape", {op("Unique", {xg}), Tensor::from_vector(std::vector<int64_t>{2, 4}, {2})}).at(0);
  EXPECT_NE(testing::error_of([&] { op("ReduceSum", {ddp.forward(unique)}).backward(); }).find("no gradient rule for Unique"),
            std::string::npos);
  net->zero_grad();
  reference->zero_grad();
  op("ReduceSum", {ddp.forward(x)}).backward();
  op("ReduceSum", {reference->forward(x)}).backward();
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].second.grad().to_vector<float>(), ref[i].second.grad().to_vector<float>()) << "after a failed backward: " << mine[i].first;
    EXPECT_EQ(mine[i].second.grad().storage().get(), buckets[i]) << "not reduced after a failed backward: " << mine[i].first;
  }
  distributed::destroy_process_group();
  EXPECT_FALSE(distributed::is_initialized());
  fs::remove_all(folder);
}

}  // namespace
}  // namespace ingot
