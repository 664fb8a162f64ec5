// The eager tape and its backward walk (autograd/tape.h), and the Tensor methods of autograd.
#include "autograd/tape.h"

#include <ingot/autograd.h>
#include <ingot/ops.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "ops/autocast.h"
#include "ops/gradient.h"

namespace ingot {
namespace {

thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_sequence{0};

// Sets whether ops record for the life of the scope.
class GradMode {
 public:
  explicit GradMode(bool on) : previous_(t_grad_enabled) { t_grad_enabled = on; }
  ~GradMode() { t_grad_enabled = previous_; }

 private:
  bool previous_;
};

// A rule's small float constant (a scalar, mostly) on the accelerator its node ran on: copied there
// once per value and device, not at every call that reads it. Integer constants (axes, shapes) stay
// on the host, where kernels read them.
Tensor on_device(const Tensor& t, Device device) {
  if (device.type == DeviceType::CPU || !is_floating(t.dtype()) || t.nbytes() > 64) return t;
  using Key = std::tuple<int, int, DType, Shape, std::string>;
  static std::mutex mutex;
  static std::map<Key, Tensor> cache;
  Key key{int(device.type), device.index, t.dtype(), t.shape(),
          std::string(static_cast<const char*>(t.raw_data()), t.nbytes())};
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();  // distinct values are few; a bound all the same
  return cache.emplace(std::move(key), t.to(device)).first->second;
}

// Gradient rules run eagerly: every call is an ops::call (recorded when the backward creates a graph).
class EagerEmitter final : public GradEmitter {
 public:
  void set_device(Device device) { device_ = device; }
  std::vector<GradValue> emit(const OpDef& def, const std::vector<GradValue>& inputs, const Attributes& attrs,
                              int num_outputs) override {
    std::vector<Tensor> in;
    in.reserve(inputs.size());
    for (const GradValue& v : inputs) in.push_back(v.tensor);
    std::vector<Tensor> out = ops::call(def.name, in, attrs, num_outputs, def.domain);
    std::vector<GradValue> result;
    for (Tensor& t : out) result.push_back({std::move(t), {}});
    return result;
  }
  GradValue constant(const Tensor& t) override { return {on_device(t, device_), {}}; }
  DType dtype(const GradValue& v) const override { return v.tensor.dtype(); }
  std::optional<Shape> shape(const GradValue& v) const override { return v.tensor.shape(); }
  int64_t rank(const GradValue& v) const override { return v.tensor.rank(); }
  std::optional<Tensor> value(const GradValue& v) const override { return v.tensor; }
  int onnx_opset() const override { return 21; }  // ops::call's default for ONNX's ops

 private:
  Device device_;
};

Tensor accumulate(const Tensor& sum, const Tensor& g) {
  return sum.defined() ? ops::call("Add", {sum, g}, {}, 1).at(0) : g;
}

Tensor ones_like(const Tensor& t) {
  if (t.numel() != 1) return Tensor();
  return on_device(Tensor::scalar<double>(1.0).cast(t.dtype()), t.device()).reshape(t.shape());
}

AutogradMeta* meta_of(const Tensor& t) { return t.autograd_meta().get(); }

// The callbacks queued (autograd::queue_callback) during the backward now running on this thread.
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

// Collects the callbacks of one backward walk; nested walks (a backward inside a hook) keep their own.
class CallbackQueue {
 public:
  CallbackQueue() : outer_(t_callbacks) { t_callbacks = &queued_; }
  ~CallbackQueue() { t_callbacks = outer_; }
  CallbackQueue(const CallbackQueue&) = delete;
  CallbackQueue& operator=(const CallbackQueue&) = delete;
  void run() {
    t_callbacks = outer_;  // a callback queuing another is an error, as outside a backward
    for (size_t i = 0; i < queued_.size(); ++i) queued_[i]();
  }

 private:
  std::vector<std::function<void()>>* outer_;
  std::vector<std::function<void()>> queued_;
};
bool tracked(const Tensor& t) { return t.defined() && meta_of(t) && meta_of(t)->requires_grad; }

}  // namespace

// ---- the public switches

bool autograd::grad_enabled() { return t_grad_enabled; }
autograd::NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
autograd::NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

// ---- recording

bool autograd::detail::should_record(const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled) return false;
  return std::any_of(inputs.begin(), inputs.end(), tracked);
}

void autograd::detail::record(const OpDef& def, const Attributes& attrs, int opset, const std::vector<Tensor>& inputs,
                              std::vector<Tensor>& outputs) {
  auto node = std::make_shared<GradNode>();
  node->def = &def;
  node->attrs = attrs;
  node->opset = opset;
  node->inputs = inputs;
  node->sequence = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->num_outputs = outputs.size();
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& out = outputs[k];
    node->outputs.push_back(out.detach());
    if (out.defined() && differentiable_dtype(out.dtype()) && def.no_gradient.empty()) {
      auto meta = std::make_shared<AutogradMeta>();
      meta->requires_grad = true;
      meta->grad_fn = node;
      meta->output_index = int(k);
      out.set_autograd_meta(std::move(meta));
    } else {
      out.set_autograd_meta(nullptr);  // integer and bool results (and constants by design) carry no gradient
    }
  }
}

// ---- the backward walk

std::vector<Tensor> autograd::detail::backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& cotangents,
                                               const std::vector<Tensor>& targets, bool retain_graph,
                                               bool create_graph) {
  if (!cotangents.empty() && cotangents.size() != roots.size())
    fail("backward: {} gradients given for {} outputs", cotangents.size(), roots.size());
  std::unordered_map<const AutogradMeta*, size_t> target_index;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!tracked(targets[i])) fail("autograd::grad: input {} does not require a gradient", i);
    target_index.emplace(meta_of(targets[i]), i);
  }
  std::vector<Tensor> captured(targets.size());
  GradMode mode(create_graph);

  struct Pending {
    std::shared_ptr<GradNode> node;
    std::vector<Tensor> cotangents;  // per output
    bool needed = true;              // leads to a target (when there are targets)
  };
  std::unordered_map<const GradNode*, Pending> pending;
  auto visit = [&](const std::shared_ptr<GradNode>& n) {
    auto [it, inserted] = pending.try_emplace(n.get());
    if (inserted) it->second.node = n;
    return inserted;
  };
  std::vector<std::shared_ptr<GradNode>> stack;
  for (const Tensor& r : roots) {
    if (!tracked(r)) fail("backward: an output does not require a gradient (no input of its ops required one)");
    if (const auto& fn = meta_of(r)->grad_fn; fn && visit(fn)) stack.push_back(fn);
  }
  while (!stack.empty()) {
    std::shared_ptr<GradNode> n = std::move(stack.back());
    stack.pop_back();
    for (const Tensor& in : n->inputs) {
      if (!tracked(in)) continue;
      if (const auto& fn = meta_of(in)->grad_fn; fn && visit(fn)) stack.push_back(fn);
    }
  }
  // Later nodes first: a node's inputs were all made before it.
  std::vector<Pending*> order;
  for (auto& [n, p] : pending) order.push_back(&p);
  std::sort(order.begin(), order.end(), [](Pending* a, Pending* b) { return a->node->sequence > b->node->sequence; });
  if (!targets.empty()) {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const GradNode& n = *(*it)->node;
      (*it)->needed = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const Tensor& in) {
        if (!tracked(in)) return false;
        const AutogradMeta* m = meta_of(in);
        return target_index.count(m) || (m->grad_fn && pending.at(m->grad_fn.get()).needed);
      });
    }
  }

  // Where a gradient arriving at a tensor goes: a target, the node that made it, or a leaf's grad().
  auto deliver = [&](const Tensor& t, const Tensor& g) {
    const AutogradMeta* m = meta_of(t);
    if (auto it = target_index.find(m); it != target_index.end()) captured[it->second] = accumulate(captured[it->second], g);
    if (m->grad_fn) {
      Pending& p = pending.at(m->grad_fn.get());
      if (!p.needed) return;
      p.cotangents.resize(p.node->num_outputs);
      Tensor& slot = p.cotangents[size_t(m->output_index)];
      slot = accumulate(slot, g);
    } else if (targets.empty()) {
      AutogradMeta* leaf = t.autograd_meta().get();
      leaf->grad = accumulate(leaf->grad, create_graph ? g : g.detach());
    }
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    Tensor g = cotangents.empty() ? ones_like(roots[i]) : cotangents[i];
    if (!g.defined()) fail("backward() without a gradient needs a one-element output, not {}", roots[i].describe());
    if (g.shape() != roots[i].shape())
      fail("backward: the gradient {} does not match the output {}", g.describe(), roots[i].describe());
    deliver(roots[i], g);
  }

  // Leaves with post-accumulate hooks, by the position in `order` of the last node that delivers to
  // them (order.size(): none does; a root that is itself a leaf): their hooks run after it.
  std::vector<std::vector<Tensor>> hooked_after(order.size() + 1);
  if (targets.empty()) {
    std::unordered_map<const AutogradMeta*, std::pair<size_t, Tensor>> last;
    for (size_t i = 0; i < order.size(); ++i) {
      for (const Tensor& in : order[i]->node->inputs) {
        if (tracked(in) && !meta_of(in)->grad_fn && !meta_of(in)->hooks.empty()) last[meta_of(in)] = {i, in};
      }
    }
    for (const Tensor& r : roots) {
      if (!meta_of(r)->grad_fn && !meta_of(r)->hooks.empty()) last.try_emplace(meta_of(r), order.size(), r);
    }
    for (auto& [m, use] : last) hooked_after[use.first].push_back(use.second);
    // Leaves done by the same node: in the order their hooks were registered (the same on every run
    // and every rank of a data-parallel group).
    for (auto& leaves : hooked_after) {
      std::sort(leaves.begin(), leaves.end(), [](const Tensor& a, const Tensor& b) {
        return meta_of(a)->hooks.front().first < meta_of(b)->hooks.front().first;
      });
    }
  }
  auto run_hooks = [&](size_t position) {
    for (Tensor& leaf : hooked_after[position]) {
      auto hooks = meta_of(leaf)->hooks;  // a hook may remove hooks
      for (auto& [id, hook] : hooks) hook(leaf);
    }
  };
  CallbackQueue callbacks;

  ops::detail::AutocastSuspend no_autocast;  // backward runs in the forward's dtypes, as PyTorch's
  EagerEmitter emitter;
  std::vector<GradNode*> ran;
  for (size_t position = 0; position < order.size(); ++position) {
    Pending* p = order[position];
    GradNode& n = *p->node;
    if (!p->needed || std::none_of(p->cotangents.begin(), p->cotangents.end(), [](const Tensor& t) { return t.defined(); })) {
      run_hooks(position);
      continue;
    }
    if (n.released)
      fail("backward through {} a second time: the first backward released what it saved (pass retain_graph)",
           n.def->name);
    if (!n.def->vjp) fail("no gradient rule for {}: an input of it requires a gradient", n.def->name);
    std::vector<GradValue> ins, outs, cots;
    std::vector<bool> wanted;
    Device device;  // where the node ran: its rule's constants go there
    for (const Tensor& in : n.inputs) {
      if (in.defined() && in.device().type != DeviceType::CPU) device = in.device();
    }
    emitter.set_device(device);
    for (const Tensor& in : n.inputs) {
      ins.push_back({in, {}});
      bool want = tracked(in) && differentiable_dtype(in.dtype());
      if (want && !targets.empty()) {
        const AutogradMeta* m = meta_of(in);
        want = target_index.count(m) || (m->grad_fn && pending.at(m->grad_fn.get()).needed);
      }
      wanted.push_back(want);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      Tensor out = n.outputs[k];
      if (create_graph && out.defined() && differentiable_dtype(out.dtype())) {
        // Reattached to this node, so that a rule reading the output is differentiated through it.
        auto meta = std::make_shared<AutogradMeta>();
        meta->requires_grad = true;
        meta->grad_fn = p->node;
        meta->output_index = int(k);
        out.set_autograd_meta(std::move(meta));
      }
      outs.push_back({out, {}});
    }
    p->cotangents.resize(n.num_outputs);
    for (const Tensor& c : p->cotangents) cots.push_back({c, {}});
    GradBuilder b(emitter, *n.def, n.attrs, n.opset, std::move(ins), std::move(outs), std::move(cots), wanted);
    try {
      n.def->vjp(b);
    } catch (Error& e) {
      e.add_context("the gradient of " + n.def->name);
      throw;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Tensor& g = b.grads()[i].tensor;
      if (!wanted[i] || !g.defined()) continue;
      if (g.shape() != n.inputs[i].shape() || g.dtype() != n.inputs[i].dtype())
        fail("the gradient rule of {} gave {} for input {}, which is {}", n.def->name, g.describe(), i,
             n.inputs[i].describe());
      deliver(n.inputs[i], g);
    }
    p->cotangents.clear();
    ran.push_back(&n);
    run_hooks(position);
  }
  run_hooks(order.size());
  if (!retain_graph) {
    for (GradNode* n : ran) {
      n->inputs.clear();
      n->outputs.clear();
      n->released = true;
    }
  }
  callbacks.run();
  return captured;
}

std::vector<Tensor> autograd::grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph) {
  if (inputs.empty()) fail("autograd::grad: no inputs to take gradients for");
  return detail::backward(outputs, grad_outputs, inputs, retain_graph || create_graph, create_graph);
}

// ---- hooks

autograd::HookHandle& autograd::HookHandle::operator=(HookHandle&& other) noexcept {
  if (this != &other) {
    remove();
    meta_ = std::move(other.meta_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void autograd::HookHandle::remove() {
  if (auto meta = meta_.lock(); meta && id_) {
    auto& hooks = meta->hooks;
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.first == id_; }), hooks.end());
  }
  meta_.reset();
  id_ = 0;
}

autograd::HookHandle autograd::register_post_accumulate_grad_hook(const Tensor& leaf,
                                                                  std::function<void(Tensor&)> hook) {
  if (!tracked(leaf) || meta_of(leaf)->grad_fn)
    fail("register_post_accumulate_grad_hook: {} is not a leaf that requires a gradient", leaf.describe());
  static std::atomic<uint64_t> next_id{1};
  uint64_t id = next_id++;
  meta_of(leaf)->hooks.emplace_back(id, std::move(hook));
  return HookHandle(leaf.autograd_meta(), id);
}

void autograd::queue_callback(std::function<void()> callback) {
  if (!t_callbacks) fail("autograd::queue_callback: no backward pass is running on this thread (call it from a hook)");
  t_callbacks->push_back(std::move(callback));
}

// ---- Tensor's autograd methods

bool Tensor::requires_grad() const { return tracked(*this); }

Tensor& Tensor::set_requires_grad(bool on) {
  if (autograd_ && autograd_->grad_fn)
    fail("set_requires_grad: {} was made by {}; only leaves can be set (detach() it first)", describe(),
         autograd_->grad_fn->def->name);
  if (on && !differentiable_dtype(dtype_))
    fail("set_requires_grad: only float tensors can require gradients, not {}", describe());
  if (!autograd_) autograd_ = std::make_shared<AutogradMeta>();
  autograd_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return autograd_ ? autograd_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  if (!autograd_) autograd_ = std::make_shared<AutogradMeta>();
  autograd_->grad = g;
}

bool Tensor::is_leaf() const { return !autograd_ || !autograd_->grad_fn; }

Tensor Tensor::detach() const {
  Tensor t = *this;
  t.autograd_.reset();
  return t;
}

void Tensor::backward() const { backward(Tensor()); }

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::detail::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{}, {},
                             retain_graph || create_graph, create_graph);
}

}  // namespace ingot
