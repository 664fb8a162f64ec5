// Shared by the libFuzzer targets: the input bytes as a file (Ingot's loaders take paths, and the
// package loader maps its file), in memory: one memfd rewritten for each input, reached as
// /proc/self/fd/N.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ingot::fuzz {

class MemFile {
 public:
  MemFile() : fd_(memfd_create("ingot-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != ssize_t(size)) std::abort();
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace ingot::fuzz
