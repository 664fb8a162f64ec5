// Recording: one process-wide buffer behind a mutex. Nodes run one at a time (kernels parallelize
// inside), so the lock is uncontended; allocations from worker threads take it too. Recording is kept
// cheap (~0.05 us per op event; docs/PROFILING.md): a fixed-size Record per event, input shapes appended
// to one int64 arena, nodes interned by pointer (their strings copied once per profile), and free()s
// matched with allocations only at stop(). stop() builds the public Events from that.
#include <ingot/error.h>
#include <ingot/profiler.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/strings.h"
#include "graph/graph.h"
#include "ops/kernel.h"
#include "profiler/hooks.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace ingot::profiler {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

// One recorded event, in a form that is cheap to write (56 bytes, no pointers to own); stop() turns
// it into an Event.
struct Record {
  int64_t start = 0, end = 0;  // clock ticks (now_ticks()); end == start for Alloc/Free
  union {
    uint64_t inputs = 0;  // Op: where its n_inputs inputs are encoded in State::shapes
    const void* ptr;      // Alloc/Free: the storage
  };
  int64_t bytes = 0;      // Alloc
  uint32_t name = 0;      // Op: index into State::nodes; SessionRun: index into State::run_names
  uint32_t n_inputs = 0;  // Op
  uint32_t tid = 0;
  int depth = 0;
  int16_t device = 0;
  EventKind kind = EventKind::Op;
  uint8_t backend = 0;  // Op/SessionRun: index into State::backends
};
static_assert(sizeof(Record) == 56);

struct NodeNames {
  std::string name, op_type;
};

// Arena encoding of one op input: a header word, then `rank` dims.
int64_t input_header(TensorDesc::Kind kind, DType dtype, size_t rank) {
  return int64_t(kind) | int64_t(dtype) << 8 | int64_t(rank) << 16;
}

struct State {
  std::mutex mutex;
  std::vector<Record> records;
  std::vector<int64_t> shapes;                         // op input headers and dims (Record::inputs)
  std::unordered_map<const Node*, uint32_t> node_ids;  // nodes seen in this profile -> index in `nodes`
  std::vector<NodeNames> nodes;
  std::vector<std::string> run_names;      // model names of SessionRun records
  std::vector<std::string_view> backends;  // static strings ("cpu")
  std::chrono::steady_clock::time_point origin;
  int64_t origin_ticks = 0;  // now_ticks() at `origin`
  std::map<uint32_t, std::string> threads;
  uint64_t generation = 0;  // bumped by start(): threads note their name once per profile
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

// The clock events are timed with: the CPU's time-stamp counter where it ticks at a constant rate
// (invariant TSC: ~10 ns to read, against ~24 ns for steady_clock::now() through the vDSO, and an op
// event reads the clock twice), converted to steady-clock ns at stop() by the ticks per ns measured
// between start() and stop(); steady_clock ns elsewhere.
bool has_invariant_tsc() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d)) return (d >> 8) & 1;
#endif
  return false;
}

const bool g_use_tsc = has_invariant_tsc();

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t now_ticks() {
#if defined(__x86_64__)
  if (g_use_tsc) return int64_t(__rdtsc());
#endif
  return steady_ns();
}

// Maps clock ticks to ns since start(). Built at stop().
struct TickConverter {
  int64_t origin_ticks = 0;
  double ns_per_tick = 1;
  int64_t operator()(int64_t ticks) const { return std::llround(double(ticks - origin_ticks) * ns_per_tick); }
};

thread_local uint64_t t_noted_generation = 0;

// Called with the lock held.
void note_thread(State& s, uint32_t tid) {
  if (t_noted_generation == s.generation) return;
  t_noted_generation = s.generation;
  if (!s.threads.count(tid)) s.threads[tid] = s.threads.empty() ? "main" : "thread " + std::to_string(tid);
}

// Turns the records into Events, in start order (outer ranges first): names and shapes looked up,
// frees matched with allocations.
std::vector<Event> build_events(const State& s, const TickConverter& to_ns) {
  const std::vector<Record>& records = s.records;
  // Frees matched with allocations and live bytes after each, in record order (which is time order:
  // the lock is held while the clock is read). A free of a storage allocated before start() gets
  // bytes -1 and is dropped: not ours to count.
  std::vector<int64_t> bytes(records.size()), live_after(records.size());
  std::unordered_map<const void*, int64_t> live;  // storages allocated while profiling -> bytes
  int64_t live_bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (r.kind == EventKind::Alloc) {
      live[r.ptr] = r.bytes;
      live_bytes += r.bytes;
      bytes[i] = r.bytes;
    } else if (r.kind == EventKind::Free) {
      auto it = live.find(r.ptr);
      if (it == live.end()) {
        bytes[i] = -1;
        continue;
      }
      bytes[i] = it->second;
      live.erase(it);
      live_bytes -= bytes[i];
    }
    live_after[i] = live_bytes;
  }
  // Ranges are recorded when they end (a Loop after its body ops): order by start, outer first.
  std::vector<uint32_t> order(records.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    int64_t a_ns = to_ns(records[a].start), b_ns = to_ns(records[b].start);
    if (a_ns != b_ns) return a_ns < b_ns;
    return records[a].depth < records[b].depth;
  });
  std::vector<Event> events;
  events.reserve(records.size());
  for (uint32_t i : order) {
    const Record& r = records[i];
    if (r.kind == EventKind::Free && bytes[i] < 0) continue;
    Event e;
    e.kind = r.kind;
    e.start_ns = to_ns(r.start);
    e.end_ns = to_ns(r.end);
    e.tid = r.tid;
    e.depth = r.depth;
    switch (r.kind) {
      case EventKind::Op: {
        const NodeNames& node = s.nodes[r.name];
        e.name = node.name;
        e.op_type = node.op_type;
        e.backend = s.backends[r.backend];
        e.inputs.resize(r.n_inputs);
        const int64_t* p = s.shapes.data() + r.inputs;
        for (TensorDesc& d : e.inputs) {
          int64_t header = *p++;
          d.kind = TensorDesc::Kind(header & 0xff);
          d.dtype = DType((header >> 8) & 0xff);
          size_t rank = size_t(header >> 16);
          d.shape.assign(p, p + rank);
          p += rank;
        }
        break;
      }
      case EventKind::SessionRun:
        e.name = s.run_names[r.name];
        e.backend = s.backends[r.backend];
        break;
      case EventKind::Alloc:
      case EventKind::Free:
        e.bytes = bytes[i];
        e.live_bytes = live_after[i];
        e.device = r.device;
        break;
      default: break;
    }
    events.push_back(std::move(e));
  }
  return events;
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
  // Room for 64 k events and 128 k shape words (tens of runs of a model of a few hundred nodes)
  // before the buffers grow, written once here so that recording does not take the page faults of
  // fresh memory (measurably slower on small models). ~4.7 MB, ~1 ms.
  s.records.resize(1 << 16);
  s.records.clear();
  s.shapes.resize(1 << 17);
  s.shapes.clear();
  s.node_ids.clear();
  s.nodes.clear();
  s.run_names.clear();
  s.backends.clear();
  s.threads.clear();
  ++s.generation;
  s.origin = std::chrono::steady_clock::now();
  s.origin_ticks = now_ticks();
  note_thread(s, this_tid());
  detail::g_enabled.store(true);
}

Trace stop() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!detail::g_enabled.load()) fail("profiler: stop() without start()");
  detail::g_enabled.store(false);
  TickConverter to_ns{s.origin_ticks, 1.0};
  if (g_use_tsc) {
    int64_t ticks = now_ticks() - s.origin_ticks;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - s.origin);
    if (ticks > 0) to_ns.ns_per_tick = double(ns.count()) / double(ticks);
  }
  Trace trace;
  trace.events = build_events(s, to_ns);
  s.records = {};
  s.shapes = {};
  s.node_ids = {};
  s.nodes = {};
  s.run_names = {};
  s.backends = {};
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
  start_ticks_ = now_ticks();
  depth_ = t_depth++;
  active_ = true;
}

namespace {

// Called with the lock held.
uint8_t backend_index(State& s, std::string_view backend) {
  for (size_t i = 0; i < s.backends.size(); ++i) {
    if (s.backends[i].data() == backend.data() || s.backends[i] == backend) return uint8_t(i);
  }
  s.backends.push_back(backend);
  return uint8_t(s.backends.size() - 1);
}

// Appends a finished range's record (end time, thread) unless the profile stopped while it ran.
// Called with the lock held.
bool push_range(State& s, Record& r) {
  if (!g_enabled.load(std::memory_order_relaxed)) return false;
  r.end = now_ticks();
  r.tid = this_tid();
  note_thread(s, r.tid);
  s.records.push_back(r);
  return true;
}

}  // namespace

void Range::end_op(const Node& node, std::string_view backend, const std::vector<const Value*>& inputs) {
  active_ = false;
  t_depth = depth_;
  Record r;
  r.kind = EventKind::Op;
  r.start = start_ticks_;
  r.depth = depth_;
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto [it, added] = s.node_ids.try_emplace(&node, uint32_t(s.nodes.size()));
  if (added) {
    std::string op_type = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
    std::string name = node.name.empty() ? op_type : node.name;
    s.nodes.push_back({std::move(name), std::move(op_type)});
  }
  r.name = it->second;
  r.backend = backend_index(s, backend);
  r.inputs = s.shapes.size();
  r.n_inputs = uint32_t(inputs.size());
  if (!push_range(s, r)) return;
  for (const Value* v : inputs) {
    if (v && v->kind == Value::Kind::Tensor) {
      const auto& shape = v->tensor.shape();
      s.shapes.push_back(input_header(TensorDesc::Kind::Tensor, v->tensor.dtype(), shape.size()));
      s.shapes.insert(s.shapes.end(), shape.begin(), shape.end());
    } else {
      auto kind = v && v->kind == Value::Kind::Sequence ? TensorDesc::Kind::Sequence : TensorDesc::Kind::None;
      s.shapes.push_back(input_header(kind, DType::Undefined, 0));
    }
  }
}

void Range::end_session(const std::string& model_name) {
  active_ = false;
  t_depth = depth_;
  Record r;
  r.kind = EventKind::SessionRun;
  r.start = start_ticks_;
  r.depth = depth_;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.run_names.empty() || s.run_names.back() != model_name) s.run_names.push_back(model_name);
  r.name = uint32_t(s.run_names.size() - 1);
  r.backend = backend_index(s, "cpu");
  push_range(s, r);
}

void forget_nodes() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.node_ids.clear();  // the copied names stay in `nodes` for the records that use them
}

namespace {

// An instant Alloc/Free record. Called with the lock held.
void push_instant(State& s, EventKind kind, const void* ptr, int64_t bytes, int16_t device) {
  Record r;
  r.kind = kind;
  r.ptr = ptr;
  r.bytes = bytes;
  r.device = device;
  r.start = r.end = now_ticks();
  r.tid = this_tid();
  note_thread(s, r.tid);
  r.depth = t_depth;
  s.records.push_back(r);
}

}  // namespace

void record_alloc(const void* ptr, size_t bytes, int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  push_instant(s, EventKind::Alloc, ptr, int64_t(bytes), int16_t(device));
}

void record_free(const void* ptr) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  push_instant(s, EventKind::Free, ptr, 0, 0);  // matched with its allocation (or dropped) by stop()
}

}  // namespace detail

}  // namespace ingot::profiler
