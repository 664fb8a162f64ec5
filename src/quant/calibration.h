// Ranges of activations seen over calibration runs, and the range each method picks from them
// (onnxruntime's MinMax / Percentile / Entropy calibrators, TensorRT's entropy calibration).
#pragma once
#include <ingot/quantize.h>
#include <ingot/tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace ingot::quant {

// One tensor's observed values: min/max in a first pass over the samples, a histogram over that
// range in a second (Percentile and Entropy only).
class RangeObserver {
 public:
  static constexpr int kBins = 2048;

  void observe_range(const Tensor& t);      // pass 1
  void observe_histogram(const Tensor& t);  // pass 2 (after every observe_range)
  bool empty() const { return count_ == 0; }
  float min() const { return min_; }
  float max() const { return max_; }

  // The range to quantize: [min, max], or narrowed by the method.
  std::pair<float, float> range(CalibrationMethod method, double percentile, bool symmetric) const;

 private:
  std::pair<float, float> percentile_range(double percentile) const;
  std::pair<float, float> entropy_range(bool symmetric) const;

  float min_ = 0, max_ = 0;
  int64_t count_ = 0;
  // Histogram of |x| over [0, max(|min|, |max|)] (entropy) and of x over [min, max] (percentile).
  std::vector<int64_t> abs_hist_, hist_;
};

// Scale and zero point of an 8-bit activation for a range (which is widened to include 0, so that
// 0 is exact: padding and Relu's floor): uint8 with a zero point, or int8 with zero point 0.
struct QuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
  DType dtype = DType::UInt8;
};
QuantParams activation_params(float lo, float hi, bool symmetric);

}  // namespace ingot::quant
