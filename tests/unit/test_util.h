// Helpers shared by the unit tests.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace ingot::testing {

// A scratch folder private to this test process: ctest runs every test case as its own process,
// in parallel, so fixed file names in a shared folder would race.
inline std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("ingot_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ingot::testing
