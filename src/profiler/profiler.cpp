// Recording: one process-wide buffer of events behind a mutex. Nodes run one at a time (kernels
// parallelize inside), so the lock is uncontended; allocations from worker threads take it too.
#include <ingot/error.h>
#include <ingot/profiler.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/strings.h"
#include "ops/kernel.h"
#include "profiler/hooks.h"

namespace ingot::profiler {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

struct State {
  std::mutex mutex;
  std::vector<Event> events;
  std::unordered_map<const void*, int64_t> live;  // storages allocated while profiling -> bytes
  int64_t live_bytes = 0;
  std::chrono::steady_clock::time_point origin;
  std::map<uint32_t, std::string> threads;
};

State& state() {
  static State s;
  return s;
}

std::atomic<uint32_t> g_next_tid{0};
thread_local int t_depth = 0;

uint32_t this_tid() {
  thread_local uint32_t tid = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  return tid;
}

int64_t now_ns(const State& s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - s.origin).count();
}

// Called with the lock held.
void note_thread(State& s, uint32_t tid) {
  if (!s.threads.count(tid)) s.threads[tid] = s.threads.empty() ? "main" : "thread " + std::to_string(tid);
}

Summary summarize(const std::vector<Event>& events) {
  Summary sum;
  std::map<std::string, OpStats> by_type;
  int64_t live = 0;
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::Op: {
        OpStats& st = by_type[e.op_type];
        st.op_type = e.op_type;
        ++st.count;
        st.total_ms += e.duration_ms();
        ++sum.op_events;
        break;
      }
      case EventKind::SessionRun:
        ++sum.session_runs;
        sum.session_ms += e.duration_ms();
        break;
      case EventKind::Alloc:
        ++sum.alloc_count;
        sum.alloc_bytes += e.bytes;
        live += e.bytes;
        sum.peak_live_bytes = std::max(sum.peak_live_bytes, live);
        break;
      case EventKind::Free:
        ++sum.free_count;
        sum.freed_bytes += e.bytes;
        live -= e.bytes;
        break;
      default: break;
    }
  }
  // Shares are of top-level op time: an If's body ops are already inside the If's own duration.
  int min_depth = INT32_MAX;
  for (const Event& e : events) {
    if (e.kind == EventKind::Op) min_depth = std::min(min_depth, e.depth);
  }
  for (const Event& e : events) {
    if (e.kind == EventKind::Op && e.depth == min_depth) sum.op_ms += e.duration_ms();
  }
  for (auto& [type, st] : by_type) {
    st.mean_ms = st.total_ms / double(st.count);
    st.share = sum.op_ms > 0 ? st.total_ms / sum.op_ms : 0;
    sum.ops.push_back(st);
  }
  std::stable_sort(sum.ops.begin(), sum.ops.end(),
                   [](const OpStats& a, const OpStats& b) { return a.total_ms > b.total_ms; });
  return sum;
}

}  // namespace

std::string_view kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::Op: return "op";
    case EventKind::SessionRun: return "session";
    case EventKind::Alloc: return "alloc";
    case EventKind::Free: return "free";
    case EventKind::Copy: return "copy";
    case EventKind::Fallback: return "fallback";
  }
  return "?";
}

std::string TensorDesc::str() const {
  if (kind == Kind::Sequence) return "sequence";
  if (kind == Kind::None) return "none";
  return std::string(dtype_name(dtype)) + "[" + join(shape, ",") + "]";
}

void start() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (detail::g_enabled.load()) fail("profiler: already started");
  s.events.clear();
  s.events.reserve(1 << 14);  // grows if needed; reserving keeps the first runs free of reallocation
  s.live.clear();
  s.live_bytes = 0;
  s.threads.clear();
  s.origin = std::chrono::steady_clock::now();
  note_thread(s, this_tid());
  detail::g_enabled.store(true);
}

Trace stop() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!detail::g_enabled.load()) fail("profiler: stop() without start()");
  detail::g_enabled.store(false);
  Trace trace;
  trace.events = std::move(s.events);
  s.events = {};
  s.live.clear();
  // Ranges are recorded when they end (a Loop after its body ops): order by start, outer first.
  std::stable_sort(trace.events.begin(), trace.events.end(), [](const Event& a, const Event& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.depth < b.depth;
  });
  for (const auto& [tid, name] : s.threads) trace.threads.emplace_back(tid, name);
  trace.summary = summarize(trace.events);
  return trace;
}

ScopedProfile::ScopedProfile(Trace* out) : out_(out) { start(); }

ScopedProfile::~ScopedProfile() {
  if (!active_) return;
  Trace t = profiler::stop();
  if (out_) *out_ = std::move(t);
}

Trace ScopedProfile::stop() {
  if (!active_) fail("profiler: ScopedProfile already stopped");
  active_ = false;
  return profiler::stop();
}

namespace detail {

Range::~Range() {
  if (active_) t_depth = depth_;  // left by an exception: restore the nesting depth, record nothing
}

void Range::begin() {
  start_ns_ = now_ns(state());
  depth_ = t_depth++;
  active_ = true;
}

namespace {

void push_range(Event&& e) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!g_enabled.load(std::memory_order_relaxed)) return;  // stopped while the range ran
  e.end_ns = now_ns(s);
  e.tid = this_tid();
  note_thread(s, e.tid);
  s.events.push_back(std::move(e));
}

}  // namespace

void Range::end_op(const std::string& node_name, const std::string& domain, const std::string& op_type,
                   std::string_view backend, const std::vector<const Value*>& inputs) {
  active_ = false;
  t_depth = depth_;
  Event e;
  e.kind = EventKind::Op;
  e.op_type = domain.empty() ? op_type : domain + "." + op_type;
  e.name = node_name.empty() ? e.op_type : node_name;
  e.backend = backend;
  e.start_ns = start_ns_;
  e.depth = depth_;
  e.inputs.reserve(inputs.size());
  for (const Value* v : inputs) {
    TensorDesc d;
    if (v && v->kind == Value::Kind::Tensor) {
      d.dtype = v->tensor.dtype();
      d.shape.assign(v->tensor.shape().begin(), v->tensor.shape().end());
    } else {
      d.kind = v && v->kind == Value::Kind::Sequence ? TensorDesc::Kind::Sequence : TensorDesc::Kind::None;
    }
    e.inputs.push_back(std::move(d));
  }
  push_range(std::move(e));
}

void Range::end_session(const std::string& model_name) {
  active_ = false;
  t_depth = depth_;
  Event e;
  e.kind = EventKind::SessionRun;
  e.name = model_name;
  e.backend = "cpu";
  e.start_ns = start_ns_;
  e.depth = depth_;
  push_range(std::move(e));
}

void record_alloc(const void* ptr, size_t bytes, int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  s.live[ptr] = int64_t(bytes);
  s.live_bytes += int64_t(bytes);
  Event e;
  e.kind = EventKind::Alloc;
  e.start_ns = e.end_ns = now_ns(s);
  e.tid = this_tid();
  note_thread(s, e.tid);
  e.depth = t_depth;
  e.bytes = int64_t(bytes);
  e.live_bytes = s.live_bytes;
  e.device = device;
  s.events.push_back(std::move(e));
}

void record_free(const void* ptr) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  auto it = s.live.find(ptr);
  if (it == s.live.end()) return;  // allocated before the profile started: not ours to count
  Event e;
  e.kind = EventKind::Free;
  e.bytes = it->second;
  s.live.erase(it);
  s.live_bytes -= e.bytes;
  e.start_ns = e.end_ns = now_ns(s);
  e.tid = this_tid();
  note_thread(s, e.tid);
  e.depth = t_depth;
  e.live_bytes = s.live_bytes;
  s.events.push_back(std::move(e));
}

}  // namespace detail

}  // namespace ingot::profiler
