// Optimizers, gradient clipping and learning-rate schedules, after torch.optim: the same names,
// arguments, defaults and update rules, so a training script ports line for line.
//
// An optimizer holds the parameter tensors it was given (nn::Module::parameters(), after the module
// was moved to its device) and its per-parameter state; step() updates every parameter that has a
// gradient in place, in one fused node (ai.ingot.SGDStep / AdamStep: one pass over each tensor on
// the CPU, one launch for many tensors on the GPU). zero_grad() sets the gradients to none.
//
//   optim::AdamW opt(net->parameters(), {.lr = 1e-3});
//   for (...) { opt.zero_grad(); loss(net, batch).backward(); opt.step(); }
#pragma once
#include <ingot/attribute.h>
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

INGOT_API_BEGIN
namespace ingot::nn {
class Module;
}
namespace ingot::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter with a gradient (under no_grad); parameters without one are left
  // alone, as PyTorch does.
  void step();
  void zero_grad();  // set_to_none
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  // Adam's beta1 or SGD's momentum: what one-cycle schedules cycle (0 where there is none).
  virtual double momentum() const { return 0; }
  virtual void set_momentum(double) {}
  int64_t steps() const { return steps_; }
  const std::vector<Tensor>& params() const { return params_; }
  // The per-parameter state ("state.<i>.<name>", i the parameter's position) and the step count
  // ("step"), for checkpoints; load_state_dict copies values into the state in place.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  friend class CompiledStep;
  // What one step is: the fused op (ai.ingot.SGDStep / AdamStep), its hyperparameters (input 0), its
  // attributes, and the state tensors that follow each (parameter, gradient) pair ("" for a slot left
  // empty, SGD's buffer without momentum). step() runs it in place; CompiledStep traces it.
  struct FusedUpdate {
    const char* op;
    std::vector<double> hyperparameters;
    Attributes attrs;
    std::vector<std::string> states;
  };
  virtual FusedUpdate fused_update() const = 0;
  // State tensor `name` of parameter i (zeros like the parameter, made at first use).
  Tensor& state(size_t i, const std::string& name);
  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;

 private:
  std::vector<std::map<std::string, Tensor>> state_;
};

struct SGDOptions {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  double momentum() const override { return options_.momentum; }
  void set_momentum(double m) override { options_.momentum = m; }

 private:
  FusedUpdate fused_update() const override;
  SGDOptions options_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, maximize = false;
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  double momentum() const override { return options_.beta1; }
  void set_momentum(double beta1) override { options_.beta1 = beta1; }

 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);

 private:
  FusedUpdate fused_update() const override;
  AdamOptions options_;
  bool decoupled_;
};
// Adam with decoupled weight decay (PyTorch's AdamW: weight_decay defaults to 1e-2).
struct AdamWOptions : AdamOptions {
  AdamWOptions() { weight_decay = 1e-2; }
};
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
};

// A training step compiled once (autograd's compile, docs/TRAINING.md "Compiled steps"): `loss`
// (the forward and the loss on a batch, autocast regions included), the gradients of every
// parameter of `module` and `optimizer`'s update are traced into one graph on the first call, which
// then goes through the compile pipeline (elementwise chains and epilogues fused, a memory plan; a
// CUDA graph on a GPU where the run allows) and runs in place of the eager step. After every call
// the module's parameters and buffers (batch-norm statistics) and the optimizer's state hold the
// new values, in place, as after opt.step(); the optimizer's lr and momentum are read at every call
// (schedules work) and dropout draws a new mask every step. The parameters' .grad() are not set.
// A new batch shape traces again. GradScaler's skipped steps are data-dependent control flow and
// are not supported: use bf16 autocast, or the eager step for fp16.
//
//   optim::CompiledStep step(*net, opt, [&](const std::vector<Tensor>& b) {
//     return nn::functional::cross_entropy(net->forward(b[0]), b[1]);
//   });
//   for (...) Tensor loss = step({images, labels});
class CompiledStep {
 public:
  using Loss = std::function<Tensor(const std::vector<Tensor>& batch)>;
  CompiledStep(nn::Module& module, Optimizer& optimizer, Loss loss);
  ~CompiledStep();
  CompiledStep(const CompiledStep&) = delete;
  CompiledStep& operator=(const CompiledStep&) = delete;
  Tensor operator()(const std::vector<Tensor>& batch);  // the loss of this step (before the update)
  // How the last batch shape's graph runs (nodes, fallbacks, memory plan, CUDA graph or why not).
  std::string report() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Scales the gradients so that their total norm is at most max_norm (torch.nn.utils.clip_grad_norm_);
// returns the total norm before clipping, as a one-element tensor on the gradients' device (no wait
// for the device). norm_type: 2 or any p >= 1, or infinity.
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

// Learning-rate schedules (torch.optim.lr_scheduler): step() after each optimizer step (OneCycleLR)
// or epoch (StepLR, CosineAnnealingLR), as in PyTorch; the optimizer's lr is set at construction
// (the schedule's value at step 0) and at every step().
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return epoch_; }
  double last_lr() const { return optimizer_.lr(); }

 protected:
  void apply();  // sets the optimizer's lr (and momentum) for epoch_
  virtual double lr_at(int64_t epoch) const = 0;
  virtual double momentum_at(int64_t) const { return optimizer_.momentum(); }
  Optimizer& optimizer_;
  double base_lr_;
  int64_t epoch_ = 0;
};
// lr = base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(int64_t epoch) const override;
  int64_t step_size_;
  double gamma_;
};
// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 private:
  double lr_at(int64_t epoch) const override;
  int64_t t_max_;
  double eta_min_;
};
// One cycle (Smith): warm-up from max_lr / div_factor to max_lr over pct_start of total_steps, then
// cosine annealing to max_lr / (div_factor * final_div_factor); momentum (SGD's, or Adam's beta1)
// cycles the other way between max_momentum and base_momentum. PyTorch's defaults.
struct OneCycleOptions {
  double pct_start = 0.3, div_factor = 25, final_div_factor = 1e4;
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
};
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleOptions options = {});

 private:
  double lr_at(int64_t step) const override;
  double momentum_at(int64_t step) const override;
  double phase(int64_t step, double start_value, double peak, double end_value) const;
  double max_lr_;
  int64_t total_;
  OneCycleOptions options_;
};

}  // namespace ingot::optim
INGOT_API_END
