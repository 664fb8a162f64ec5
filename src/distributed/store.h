// The rendezvous store of a process group (core/collectives.h's KeyValueStore) over a folder that
// every rank reaches: one file per key, written under a temporary name and renamed into place, so a
// reader sees a whole value or none. torch.distributed's FileStore does the same job with one file.
// The folder must be fresh for each group (`ingot launch` makes one per run): old keys would be read
// as new ones.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "core/collectives.h"

namespace ingot::distributed {

class FileStore final : public KeyValueStore {
 public:
  explicit FileStore(std::string folder);  // created if missing
  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override;
  // Waits until every key is there or the timeout passes; returns the keys still missing.
  std::vector<std::string> wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  const std::string& folder() const { return folder_; }

 private:
  std::string path_of(const std::string& key) const;
  std::string folder_;
};

}  // namespace ingot::distributed
