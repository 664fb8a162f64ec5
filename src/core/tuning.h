// Choices a backend makes by measuring (which cuDNN algorithm is fastest for a convolution problem
// on this GPU) kept process-wide under a key that names the problem, the library version and the
// device architecture. `ingot convert --device cuda` runs the model once and stores the entries in
// the package (`algorithms`); loading the package puts them back, so its first run measures
// nothing. A backend looks a choice up before measuring and records what it measured.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ingot::tuning {

std::optional<std::string> find(const std::string& key);  // counts a hit or a miss
void put(const std::string& key, const std::string& value);
std::vector<std::pair<std::string, std::string>> entries();  // sorted by key

struct Stats {
  int64_t hits = 0, misses = 0;
};
Stats stats();
void clear();  // forgets every entry and resets the counts (tests)

}  // namespace ingot::tuning
