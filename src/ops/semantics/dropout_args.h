// ai.ingot.Dropout's Philox key and stream, for the CPU and CUDA kernels. Eager calls: key = the
// `seed` attribute, stream 0. With input 1 (an int64 scalar, new every call of a compiled training
// step, so one traced graph draws a new mask every step): key = input 1, stream = the `seed`
// attribute (each dropout of the step its own, without arithmetic on the seed in the graph). The
// CPU kernel reads input 1 on the host; the CUDA kernel on the device, so that a captured step
// replays with each step's seed.
#pragma once
#include <cstdint>

#include "ops/kernel.h"

namespace ingot::sem {

// Input 1, checked, or nullptr when the node has none.
inline const Tensor* dropout_seed_input(const KernelContext& ctx) {
  if (!ctx.has_input(1)) return nullptr;
  const Tensor& s = ctx.input(1);
  if (s.numel() != 1 || s.dtype() != DType::Int64) fail("input 1 (seed): expected one int64, got {}", s.describe());
  return &s;
}

struct DropoutKey {
  uint64_t seed, stream;
};

// The key and stream, input 1 read on the host.
inline DropoutKey dropout_key(const KernelContext& ctx) {
  const uint64_t attr = uint64_t(ctx.attr_int("seed"));
  if (const Tensor* s = dropout_seed_input(ctx)) return {uint64_t(s->item_int()), attr};
  return {attr, 0};
}

}  // namespace ingot::sem
