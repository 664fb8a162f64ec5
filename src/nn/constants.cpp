#include "nn/constants.h"
#include "nn/traced_seeds.h"

#include <ingot/nn.h>
#include <ingot/ops.h>

#include <map>
#include <mutex>
#include <random>
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

Tensor int64s(std::vector<int64_t> values) {
  const auto n = int64_t(values.size());
  return Tensor::from_vector(values, {n});
}
Tensor slice(const Tensor& x, int64_t axis, int64_t begin, int64_t end) {
  return ops::call("Slice", {x, int64s({begin}), int64s({end}), int64s({axis})}).at(0);
}

Tensor uniform(Shape shape, double bound) {
  std::mt19937_64 rng(random_u64());
  std::uniform_real_distribution<float> d(-float(bound), float(bound));
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}
Tensor normal(Shape shape) {
  std::mt19937_64 rng(random_u64());
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}
Tensor filled(Shape shape, float value) {
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = value;
  return t;
}

namespace detail {
namespace {
thread_local TracedSeeds* t_seeds = nullptr;
}  // namespace

TracedSeeds::TracedSeeds(Tensor base) : base_(std::move(base)), previous_(t_seeds) { t_seeds = this; }
TracedSeeds::~TracedSeeds() { t_seeds = previous_; }
TracedSeeds* TracedSeeds::active() { return t_seeds; }
TracedSeeds::Seed TracedSeeds::next() { return {base_, ++count_}; }
}  // namespace detail

}  // namespace ingot::nn
