#include "quant/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ingot::quant {

namespace {

const float* float_data(const Tensor& t) {
  if (t.dtype() != DType::Float32) fail("calibration: expected a float32 activation, got {}", t.describe());
  return t.data<float>();
}

}  // namespace

void RangeObserver::observe_range(const Tensor& t) {
  const float* x = float_data(t);
  const int64_t n = t.numel();
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) continue;
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (lo > hi) return;  // nothing finite
  min_ = count_ ? std::min(min_, lo) : lo;
  max_ = count_ ? std::max(max_, hi) : hi;
  count_ += n;
}

void RangeObserver::observe_histogram(const Tensor& t) {
  if (hist_.empty()) {
    hist_.assign(kBins, 0);
    abs_hist_.assign(kBins, 0);
  }
  const float* x = float_data(t);
  const int64_t n = t.numel();
  const double width = double(max_) - double(min_);
  const double abs_max = std::max(std::abs(double(min_)), std::abs(double(max_)));
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) continue;
    if (width > 0) {
      const int b = int(std::clamp((double(x[i]) - min_) / width * kBins, 0.0, double(kBins - 1)));
      ++hist_[size_t(b)];
    }
    if (abs_max > 0) {
      const int b = int(std::clamp(std::abs(double(x[i])) / abs_max * kBins, 0.0, double(kBins - 1)));
      ++abs_hist_[size_t(b)];
    }
  }
}

std::pair<float, float> RangeObserver::range(CalibrationMethod method, double percentile, bool symmetric) const {
  if (method == CalibrationMethod::MinMax || hist_.empty() || max_ <= min_) return {min_, max_};
  return method == CalibrationMethod::Percentile ? percentile_range(percentile) : entropy_range(symmetric);
}

// The narrowest [lo, hi] with (100 - p)% of the values outside, split between the two tails (one
// tail when every value has one sign).
std::pair<float, float> RangeObserver::percentile_range(double percentile) const {
  int64_t total = 0;
  for (int64_t c : hist_) total += c;
  if (total == 0) return {min_, max_};
  const double outside = std::clamp(1.0 - percentile / 100.0, 0.0, 1.0);
  const bool one_sided = min_ >= 0 || max_ <= 0;
  const double low_share = one_sided ? (min_ >= 0 ? 0.0 : outside) : outside / 2;
  const double high_share = one_sided ? (min_ >= 0 ? outside : 0.0) : outside / 2;
  const double width = (double(max_) - double(min_)) / kBins;
  int64_t seen = 0;
  int lo_bin = 0, hi_bin = kBins - 1;
  for (int b = 0; b < kBins; ++b) {
    seen += hist_[size_t(b)];
    if (double(seen) > low_share * double(total)) {
      lo_bin = b;
      break;
    }
  }
  seen = 0;
  for (int b = kBins - 1; b >= 0; --b) {
    seen += hist_[size_t(b)];
    if (double(seen) > high_share * double(total)) {
      hi_bin = b;
      break;
    }
  }
  const float lo = low_share == 0 ? min_ : float(min_ + width * lo_bin);
  const float hi = high_share == 0 ? max_ : float(min_ + width * (hi_bin + 1));
  return {lo, std::max(hi, lo)};
}

// TensorRT's entropy calibration: the threshold t on |x| whose clipped and `levels`-level quantized
// distribution is closest to the observed one in KL divergence; the range is [-t, t] cut to [min, max].
std::pair<float, float> RangeObserver::entropy_range(bool symmetric) const {
  const double abs_max = std::max(std::abs(double(min_)), std::abs(double(max_)));
  const int levels = symmetric || min_ < 0 ? 128 : 256;
  if (abs_max == 0) return {min_, max_};
  double best_kl = std::numeric_limits<double>::infinity();
  int best = kBins;
  std::vector<double> p, q;
  for (int i = levels; i <= kBins; ++i) {
    // P: the first i bins, everything beyond them folded into the last.
    p.assign(abs_hist_.begin(), abs_hist_.begin() + i);
    double outliers = 0;
    for (int b = i; b < kBins; ++b) outliers += double(abs_hist_[size_t(b)]);
    p.back() += outliers;
    // Q: the i bins merged into `levels` groups, each group's mass spread over its non-empty bins.
    q.assign(size_t(i), 0.0);
    const double per = double(i) / levels;
    for (int l = 0; l < levels; ++l) {
      const int start = int(std::floor(l * per)), stop = std::max(start + 1, int(std::floor((l + 1) * per)));
      double mass = 0;
      int nonzero = 0;
      for (int b = start; b < stop && b < i; ++b) {
        mass += double(abs_hist_[size_t(b)]);
        nonzero += abs_hist_[size_t(b)] != 0;
      }
      for (int b = start; b < stop && b < i; ++b)
        if (abs_hist_[size_t(b)] != 0) q[size_t(b)] = mass / nonzero;
    }
    double p_sum = 0, q_sum = 0;
    for (int b = 0; b < i; ++b) {
      p_sum += p[size_t(b)];
      q_sum += q[size_t(b)];
    }
    if (p_sum == 0 || q_sum == 0) continue;
    double kl = 0;
    for (int b = 0; b < i; ++b) {
      const double pb = p[size_t(b)] / p_sum, qb = q[size_t(b)] / q_sum;
      if (pb == 0) continue;
      kl += qb == 0 ? pb * 20.0 : pb * std::log(pb / qb);  // a value Q cannot represent costs dearly
    }
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  const float t = float(abs_max * (double(best) + 0.5) / kBins);
  return {std::max(min_, -t), std::min(max_, t)};
}

QuantParams activation_params(float lo, float hi, bool symmetric) {
  QuantParams p;
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  if (symmetric) {
    p.dtype = DType::Int8;
    const float a = std::max(std::abs(lo), std::abs(hi));
    p.scale = a > 0 ? a / 127.0f : 1.0f;
    p.zero_point = 0;
    return p;
  }
  p.dtype = DType::UInt8;
  if (hi - lo <= 0) return p;
  p.scale = (hi - lo) / 255.0f;
  p.zero_point = int32_t(std::clamp(std::nearbyint(-lo / p.scale), 0.0f, 255.0f));
  return p;
}

}  // namespace ingot::quant
