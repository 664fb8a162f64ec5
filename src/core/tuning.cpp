#include "core/tuning.h"

#include <map>
#include <mutex>

namespace ingot::tuning {
namespace {

struct Store {
  std::mutex mu;
  std::map<std::string, std::string> entries;
  Stats stats;
};
Store& store() {
  static Store* s = new Store();  // used by static kernels' state until exit
  return *s;
}

}  // namespace

std::optional<std::string> find(const std::string& key) {
  Store& s = store();
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(key);
  if (it == s.entries.end()) {
    ++s.stats.misses;
    return std::nullopt;
  }
  ++s.stats.hits;
  return it->second;
}

void put(const std::string& key, const std::string& value) {
  Store& s = store();
  std::lock_guard lock(s.mu);
  s.entries[key] = value;
}

std::vector<std::pair<std::string, std::string>> entries() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  return {s.entries.begin(), s.entries.end()};
}

Stats stats() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  return s.stats;
}

void clear() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  s.entries.clear();
  s.stats = {};
}

}  // namespace ingot::tuning
