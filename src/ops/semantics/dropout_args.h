// ai.ingot.Dropout's seed, for the CPU and CUDA kernels: input 1 (an int64 scalar, read on the host)
// when given, which is how a compiled training step draws a new mask every step from one traced
// graph, else the `seed` attribute (eager calls).
#pragma once
#include <cstdint>

#include "ops/kernel.h"

namespace ingot::sem {

inline uint64_t dropout_seed(const KernelContext& ctx) {
  if (ctx.has_input(1)) {
    const Tensor& s = ctx.input(1);
    if (s.numel() != 1 || s.dtype() != DType::Int64) fail("input 1 (seed): expected one int64, got {}", s.describe());
    return uint64_t(s.item_int());
  }
  return uint64_t(ctx.attr_int("seed"));
}

}  // namespace ingot::sem
