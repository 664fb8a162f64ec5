// Autocast (include/ingot/amp.h): thread-local regions per device type, the schema tags' policy and
// the casts, with a per-region cache of parameter casts (leaves that require gradients), as
// PyTorch's autocast weight cache.
#include "ops/autocast.h"

#include <ingot/amp.h>
#include <ingot/ops.h>

#include <map>
#include <utility>

namespace ingot {
namespace {

struct State {
  bool enabled[2] = {false, false};  // per DeviceType (CPU, CUDA)
  DType dtype[2] = {DType::BFloat16, DType::Float16};
  int depth = 0;
  bool suspended = false;
  // (the parameter's autograd record, dtype) -> its cast; the cast's tape node keeps the parameter,
  // so the record cannot be reused by another tensor while the entry exists.
  std::map<std::pair<const void*, DType>, Tensor> cache;
};
thread_local State t_state;

size_t slot(DeviceType d) { return d == DeviceType::CPU ? 0 : 1; }

bool is_16bit(DType dt) { return dt == DType::Float16 || dt == DType::BFloat16; }
bool castable(DType dt) { return dt == DType::Float32 || is_16bit(dt); }  // float64 stays

Tensor cast_to(const Tensor& t, DType dtype) {
  const bool parameter = t.requires_grad() && t.is_leaf();
  if (parameter) {
    auto it = t_state.cache.find({t.autograd_meta().get(), dtype});
    if (it != t_state.cache.end()) return it->second;
  }
  Tensor c = ops::call("Cast", {t}, {{"to", int64_t(dtype)}}, 1).at(0);
  if (parameter) t_state.cache[{t.autograd_meta().get(), dtype}] = c;
  return c;
}

}  // namespace

namespace ops::detail {

AutocastPolicy autocast_policy(const OpDef& def) {
  if (def.has(OpTag::AutocastLowPrecision)) return AutocastPolicy::LowPrecision;
  if (def.has(OpTag::AutocastFollow)) return AutocastPolicy::Follow;
  return AutocastPolicy::Float32;
}

DType active_autocast(Device device) {
  const State& s = t_state;
  if (s.suspended || !s.enabled[slot(device.type)]) return DType::Undefined;
  return s.dtype[slot(device.type)];
}

std::optional<std::vector<Tensor>> autocast_inputs(const OpDef& def, const std::vector<Tensor>& inputs, DType low) {
  if (def.name == "Cast" || def.name == "CastLike") return std::nullopt;
  const AutocastPolicy policy = autocast_policy(def);
  auto data = [&](size_t i) {
    return inputs[i].defined() && castable(inputs[i].dtype()) &&
           !(def.float32_params_from >= 0 && int(i) >= def.float32_params_from);
  };
  DType target = DType::Undefined;
  if (policy == AutocastPolicy::LowPrecision) {
    target = low;
  } else if (policy == AutocastPolicy::Float32) {
    target = DType::Float32;
  } else {  // follow: the widest float dtype among the data inputs, when they differ
    bool mixed = false;
    DType first = DType::Undefined;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!data(i)) continue;
      if (first == DType::Undefined) first = inputs[i].dtype();
      mixed |= inputs[i].dtype() != first;
    }
    if (!mixed) return std::nullopt;
    target = DType::Float32;  // the widest (float16 with bfloat16 promotes to float32 too, as in PyTorch)
  }
  std::vector<Tensor> out = inputs;
  bool changed = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (data(i) && out[i].dtype() != target) {
      out[i] = cast_to(out[i], target);
      changed = true;
    }
  }
  if (!changed) return std::nullopt;
  return out;
}

AutocastSuspend::AutocastSuspend() : previous_(t_state.suspended) { t_state.suspended = true; }
AutocastSuspend::~AutocastSuspend() { t_state.suspended = previous_; }

}  // namespace ops::detail

namespace amp {

Autocast::Autocast(DeviceType device, DType dtype, bool enabled) : device_(device) {
  State& s = t_state;
  if (dtype == DType::Undefined) dtype = device == DeviceType::CPU ? DType::BFloat16 : DType::Float16;
  if (!is_16bit(dtype)) fail("Autocast: dtype must be float16 or bfloat16, got {}", dtype_name(dtype));
  previous_enabled_ = s.enabled[slot(device)];
  previous_dtype_ = s.dtype[slot(device)];
  s.enabled[slot(device)] = enabled;
  s.dtype[slot(device)] = dtype;
  ++s.depth;
}

Autocast::~Autocast() {
  State& s = t_state;
  s.enabled[slot(device_)] = previous_enabled_;
  s.dtype[slot(device_)] = previous_dtype_;
  if (--s.depth == 0) s.cache.clear();  // the outermost region ends: its parameter casts go
}

bool is_autocast_enabled(DeviceType device) { return t_state.enabled[slot(device)]; }
DType autocast_dtype(DeviceType device) { return t_state.dtype[slot(device)]; }

std::string autocast_policy(const std::string& op, const std::string& domain) {
  const OpDef* def = OpCatalogue::instance().find(domain, op);
  if (!def) return "";
  switch (ops::detail::autocast_policy(*def)) {
    case ops::detail::AutocastPolicy::LowPrecision: return "low";
    case ops::detail::AutocastPolicy::Follow: return "follow";
    default: return "float32";
  }
}

}  // namespace amp
}  // namespace ingot
