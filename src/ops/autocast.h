// Autocast's per-thread state and its input casts (include/ingot/amp.h), applied by ops::call.
#pragma once
#include <ingot/tensor.h>

#include <optional>
#include <vector>

#include "ops/op_def.h"

namespace ingot::ops::detail {

enum class AutocastPolicy : uint8_t { LowPrecision, Follow, Float32 };
// From the op's tags: AutocastLowPrecision -> low, AutocastFollow -> follow, anything else float32
// (PyTorch's fp32 list, and ops it does not list: safe in float32).
AutocastPolicy autocast_policy(const OpDef& def);

// The low dtype when autocast is on for `device` on this thread (and not suspended), else Undefined.
DType active_autocast(Device device);
// The inputs cast as the op's policy asks (float32 parameters of the op, OpDef::float32_params_from,
// are left alone); nullopt when none needs a cast.
std::optional<std::vector<Tensor>> autocast_inputs(const OpDef& def, const std::vector<Tensor>& inputs, DType low);

// Turns autocast off on this thread while it lives (the backward pass).
class AutocastSuspend {
 public:
  AutocastSuspend();
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;

 private:
  bool previous_;
};

}  // namespace ingot::ops::detail
