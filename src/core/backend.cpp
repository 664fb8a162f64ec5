#include "core/backend.h"

#include <array>
#include <cctype>

namespace ingot {
namespace {

// Indexed by DeviceType (append-only, as the package format stores it).
std::array<Backend*, 2>& table() {
  static std::array<Backend*, 2> t{};
  return t;
}

}  // namespace

std::string Backend::label() const {
  std::string s(name());
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::unique_ptr<Communicator> Backend::connect(const ConnectOptions&) {
  fail("the {} backend cannot communicate with other processes (no collectives)", name());
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

void register_backend(Backend& backend) {
  auto index = size_t(backend.type());
  if (index >= table().size()) fail("backend '{}': device type {} has no slot", backend.name(), index);
  if (table()[index]) fail("a second backend for device type '{}' was registered", backend.name());
  table()[index] = &backend;
}

Backend* find_backend(DeviceType type) {
  auto index = size_t(type);
  return index < table().size() ? table()[index] : nullptr;
}

Backend* find_backend(std::string_view name) {
  for (Backend* b : table()) {
    if (b && b->name() == name) return b;
  }
  return nullptr;
}

std::vector<Backend*> backends() {
  std::vector<Backend*> out;
  for (Backend* b : table()) {
    if (b) out.push_back(b);
  }
  return out;
}

Backend& backend_for(Device device) {
  Backend* b = find_backend(device.type);
  if (!b) fail("device {} is not available: this build of Ingot has no backend for it", device.str());
  return *b;
}

}  // namespace ingot
