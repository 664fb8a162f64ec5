// Reverse-mode automatic differentiation of eager op calls, and the function transforms built on it.
//
// A tensor that requires a gradient (Tensor::set_requires_grad) is a leaf; every op called on it
// (ingot::ops::call and the named ops) records a node on a tape, and its float outputs require
// gradients too. Tensor::backward() walks the tape from a result back to the leaves, applying each
// op's gradient rule (written beside the op's definition), and adds the gradients into the leaves'
// grad(). Names and defaults follow PyTorch (libtorch's C++ API): requires_grad, grad, backward with
// retain_graph and create_graph, detach, is_leaf, NoGradGuard; autograd::grad is torch.autograd.grad.
//
// The transforms take functions of tensors to tensors, and compose (grad(grad(f)), vjp of a grad,
// compile of a grad):
//   grad(f, argnums)           the gradient of f's first output (one element) with respect to the
//                              arguments at argnums
//   value_and_grad(f, argnums) f's outputs and that gradient
//   vjp(f, primals)            f's outputs and a function from output cotangents to input cotangents
//   jvp(f, primals, tangents)  f's outputs and their tangents (forward mode, as the vjp of a vjp)
//
// State belongs to a tensor handle and the copies made of it afterwards (a copy made before
// set_requires_grad does not see it). Ops record what they read; a tensor written through data()
// after an op read it makes that op's gradient wrong, as in any tape (PyTorch checks versions).
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

namespace autograd {

// Whether ops record onto the tape on this thread (true unless a NoGradGuard is alive).
bool grad_enabled();

// Ops called while it lives record nothing (PyTorch's torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// The gradients of `outputs` (weighted by `grad_outputs`: one per output, or none when every output
// has one element, meaning ones) with respect to `inputs` (leaves or intermediate results), returned
// rather than added into grad(). An input the outputs do not depend on gets an undefined tensor.
// create_graph: the gradients are themselves recorded, so they can be differentiated again.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false);

// A leaf's post-accumulate-grad hook (torch.Tensor.register_post_accumulate_grad_hook): called
// with the leaf once a backward() has added into its grad() everything that backward will add
// (once per backward, not per contribution; not by autograd::grad, which leaves grad() alone), while
// the backward goes on with the rest of the tape. DistributedDataParallel starts reducing a bucket
// of gradients from here. The hook stays until the handle is removed or destroyed.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<AutogradMeta> meta, uint64_t id) : meta_(std::move(meta)), id_(id) {}
  HookHandle(HookHandle&& other) noexcept : meta_(std::move(other.meta_)), id_(other.id_) { other.id_ = 0; }
  HookHandle& operator=(HookHandle&& other) noexcept;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { remove(); }
  void remove();

 private:
  std::weak_ptr<AutogradMeta> meta_;
  uint64_t id_ = 0;
};
[[nodiscard]] HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(Tensor&)> hook);

// Runs `callback` once the backward() now running has walked the whole tape (after every hook), in
// the order queued (torch's Variable._execution_engine.queue_callback). Only from a hook; an error
// otherwise.
void queue_callback(std::function<void()> callback);

}  // namespace autograd

using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

Function grad(Function f, std::vector<int> argnums = {0});
std::function<std::pair<std::vector<Tensor>, std::vector<Tensor>>(const std::vector<Tensor>&)> value_and_grad(
    Function f, std::vector<int> argnums = {0});
// f's outputs at `primals`, and the function taking one cotangent per output to one per primal.
std::pair<std::vector<Tensor>, Function> vjp(const Function& f, const std::vector<Tensor>& primals);
// f's outputs at `primals`, and the directional derivative of each along `tangents` (one per primal).
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const Function& f, const std::vector<Tensor>& primals,
                                                        const std::vector<Tensor>& tangents);

// vmap(f, in_axes, out_axes): f mapped over axis in_axes[i] of argument i (-1: the argument is shared
// by every element, not mapped; one entry applies to all), its outputs stacked along out_axes[k].
// Every argument mapped must have the same size there. f is traced once on one example (so, as for
// compile, it must not branch on its arguments' values), and the traced ops then run once on the
// whole batch through each op's batching rule (ops/batching.h): MatMul's batch dims, reductions and
// softmaxes with their axes shifted, convolutions and pools with the batch folded into N, one shared
// rule for elementwise ops. An op without a rule for its case runs once per batch element, reported
// once per op on stderr. Composes with the other transforms (vmap(grad(f)) gives per-example
// gradients, grad(vmap(f)) differentiates through the batched ops, vmap(vmap(f)) nests).
Function vmap(Function f, std::vector<int64_t> in_axes = {0}, std::vector<int64_t> out_axes = {0});

// compile(f): f traced once per input signature (dtypes, shapes, devices) into a graph, which goes
// through the compile pipeline (fusions, memory plan; CUDA graph replay on a GPU) and then runs in
// place of f. Tensors f reads without getting them as arguments are constants of the graph, read by
// reference. f must be a pure function of its arguments' values (no data-dependent Python-style
// control flow: the trace follows the branch the first call took). Outputs do not record on the tape:
// take gradients inside f (compile(grad(loss)) or an update step written with grad).
class CompiledFunction {
 public:
  explicit CompiledFunction(Function f);
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;
  size_t traces() const;  // the input signatures traced so far
  // The graph traced for these arguments' signature, as text (empty before it was traced).
  std::string graph_text(const std::vector<Tensor>& args) const;
  // How that graph runs: its CPU fallbacks (on an accelerator), and its memory plan and CUDA graph
  // (planned bytes; replayed, or why not). Empty before it was traced.
  std::string report(const std::vector<Tensor>& args) const;
  operator Function() const {  // NOLINT: usable wherever a Function is
    return [*this](const std::vector<Tensor>& args) { return (*this)(args); };
  }

 private:
  struct State;
  std::shared_ptr<State> state_;
};
CompiledFunction compile(Function f);

}  // namespace ingot
INGOT_API_END
