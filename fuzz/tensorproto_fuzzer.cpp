// libFuzzer target: serialized TensorProto / SequenceProto / OptionalProto bytes -> Ingot's tensor
// reader (dtypes, dims against data, raw and typed fields, strings, external data refused).
#include <ingot/error.h>

#include "fuzz_util.h"
#include "onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ingot::fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  for (ingot::ValueKind kind : {ingot::ValueKind::Tensor, ingot::ValueKind::Sequence, ingot::ValueKind::Optional}) {
    try {
      ingot::ValueType type;
      type.kind = kind;
      ingot::load_value_pb(path, type);
    } catch (const ingot::Error&) {
    }
  }
  return 0;
}
