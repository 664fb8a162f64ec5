// Device constants that modules and losses use every step (a host scalar would be copied to the
// device on each call): made once per value, dtype and device, and kept. And the initial values of
// parameters, drawn from the seeded generator (ingot::random_u64).
#pragma once
#include <ingot/tensor.h>

#include <vector>

namespace ingot::nn {

// A scalar of like's dtype on like's device.
Tensor scalar_like(double value, const Tensor& like);
// A vector [n] filled with `value`, of like's dtype on like's device.
Tensor constant_vector(int64_t n, double value, const Tensor& like);

// A host int64 vector (shape and index operands) and x[begin:end] along `axis` (ONNX Slice).
Tensor int64s(std::vector<int64_t> values);
Tensor slice(const Tensor& x, int64_t axis, int64_t begin, int64_t end);

// float32 host tensors of `shape`: ~ U(-bound, bound), ~ N(0, 1), or all `value`.
Tensor uniform(Shape shape, double bound);
Tensor normal(Shape shape);
Tensor filled(Shape shape, float value);

}  // namespace ingot::nn
