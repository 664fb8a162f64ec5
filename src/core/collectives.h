// Collective communication among the processes of a data-parallel group, for one device kind: what
// src/distributed/ (the process group, DistributedDataParallel) needs of a backend, as
// core/device_graph.h is what the executor needs for capture. A backend that can communicate
// returns a Communicator from Backend::connect (core/backend.h): the CPU backend through Gloo (a
// plugin library opened on first use, backends/cpu/gloo_collectives.cpp), CUDA through NCCL (opened
// with dlopen, backends/cuda/nccl.cpp). Neither is loaded by a process that does not join a group.
#pragma once
#include <ingot/distributed.h>
#include <ingot/tensor.h>

#include <chrono>
#include <string>
#include <vector>

namespace ingot {

// The rendezvous: a key-value store every process of the group reaches (distributed::FileStore, a
// folder). Values are bytes; get() waits for the key until the timeout, then throws naming it.
struct KeyValueStore {
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  virtual std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

const char* reduce_op_name(ReduceOp op);

struct ConnectOptions {
  KeyValueStore* store = nullptr;  // keys under `prefix`, so that successive groups do not meet old keys
  std::string prefix;
  int rank = 0;
  int world_size = 1;
  int device_index = 0;  // the device this process's tensors live on
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// One process's end of a group. Operations are queued in call order and run in that order (every
// rank must queue the same operations in the same order, as with NCCL and Gloo); each runs after
// the work already queued on the device's compute queue when it was called, and returns to the
// host at once (CPU: a worker thread of the communicator runs them). The tensors must be contiguous,
// on the communicator's device, and left alone (not written, read or freed by other work) until
// join(). Errors (a peer gone, a timeout) surface from join() or from the next call.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual void all_reduce(const Tensor& t, ReduceOp op) = 0;  // in place
  virtual void broadcast(const Tensor& t, int root) = 0;      // in place: root's values everywhere
  // Work queued on the device after join() returns sees every result queued before it (CUDA: the
  // compute stream waits for the communication stream; the host does not wait. CPU: blocks).
  virtual void join() = 0;
  // Blocks until every rank has called barrier() (and everything queued before it has finished).
  virtual void barrier() = 0;
  virtual std::string describe() const = 0;  // "gloo over TCP (2 ranks)", "NCCL 2.27.3 (2 ranks)"
};

}  // namespace ingot
