// Recording: each thread appends to a log of its own (ThreadLog), without a lock or any atomic
// read-modify-write: a locked instruction is a full barrier that waits for the stores of the kernel
// that just ran, which cost Silero VAD ~3.5% of its run on the CPU (docs/PROFILING.md). What a thread
// writes stays its own until stop(), which turns the profiler off and then waits until no thread is
// inside a write (ThreadLog::busy; made visible to it by one membarrier() system call instead of a
// fence in every write, see WriteSection). A record is a fixed-size Record in blocks that never move;
// op input shapes go to the thread's int64 arena; nodes, backends and names are interned once per
// profile in State under a mutex (found again through the caller's NodeCache); free()s are matched
// with allocations only at stop(), which merges the threads' logs in time order and builds the public
// Events.
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

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/backend.h"
#include "core/flags.h"
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

// One recorded event, in a form that is cheap to write (48 bytes, no pointers to own); stop() turns
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
  int16_t depth = 0;      // (the thread is its log's)
  int16_t device = 0;
  EventKind kind = EventKind::Op;
  uint8_t backend = 0;  // Op/SessionRun: index into State::backends; Copy: the CopyKind
  uint8_t flags = 0;    // kFallback...
};
static_assert(sizeof(Record) == 48);

constexpr uint8_t kFallbackOp = 1;    // Op: a fallback node
constexpr uint8_t kForFallback = 2;   // Copy: for a fallback node's input
constexpr uint8_t kFromFallback = 4;  // Copy: of a fallback node's output
constexpr uint32_t kNoValue = UINT32_MAX;

struct NodeNames {
  std::string name, op_type;
  std::vector<uint32_t> outputs;  // value ids, interned for fallback nodes
  bool outputs_interned = false;
};

// The accelerator backend's device timer (core/device_timer.h), looked up once, at first use (after
// every backend registered at static initialization).
struct DeviceTiming {
  const DeviceTimer* timer = nullptr;
  std::string_view backend;  // its backend's name, for device events
  bool nvtx = false;         // it pushes NVTX ranges
  bool nvtx_always = false;  // ... around every op, profiling or not (INGOT_NVTX=1)
};
const DeviceTiming& device_timing() {
  static const DeviceTiming timing = [] {
    for (Backend* b : backends()) {
      if (const DeviceTimer* t = b->timer()) {
        bool nvtx = t->push_range != nullptr;
        return DeviceTiming{t, b->name(), nvtx, nvtx && flags::enabled("INGOT_NVTX")};
      }
    }
    return DeviceTiming{};
  }();
  return timing;
}
// INGOT_NVTX=1: the executor's op hooks are on from the start, for NVTX ranges without a profile.
const bool g_nvtx_hooks = [] {
  if (flags::enabled("INGOT_NVTX")) detail::g_op_hooks.store(true);
  return true;
}();

// Arena encoding of one op input: a header word, then `rank` dims.
int64_t input_header(TensorDesc::Kind kind, DType dtype, size_t rank) {
  return int64_t(kind) | int64_t(dtype) << 8 | int64_t(rank) << 16;
}

// The records of a profile, in blocks of kBlock: appending never moves what was recorded. (A
// vector that doubles copies everything recorded so far and then takes the page faults of its new
// memory: 2 M op events of one profile cost ~200 ns each that way, ~33 once the memory is there.)
class RecordLog {
 public:
  static constexpr size_t kBlock = size_t(1) << 14;  // 16 k records, 768 KiB
  static constexpr size_t kPrefetchAhead = 8;

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
  // The next record, to be filled in place.
  [[gnu::always_inline]] Record& append() {
    if (size_ == blocks_.size() * kBlock) [[unlikely]]
      grow();
    Record* r = &blocks_[size_ / kBlock][size_ % kBlock];
    // The records a few events ahead, fetched for writing now: a record's line is long out of the
    // cache (start() wrote it), and a store that waits for it stalls the kernels that follow once
    // the store queue fills (Silero VAD: ~25 ns per op event without this).
    if (size_ % kBlock + kPrefetchAhead < kBlock) __builtin_prefetch(r + kPrefetchAhead, 1, 3);
    ++size_;
    return *r;
  }
  size_t size() const { return size_; }
  const Record& operator[](size_t i) const { return blocks_[i / kBlock][i % kBlock]; }

 private:
  [[gnu::noinline]] void grow() { blocks_.emplace_back(new Record[kBlock]); }

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

// What one thread recorded in the current profile. Written only by its thread, inside a
// WriteSection; read and reset by start() and stop() only while no thread is inside one.
struct ThreadLog {
  std::atomic<int> busy{0};      // > 0: the thread is inside a WriteSection
  uint32_t tid = 0;              // its track in the trace
  bool exited = false;           // the thread ended (the log stays until the profile is collected)
  RecordLog records;
  std::vector<int64_t> shapes;   // op input headers and dims (Record::inputs)
  // The model name of this thread's last SessionRun record and its index in State::run_names.
  uint64_t run_generation = 0;
  std::string run_name;
  uint32_t run_name_id = 0;
  uint8_t run_backend = 0;
};

// Interned names and the threads' logs.
struct State {
  std::mutex mutex;  // the tables below; taken inside a WriteSection only on a profile's first sight of something
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
  uint64_t generation = 0;  // bumped by start() (NodeCaches of another profile are refilled)

  // Serializes start() and stop() and guards `logs` (never taken inside a WriteSection).
  std::mutex logs_mutex;
  std::vector<std::unique_ptr<ThreadLog>> logs;  // one per thread that ever recorded and has not ended
  uint32_t main_tid = 0;                          // the thread that called start()
  std::chrono::steady_clock::time_point origin;
  int64_t origin_ticks = 0;  // now_ticks() at `origin`
};

[[gnu::always_inline]] inline State& state() {
  static State s;
  return s;
}

std::atomic<uint32_t> g_next_tid{0};
thread_local int t_depth = 0;

// The calling thread's log, registered on first use. A thread that ends marks its log, which
// stop() collects and frees (the records of a thread that ended during a profile are kept).
thread_local ThreadLog* t_log = nullptr;

struct LogOwner {
  ~LogOwner() {
    if (!t_log) return;
    State& s = state();
    std::lock_guard lock(s.logs_mutex);
    t_log->exited = true;
    t_log = nullptr;
  }
};
thread_local LogOwner t_log_owner;

[[gnu::noinline]] ThreadLog& attach_log() {
  auto log = std::make_unique<ThreadLog>();
  log->tid = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  ThreadLog* raw = log.get();
  {
    State& s = state();
    std::lock_guard lock(s.logs_mutex);
    s.logs.push_back(std::move(log));
  }
  (void)&t_log_owner;  // constructs the owner, whose destructor runs at thread exit
  t_log = raw;
  return *raw;
}

ThreadLog& this_log() { return t_log ? *t_log : attach_log(); }

// Whether stop() can make writers' `busy` flags visible with one membarrier() (Linux >= 4.14):
// then a write needs only a compiler barrier between raising `busy` and reading `enabled`, not a
// fence. Decided by the first start(); without it every write pays a full fence.
std::atomic<bool> g_asymmetric_fence{false};

bool register_membarrier() {
#if defined(__linux__) && defined(SYS_membarrier)  // (the commands are enumerators, not macros)
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
  return false;
#endif
}

// Every thread of the process executes a full memory barrier before this returns.
void barrier_all_threads() {
#if defined(__linux__) && defined(SYS_membarrier)
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);  // (writers fence themselves then)
}

// A write to the calling thread's log: raises its `busy` flag and then checks that the profile is
// still on (Dekker's handshake with stop(), which lowers `enabled` and then waits for `busy`).
class WriteSection {
 public:
  [[gnu::always_inline]] WriteSection() : log_(this_log()) {
    // A counter, in case a write ever nests in another on one thread (only this thread changes it).
    log_.busy.store(log_.busy.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (g_asymmetric_fence.load(std::memory_order_relaxed)) {
      std::atomic_signal_fence(std::memory_order_seq_cst);  // stop()'s membarrier() orders it
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    on_ = detail::g_enabled.load(std::memory_order_acquire);
  }
  [[gnu::always_inline]] ~WriteSection() { log_.busy.store(log_.busy.load(std::memory_order_relaxed) - 1, std::memory_order_release); }
  WriteSection(const WriteSection&) = delete;
  WriteSection& operator=(const WriteSection&) = delete;

  bool on() const { return on_; }  // false: the profile stopped; write nothing
  ThreadLog& log() { return log_; }

 private:
  ThreadLog& log_;
  bool on_ = false;
};

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

// A record and the log it is in, in the merged order of all threads' logs.
struct LoggedRecord {
  const Record* record;
  const ThreadLog* log;
};

// The threads' records in one sequence ordered by the time they were written (a record is written
// when its range ends; each log is in that order already), ties in thread order.
std::vector<LoggedRecord> merge_logs(const std::vector<std::unique_ptr<ThreadLog>>& logs) {
  std::vector<LoggedRecord> merged;
  size_t total = 0;
  for (const auto& log : logs) total += log->records.size();
  merged.reserve(total);
  size_t nonempty = 0;
  for (const auto& log : logs) {
    for (size_t i = 0; i < log->records.size(); ++i) merged.push_back({&log->records[i], log.get()});
    nonempty += log->records.size() > 0;
  }
  if (nonempty > 1) {
    std::stable_sort(merged.begin(), merged.end(),
                     [](const LoggedRecord& a, const LoggedRecord& b) { return a.record->end < b.record->end; });
  }
  return merged;
}

// Turns the records into Events, in start order (outer ranges first): names and shapes looked up,
// frees matched with allocations, copies attributed to fallbacks, device markers resolved into
// device-track events.
std::vector<Event> build_events(const State& s, const std::vector<LoggedRecord>& records, const TickConverter& to_ns) {
  // Frees matched with allocations and live bytes after each, in time order. A free of a storage
  // allocated before start() gets bytes -1 and is dropped: not ours to count.
  std::vector<int64_t> bytes(records.size()), live_after(records.size());
  std::unordered_map<const void*, int64_t> live;  // storages allocated while profiling -> bytes
  int64_t live_bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = *records[i].record;
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
    const Record& r = *records[i].record;
    const uint32_t tid = records[i].log->tid;
    if (r.kind == EventKind::Free && bytes[i] < 0) continue;
    Event e;
    e.kind = r.kind;
    e.start_ns = to_ns(r.start);
    e.end_ns = to_ns(r.end);
    e.tid = tid;
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
        const int64_t* p = records[i].log->shapes.data() + r.inputs;
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
          if (auto it = pending.find(tid); it != pending.end()) {
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
      case EventKind::Phase:
        e.name = static_cast<const char*>(r.ptr);
        break;
      case EventKind::Alloc:
      case EventKind::Free:
        e.bytes = bytes[i];
        e.live_bytes = live_after[i];
        e.device = r.device;
        break;
      case EventKind::Copy: {
        e.name = copy_name(r.backend);
        e.backend = device_timing().backend;
        e.tid = kCopiesTrack;
        e.depth = 0;
        e.bytes = r.bytes;
        e.device = r.device;
        e.blocking = detail::CopyKind(r.backend) == detail::CopyKind::DeviceToHost;
        if (r.name != kNoValue) e.value = s.value_names[r.name];
        token = r.token;
        if (r.flags & kForFallback) pending[tid].push_back(events.size());
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
  if (const DeviceTimer* timer = device_timing().timer; timer && !device_spans.empty()) {
    std::sort(device_spans.begin(), device_spans.end());
    std::map<int, int64_t> last_end;  // device -> end of its last event
    for (auto [token, index] : device_spans) {
      int64_t ref_ticks = 0, start_ns = 0, end_ns = 0;
      int device = 0;
      if (!timer->resolve(token, &ref_ticks, &start_ns, &end_ns, &device)) continue;
      Event d = events[index];
      d.kind = d.kind == EventKind::Copy ? EventKind::Copy : EventKind::Op;
      d.backend = device_timing().backend;
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
      case EventKind::Phase: {
        auto it = std::find_if(sum.phases.begin(), sum.phases.end(), [&](const PhaseStats& p) { return p.name == e.name; });
        if (it == sum.phases.end()) {
          it = sum.phases.insert(sum.phases.end(), PhaseStats());
          it->name = e.name;
          it->first_start_ms = double(e.start_ns) * 1e-6;
        }
        ++it->count;
        it->total_ms += e.duration_ms();
        it->first_start_ms = std::min(it->first_start_ms, double(e.start_ns) * 1e-6);
        it->last_end_ms = std::max(it->last_end_ms, double(e.end_ns) * 1e-6);
        if (std::find(it->tids.begin(), it->tids.end(), e.tid) == it->tids.end()) it->tids.push_back(e.tid);
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
    case EventKind::Phase: return "phase";
  }
  return "?";
}

std::string TensorDesc::str() const {
  if (kind == Kind::Sequence) return "sequence";
  if (kind == Kind::None) return "none";
  return std::string(dtype_name(dtype)) + "[" + join(shape, ",") + "]";
}

namespace {

// The name tables of a profile, emptied (start()) or released (stop()). Called with State::mutex held.
void clear_tables(State& s) {
  s.node_ids = {};
  s.node_cache = {};
  s.nodes = {};
  s.run_names = {};
  s.backends = {};
  s.value_ids = {};
  s.value_names = {};
  s.slot_tables = {};
}

// Frees the logs of threads that ended and empties the others. Only while no thread writes (the
// profiler off, stop() having waited for the last writers); called with State::logs_mutex held.
void release_logs(State& s) {
  std::erase_if(s.logs, [](const std::unique_ptr<ThreadLog>& log) { return log->exited; });
  for (auto& log : s.logs) {
    log->records.release();
    log->shapes = {};
  }
}

}  // namespace

void start() {
  State& s = state();
  ThreadLog& mine = this_log();  // (registers this thread: before taking logs_mutex)
  std::lock_guard logs_lock(s.logs_mutex);
  if (detail::g_enabled.load()) fail("profiler: already started");
  static const bool asymmetric = register_membarrier();
  g_asymmetric_fence.store(asymmetric, std::memory_order_relaxed);
  {
    std::lock_guard lock(s.mutex);
    clear_tables(s);
    ++s.generation;
  }
  release_logs(s);
  // Room for 64 k events and 128 k shape words on this thread (tens of runs of a model of a few
  // hundred nodes) before its buffers grow, written once here so that recording does not take the
  // page faults of fresh memory (measurably slower on small models). ~4.7 MB, ~1 ms. Other threads'
  // logs (workers' allocations) start empty.
  mine.records.reset(4);
  mine.shapes.resize(1 << 17);
  mine.shapes.clear();
  s.main_tid = mine.tid;
  if (const DeviceTimer* timer = device_timing().timer) timer->reset();
  s.origin = std::chrono::steady_clock::now();
  s.origin_ticks = now_ticks();
  detail::g_enabled.store(true);  // (seq_cst: the logs above are ready before a writer sees it)
  detail::g_op_hooks.store(true);
}

Trace stop() {
  State& s = state();
  std::lock_guard logs_lock(s.logs_mutex);
  if (!detail::g_enabled.load()) fail("profiler: stop() without start()");
  detail::g_enabled.store(false);
  detail::g_op_hooks.store(device_timing().nvtx_always);
  // Every writer now either raised `busy` before it read `enabled` (and is waited for) or reads false.
  if (g_asymmetric_fence.load(std::memory_order_relaxed)) barrier_all_threads();
  for (const auto& log : s.logs) {
    while (log->busy.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  TickConverter to_ns{s.origin_ticks, 1.0};
  if (g_use_tsc) {
    int64_t ticks = now_ticks() - s.origin_ticks;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - s.origin);
    if (ticks > 0) to_ns.ns_per_tick = double(ns.count()) / double(ticks);
  }
  Trace trace;
  {
    std::lock_guard lock(s.mutex);
    trace.events = build_events(s, merge_logs(s.logs), to_ns);  // waits for the device markers
    clear_tables(s);
  }
  if (const DeviceTimer* timer = device_timing().timer) timer->reset();
  // Threads by track: the one that started the profile is "main", then every other that recorded.
  std::map<uint32_t, std::string> threads{{s.main_tid, "main"}};
  for (const auto& log : s.logs) {
    if (log->records.size() > 0) threads.try_emplace(log->tid, "thread " + std::to_string(log->tid));
  }
  release_logs(s);
  for (auto& [tid, name] : threads) trace.threads.emplace_back(tid, std::move(name));
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

Range::~Range() {
  if (!active_) return;
  // Left by an exception: restore the nesting depth, close the NVTX range, record nothing.
  t_depth = depth_;
  if (device_token_ >= 0) device_timing().timer->end(device_token_);
  if (nvtx_) device_timing().timer->pop_range();
}

void Range::begin() {
  start_ticks_ = now_ticks();
  depth_ = t_depth++;
  active_ = true;
  recording_ = true;
}

void Range::begin_op(const Node& node, bool on_device) {
  recording_ = g_enabled.load(std::memory_order_relaxed);
  const DeviceTiming& timing = device_timing();
  if (timing.nvtx && (recording_ || timing.nvtx_always)) [[unlikely]] {
    thread_local std::string label;  // reused: no allocation per op once it has grown
    label.assign(node.name.empty() ? node.op_type : node.name);
    label.append(" (").append(node.op_type).append(")");
    timing.timer->push_range(label.c_str());
    nvtx_ = true;
  }
  depth_ = t_depth++;
  active_ = true;
  if (!recording_) return;
  if (on_device && timing.timer) device_token_ = timing.timer->begin();  // the first of a profile waits: not op time
  start_ticks_ = now_ticks();
}

void Range::begin_copy(bool on_device) {
  depth_ = t_depth;  // copies do not nest
  active_ = true;
  recording_ = true;
  if (const DeviceTimer* timer = device_timing().timer; on_device && timer) device_token_ = timer->begin();
  start_ticks_ = now_ticks();
}

namespace {

// Called with State::mutex held.
uint8_t backend_index(State& s, std::string_view backend) {
  for (size_t i = 0; i < s.backends.size(); ++i) {
    if (s.backends[i].data() == backend.data() || s.backends[i] == backend) return uint8_t(i);
  }
  s.backends.push_back(backend);
  return uint8_t(s.backends.size() - 1);
}

// Called with State::mutex held.
uint32_t value_id(State& s, const std::string& name) {
  auto [it, added] = s.value_ids.try_emplace(name, uint32_t(s.value_names.size()));
  if (added) s.value_names.push_back(name);
  return it->second;
}

// The header word of one op input in a ThreadLog's shapes (its dims follow for a tensor).
int64_t input_word(const Value* v) {
  if (v && v->kind == Value::Kind::Tensor) {
    return input_header(TensorDesc::Kind::Tensor, v->tensor.dtype(), v->tensor.shape().size());
  }
  auto kind = v && v->kind == Value::Kind::Sequence ? TensorDesc::Kind::Sequence : TensorDesc::Kind::None;
  return input_header(kind, DType::Undefined, 0);
}

// Whether `inputs` encode to the `n` words at `w` (a node's previous record). A node's inputs are
// tensors of the same ranks run after run: the dims are compared without a branch per dim.
[[gnu::always_inline]] inline bool same_inputs(const int64_t* w, size_t n, const std::vector<const Value*>& inputs) {
  size_t i = 0;
  for (const Value* v : inputs) {
    if (v && v->kind == Value::Kind::Tensor) [[likely]] {
      const Shape& shape = v->tensor.shape();
      const size_t rank = shape.size();
      if (rank + 1 > n - i || w[i] != input_header(TensorDesc::Kind::Tensor, v->tensor.dtype(), rank)) return false;
      const int64_t* last = w + i + 1;
      uint64_t diff = 0;
      for (size_t d = 0; d < rank; ++d) diff |= uint64_t(last[d] ^ shape[d]);
      if (diff != 0) return false;
      i += rank + 1;
    } else if (i == n || w[i++] != input_word(v)) {
      return false;
    }
  }
  return i == n;
}

// Appends the encoding of `inputs` to the thread's shapes and notes it in the node's cache (inline
// too when it fits). Returns where it starts.
[[gnu::noinline]] uint64_t append_inputs(ThreadLog& log, const std::vector<const Value*>& inputs, detail::NodeCache& c) {
  std::vector<int64_t>& shapes = log.shapes;
  const size_t at = shapes.size();
  for (const Value* v : inputs) {
    shapes.push_back(input_word(v));
    if (v && v->kind == Value::Kind::Tensor) {
      const auto& shape = v->tensor.shape();
      shapes.insert(shapes.end(), shape.begin(), shape.end());
    }
  }
  c.log = &log;
  c.last_inputs = at;
  c.last_words = uint32_t(shapes.size() - at);
  if (c.last_words <= detail::NodeCache::kInlineWords) std::copy(shapes.begin() + ptrdiff_t(at), shapes.end(), c.words);
  return at;
}

// Brings a node's cache up to this profile: the node interned (its name and op type copied once),
// the backend's index, a fallback's output names.
[[gnu::noinline]] void fill_cache(State& s, const Node& node, std::string_view backend, bool fallback,
                                  detail::NodeCache& c) {
  std::lock_guard lock(s.mutex);
  if (c.generation != s.generation) {
    auto [it, added] = s.node_ids.try_emplace(&node, uint32_t(s.nodes.size()));
    if (added) {
      std::string op_type = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
      std::string name = node.name.empty() ? op_type : node.name;
      s.nodes.push_back({std::move(name), std::move(op_type), {}, false});
    }
    c = {};
    c.generation = s.generation;
    c.id = it->second;
  }
  if (c.backend_name != backend.data()) {
    c.backend = backend_index(s, backend);
    c.backend_name = backend.data();
  }
  if (fallback && !c.outputs_interned) {
    NodeNames& names = s.nodes[c.id];
    if (!names.outputs_interned) {
      names.outputs_interned = true;
      for (const std::string& out : node.outputs) {
        if (!out.empty()) names.outputs.push_back(value_id(s, out));
      }
    }
    c.outputs_interned = true;
  }
}

// Writes an op's record to the calling thread's log (inside a WriteSection).
[[gnu::always_inline]] inline void write_op(State& s, ThreadLog& log, detail::NodeCache& c, const Node& node, std::string_view backend,
              const std::vector<const Value*>& inputs, bool fallback, int64_t start, int64_t end, int depth,
              int64_t device_token) {
  if (c.generation != s.generation || c.backend_name != backend.data() || (fallback && !c.outputs_interned))
      [[unlikely]]
    fill_cache(s, node, backend, fallback, c);
  Record& r = log.records.append();
  r.start = start;
  r.end = end;
  r.bytes = device_token;
  r.name = c.id;
  r.n_inputs = uint32_t(inputs.size());
  r.depth = int16_t(depth);
  r.kind = EventKind::Op;
  r.backend = c.backend;
  r.flags = fallback ? kFallbackOp : 0;
  const int64_t* last = c.last_words <= detail::NodeCache::kInlineWords ? c.words : log.shapes.data() + c.last_inputs;
  const bool same = c.log == &log && c.last_inputs != UINT64_MAX && same_inputs(last, c.last_words, inputs);
  r.inputs = same ? c.last_inputs : append_inputs(log, inputs, c);
}

}  // namespace

void Range::end_op(const Node& node, std::string_view backend, const std::vector<const Value*>& inputs,
                   bool fallback, NodeCache* cache) {
  active_ = false;
  t_depth = depth_;
  if (device_token_ >= 0) device_timing().timer->end(device_token_);
  if (nvtx_) {
    device_timing().timer->pop_range();
    nvtx_ = false;
  }
  if (!recording_) return;
  const int64_t end = now_ticks();  // before the bookkeeping below, which is not the op's time
  State& s = state();
  WriteSection w;
  if (!w.on()) return;  // stopped while the op ran
  if (cache) {
    write_op(s, w.log(), *cache, node, backend, inputs, fallback, start_ticks_, end, depth_, device_token_);
    return;
  }
  // The caller keeps no cache: the node's slot in the shared table (a copy, as fill_cache locks too).
  NodeSlot& slot = s.node_cache[node_slot(&node)];
  NodeCache c;
  {
    std::lock_guard lock(s.mutex);
    if (slot.node == &node) c = slot.cache;
  }
  write_op(s, w.log(), c, node, backend, inputs, fallback, start_ticks_, end, depth_, device_token_);
  std::lock_guard lock(s.mutex);
  slot = {&node, c};
}

void Range::end_session(const std::string& model_name) {
  active_ = false;
  t_depth = depth_;
  const int64_t end = now_ticks();
  State& s = state();
  WriteSection w;
  if (!w.on()) return;
  ThreadLog& log = w.log();
  if (log.run_generation != s.generation || log.run_name != model_name) [[unlikely]] {
    std::lock_guard lock(s.mutex);
    if (s.run_names.empty() || s.run_names.back() != model_name) s.run_names.push_back(model_name);
    log.run_generation = s.generation;
    log.run_name = model_name;
    log.run_name_id = uint32_t(s.run_names.size() - 1);
    log.run_backend = backend_index(s, "cpu");
  }
  Record& r = log.records.append();
  r.name = log.run_name_id;
  r.backend = log.run_backend;
  r.kind = EventKind::SessionRun;
  r.start = start_ticks_;
  r.end = end;
  r.depth = int16_t(depth_);
}

void Range::end_phase(const char* name) {
  active_ = false;
  t_depth = depth_;
  const int64_t end = now_ticks();
  WriteSection w;
  if (!w.on()) return;
  Record& r = w.log().records.append();
  r.kind = EventKind::Phase;
  r.ptr = name;
  r.start = start_ticks_;
  r.end = end;
  r.depth = int16_t(depth_);
}

void Range::end_copy(CopyKind kind, int64_t bytes, int device, const std::unordered_map<std::string, int>* slots,
                     int slot, bool for_fallback, bool from_fallback) {
  active_ = false;
  if (device_token_ >= 0) device_timing().timer->end(device_token_);
  const int64_t end = now_ticks();
  State& s = state();
  WriteSection w;
  if (!w.on()) return;
  Record& r = w.log().records.append();
  r.kind = EventKind::Copy;
  r.start = start_ticks_;
  r.end = end;
  r.depth = int16_t(depth_);
  r.token = device_token_;
  r.bytes = bytes;
  r.device = int16_t(device);
  r.backend = uint8_t(kind);
  r.flags = uint8_t((for_fallback ? kForFallback : 0) | (from_fallback ? kFromFallback : 0));
  r.name = kNoValue;
  if (slots && slot >= 0) {
    std::lock_guard lock(s.mutex);
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
}

void forget_nodes() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.node_ids.clear();  // the copied names stay in `nodes` for the records that use them
  s.node_cache = {};
  s.slot_tables.clear();
}

namespace {

// An instant Alloc/Free record in the calling thread's log.
void write_instant(EventKind kind, const void* ptr, int64_t bytes, int16_t device) {
  WriteSection w;
  if (!w.on()) return;
  Record& r = w.log().records.append();
  r.kind = kind;
  r.ptr = ptr;
  r.bytes = bytes;
  r.device = device;
  r.start = r.end = now_ticks();
  r.depth = int16_t(t_depth);
}

}  // namespace

void record_alloc(const void* ptr, size_t bytes, int device) {
  write_instant(EventKind::Alloc, ptr, int64_t(bytes), int16_t(device));
}

void record_free(const void* ptr) {
  write_instant(EventKind::Free, ptr, 0, 0);  // matched with its allocation (or dropped) by stop()
}

}  // namespace detail

}  // namespace ingot::profiler
