// libFuzzer target: ONNX model bytes -> import (parse, node sorting, ONNX's shape inference,
// conversion, verification). Every input must either import or raise ingot::Error; a crash, a
// sanitizer report, another exception or a hang is a finding.
#include <ingot/error.h>

#include "fuzz_util.h"
#include "onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ingot::fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    ingot::import_onnx(path);
  } catch (const ingot::Error&) {
  }
  return 0;
}
