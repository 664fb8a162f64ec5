// Helpers shared by the CPU neural-network kernels (conv, pool, norm, resize): the spatial window
// geometry (ops/semantics/window.h, shared with the CUDA backend) and float conversion for half types.
#pragma once
#include <ingot/tensor.h>

#include <string>
#include <vector>

#include "ops/kernel.h"
#include "ops/semantics/window.h"

namespace ingot::sem {

// The compute type of a storage type: double for double, float otherwise (half types, float).
template <class T>
struct acc_type {
  using type = float;
};
template <>
struct acc_type<double> {
  using type = double;
};
template <class T>
using acc_t = typename acc_type<T>::type;

// Reads any float tensor into a vector of A (small parameter tensors: scales, biases, means).
template <class A>
std::vector<A> to_vector_as(const Tensor& t) {
  Tensor c = t.cast(DType::Float64);
  const double* p = c.data<double>();
  return std::vector<A>(p, p + c.numel());
}

}  // namespace ingot::sem
