#include "nn/constants.h"

#include <map>
#include <mutex>
#include <tuple>

namespace ingot::nn {

Tensor scalar_like(double value, const Tensor& like) {
  static std::mutex mutex;
  static std::map<std::tuple<double, DType, DeviceType, int>, Tensor> cache;
  const auto key = std::make_tuple(value, like.dtype(), like.device().type, like.device().index);
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Tensor t = Tensor::scalar<double>(value).cast(like.dtype()).to(like.device());
  return cache.emplace(key, t).first->second;
}

Tensor constant_vector(int64_t n, double value, const Tensor& like) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, double, DType, DeviceType, int>, Tensor> cache;
  const auto key = std::make_tuple(n, value, like.dtype(), like.device().type, like.device().index);
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Tensor t = Tensor::empty(DType::Float64, {n});
  for (double& v : t.span<double>()) v = value;
  t = t.cast(like.dtype()).to(like.device());
  return cache.emplace(key, t).first->second;
}

}  // namespace ingot::nn
