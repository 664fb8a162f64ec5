// The process group (include/ingot/distributed.h): one per process, joined through a FileStore; its
// collectives go to the Communicator of the group's device's backend (core/collectives.h).
#include "distributed/process_group.h"

#include <fmt/format.h>
#include <ingot/distributed.h>
#include <ingot/error.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "core/backend.h"
#include "core/flags.h"
#include "distributed/store.h"

namespace ingot::distributed {
namespace {

struct Group {
  std::string backend;
  int rank = 0, world_size = 1, local_rank = 0;
  Device device;
  std::unique_ptr<FileStore> store;
  std::unique_ptr<Communicator> comm;
};

std::mutex g_mutex;
std::unique_ptr<Group> g_group;
int g_generation = 0;  // groups started by this process: the store prefix of each, agreed by every rank

// An integer from the environment; `fallback` when unset, an error naming the variable when malformed.
int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end || v < 0 || v > 1 << 20) fail("environment variable {}='{}' is not a rank or a count", name, text);
  return int(v);
}

Group& group() {
  if (!g_group) fail("no process group: call distributed::init_process_group first");
  return *g_group;
}

}  // namespace

Communicator& communicator() { return *group().comm; }

void init_process_group(const InitOptions& options) {
  std::lock_guard lock(g_mutex);
  if (g_group) fail("init_process_group: this process is already in a group (destroy_process_group first)");
  auto g = std::make_unique<Group>();
  g->backend = options.backend;
  if (g->backend != "nccl" && g->backend != "gloo")
    fail("init_process_group: backend '{}' is not one of nccl (CUDA tensors), gloo (CPU tensors)", options.backend);
  g->world_size = options.world_size >= 0 ? options.world_size : env_int("WORLD_SIZE", -1);
  g->rank = options.rank >= 0 ? options.rank : env_int("RANK", -1);
  if (g->world_size < 1 || g->rank < 0)
    fail("init_process_group: no rank or world size (set RANK and WORLD_SIZE, or run under `ingot launch`)");
  if (g->rank >= g->world_size) fail("init_process_group: rank {} of a world of {}", g->rank, g->world_size);
  g->local_rank = options.local_rank >= 0 ? options.local_rank : env_int("LOCAL_RANK", g->rank);
  std::string method = options.init_method;
  if (method.empty()) {
    method = flags::text("INGOT_RENDEZVOUS");
    if (method.empty()) fail("init_process_group: no rendezvous (set INGOT_RENDEZVOUS=file:///folder, or run under `ingot launch`)");
  }
  constexpr std::string_view kFile = "file://";
  if (method.compare(0, kFile.size(), kFile) != 0)
    fail("init_process_group: init method '{}' is not file:///folder (the only rendezvous)", method);
  g->store = std::make_unique<FileStore>(method.substr(kFile.size()));

  g->device = g->backend == "nccl" ? Device{DeviceType::CUDA, g->local_rank} : Device::cpu();
  Backend* backend = find_backend(g->device.type);
  if (!backend) fail("init_process_group: backend {} needs CUDA, and this build has none", g->backend);
  if (!backend->memory().available(g->device.index))
    fail("init_process_group: rank {}'s device {} (LOCAL_RANK {}) is not on this machine", g->rank,
         g->device.str(), g->local_rank);

  // Every rank says it is here, then waits for the others: a rank that never comes is named.
  std::string prefix = fmt::format("group{}/", g_generation);
  g->store->set(prefix + fmt::format("rank{}", g->rank), std::vector<char>{'1'});
  std::vector<std::string> keys;
  for (int r = 0; r < g->world_size; ++r) keys.push_back(prefix + fmt::format("rank{}", r));
  std::vector<std::string> missing = g->store->wait(keys, options.timeout);
  if (!missing.empty()) {
    std::string names;
    for (const std::string& k : missing) names += (names.empty() ? "" : ", ") + k.substr(k.find("rank") + 4);
    fail("init_process_group: rank {}: rank(s) {} of {} did not join within {:g} s (rendezvous folder {})", g->rank,
         names, g->world_size, double(options.timeout.count()) / 1000.0, g->store->folder());
  }
  ConnectOptions connect;
  connect.store = g->store.get();
  connect.prefix = prefix + g->backend + "/";
  connect.rank = g->rank;
  connect.world_size = g->world_size;
  connect.device_index = g->device.index;
  connect.timeout = options.timeout;
  try {
    g->comm = backend->connect(connect);
  } catch (Error& e) {
    e.add_context(fmt::format("init_process_group ({}, rank {} of {})", g->backend, g->rank, g->world_size));
    throw;
  }
  ++g_generation;
  g_group = std::move(g);
}

void destroy_process_group() {
  std::lock_guard lock(g_mutex);
  // The group goes even when its last collectives fail (their error is still thrown): a process
  // can start a new one afterwards.
  std::unique_ptr<Group> g = std::move(g_group);
  if (g && g->comm) g->comm->join();
}

bool is_initialized() { return g_group != nullptr; }
bool launched() {
  const char* w = std::getenv("WORLD_SIZE");
  return w && *w;
}
int get_rank() { return g_group ? g_group->rank : 0; }
int get_world_size() { return g_group ? g_group->world_size : 1; }
int get_local_rank() { return g_group ? g_group->local_rank : 0; }
Device device() { return g_group ? g_group->device : Device::cpu(); }
std::string describe() { return g_group ? g_group->comm->describe() : "no process group"; }

namespace {
void check_tensor(const Tensor& t, const char* what) {
  Group& g = group();
  if (!t.defined()) fail("distributed::{}: the tensor is undefined", what);
  if (t.device() != g.device)
    fail("distributed::{}: {} is not on the group's device {} ({} reduces {} tensors)", what, t.describe(),
         g.device.str(), g.backend, g.device.type == DeviceType::CUDA ? "CUDA" : "CPU");
}
}  // namespace

void all_reduce(const Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  group().comm->all_reduce(t, op);
  group().comm->join();
}
void all_reduce(const Tensor& t) { all_reduce(t, ReduceOp::Sum); }

void broadcast(const Tensor& t, int src) {
  check_tensor(t, "broadcast");
  if (src < 0 || src >= group().world_size) fail("distributed::broadcast: source rank {} of a world of {}", src, group().world_size);
  group().comm->broadcast(t, src);
  group().comm->join();
}

void barrier() { group().comm->barrier(); }

}  // namespace ingot::distributed
