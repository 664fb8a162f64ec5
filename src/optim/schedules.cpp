// Learning-rate schedules (include/ingot/optim.h), as torch.optim.lr_scheduler's closed forms.
#include <ingot/optim.h>

#include <cmath>

namespace ingot::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::apply() {
  optimizer_.set_lr(lr_at(epoch_));
  optimizer_.set_momentum(momentum_at(epoch_));
}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) fail("StepLR: step_size must be >= 1, got {}", step_size);
  apply();
}
double StepLR::lr_at(int64_t epoch) const { return base_lr_ * std::pow(gamma_, double(epoch / step_size_)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  if (t_max < 1) fail("CosineAnnealingLR: T_max must be >= 1, got {}", t_max);
  apply();
}
double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(M_PI * double(epoch) / double(t_max_))) / 2;
}

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleOptions options)
    : LRScheduler(optimizer), max_lr_(max_lr), total_(total_steps), options_(options) {
  if (total_steps < 2) fail("OneCycleLR: total_steps must be >= 2, got {}", total_steps);
  if (!(options.pct_start > 0 && options.pct_start < 1)) fail("OneCycleLR: pct_start must be in (0, 1), got {}", options.pct_start);
  apply();
}

// PyTorch's two phases: [0, pct_start total - 1] from start to peak, then to total - 1 from peak to
// end, each a cosine anneal.
double OneCycleLR::phase(int64_t step, double start_value, double peak, double end_value) const {
  if (step > total_) fail("OneCycleLR: stepped {} times for {} total steps", step, total_);
  const double warm_end = options_.pct_start * double(total_) - 1, last = double(total_) - 1;
  auto anneal = [](double from, double to, double pct) { return to + (from - to) / 2.0 * (std::cos(M_PI * pct) + 1); };
  const double s = double(step);
  if (s <= warm_end) return anneal(start_value, peak, s / warm_end);
  return anneal(peak, end_value, (s - warm_end) / (last - warm_end));
}

double OneCycleLR::lr_at(int64_t step) const {
  const double initial = max_lr_ / options_.div_factor, min_lr = initial / options_.final_div_factor;
  return phase(step, initial, max_lr_, min_lr);
}

double OneCycleLR::momentum_at(int64_t step) const {
  if (!options_.cycle_momentum) return optimizer_.momentum();
  return phase(step, options_.max_momentum, options_.base_momentum, options_.max_momentum);
}

}  // namespace ingot::optim
