// Recording: one process-wide buffer behind a lock. Nodes run one at a time (kernels parallelize
// inside), so the lock is uncontended; allocations from worker threads take it too. Recording is kept
// cheap (~0.05 us per op event; docs/PROFILING.md): a fixed-size Record per event in blocks that never
// move, input shapes appended to one int64 arena, nodes interned once per profile (found through the
// caller's NodeCache, else by pointer), and free()s matched with allocations only at stop(). stop()
// builds the public Events from that.
#include <ingot/error.h>
#include <ingot/profiler.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <array>
#include <atomic>
#include <mutex>
#include <thread>
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
std::atomic<bool> g_op_hooks{false};
}  // namespace detail

namespace {

// One recorded event, in a form that is cheap to write (56 bytes, no pointers to own); stop() turns
// it into an Event.
struct Record {
  int64_t start = 0, end = 0;  // clock ticks (now_ticks()); end == start for Alloc/Free
  union {
    uint64_t inputs = 0;  // Op: where its n_inputs inputs are encoded in State::shapes
    const void* ptr;      // Alloc/Free: the storage
    int64_t token;        // Copy: the device timer's token (-1: none)
  };
  int64_t bytes = 0;      // Alloc, Copy; Op: the device timer's token (-1: none)
  uint32_t name = 0;      // Op: index into State::nodes; SessionRun: into State::run_names; Copy: value id
  uint32_t n_inputs = 0;  // Op
  uint32_t tid = 0;
  int depth = 0;
  int16_t device = 0;
  EventKind kind = EventKind::Op;
  uint8_t backend = 0;  // Op/SessionRun: index into State::backends; Copy: the CopyKind
  uint8_t flags = 0;    // kFallback...
};
static_assert(sizeof(Record) == 56);

constexpr uint8_t kFallbackOp = 1;    // Op: a fallback node
constexpr uint8_t kForFallback = 2;   // Copy: for a fallback node's input
constexpr uint8_t kFromFallback = 4;  // Copy: of a fallback node's output
constexpr uint32_t kNoValue = UINT32_MAX;

struct NodeNames {
  std::string name, op_type;
  std::vector<uint32_t> outputs;  // value ids, interned for fallback nodes
  bool outputs_interned = false;
};

const detail::DeviceTimer* g_timer = nullptr;
bool g_nvtx_always = false;

// Arena encoding of one op input: a header word, then `rank` dims.
int64_t input_header(TensorDesc::Kind kind, DType dtype, size_t rank) {
  return int64_t(kind) | int64_t(dtype) << 8 | int64_t(rank) << 16;
}

// The recording lock: taken once per event, almost always uncontended (nodes run one at a time;
// worker threads only record allocations), so a test-and-set spin lock (one atomic exchange to
// take, a store to release) instead of a pthread mutex; a waiter that spins long yields.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; flag_.exchange(true, std::memory_order_acquire); ++spins) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
        } else {
#if defined(__x86_64__)
          _mm_pause();
#endif
        }
      }
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

// The records of a profile, in blocks of kBlock: appending never moves what was recorded. (A
// vector that doubles copies everything recorded so far and then takes the page faults of its new
// memory: 2 M op events of one profile cost ~200 ns each that way, ~33 once the memory is there.)
class RecordLog {
 public:
  static constexpr size_t kBlock = size_t(1) << 14;  // 16 k records, 896 KiB

  // Empties the log and allocates `blocks` blocks up front (their records constructed: the pages
  // are written now rather than while recording).
  void reset(size_t blocks) {
    release();
    for (size_t i = 0; i < blocks; ++i) blocks_.emplace_back(new Record[kBlock]);
  }
  void release() {
    blocks_.clear();
    blocks_.shrink_to_fit();
    size_ = 0;
  }
  void push_back(const Record& r) {
    if (size_ == blocks_.size() * kBlock) blocks_.emplace_back(new Record[kBlock]);
    blocks_[size_ / kBlock][size_ % kBlock] = r;
    ++size_;
  }
  size_t size() const { return size_; }
  const Record& operator[](size_t i) const { return blocks_[i / kBlock][i % kBlock]; }

 private:
  std::vector<std::unique_ptr<Record[]>> blocks_;
  size_t size_ = 0;
};

// A direct-mapped front of State::node_ids for callers that keep no NodeCache: a profile looks the
// same few hundred nodes up run after run, and a slot compare is cheaper than the hash map's
// bucket walk.
struct NodeSlot {
  const Node* node = nullptr;
  detail::NodeCache cache;
};
constexpr size_t kNodeSlots = 1024;
size_t node_slot(const Node* node) { return size_t((uintptr_t(node) * 0x9E3779B97F4A7C15ull) >> 54) % kNodeSlots; }

struct State {
  SpinLock mutex;
  RecordLog records;
  std::vector<int64_t> shapes;                         // op input headers and dims (Record::inputs)
  std::unordered_map<const Node*, uint32_t> node_ids;  // nodes seen in this profile -> index in `nodes`
  std::array<NodeSlot, kNodeSlots> node_cache{};        // cleared with node_ids
  std::vector<NodeNames> nodes;
  std::vector<std::string> run_names;      // model names of SessionRun records
  std::vector<std::string_view> backends;  // static strings ("cpu")
  // Graph value names (copies, fallback outputs), interned; and per executor name -> slot table
  // (by address, dropped by forget_nodes()), each slot's value id.
  std::unordered_map<std::string, uint32_t> value_ids;
  std::vector<std::string> value_names;
  std::unordered_map<const void*, std::vector<uint32_t>> slot_tables;
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

std::string_view copy_name(uint8_t kind) {
  switch (detail::CopyKind(kind)) {
    case detail::CopyKind::HostToDevice: return "copy H2D";
    case detail::CopyKind::DeviceToHost: return "copy D2H";
    case detail::CopyKind::DeviceToDevice: return "copy D2D";
  }
  return "copy";
}

// Outer ranges first among ranges starting together: a session, then a fallback, then its op.
int kind_rank(const Event& e) { return e.kind == EventKind::SessionRun ? 0 : e.kind == EventKind::Fallback ? 1 : 2; }

// Turns the records into Events, in start order (outer ranges first): names and shapes looked up,
// frees matched with allocations, copies attributed to fallbacks, device markers resolved into
// device-track events.
std::vector<Event> build_events(const State& s, const TickConverter& to_ns) {
  const RecordLog& records = s.records;
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
  // In record order (ranges are recorded when they end): copies for a fallback's inputs come just
  // before its op record on the same thread; copies of its outputs come later, naming the value.
  std::vector<Event> events;
  events.reserve(records.size() + records.size() / 4);
  std::unordered_map<uint32_t, std::vector<size_t>> pending;  // tid -> copies for the next fallback
  std::unordered_map<uint32_t, size_t> fallback_of_value;     // value id -> its fallback's event
  std::vector<std::pair<int64_t, size_t>> device_spans;       // device token -> host event
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (r.kind == EventKind::Free && bytes[i] < 0) continue;
    Event e;
    e.kind = r.kind;
    e.start_ns = to_ns(r.start);
    e.end_ns = to_ns(r.end);
    e.tid = r.tid;
    e.depth = r.depth;
    int64_t token = -1;
    switch (r.kind) {
      case EventKind::Op: {
        const NodeNames& node = s.nodes[r.name];
        e.name = node.name;
        e.op_type = node.op_type;
        e.backend = s.backends[r.backend];
        e.device = r.device;
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
        token = r.bytes;
        if (r.flags & kFallbackOp) {
          Event f;
          f.kind = EventKind::Fallback;
          f.name = e.name;
          f.op_type = e.op_type;
          f.backend = e.backend;
          f.start_ns = e.start_ns;
          f.end_ns = e.end_ns;
          f.tid = e.tid;
          f.depth = e.depth;
          size_t index = events.size() + 1;  // after the op, pushed below
          if (auto it = pending.find(r.tid); it != pending.end()) {
            for (size_t c : it->second) {
              f.start_ns = std::min(f.start_ns, events[c].start_ns);
              f.bytes += events[c].bytes;
              events[c].fallback = f.name;
            }
            it->second.clear();
          }
          for (uint32_t v : node.outputs) fallback_of_value[v] = index;
          if (token >= 0) device_spans.emplace_back(token, events.size());
          events.push_back(std::move(e));
          events.push_back(std::move(f));
          continue;
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
      case EventKind::Copy: {
        e.name = copy_name(r.backend);
        e.backend = g_timer ? g_timer->backend : "";
        e.tid = kCopiesTrack;
        e.depth = 0;
        e.bytes = r.bytes;
        e.device = r.device;
        e.blocking = detail::CopyKind(r.backend) == detail::CopyKind::DeviceToHost;
        if (r.name != kNoValue) e.value = s.value_names[r.name];
        token = r.token;
        if (r.flags & kForFallback) pending[r.tid].push_back(events.size());
        if (r.flags & kFromFallback) {
          if (auto it = fallback_of_value.find(r.name); r.name != kNoValue && it != fallback_of_value.end()) {
            events[it->second].bytes += e.bytes;
            e.fallback = events[it->second].name;
          }
        }
        break;
      }
      default: break;
    }
    if (token >= 0) device_spans.emplace_back(token, events.size());
    events.push_back(std::move(e));
  }
  // Device-timed events: the markers' times after their device's reference, placed on the host
  // clock at the reference's host time. Kept in stream (token) order and non-overlapping (the
  // elapsed times are floats in ms: rounding must not make one kernel start before the last ended).
  if (g_timer && !device_spans.empty()) {
    std::sort(device_spans.begin(), device_spans.end());
    std::map<int, int64_t> last_end;  // device -> end of its last event
    for (auto [token, index] : device_spans) {
      int64_t ref_ticks = 0, start_ns = 0, end_ns = 0;
      int device = 0;
      if (!g_timer->resolve(token, &ref_ticks, &start_ns, &end_ns, &device)) continue;
      Event d = events[index];
      d.kind = d.kind == EventKind::Copy ? EventKind::Copy : EventKind::Op;
      d.backend = g_timer->backend;
      d.start_ns = to_ns(ref_ticks) + start_ns;
      d.end_ns = to_ns(ref_ticks) + end_ns;
      if (auto it = last_end.find(device); it != last_end.end()) d.start_ns = std::max(d.start_ns, it->second);
      d.end_ns = std::max(d.end_ns, d.start_ns);
      last_end[device] = d.end_ns;
      d.tid = device_track(device);
      d.device = device;
      d.stream = 1;
      d.depth = 0;
      events.push_back(std::move(d));
    }
  }
  std::vector<uint32_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Event &x = events[a], &y = events[b];
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.depth != y.depth) return x.depth < y.depth;
    return kind_rank(x) < kind_rank(y);
  });
  std::vector<Event> sorted;
  sorted.reserve(events.size());
  for (uint32_t i : order) sorted.push_back(std::move(events[i]));
  return sorted;
}

}  // namespace

Summary summarize(const std::vector<Event>& events) {
  Summary sum;
  std::map<std::string, OpStats> by_type;
  std::map<std::string, FallbackStats> fallbacks;
  int64_t live = 0;
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::Op: {
        OpStats& st = by_type[e.op_type];
        st.op_type = e.op_type;
        if (e.on_device()) {
          ++st.device_count;
          st.device_ms += e.duration_ms();
          ++sum.device_events;
          sum.device_ms += e.duration_ms();
          break;
        }
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
      case EventKind::Copy: {
        if (e.on_device()) {
          sum.copy_device_ms += e.duration_ms();
          break;
        }
        ++sum.copy_count;
        sum.copy_bytes += e.bytes;
        sum.copy_ms += e.duration_ms();
        std::string_view name = e.name;
        if (name.ends_with("H2D")) {
          sum.h2d_bytes += e.bytes;
        } else if (name.ends_with("D2H")) {
          sum.d2h_bytes += e.bytes;
        } else {
          sum.d2d_bytes += e.bytes;
        }
        break;
      }
      case EventKind::Fallback: {
        FallbackStats& f = fallbacks[e.op_type];
        f.op_type = e.op_type;
        ++f.count;
        f.bytes += e.bytes;
        f.total_ms += e.duration_ms();
        if (std::find(f.nodes.begin(), f.nodes.end(), e.name) == f.nodes.end()) f.nodes.push_back(e.name);
        ++sum.fallback_count;
        sum.fallback_bytes += e.bytes;
        sum.fallback_ms += e.duration_ms();
        break;
      }
    }
  }
  // Shares are of top-level op time: an If's body ops are already inside the If's own duration.
  int min_depth = INT32_MAX;
  for (const Event& e : events) {
    if (e.kind == EventKind::Op && !e.on_device()) min_depth = std::min(min_depth, e.depth);
  }
  for (const Event& e : events) {
    if (e.kind == EventKind::Op && !e.on_device() && e.depth == min_depth) sum.op_ms += e.duration_ms();
  }
  for (auto& [type, st] : by_type) {
    st.mean_ms = st.count > 0 ? st.total_ms / double(st.count) : 0;
    st.share = sum.op_ms > 0 ? st.total_ms / sum.op_ms : 0;
    sum.ops.push_back(st);
  }
  std::stable_sort(sum.ops.begin(), sum.ops.end(),
                   [](const OpStats& a, const OpStats& b) { return a.total_ms > b.total_ms; });
  for (auto& [type, f] : fallbacks) sum.fallbacks.push_back(std::move(f));
  std::stable_sort(sum.fallbacks.begin(), sum.fallbacks.end(),
                   [](const FallbackStats& a, const FallbackStats& b) { return a.total_ms > b.total_ms; });
  return sum;
}

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
  s.records.reset(4);
  s.shapes.resize(1 << 17);
  s.shapes.clear();
  s.node_ids.clear();
  s.node_cache = {};
  s.nodes.clear();
  s.run_names.clear();
  s.backends.clear();
  s.value_ids.clear();
  s.value_names.clear();
  s.slot_tables.clear();
  s.threads.clear();
  if (g_timer) g_timer->reset();
  ++s.generation;
  s.origin = std::chrono::steady_clock::now();
  s.origin_ticks = now_ticks();
  note_thread(s, this_tid());
  detail::g_enabled.store(true);
  detail::g_op_hooks.store(true);
}

Trace stop() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!detail::g_enabled.load()) fail("profiler: stop() without start()");
  detail::g_enabled.store(false);
  detail::g_op_hooks.store(g_nvtx_always);
  TickConverter to_ns{s.origin_ticks, 1.0};
  if (g_use_tsc) {
    int64_t ticks = now_ticks() - s.origin_ticks;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - s.origin);
    if (ticks > 0) to_ns.ns_per_tick = double(ns.count()) / double(ticks);
  }
  Trace trace;
  trace.events = build_events(s, to_ns);  // waits for the device markers
  if (g_timer) g_timer->reset();
  s.records.release();
  s.shapes = {};
  s.node_ids = {};
  s.node_cache = {};
  s.nodes = {};
  s.run_names = {};
  s.backends = {};
  s.value_ids = {};
  s.value_names = {};
  s.slot_tables = {};
  for (const auto& [tid, name] : s.threads) trace.threads.emplace_back(tid, name);
  // The tracks that are not threads, after them: copies, then each device's stream.
  std::map<uint32_t, std::string> tracks;
  for (const Event& e : trace.events) {
    if (e.tid == kCopiesTrack) tracks.try_emplace(e.tid, "Copies");
    if (e.on_device()) tracks.try_emplace(e.tid, "GPU " + std::to_string(e.device) + " stream");
  }
  for (auto& [tid, name] : tracks) trace.threads.emplace_back(tid, std::move(name));
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

int64_t clock_ticks() { return now_ticks(); }

void register_device_timer(const DeviceTimer* timer, bool nvtx_always) {
  g_timer = timer;
  g_nvtx_always = nvtx_always && timer && timer->push_range;
  if (g_nvtx_always) g_op_hooks.store(true);
}

Range::~Range() {
  if (!active_) return;
  // Left by an exception: restore the nesting depth, close the NVTX range, record nothing.
  t_depth = depth_;
  if (device_token_ >= 0) g_timer->end(device_token_);
  if (nvtx_) g_timer->pop_range();
}

void Range::begin() {
  start_ticks_ = now_ticks();
  depth_ = t_depth++;
  active_ = true;
  recording_ = true;
}

void Range::begin_op(const Node& node, bool on_device) {
  recording_ = g_enabled.load(std::memory_order_relaxed);
  if (g_timer && g_timer->push_range && (recording_ || g_nvtx_always)) {
    thread_local std::string label;  // reused: no allocation per op once it has grown
    label.assign(node.name.empty() ? node.op_type : node.name);
    label.append(" (").append(node.op_type).append(")");
    g_timer->push_range(label.c_str());
    nvtx_ = true;
  }
  depth_ = t_depth++;
  active_ = true;
  if (!recording_) return;
  if (on_device && g_timer) device_token_ = g_timer->begin();  // the first of a profile waits: not op time
  start_ticks_ = now_ticks();
}

void Range::begin_copy(bool on_device) {
  depth_ = t_depth;  // copies do not nest
  active_ = true;
  recording_ = true;
  if (on_device && g_timer) device_token_ = g_timer->begin();
  start_ticks_ = now_ticks();
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

// Called with the lock held.
uint32_t value_id(State& s, const std::string& name) {
  auto [it, added] = s.value_ids.try_emplace(name, uint32_t(s.value_names.size()));
  if (added) s.value_names.push_back(name);
  return it->second;
}

// The header word of one op input in State::shapes (its dims follow for a tensor).
int64_t input_word(const Value* v) {
  if (v && v->kind == Value::Kind::Tensor) {
    return input_header(TensorDesc::Kind::Tensor, v->tensor.dtype(), v->tensor.shape().size());
  }
  auto kind = v && v->kind == Value::Kind::Sequence ? TensorDesc::Kind::Sequence : TensorDesc::Kind::None;
  return input_header(kind, DType::Undefined, 0);
}

// Whether `inputs` are encoded at shapes[at...] (a node's previous record).
bool same_inputs(const std::vector<int64_t>& shapes, uint64_t at, const std::vector<const Value*>& inputs) {
  size_t i = size_t(at);
  for (const Value* v : inputs) {
    if (i >= shapes.size() || shapes[i++] != input_word(v)) return false;
    if (v && v->kind == Value::Kind::Tensor) {
      const auto& shape = v->tensor.shape();
      if (i + shape.size() > shapes.size() || !std::equal(shape.begin(), shape.end(), shapes.begin() + ptrdiff_t(i)))
        return false;
      i += shape.size();
    }
  }
  return true;
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

void Range::end_op(const Node& node, std::string_view backend, const std::vector<const Value*>& inputs,
                   bool fallback, NodeCache* cache) {
  active_ = false;
  t_depth = depth_;
  if (device_token_ >= 0) g_timer->end(device_token_);
  if (nvtx_) {
    g_timer->pop_range();
    nvtx_ = false;
  }
  if (!recording_) return;
  Record r;
  r.kind = EventKind::Op;
  r.start = start_ticks_;
  r.depth = depth_;
  r.bytes = device_token_;
  r.flags = fallback ? kFallbackOp : 0;
  State& s = state();
  std::lock_guard lock(s.mutex);
  NodeCache* c = cache;
  if (!c) {
    NodeSlot& slot = s.node_cache[node_slot(&node)];
    if (slot.node != &node) slot = {&node, {}};
    c = &slot.cache;
  }
  if (c->generation != s.generation) {
    auto [it, added] = s.node_ids.try_emplace(&node, uint32_t(s.nodes.size()));
    if (added) {
      std::string op_type = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
      std::string name = node.name.empty() ? op_type : node.name;
      s.nodes.push_back({std::move(name), std::move(op_type), {}, false});
    }
    *c = {s.generation, it->second, UINT64_MAX};
  }
  const uint32_t node_id = c->id;
  if (fallback && !s.nodes[node_id].outputs_interned) {
    NodeNames& names = s.nodes[node_id];
    names.outputs_interned = true;
    for (const std::string& out : node.outputs) {
      if (!out.empty()) names.outputs.push_back(value_id(s, out));
    }
  }
  r.name = node_id;
  r.backend = backend_index(s, backend);
  r.n_inputs = uint32_t(inputs.size());
  const bool same = c->last_inputs != UINT64_MAX && same_inputs(s.shapes, c->last_inputs, inputs);
  r.inputs = same ? c->last_inputs : s.shapes.size();
  if (!push_range(s, r) || same) return;
  c->last_inputs = r.inputs;
  for (const Value* v : inputs) {
    const int64_t header = input_word(v);
    s.shapes.push_back(header);
    if (v && v->kind == Value::Kind::Tensor) {
      const auto& shape = v->tensor.shape();
      s.shapes.insert(s.shapes.end(), shape.begin(), shape.end());
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

void Range::end_copy(CopyKind kind, int64_t bytes, int device, const std::unordered_map<std::string, int>* slots,
                     int slot, bool for_fallback, bool from_fallback) {
  active_ = false;
  if (device_token_ >= 0) g_timer->end(device_token_);
  Record r;
  r.kind = EventKind::Copy;
  r.start = start_ticks_;
  r.depth = depth_;
  r.token = device_token_;
  r.bytes = bytes;
  r.device = int16_t(device);
  r.backend = uint8_t(kind);
  r.flags = uint8_t((for_fallback ? kForFallback : 0) | (from_fallback ? kFromFallback : 0));
  r.name = kNoValue;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (slots && slot >= 0) {
    // The executor's name -> slot table, inverted once per profile into value ids.
    std::vector<uint32_t>& table = s.slot_tables[slots];
    if (table.empty()) {
      int n = 0;
      for (const auto& [name, sl] : *slots) n = std::max(n, sl + 1);
      table.assign(size_t(n), kNoValue);
      for (const auto& [name, sl] : *slots) {
        if (sl >= 0) table[size_t(sl)] = value_id(s, name);
      }
    }
    if (size_t(slot) < table.size()) r.name = table[size_t(slot)];
  }
  push_range(s, r);
}

void forget_nodes() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.node_ids.clear();  // the copied names stay in `nodes` for the records that use them
  s.node_cache = {};
  s.slot_tables.clear();
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
