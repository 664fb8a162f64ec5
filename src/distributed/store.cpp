#include "distributed/store.h"

#include <fmt/format.h>
#include <ingot/error.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace ingot::distributed {
namespace fs = std::filesystem;

FileStore::FileStore(std::string folder) : folder_(std::move(folder)) {
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (!fs::is_directory(folder_)) fail("rendezvous folder '{}': cannot be created ({})", folder_, ec.message());
}

// Keys may hold '/' (prefixes) and anything else: every byte outside [A-Za-z0-9._-] is escaped, so
// a key is one file name and two keys never share one.
std::string FileStore::path_of(const std::string& key) const {
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_')
      name += char(c);
    else
      name += fmt::format("%{:02x}", c);
  }
  return folder_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::vector<char>& value) {
  std::string path = path_of(key);
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), std::streamsize(value.size()));
    out.flush();
    if (!out) fail("rendezvous folder '{}': cannot write key '{}' ({})", folder_, key, std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("rendezvous folder '{}': cannot publish key '{}' ({})", folder_, key, ec.message());
}

namespace {

// Polls for a file: every 1 ms at first, backing off to 20 ms.
template <class Ready>
bool poll_until(std::chrono::milliseconds timeout, Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(1000);
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  return true;
}

}  // namespace

std::vector<char> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::string path = path_of(key);
  if (!poll_until(timeout, [&] { return fs::exists(path); }))
    fail("rendezvous folder '{}': no key '{}' after {:.0f} s", folder_, key, timeout.count() / 1000.0);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("rendezvous folder '{}': cannot read key '{}'", folder_, key);
  return value;
}

std::vector<std::string> FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> missing = keys;
  poll_until(timeout, [&] {
    missing.erase(std::remove_if(missing.begin(), missing.end(), [&](const std::string& k) { return fs::exists(path_of(k)); }),
                  missing.end());
    return missing.empty();
  });
  return missing;
}

}  // namespace ingot::distributed
