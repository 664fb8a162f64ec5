// Timing a device's queued work for the profiler (CUDA events), and named ranges for external tools
// (NVTX). A backend that can returns one from Backend::timer() (core/backend.h); the profiler only
// sees this interface. Every function may be called from the thread running a session while a
// profile is on; none throws.
#pragma once
#include <cstdint>

namespace ingot {

struct DeviceTimer {
  // Marks the start of device work on the current device's stream (e.g. a pooled CUDA event
  // recorded there) and returns a token, or -1 when it cannot. The first call of a profile on a
  // device also records that device's reference marker (waiting for the stream once).
  int64_t (*begin)();
  // Marks the end of the device work begun with `token` (on the same stream).
  void (*end)(int64_t token);
  // At stop(): waits for the token's markers and gives their times as ns after its device's
  // reference marker, whose host time (profiler::detail::clock_ticks()) was *ref_ticks. False when
  // unresolvable.
  bool (*resolve)(int64_t token, int64_t* ref_ticks, int64_t* start_ns, int64_t* end_ns, int* device);
  // At start() and at the end of stop(): forgets the tokens and references (markers go back to the pool).
  void (*reset)();
  // NVTX-style named ranges around each op (null when the backend has none, or no tool collects them).
  void (*push_range)(const char* name);
  void (*pop_range)();
};

}  // namespace ingot
