// libFuzzer target: .npy bytes -> load_npy (header parsing, dtype, shape, data length).
#include <ingot/error.h>

#include "core/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ingot::fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    ingot::load_npy(path);
  } catch (const ingot::Error&) {
  }
  return 0;
}
