// The static memory plan: where in one arena each intermediate tensor of a run lives. Built from
// the buffers a first run allocated (their sizes and the steps during which they are alive), it
// places buffers whose lifetimes overlap at disjoint offsets and lets the others share memory:
// "greedy by size" (largest first, each at the lowest offset that fits between the buffers already
// placed and alive at the same time), the usual heuristic of inference runtimes; it is within a few
// percent of the lower bound (the most bytes alive at one step) on real models.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ingot {

// One buffer: alive from the step that allocates it to the last step that reads it (inclusive), so
// a step's outputs never share memory with its inputs.
struct BufferLife {
  size_t bytes = 0;
  int first = 0, last = 0;
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // per buffer, in the order given; multiples of the alignment
  size_t arena_bytes = 0;       // the arena's size: the plan's peak
  size_t total_bytes = 0;       // what the buffers take without reuse
  size_t lower_bound = 0;       // the most bytes alive at any one step (no plan can do better)
};

// 256-byte alignment: what cuBLASLt and cuDNN prefer and more than any vector access needs.
constexpr size_t kArenaAlignment = 256;

MemoryPlan plan_memory(const std::vector<BufferLife>& buffers, size_t alignment = kArenaAlignment);

}  // namespace ingot
