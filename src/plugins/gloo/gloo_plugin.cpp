// libingot_gloo.so: the CPU backend's collectives over Gloo (backends/cpu/gloo_plugin.h says why a
// plugin). A full mesh of TCP connections on the loopback interface, rendezvous through Ingot's
// KeyValueStore, Gloo's ring all-reduce and one-to-all broadcast.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "backends/cpu/gloo_plugin.h"

namespace {

using ingot::KeyValueStore;
using ingot::ReduceOp;

// Gloo's rendezvous over Ingot's store.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(KeyValueStore& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_.set(prefix_ + key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(prefix_ + key, timeout_); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& k : keys) store_.get(prefix_ + k, timeout);
  }

 private:
  KeyValueStore& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <class T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max: return &gloo::max<T>;
    case ReduceOp::Min: return &gloo::min<T>;
    default: return &gloo::sum<T>;
  }
}

template <class T>
void all_reduce_as(const std::shared_ptr<gloo::Context>& context, void* data, size_t count, ReduceOp op,
                   std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(static_cast<T*>(data), count);
  opts.setReduceFunction(reduce_fn<T>(op));
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

class Group final : public ingot::cpu::GlooGroup {
 public:
  Group(KeyValueStore& store, const std::string& prefix, int rank, int world_size, std::chrono::milliseconds timeout)
      : timeout_(timeout) {
    gloo::transport::tcp::attr attr("127.0.0.1");
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
    context->setTimeout(timeout);
    StoreAdapter adapter(store, prefix, timeout);
    context->connectFullMesh(adapter, device);
    context_ = context;
  }

  void all_reduce(void* data, size_t count, int dtype, ReduceOp op) override {
    if (count == 0) return;
    switch (dtype) {  // ONNX's TensorProto codes
      case 1: return all_reduce_as<float>(context_, data, count, op, timeout_);
      case 11: return all_reduce_as<double>(context_, data, count, op, timeout_);
      case 10: return all_reduce_as<gloo::float16>(context_, data, count, op, timeout_);
      case 2: return all_reduce_as<uint8_t>(context_, data, count, op, timeout_);
      case 3: return all_reduce_as<int8_t>(context_, data, count, op, timeout_);
      case 5: return all_reduce_as<int16_t>(context_, data, count, op, timeout_);
      case 6: return all_reduce_as<int32_t>(context_, data, count, op, timeout_);
      case 7: return all_reduce_as<int64_t>(context_, data, count, op, timeout_);
      default: throw std::invalid_argument("gloo all-reduce: no reduction for this dtype (code " + std::to_string(dtype) + ")");
    }
  }

  void broadcast(void* data, size_t nbytes, int root) override {
    if (nbytes == 0) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), nbytes);
    opts.setRoot(root);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  }

  void barrier() override {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  }

 private:
  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) ingot::cpu::GlooGroup* ingot_gloo_connect(
    KeyValueStore* store, const char* prefix, int rank, int world_size, int64_t timeout_ms) {
  return new Group(*store, prefix, rank, world_size, std::chrono::milliseconds(timeout_ms));
}
