// One rank of the data-parallel test (ctest `distributed.ddp_cpu`: `ingot launch --nproc-per-node 2`
// runs two of it; `distributed.ddp_cuda` in tests/gpu runs it with --device cuda). Each rank checks
//  - the collectives against values it computes itself: all-reduce sum/avg/max/min over dtypes and
//    sizes (odd, larger than Gloo's 1 MB segments, empty), broadcast from the last rank;
//  - DistributedDataParallel against one process training on the whole batch: each rank's half of
//    a batch, averaged by DDP, must give the parameters the whole batch gives (SGD with momentum, 3
//    steps; buckets of every parameter and one bucket; an unused parameter; gradient accumulation
//    with no_sync), within 1e-5.
// Exits 1 with a message naming the first check that failed.
#include <ingot/autograd.h>
#include <ingot/distributed.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace ingot;

namespace {

int g_rank = 0, g_world = 1;
Device g_device;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::exit(1);
}

void expect_near(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  std::vector<double> a = got.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  std::vector<double> b = want.to(Device::cpu()).cast(DType::Float64).to_vector<double>();
  if (a.size() != b.size()) die(what + ": sizes differ");
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i]))))
      die(what + ": element " + std::to_string(i) + " is " + std::to_string(a[i]) + ", expected " + std::to_string(b[i]));
  }
}

Tensor filled(DType dt, int64_t n, double value) {
  std::vector<double> v(size_t(n), value);
  return Tensor::from_vector(v, {n}).cast(dt).to(g_device);
}

void check_collectives() {
  const double sum = g_world * (g_world + 1) / 2.0;  // ranks contribute rank + 1
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Float16}) {
    for (int64_t n : {int64_t(1), int64_t(1000003), int64_t(0)}) {
      if (dt == DType::Float16 && n > 1000) continue;
      std::string what = std::string(dtype_name(dt)) + "[" + std::to_string(n) + "]";
      Tensor t = filled(dt, n, g_rank + 1);
      distributed::all_reduce(t, ReduceOp::Sum);
      expect_near(t, filled(dt, n, sum), 0, "all_reduce sum of " + what);
      t = filled(dt, n, g_rank + 1);
      distributed::all_reduce(t, ReduceOp::Max);
      expect_near(t, filled(dt, n, g_world), 0, "all_reduce max of " + what);
      t = filled(dt, n, g_rank + 1);
      distributed::all_reduce(t, ReduceOp::Min);
      expect_near(t, filled(dt, n, 1), 0, "all_reduce min of " + what);
      if (dt != DType::Int64) {
        t = filled(dt, n, g_rank + 1);
        distributed::all_reduce(t, ReduceOp::Avg);
        expect_near(t, filled(dt, n, sum / g_world), 1e-6, "all_reduce avg of " + what);
      }
    }
  }
  Tensor b = Tensor::from_vector(std::vector<float>{float(g_rank), 2.5f, -1.0f * float(g_rank)}, {3}).to(g_device);
  distributed::broadcast(b, g_world - 1);
  expect_near(b, Tensor::from_vector(std::vector<float>{float(g_world - 1), 2.5f, -1.0f * float(g_world - 1)}, {3}), 0,
              "broadcast from the last rank");
  distributed::barrier();
}

// A network with a parameter its forward never uses (DDP must still agree on it across ranks).
struct Net : nn::Layer {
  std::shared_ptr<nn::Linear> a, b, unused;
  Net() {
    a = register_module("a", std::make_shared<nn::Linear>(8, 32));
    b = register_module("b", std::make_shared<nn::Linear>(32, 4));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override { return b->forward(ops::call("Relu", {a->forward(x)}).at(0)); }
};

Tensor rows(const Tensor& t, int64_t begin, int64_t end) { return t.slice_rows(begin, end).clone(); }

void check_ddp(double bucket_cap_mb) {
  const int64_t per_rank = 6, n = per_rank * g_world;
  std::string what = "DDP (bucket_cap_mb " + std::to_string(bucket_cap_mb) + ")";
  manual_seed(1234 + uint64_t(g_rank));  // different initial values per rank: DDP must make them rank 0's
  auto net = std::make_shared<Net>();
  net->to(g_device);
  distributed::DistributedDataParallel ddp(net, {.bucket_cap_mb = bucket_cap_mb});
  if (bucket_cap_mb < 0.001 && ddp.buckets().size() != net->parameters().size()) die(what + ": not one bucket per parameter");
  if (bucket_cap_mb >= 1 && ddp.buckets().size() != 1) die(what + ": not one bucket");
  if (ddp.buckets().front().front() != "unused.bias") die(what + ": the first bucket does not start at the last parameter");

  auto reference = std::make_shared<Net>();  // the same start, trained on the whole batch in this process
  reference->to(g_device);
  reference->load_state_dict(net->state_dict());
  for (auto& [name, p] : net->named_parameters()) {  // every rank starts from rank 0's values
    Tensor lo = p.clone(), hi = p.clone();
    distributed::all_reduce(lo, ReduceOp::Min);
    distributed::all_reduce(hi, ReduceOp::Max);
    expect_near(lo, hi, 0, what + ": " + name + " after the initial broadcast");
  }

  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  auto data = [&](int step) {  // the same batch on every rank
    auto wave = [&](int64_t count, double phase) {
      std::vector<float> v(static_cast<size_t>(count));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(0.37 * double(i) + phase));
      return v;
    };
    return std::pair{Tensor::from_vector(wave(n * 8, step), {n, 8}).to(g_device),
                     Tensor::from_vector(wave(n * 4, 0.5 + step), {n, 4}).to(g_device)};
  };
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = data(step);
    auto [x2, y2] = data(10 + step);
    opt.zero_grad();
    if (step == 2) {  // gradient accumulation: a local backward, then one that reduces both
      auto guard = ddp.no_sync();
      nn::functional::mse_loss(ddp.forward(rows(x2, g_rank * per_rank, (g_rank + 1) * per_rank)),
                               rows(y2, g_rank * per_rank, (g_rank + 1) * per_rank))
          .backward();
    }
    nn::functional::mse_loss(ddp.forward(rows(x, g_rank * per_rank, (g_rank + 1) * per_rank)),
                             rows(y, g_rank * per_rank, (g_rank + 1) * per_rank))
        .backward();
    opt.step();

    ref_opt.zero_grad();
    if (step == 2) nn::functional::mse_loss(reference->forward(x2), y2).backward();
    nn::functional::mse_loss(reference->forward(x), y).backward();
    ref_opt.step();

    auto mine = net->named_parameters();
    auto ref = reference->named_parameters();
    for (size_t i = 0; i < mine.size(); ++i)
      expect_near(mine[i].second, ref[i].second, 1e-5, what + ": " + mine[i].first + " after step " + std::to_string(step));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string device = argc > 2 && std::string(argv[1]) == "--device" ? argv[2] : "cpu";
    distributed::init_process_group({.backend = device == "cpu" ? "gloo" : "nccl"});
    g_rank = distributed::get_rank();
    g_world = distributed::get_world_size();
    g_device = distributed::device();
    check_collectives();
    check_ddp(1e-6);
    check_ddp(25);
    std::printf("rank %d of %d (%s): collectives and DDP match the single-process reference\n", g_rank, g_world,
                distributed::describe().c_str());
    distributed::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    die(e.what());
  }
}
