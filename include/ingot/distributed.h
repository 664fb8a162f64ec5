// Data-parallel training over several processes, with PyTorch's names (torch.distributed, DDP,
// torchrun's environment): one process per device, joined through a rendezvous folder, gradients
// averaged by all-reduce while the backward pass runs.
//
//   $ ingot launch --nproc-per-node 2 build/apps/ingot-fashion-mnist --device cuda
//
//   distributed::init_process_group({.backend = "nccl"});  // RANK, WORLD_SIZE, LOCAL_RANK from the launcher
//   Device dev = distributed::device();                    // cuda:LOCAL_RANK
//   net->to(dev);
//   distributed::DistributedDataParallel ddp(net);         // rank 0's parameters and buffers everywhere
//   optim::SGD opt(net->parameters(), ...);
//   for (...) {                                            // DataLoader with world_size / rank: each rank its share
//     opt.zero_grad();
//     loss_fn(ddp.forward(x), y).backward();               // gradients averaged over the ranks
//     opt.step();
//   }
//   if (distributed::get_rank() == 0) save_safetensors(...);
//
// Backends: "nccl" for CUDA tensors (NCCL, opened when the group starts), "gloo" for CPU tensors
// (Gloo, in the plugin libingot_gloo.so beside the library). Neither is loaded by a process that
// does not call init_process_group.
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

INGOT_API_BEGIN
namespace ingot {
namespace nn {
class Module;
class Layer;
}  // namespace nn

// How all_reduce combines the ranks' values (Avg: the sum divided by the world size).
enum class ReduceOp { Sum, Avg, Max, Min };

namespace distributed {

struct InitOptions {
  // "nccl" (CUDA tensors, device cuda:LOCAL_RANK) or "gloo" (CPU tensors).
  std::string backend{};
  // Where the processes meet: "file:///path/to/folder" (a folder every rank can reach; the launcher
  // makes a fresh one). Empty: the environment's INGOT_RENDEZVOUS.
  std::string init_method{};
  // -1: from the environment (RANK, WORLD_SIZE, LOCAL_RANK, as torchrun and `ingot launch` set them).
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  // How long a collective or the rendezvous waits for the other ranks before failing (naming them).
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

// Joins this process to the group (torch.distributed.init_process_group); an error names what is
// missing (the environment, the folder, the library) or which ranks did not arrive in time.
void init_process_group(const InitOptions& options);
void destroy_process_group();
bool is_initialized();
// The environment of a launched process (`ingot launch`): WORLD_SIZE is set.
bool launched();
int get_rank();        // 0 when no group
int get_world_size();  // 1 when no group
int get_local_rank();
Device device();       // the device this process's tensors live on: cpu, or cuda:LOCAL_RANK
std::string describe();  // "NCCL 2.27 over 2 ranks", for logs

// Collectives on the group (every rank must call them in the same order). In place; the tensor
// must be on device(). all_reduce and broadcast are ordered on the device's queue (CUDA: the host
// does not wait; CPU: they return with the result).
void all_reduce(const Tensor& t, ReduceOp op);
void all_reduce(const Tensor& t);  // sum
void broadcast(const Tensor& t, int src);
void barrier();

// Gradient averaging for a module (torch.nn.parallel.DistributedDataParallel): on construction rank
// 0's parameters and buffers are broadcast to every rank; during each backward the parameters'
// gradients, in buckets of about bucket_cap_mb (the first 1 MB, so that communication starts early),
// in reverse registration order (roughly the order the backward produces them), are all-reduced as
// soon as a bucket's last gradient is complete, while the backward goes on; at the end of the
// backward every gradient is the average over the ranks (a view into its bucket). A parameter that
// got no gradient on a rank counts as zeros there; one no rank used gets a zero gradient.
class DistributedDataParallel {
 public:
  struct Options {
    double bucket_cap_mb = 25;
    bool broadcast_buffers = true;  // rank 0's buffers (batch norm's statistics) at every forward
  };
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module);
  DistributedDataParallel(std::shared_ptr<nn::Module> module, Options options);
  // For models that are not an nn::Module (Python's ingot.nn.Module): the parameters by name, and
  // what gives the buffers (read at construction and at every sync_buffers). forward() is then the
  // caller's: sync_buffers(), then the model.
  DistributedDataParallel(std::vector<std::pair<std::string, Tensor>> named_parameters,
                          std::function<std::vector<Tensor>()> buffers, Options options);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The module's forward (it must be an nn::Layer) after the buffers' broadcast.
  Tensor forward(const Tensor& x);
  // Rank 0's buffers on every rank (what forward does first; call it before a forward of your own).
  void sync_buffers();
  nn::Module& module() const;

  // While alive, backward passes accumulate gradients locally without communicating (gradient
  // accumulation, DDP's no_sync()); the first backward after it reduces the sum.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The buckets, as parameter names per bucket (tests, logs).
  std::vector<std::vector<std::string>> buckets() const;
  // Whether backward passes reduce (what NoSync turns off), for bindings that scope it themselves.
  void set_sync(bool on);
  bool sync() const;

 private:
  struct Reducer;
  std::unique_ptr<Reducer> reducer_;
};
using DDP = DistributedDataParallel;

// The launcher (`ingot launch`): runs `argv` as `nproc` processes with RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE and INGOT_RENDEZVOUS (a fresh folder) set, their output lines prefixed with the
// rank where `prefix_output`; when one fails the others are stopped. Returns the first failing
// process's exit status (128 + signal for a signal), else 0. `bind_cpus`: each rank runs on its own
// slice of the CPUs this process may use (so its thread pool is sized for that slice).
struct LaunchOptions {
  int nproc = 1;
  bool prefix_output = true;
  bool bind_cpus = true;
};
int launch(const std::vector<std::string>& argv, const LaunchOptions& options);

// For a program with a --gpus N flag: when nproc > 1 and this process is not a launched rank, runs
// nproc copies of this program with the same arguments (launch()) and returns their status; nullopt
// otherwise (this process is a rank, or the only process), when the program goes on to train.
std::optional<int> relaunch_as_ranks(int argc, char** argv, int nproc);

}  // namespace distributed
}  // namespace ingot
INGOT_API_END
