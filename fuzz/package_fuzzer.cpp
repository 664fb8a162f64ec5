// libFuzzer target: .ingot package bytes -> the loader (header, checksum, FlatBuffers verification,
// weights, graph) for the CPU, then its metadata reader. Valid packages come from scripts/fuzz.sh's
// seed corpus; the checksum makes most mutations stop early, so the target also retries each input
// with the checksum made right (INGOT_FUZZ_FIX_CHECKSUM) to reach the structure behind it.
#include <ingot/error.h>

#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "package/package.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ingot::fuzz::MemFile file;
  auto load = [&](const uint8_t* bytes, size_t n) {
    const std::string& path = file.write(bytes, n);
    try {
      ingot::PackageMetadata meta;
      ingot::inspect_package(path, meta);
      ingot::load_package(path, ingot::Device::cpu());
    } catch (const ingot::Error&) {
    }
  };
  load(data, size);
  std::vector<uint8_t> fixed(data, data + size);
  if (ingot::fix_package_checksum(fixed)) load(fixed.data(), fixed.size());
  return 0;
}
