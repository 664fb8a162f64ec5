// GradScaler (include/ingot/amp.h), PyTorch's torch.amp.GradScaler: the scale lives on the host
// (the inf/NaN check is read once per step, where PyTorch reads it too, to skip the step).
#include <ingot/amp.h>
#include <ingot/autograd.h>
#include <ingot/ops.h>
#include <ingot/optim.h>

#include <map>

namespace ingot::amp {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (!(options.init_scale > 0)) fail("GradScaler: init_scale must be > 0, got {}", options.init_scale);
  if (!(options.growth_factor > 1)) fail("GradScaler: growth_factor must be > 1, got {}", options.growth_factor);
  if (!(options.backoff_factor > 0 && options.backoff_factor < 1))
    fail("GradScaler: backoff_factor must be in (0, 1), got {}", options.backoff_factor);
  if (options.growth_interval < 1) fail("GradScaler: growth_interval must be >= 1, got {}", options.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!options_.enabled) return loss;
  Tensor s = Tensor::scalar<double>(scale_).cast(loss.dtype()).to(loss.device());
  return ops::mul(loss, s);
}

void GradScaler::unscale(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  if (unscaled_) fail("GradScaler: unscale() was already called for this step (call update() after step())");
  autograd::NoGradGuard no_grad;
  std::map<std::pair<int, int>, std::vector<Tensor>> grads;  // per device: one fused node each
  for (const Tensor& p : optimizer.params()) {
    Tensor g = p.grad();
    if (g.defined()) grads[{int(g.device().type), g.device().index}].push_back(g);
  }
  found_ = Tensor();
  for (auto& [device, gs] : grads) {
    std::vector<Tensor> in{Tensor::scalar<double>(1.0 / scale_)};
    in.insert(in.end(), gs.begin(), gs.end());
    Tensor found = ops::call("UnscaleGrads", in, {}, int(in.size()), "ai.ingot").at(0);
    found_ = found_.defined() ? ops::call("Max", {found_, found.to(found_.device())}, {}, 1).at(0) : found;
  }
  unscaled_ = true;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  if (!unscaled_) unscale(optimizer);
  found_inf_ = found_.defined() && found_.to(Device::cpu()).item_double() != 0.0;
  stepped_since_update_ = true;
  if (found_inf_) return false;  // an overflow: this step's gradients are not used
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  if (!stepped_since_update_) fail("GradScaler: update() without a step() since the last update");
  if (found_inf_) {
    scale_ *= options_.backoff_factor;
    tracker_ = 0;
  } else if (++tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    tracker_ = 0;
  }
  unscaled_ = found_inf_ = stepped_since_update_ = false;
  found_ = Tensor();
}

std::map<std::string, double> GradScaler::state_dict() const {
  return {{"scale", scale_}, {"growth_factor", options_.growth_factor}, {"backoff_factor", options_.backoff_factor},
          {"growth_interval", double(options_.growth_interval)}, {"_growth_tracker", double(tracker_)}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  auto get = [&](const char* key) {
    auto it = state.find(key);
    if (it == state.end()) fail("GradScaler load_state_dict: no '{}'", key);
    return it->second;
  };
  scale_ = get("scale");
  options_.growth_factor = get("growth_factor");
  options_.backoff_factor = get("backoff_factor");
  options_.growth_interval = int64_t(get("growth_interval"));
  tracker_ = int64_t(get("_growth_tracker"));
}

}  // namespace ingot::amp
