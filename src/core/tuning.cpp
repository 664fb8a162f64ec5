#include "core/tuning.h"

namespace ingot::tuning {

std::optional<std::string> Store::find(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  return it->second;
}

std::optional<std::string> Store::peek(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, std::string>> Store::with_prefix(const std::string& prefix) {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = entries_.lower_bound(prefix); it != entries_.end() && it->first.starts_with(prefix); ++it)
    out.emplace_back(*it);
  return out;
}

void Store::put(const std::string& key, const std::string& value) {
  std::lock_guard lock(mu_);
  entries_[key] = value;
}

std::vector<std::pair<std::string, std::string>> Store::entries() {
  std::lock_guard lock(mu_);
  return {entries_.begin(), entries_.end()};
}

Stats Store::stats() {
  std::lock_guard lock(mu_);
  return stats_;
}

void Store::clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
  stats_ = {};
}

// Never destroyed: kernels' static state may use them until exit.
Store& algorithms() {
  static Store* s = new Store();
  return *s;
}
Store& device_code() {
  static Store* s = new Store();
  return *s;
}

}  // namespace ingot::tuning
