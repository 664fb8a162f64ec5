#include "core/npy.h"

#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace ingot {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::Float32}, {"<f8", DType::Float64}, {"<f2", DType::Float16}, {"|i1", DType::Int8},
    {"<i2", DType::Int16},   {"<i4", DType::Int32},   {"<i8", DType::Int64},   {"|u1", DType::UInt8},
    {"<u2", DType::UInt16},  {"<u4", DType::UInt32},  {"<u8", DType::UInt64},  {"|b1", DType::Bool},
};

}  // namespace

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot read '{}': {}", path, ec.message());
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail("'{}' is not a .npy file", path);
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t len16;
    in.read(reinterpret_cast<char*>(&len16), 2);
    header_len = len16;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  if (!in || header_len > file_size) fail("'{}': truncated .npy header", path);
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail("'{}': truncated .npy header", path);

  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']+)')")))
    fail("'{}': .npy header has no descr", path);
  std::string descr = m[1];
  if (descr == "<U" || descr[1] == 'U' || descr[1] == 'O')
    fail("'{}': .npy dtype {} (strings/objects) is not supported", path, descr);
  DType dtype = DType::Undefined;
  for (const auto& t : kTypes) {
    if (descr == t.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(t.descr).substr(1)))
      dtype = t.dtype;
  }
  if (dtype == DType::Undefined)
    fail("'{}': .npy dtype '{}' is not supported (little-endian numeric or bool only)", path, descr);
  if (std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*True)")))
    fail("'{}': Fortran-order .npy arrays are not supported", path);
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    fail("'{}': .npy header has no shape", path);
  Shape shape;
  std::stringstream dims(m[1].str());
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    if (dim.find_first_not_of(" \t") == std::string::npos) continue;
    const size_t first = dim.find_first_not_of(" \t"), last = dim.find_last_not_of(" \t");
    int64_t d = -1;
    const auto [end, err] = std::from_chars(dim.data() + first, dim.data() + last + 1, d);
    if (err != std::errc() || end != dim.data() + last + 1 || d < 0)
      fail("'{}': .npy shape has a bad dimension '{}'", path, dim);
    shape.push_back(d);
  }
  // A few bytes of header may declare any shape: the data must be in the file before it is allocated.
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d && numel > INT64_MAX / d / 16) fail("'{}': .npy shape {} is too large", path, shape_str(shape));
    numel *= d;
  }
  const uint64_t nbytes = uint64_t(numel) * dtype_size(dtype);
  const auto at = in.tellg();
  if (at < 0 || uint64_t(at) > file_size || nbytes > file_size - uint64_t(at)) {
    fail("'{}': truncated .npy data (expected {} bytes for {}{})", path, nbytes, dtype_name(dtype), shape_str(shape));
  }
  Tensor t = Tensor::empty(dtype, shape);
  if (!in.read(static_cast<char*>(t.raw_data()), std::streamsize(t.nbytes()))) {
    fail("'{}': truncated .npy data (expected {} bytes for {})", path, t.nbytes(), t.describe());
  }
  return t;
}

void save_npy(const std::string& path, const Tensor& tensor) {
  const char* descr = nullptr;
  for (const auto& t : kTypes) {
    if (t.dtype == tensor.dtype()) descr = t.descr;
  }
  Tensor host = tensor;
  if (tensor.dtype() == DType::BFloat16) {  // numpy has no bfloat16: widen losslessly
    host = tensor.cast(DType::Float32);
    descr = "<f4";
  }
  if (!descr) fail("cannot save {} as .npy", tensor.describe());
  host = host.to(Device::cpu());
  std::string shape;
  for (int64_t d : host.shape()) shape += std::to_string(d) + ",";
  if (host.rank() > 1) shape.pop_back();
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot write '{}'", path);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(static_cast<const char*>(host.raw_data()), std::streamsize(host.nbytes()));
  if (!out) fail("failed writing '{}'", path);
}

}  // namespace ingot
