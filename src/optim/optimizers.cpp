// Optimizers (include/ingot/optim.h): each step is one fused node over every parameter with a
// gradient (ai.ingot.SGDStep / AdamStep, kernels per backend), written into the parameters and
// their state in place.
#include <ingot/autograd.h>
#include <ingot/ops.h>
#include <ingot/optim.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "core/strings.h"

namespace ingot::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  if (!(lr >= 0)) fail("optimizer: lr must be >= 0, got {}", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined() || !params_[i].requires_grad())
      fail("optimizer: parameter {} ({}) does not require a gradient", i, params_[i].defined() ? params_[i].describe() : "undefined");
  }
  state_.resize(params_.size());
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

Tensor& Optimizer::state(size_t i, const std::string& name) {
  Tensor& t = state_.at(i)[name];
  if (!t.defined()) {
    const Tensor& p = params_[i];
    t = Tensor::zeros(p.dtype(), p.shape(), p.device());
  }
  return t;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    for (const auto& [name, t] : state_[i]) out["state." + std::to_string(i) + "." + name] = t;
  }
  out["step"] = Tensor::scalar<int64_t>(steps_);
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& saved) {
  for (const auto& [key, value] : saved) {
    if (key == "step") {
      steps_ = value.to(Device::cpu()).item_int();
      continue;
    }
    const size_t dot = key.find('.', 6);
    if (key.rfind("state.", 0) != 0 || dot == std::string::npos)
      fail("optimizer load_state_dict: unexpected key '{}' (expected state.<i>.<name> or step)", key);
    const size_t i = std::stoul(key.substr(6, dot - 6));
    if (i >= params_.size()) fail("optimizer load_state_dict: '{}' names parameter {} of {}", key, i, params_.size());
    Tensor& t = state(i, key.substr(dot + 1));
    if (value.shape() != t.shape()) fail("optimizer load_state_dict: '{}' is {}, expected {}", key, value.describe(), t.describe());
    copy_tensor(value.to(Device::cpu()).cast(t.dtype()), t);
  }
}

// One fused step node per device (a model's parameters share one): the hyperparameters and the
// step count (host inputs), then, for each parameter with a gradient, (parameter, gradient,
// states...); written in place.
void Optimizer::step() {
  const FusedUpdate u = fused_update();
  const size_t group = 2 + u.states.size();
  autograd::NoGradGuard no_grad;
  std::map<std::pair<int, int>, std::vector<Tensor>> inputs;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    auto& in = inputs[{int(params_[i].device().type), params_[i].device().index}];
    if (in.empty()) {
      in = {Tensor::from_vector<double>(u.hyperparameters, {int64_t(u.hyperparameters.size())}),
            Tensor::scalar<double>(double(steps_ + 1))};
    }
    in.push_back(params_[i]);
    in.push_back(params_[i].grad());
    for (const std::string& name : u.states) in.push_back(name.empty() ? Tensor() : state(i, name));
  }
  Attributes attrs = u.attrs;
  attrs["in_place"] = int64_t(1);
  for (auto& [device, in] : inputs) ops::call(u.op, in, attrs, int((in.size() - 2) / group * (group - 1)), "ai.ingot");
  ++steps_;
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params), options.lr), options_(options) {
  if (options.momentum < 0) fail("SGD: momentum must be >= 0, got {}", options.momentum);
  if (options.weight_decay < 0) fail("SGD: weight_decay must be >= 0, got {}", options.weight_decay);
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    fail("SGD: nesterov needs momentum > 0 and dampening 0");
}

Optimizer::FusedUpdate SGD::fused_update() const {
  // Checked here, on the host, at every step (set_momentum may change it): the CUDA kernel reads the
  // values on the device.
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0))
    fail("SGD: nesterov needs momentum > 0 and dampening 0, got momentum {}", options_.momentum);
  return {"SGDStep",
          {lr_, options_.momentum, options_.dampening, options_.weight_decay},
          {{"nesterov", int64_t(options_.nesterov)}, {"maximize", int64_t(options_.maximize)}},
          {options_.momentum != 0 ? "momentum_buffer" : ""}};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {
  if (!(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1))
    fail("{}: betas must be in [0, 1), got ({}, {})", decoupled ? "AdamW" : "Adam", options.beta1, options.beta2);
  if (!(options.eps >= 0)) fail("{}: eps must be >= 0, got {}", decoupled ? "AdamW" : "Adam", options.eps);
  if (!(options.weight_decay >= 0)) fail("{}: weight_decay must be >= 0", decoupled ? "AdamW" : "Adam");
}

Optimizer::FusedUpdate Adam::fused_update() const {
  FusedUpdate u{"AdamStep",
                {lr_, options_.beta1, options_.beta2, options_.eps, options_.weight_decay},
                {{"decoupled_weight_decay", int64_t(decoupled_)},
                 {"amsgrad", int64_t(options_.amsgrad)},
                 {"maximize", int64_t(options_.maximize)}},
                {"exp_avg", "exp_avg_sq"}};
  if (options_.amsgrad) u.states.push_back("max_exp_avg_sq");
  return u;
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam(std::move(params), options, true) {}

Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  autograd::NoGradGuard no_grad;
  if (!(norm_type >= 1)) fail("clip_grad_norm: norm_type must be >= 1 or infinity, got {}", norm_type);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return Tensor::scalar<float>(0.0f);
  const bool inf = std::isinf(norm_type);
  const Tensor& like = grads[0];
  auto scalar = [&](double v) { return Tensor::scalar<double>(v).cast(like.dtype()).to(like.device()); };
  // Per-gradient norms (ReduceL2 / ReduceMax of |g| / sum |g|^p), then their norm.
  std::vector<Tensor> parts;
  for (const Tensor& g : grads) {
    Tensor gl = g.dtype() == like.dtype() ? g : ops::call("Cast", {g}, {{"to", int64_t(like.dtype())}}, 1).at(0);
    if (inf) {
      parts.push_back(ops::call("ReduceMax", {ops::call("Abs", {gl}, {}, 1).at(0)}, {{"keepdims", int64_t(0)}}, 1).at(0));
    } else if (norm_type == 2) {
      parts.push_back(ops::call("ReduceSumSquare", {gl}, {{"keepdims", int64_t(0)}}, 1).at(0));
    } else {
      Tensor a = ops::call("Pow", {ops::call("Abs", {gl}, {}, 1).at(0), scalar(norm_type)}, {}, 1).at(0);
      parts.push_back(ops::call("ReduceSum", {a}, {{"keepdims", int64_t(0)}}, 1).at(0));
    }
  }
  Tensor total;
  if (inf) {
    total = parts.size() == 1 ? parts[0] : ops::call("Max", parts, {}, 1).at(0);
  } else {
    Tensor sum = parts.size() == 1 ? parts[0] : ops::call("Sum", parts, {}, 1).at(0);
    total = ops::call("Pow", {sum, scalar(1.0 / norm_type)}, {}, 1).at(0);
  }
  // coef = min(max_norm / (total + 1e-6), 1), applied without reading it back (no device wait).
  Tensor coef = ops::div(scalar(max_norm), ops::add(total, scalar(1e-6)));
  coef = ops::call("Min", {coef, scalar(1.0)}, {}, 1).at(0);
  for (Tensor p : params) {  // a handle: its gradient is shared with the caller's
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor c = g.dtype() == coef.dtype() ? coef : ops::call("Cast", {coef}, {{"to", int64_t(g.dtype())}}, 1).at(0);
    p.set_grad(ops::mul(g, c));
  }
  return total;
}

}  // namespace ingot::optim
