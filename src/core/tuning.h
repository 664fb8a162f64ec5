// What a backend works out once per problem and device, kept process-wide under a key that names
// the problem, the library or compiler version and the device architecture:
//   algorithms()  - choices made by measuring (which cuDNN algorithm is fastest for a convolution
//                   problem on this GPU);
//   device_code() - code generated for the model (cubins NVRTC compiled for fused elementwise
//                   chains).
// `ingot convert --device cuda` runs the model once and stores both in the package (`algorithms`,
// `device_code`); loading the package puts them back, so its first run measures and compiles
// nothing. A backend looks an entry up before working it out and records what it worked out.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ingot::tuning {

struct Stats {
  int64_t hits = 0, misses = 0;
};

// A thread-safe map from keys to byte strings with hit/miss counts.
class Store {
 public:
  std::optional<std::string> find(const std::string& key);  // counts a hit or a miss
  // Looks up without counting: an entry that serves another (a choice's serialized plan, its spec).
  std::optional<std::string> peek(const std::string& key);
  void put(const std::string& key, const std::string& value);
  std::vector<std::pair<std::string, std::string>> entries();  // sorted by key
  // The entries whose key starts with `prefix`, sorted by key (without copying the others).
  std::vector<std::pair<std::string, std::string>> with_prefix(const std::string& prefix);
  Stats stats();
  void clear();  // forgets every entry and resets the counts (tests)

 private:
  std::mutex mu_;
  std::map<std::string, std::string> entries_;
  Stats stats_;
};

Store& algorithms();
Store& device_code();

}  // namespace ingot::tuning
