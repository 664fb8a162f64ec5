// DistributedDataParallel (include/ingot/distributed.h): PyTorch's reducer in outline. Gradients are
// copied into flat per-bucket buffers as the backward completes them (a post-accumulate-grad hook
// per parameter, autograd.h), a bucket is all-reduced (averaged) once its last gradient is in, in
// bucket order on every rank, and at the end of the backward (a queued callback) each parameter's
// grad() becomes a view of its averaged slice.
#include <fmt/format.h>
#include <ingot/autograd.h>
#include <ingot/distributed.h>
#include <ingot/error.h>
#include <ingot/nn.h>

#include <algorithm>
#include <map>

#include "core/backend.h"
#include "distributed/process_group.h"
#include "profiler/hooks.h"

namespace ingot::distributed {

struct DistributedDataParallel::Reducer {
  struct Bucket {
    std::vector<size_t> params;   // indices into Reducer::params, in the order their slices lie
    std::vector<size_t> offsets;  // element offset of each slice
    Tensor flat;                  // every slice, on the group's device
    size_t pending = 0;           // gradients not yet in, this backward
  };

  std::shared_ptr<nn::Module> module;  // null when made from a parameter list
  std::function<std::vector<Tensor>()> buffers_of;
  Options options;
  Device device;
  std::vector<std::string> names;
  std::vector<Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  // per parameter
  std::vector<size_t> slot_of;    // its index within its bucket
  std::vector<bool> ready;        // per parameter, this backward
  std::vector<autograd::HookHandle> hooks;
  bool sync = true;
  bool in_backward = false;
  size_t next_launch = 0;  // buckets are launched in index order on every rank

  void assign_buckets() {
    // Reverse registration order (the backward's order, roughly), one dtype per bucket; the first
    // bucket small so that the first all-reduce starts early (DDP's 1 MB), the others up to the cap.
    const size_t cap = size_t(options.bucket_cap_mb * (1 << 20));
    const size_t first_cap = std::min(cap, size_t(1) << 20);
    std::map<DType, size_t> open;  // the bucket now filling, per dtype, and its bytes
    std::map<DType, size_t> open_bytes;
    for (size_t k = params.size(); k-- > 0;) {
      const Tensor& p = params[k];
      DType dt = p.dtype();
      size_t bytes = p.nbytes();
      auto it = open.find(dt);
      if (it != open.end() && open_bytes[dt] + bytes > (it->second == 0 ? first_cap : cap)) {
        open.erase(it);
        it = open.end();
      }
      if (it == open.end()) {
        buckets.emplace_back();
        open[dt] = buckets.size() - 1;
        open_bytes[dt] = 0;
      }
      Bucket& b = buckets[open[dt]];
      bucket_of[k] = open[dt];
      slot_of[k] = b.params.size();
      b.params.push_back(k);
      open_bytes[dt] += bytes;
    }
    for (Bucket& b : buckets) {
      int64_t n = 0;
      for (size_t k : b.params) {
        b.offsets.push_back(size_t(n));
        n += params[k].numel();
      }
      b.flat = Tensor::zeros(params[b.params.front()].dtype(), {n}, device);
    }
  }

  Tensor slice(const Bucket& b, size_t slot) const {
    const Tensor& p = params[b.params[slot]];
    return Tensor::view(b.flat.storage(), b.flat.byte_offset() + b.offsets[slot] * dtype_size(p.dtype()), p.dtype(),
                        p.shape());
  }

  void start_backward() {
    in_backward = true;
    next_launch = 0;
    std::fill(ready.begin(), ready.end(), false);
    for (Bucket& b : buckets) b.pending = b.params.size();
    // A backward that fails part-way drops its queued callbacks: the guard then ends this backward's
    // reduction (waiting for what was queued), so the next backward starts afresh.
    struct Finish {
      Reducer* reducer = nullptr;
      bool ran = false;
      ~Finish() {
        if (ran || !reducer) return;
        reducer->in_backward = false;
        try {
          communicator().join();
        } catch (...) {  // the backward's own error is the one reported
        }
      }
    };
    auto finish = std::make_shared<Finish>();
    finish->reducer = this;
    autograd::queue_callback([finish] {
      finish->ran = true;
      finish->reducer->finish_backward();
    });
  }

  // Copies the parameter's gradient (zeros where it has none) into its slice.
  void take(size_t k) {
    if (ready[k]) return;
    ready[k] = true;
    Bucket& b = buckets[bucket_of[k]];
    Tensor dst = slice(b, slot_of[k]);
    DeviceMemory& memory = backend_for(device).memory();
    Tensor g = params[k].grad();
    if (g.defined()) {
      if (g.device() != device || g.dtype() != dst.dtype() || g.shape() != dst.shape())
        fail("DistributedDataParallel: the gradient of '{}' is {}, not like the parameter {}", names[k], g.describe(),
             params[k].describe());
      memory.copy(dst.raw_data(), device, g.raw_data(), device, dst.nbytes());
    } else {
      memory.fill_zero(dst.raw_data(), dst.nbytes(), device.index);
    }
    --b.pending;
  }

  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0)
      communicator().all_reduce(buckets[next_launch++].flat, ReduceOp::Avg);
  }

  void on_gradient(size_t k) {
    if (!sync) return;
    if (!in_backward) start_backward();
    take(k);
    launch_ready();
  }

  void finish_backward() {
    in_backward = false;
    for (size_t k = 0; k < params.size(); ++k) take(k);  // parameters this backward did not reach
    launch_ready();
    {
      // What the backward did not hide of the communication (CPU: the wait; CUDA: only the enqueue).
      profiler::detail::PhaseScope phase("DDP: wait for the gradients' all-reduce");
      communicator().join();
    }
    for (size_t k = 0; k < params.size(); ++k) params[k].set_grad(slice(buckets[bucket_of[k]], slot_of[k]));
  }

  void broadcast_all(const std::vector<Tensor>& tensors) {
    for (const Tensor& t : tensors) {
      if (t.device() != device)
        fail("DistributedDataParallel: {} is on {}, not on the group's device {} (move the module there first)",
             t.describe(), t.device().str(), device.str());
      communicator().broadcast(t, 0);
    }
    communicator().join();
  }
};

namespace {
nn::Module& require_module(const std::shared_ptr<nn::Module>& module) {
  if (!module) fail("DistributedDataParallel: no module");
  return *module;
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module)
    : DistributedDataParallel(std::move(module), Options{}) {}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, Options options)
    : DistributedDataParallel(require_module(module).named_parameters(),
                              [m = module.get()] {
                                std::vector<Tensor> out;
                                for (auto& [name, b] : m->named_buffers()) out.push_back(b);
                                return out;
                              },
                              options) {
  reducer_->module = std::move(module);
}

DistributedDataParallel::DistributedDataParallel(std::vector<std::pair<std::string, Tensor>> named_parameters,
                                                 std::function<std::vector<Tensor>()> buffers, Options options)
    : reducer_(std::make_unique<Reducer>()) {
  if (!is_initialized()) fail("DistributedDataParallel: no process group (call distributed::init_process_group first)");
  if (!(options.bucket_cap_mb > 0)) fail("DistributedDataParallel: bucket_cap_mb must be positive, not {}", options.bucket_cap_mb);
  Reducer& r = *reducer_;
  r.options = options;
  r.device = device();
  r.buffers_of = std::move(buffers);
  std::vector<Tensor> everything;
  for (auto& [name, p] : named_parameters) {
    everything.push_back(p);
    if (!p.requires_grad()) continue;
    r.names.push_back(name);
    r.params.push_back(p);
  }
  for (const Tensor& b : r.buffers_of()) everything.push_back(b);
  r.broadcast_all(everything);  // rank 0's initial values everywhere
  r.bucket_of.resize(r.params.size());
  r.slot_of.resize(r.params.size());
  r.ready.resize(r.params.size());
  r.assign_buckets();
  for (size_t k = 0; k < r.params.size(); ++k)
    r.hooks.push_back(autograd::register_post_accumulate_grad_hook(r.params[k], [&r, k](Tensor&) { r.on_gradient(k); }));
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::sync_buffers() {
  std::vector<Tensor> buffers = reducer_->buffers_of();
  if (!buffers.empty() && get_world_size() > 1) reducer_->broadcast_all(buffers);
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  auto* layer = dynamic_cast<nn::Layer*>(reducer_->module.get());
  if (!layer) fail("DistributedDataParallel::forward: the model is not an nn::Layer (call its forward yourself, after sync_buffers())");
  if (reducer_->options.broadcast_buffers && layer->is_training()) sync_buffers();
  return layer->forward(x);
}

nn::Module& DistributedDataParallel::module() const {
  if (!reducer_->module) fail("DistributedDataParallel::module: made from a parameter list, not a module");
  return *reducer_->module;
}

void DistributedDataParallel::set_sync(bool on) { reducer_->sync = on; }
bool DistributedDataParallel::sync() const { return reducer_->sync; }

std::vector<std::vector<std::string>> DistributedDataParallel::buckets() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : reducer_->buckets) {
    out.emplace_back();
    for (size_t k : b.params) out.back().push_back(reducer_->names[k]);
  }
  return out;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.reducer_->sync) {
  ddp.reducer_->sync = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.reducer_->sync = previous_; }

}  // namespace ingot::distributed
