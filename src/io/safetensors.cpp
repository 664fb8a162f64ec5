// safetensors reading and writing (include/ingot/safetensors.h). The header is JSON (nlohmann-json);
// everything a file says is checked before it is used (offsets inside the file, in order and
// without gaps, sizes matching dtype and shape), so a damaged file is an error naming the tensor.
#include <ingot/safetensors.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/strings.h"

namespace ingot {
namespace {

struct Code {
  DType dtype;
  const char* name;
};
constexpr Code kCodes[] = {{DType::Float64, "F64"}, {DType::Float32, "F32"}, {DType::Float16, "F16"},
                           {DType::BFloat16, "BF16"}, {DType::Int64, "I64"}, {DType::Int32, "I32"},
                           {DType::Int16, "I16"},      {DType::Int8, "I8"},    {DType::UInt64, "U64"},
                           {DType::UInt32, "U32"},    {DType::UInt16, "U16"}, {DType::UInt8, "U8"},
                           {DType::Bool, "BOOL"}};

const char* code_of(DType dt, const std::string& name) {
  for (const Code& c : kCodes) {
    if (c.dtype == dt) return c.name;
  }
  fail("safetensors: tensor '{}' has dtype {}, which the format cannot hold", name, dtype_name(dt));
}
DType dtype_of_code(const std::string& code, const std::string& name, const std::string& path) {
  for (const Code& c : kCodes) {
    if (code == c.name) return c.dtype;
  }
  fail("{}: tensor '{}' has dtype '{}', which Ingot does not read", path, name, code);
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail("safetensors: '__metadata__' cannot name a tensor");
    if (!t.defined()) fail("safetensors: tensor '{}' is undefined", name);
    Tensor h = t.to(Device::cpu());
    const char* code = code_of(h.dtype(), name);
    header[name] = {{"dtype", code}, {"shape", h.shape()}, {"data_offsets", {offset, offset + h.nbytes()}}};
    offset += h.nbytes();
    host.push_back(std::move(h));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot write '{}'", path);
  uint64_t n = text.size();
  unsigned char size_le[8];
  for (int i = 0; i < 8; ++i) size_le[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(size_le), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const Tensor& h : host) out.write(static_cast<const char*>(h.raw_data()), std::streamsize(h.nbytes()));
  if (!out) fail("writing '{}' failed", path);
}

std::map<std::string, Tensor> load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("cannot open '{}'", path);
  const uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  unsigned char size_le[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(size_le), 8)) fail("{}: not a safetensors file (too short)", path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | size_le[i];
  if (n > file_size - 8 || n > (uint64_t(100) << 20))
    fail("{}: not a safetensors file (header size {} for a file of {} bytes)", path, n, file_size);
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: the header is not JSON ({})", path, e.what());
  }
  if (!header.is_object()) fail("{}: the header is not a JSON object", path);
  const uint64_t data_size = file_size - 8 - n;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (metadata) {
        for (const auto& [k, value] : v.items()) (*metadata)[k] = value.is_string() ? value.get<std::string>() : value.dump();
      }
      continue;
    }
    try {
      Entry e{name, dtype_of_code(v.at("dtype").get<std::string>(), name, path), v.at("shape").get<Shape>(),
              v.at("data_offsets").at(0).get<uint64_t>(), v.at("data_offsets").at(1).get<uint64_t>()};
      for (int64_t d : e.shape) {
        if (d < 0) fail("{}: tensor '{}' has a negative dimension", path, name);
      }
      if (e.end < e.begin || e.end > data_size)
        fail("{}: tensor '{}' has offsets [{}, {}) outside the {} data bytes", path, name, e.begin, e.end, data_size);
      if (e.end - e.begin != uint64_t(shape_numel(e.shape)) * dtype_size(e.dtype))
        fail("{}: tensor '{}' is {} {} but has {} bytes", path, name, dtype_name(e.dtype), shape_str(e.shape), e.end - e.begin);
      entries.push_back(std::move(e));
    } catch (const nlohmann::json::exception& ex) {
      fail("{}: tensor '{}': malformed header entry ({})", path, name, ex.what());
    }
  }
  std::map<std::string, Tensor> out;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.dtype, e.shape);
    in.seekg(std::streamoff(8 + n + e.begin));
    if (!in.read(static_cast<char*>(t.raw_data()), std::streamsize(e.end - e.begin)))
      fail("{}: reading tensor '{}' failed", path, e.name);
    out[e.name] = std::move(t);
  }
  return out;
}

}  // namespace ingot
