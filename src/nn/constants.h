// Device constants that modules and losses use every step (a host scalar would be copied to the
// device on each call): made once per value, dtype and device, and kept.
#pragma once
#include <ingot/tensor.h>

namespace ingot::nn {

// A scalar of like's dtype on like's device.
Tensor scalar_like(double value, const Tensor& like);
// A vector [n] filled with `value`, of like's dtype on like's device.
Tensor constant_vector(int64_t n, double value, const Tensor& like);

}  // namespace ingot::nn
