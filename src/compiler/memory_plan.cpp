#include "compiler/memory_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace ingot {

MemoryPlan plan_memory(const std::vector<BufferLife>& buffers, size_t alignment) {
  auto round_up = [&](size_t n) { return (n + alignment - 1) / alignment * alignment; };
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t(0));
  // Largest first; ties by first use, so equal sizes are placed in program order (deterministic).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  struct Placed {
    size_t offset, size;
    int first, last;
  };
  std::vector<Placed> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed buffers alive with this one
  for (size_t i : order) {
    const BufferLife& b = buffers[i];
    size_t size = round_up(std::max<size_t>(b.bytes, 1));
    busy.clear();
    for (const Placed& p : placed) {
      if (p.first <= b.last && b.first <= p.last) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= offset + size) break;  // fits in the gap before this one
      offset = std::max(offset, hi);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    plan.total_bytes += size;
    placed.push_back({offset, size, b.first, b.last});
  }
  // The lower bound: bytes alive at each step, at its peak.
  std::map<int, int64_t> delta;
  for (const BufferLife& b : buffers) {
    delta[b.first] += int64_t(round_up(std::max<size_t>(b.bytes, 1)));
    delta[b.last + 1] -= int64_t(round_up(std::max<size_t>(b.bytes, 1)));
  }
  int64_t live = 0;
  for (const auto& [step, d] : delta) {
    live += d;
    plan.lower_bound = std::max(plan.lower_bound, size_t(live));
  }
  return plan;
}

}  // namespace ingot
