// oneDNN plumbing for the CPU kernels: one engine for the process, plain (row-major) memory
// descriptors for our dense tensors, and a cache key for reordered constant weights.
#pragma once
#include <ingot/tensor.h>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

namespace ingot::onednn {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

inline dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }

// Row-major descriptor of `dims` (float32 unless told otherwise).
inline dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims,
                                     dnnl::memory::data_type dt = dnnl::memory::data_type::f32) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return dnnl::memory::desc(dims, dt, strides);
}

// Identifies a weight tensor's contents across runs. Weights are normally constant initializers
// whose storage lives as long as the model; the weak reference detects a tensor that was freed and
// reallocated at the same address (a computed weight), which must then be reordered again.
struct TensorKey {
  std::weak_ptr<Storage> storage;
  const void* data = nullptr;
  Shape shape;

  static TensorKey of(const Tensor& t) { return {t.storage(), t.defined() ? t.raw_data() : nullptr, t.shape()}; }
  bool matches(const Tensor& t) const {
    if (!t.defined()) return data == nullptr;
    return !storage.expired() && storage.lock() == t.storage() && data == t.raw_data() && shape == t.shape();
  }
};

}  // namespace ingot::onednn
