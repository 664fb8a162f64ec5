// The CUDA backend's device timer (core/device_timer.h), which the profiler asks the backend for:
//   - device time of kernels and copies from pairs of CUDA events recorded on the device's stream
//     around them. Events come from a pool (created once, reused by later profiles); nothing waits
//     while recording except once per profile and device, when the first marker also records a
//     reference event (the stream is drained, the reference recorded between two host clock reads).
//     profiler::stop() resolves every pair with cudaEventElapsedTime against that reference;
//   - NVTX ranges (node name and op type) around each op while profiling, or always with
//     INGOT_NVTX=1, so that Nsight Systems shows the nodes. NVTX3 is header-only. Ranges only
//     reach a tool that NVTX loads, from NVTX_INJECTION64_PATH (Nsight Systems sets it for the
//     process it launches): without that variable or INGOT_NVTX=1 none are pushed, which saves
//     formatting the label for every op of a profile nobody collects them from.
// No function here throws: a failed CUDA call drops that event (and clears the runtime's last
// error, which the kernels' launch checks read).
#include <nvtx3/nvToolsExt.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "core/flags.h"
#include "profiler/hooks.h"

namespace ingot::cuda {

namespace {

constexpr int kMaxTimedDevices = 16;

struct Span {
  cudaEvent_t start = nullptr, stop = nullptr;
  int device = 0;
  bool ended = false;
};

struct Reference {
  cudaEvent_t event = nullptr;
  int64_t ticks = 0;  // profiler clock at the event
  bool recorded = false;
};

struct TimerState {
  std::mutex mutex;
  std::array<std::vector<cudaEvent_t>, kMaxTimedDevices> pool;  // free events, per device
  std::vector<Span> spans;                                      // this profile's, by token
  std::array<Reference, kMaxTimedDevices> refs;
};

TimerState& timer_state() {
  static auto* t = new TimerState();  // outlives static destructors (a profile stopped at exit)
  return *t;
}

bool ok(cudaError_t e) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();  // not a kernel's error: keep it from surfacing at the next launch check
  return false;
}

// Called with the lock held.
cudaEvent_t take(TimerState& t, int device) {
  auto& pool = t.pool[size_t(device)];
  if (!pool.empty()) {
    cudaEvent_t e = pool.back();
    pool.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  return ok(cudaEventCreate(&e)) ? e : nullptr;  // timing enabled (the default flags)
}

void give_back(TimerState& t, int device, cudaEvent_t& e) {
  if (e) t.pool[size_t(device)].push_back(e);
  e = nullptr;
}

bool current_stream(int* device, cudaStream_t* s) {
  if (!ok(cudaGetDevice(device)) || *device < 0 || *device >= kMaxTimedDevices) return false;
  try {
    *s = stream();
  } catch (...) {
    return false;
  }
  return true;
}

int64_t timer_begin() {
  int device = 0;
  cudaStream_t s = nullptr;
  if (!current_stream(&device, &s)) return -1;
  TimerState& t = timer_state();
  std::lock_guard lock(t.mutex);
  Reference& ref = t.refs[size_t(device)];
  if (!ref.recorded) {
    // Once per profile and device: with the stream idle, the reference completes within a few us
    // of being recorded, so the midpoint of the two host reads is its host time.
    if (!ref.event && !(ref.event = take(t, device))) return -1;
    if (!ok(cudaStreamSynchronize(s))) return -1;
    int64_t before = profiler::detail::clock_ticks();
    if (!ok(cudaEventRecord(ref.event, s)) || !ok(cudaEventSynchronize(ref.event))) return -1;
    int64_t after = profiler::detail::clock_ticks();
    ref.ticks = before + (after - before) / 2;
    ref.recorded = true;
  }
  Span span{take(t, device), take(t, device), device, false};
  if (!span.start || !span.stop || !ok(cudaEventRecord(span.start, s))) {
    give_back(t, device, span.start);
    give_back(t, device, span.stop);
    return -1;
  }
  t.spans.push_back(span);
  return int64_t(t.spans.size() - 1);
}

void timer_end(int64_t token) {
  int device = 0;
  cudaStream_t s = nullptr;
  if (!current_stream(&device, &s)) return;
  TimerState& t = timer_state();
  std::lock_guard lock(t.mutex);
  if (token < 0 || size_t(token) >= t.spans.size()) return;
  Span& span = t.spans[size_t(token)];
  if (span.device != device) return;  // the op switched devices: leave the span unresolved
  span.ended = ok(cudaEventRecord(span.stop, s));
}

bool timer_resolve(int64_t token, int64_t* ref_ticks, int64_t* start_ns, int64_t* end_ns, int* device) {
  TimerState& t = timer_state();
  std::lock_guard lock(t.mutex);
  if (token < 0 || size_t(token) >= t.spans.size()) return false;
  const Span& span = t.spans[size_t(token)];
  const Reference& ref = t.refs[size_t(span.device)];
  if (!span.ended || !ref.recorded) return false;
  float from_ref = 0, duration = 0;
  // The offset from the reference (float ms: ~1 us resolution after seconds) and the duration
  // from its own pair (sub-us for short kernels).
  if (!ok(cudaEventSynchronize(span.stop)) || !ok(cudaEventElapsedTime(&from_ref, ref.event, span.start)) ||
      !ok(cudaEventElapsedTime(&duration, span.start, span.stop))) {
    return false;
  }
  *ref_ticks = ref.ticks;
  *start_ns = std::llround(double(from_ref) * 1e6);
  *end_ns = *start_ns + std::llround(double(std::max(duration, 0.0f)) * 1e6);
  *device = span.device;
  return true;
}

void timer_reset() {
  TimerState& t = timer_state();
  std::lock_guard lock(t.mutex);
  for (Span& span : t.spans) {
    give_back(t, span.device, span.start);
    give_back(t, span.device, span.stop);
  }
  t.spans.clear();
  for (size_t d = 0; d < t.refs.size(); ++d) {
    give_back(t, int(d), t.refs[d].event);
    t.refs[d].recorded = false;
  }
}

void nvtx_push(const char* name) { nvtxRangePushA(name); }
void nvtx_pop() { nvtxRangePop(); }

constexpr DeviceTimer kTimer{&timer_begin, &timer_end, &timer_resolve, &timer_reset, &nvtx_push, &nvtx_pop};
constexpr DeviceTimer kTimerWithoutNvtx{&timer_begin, &timer_end, &timer_resolve, &timer_reset, nullptr, nullptr};

}  // namespace

const DeviceTimer* device_timer() {
  static const DeviceTimer* timer = [] {
    const char* tool = std::getenv("NVTX_INJECTION64_PATH");  // NVTX's own variable: a tool is attached
    return flags::enabled("INGOT_NVTX") || (tool && *tool) ? &kTimer : &kTimerWithoutNvtx;
  }();
  return timer;
}

}  // namespace ingot::cuda
