// The profiler: records every op execution, allocator activity and session run while it is on, and
// exports what it saw as a Chrome/Perfetto trace (JSON), a terminal summary table or an HTML report.
//
//   ingot::profiler::start();
//   session.run(feeds);
//   ingot::profiler::Trace trace = ingot::profiler::stop();
//   std::cout << trace.summary_table();
//   trace.write_chrome_json("trace.json");  // open in https://ui.perfetto.dev or chrome://tracing
//
// Cost when off: every hook (per op, per allocation) is one predictable branch on a relaxed atomic
// bool (`enabled()`), with no allocation and no clock read (docs/PROFILING.md has measurements).
// One profile at a time, process-wide.
#pragma once
#include <ingot/export.h>
#include <ingot/dtype.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

INGOT_API_BEGIN
namespace ingot::profiler {

// What an event is. Append-only: the GPU backend adds its kinds (kernel on a stream, copies between
// host and device, CPU fallbacks) without changing the existing ones.
enum class EventKind : uint8_t {
  Op,          // one node's kernel: name = node name, op_type, backend, inputs
  SessionRun,  // one Session::run (Executor::run): name = model name
  Alloc,       // a Storage allocated: bytes, live_bytes after it
  Free,        // a Storage freed that was allocated while profiling: bytes, live_bytes after it
  Copy,        // a copy between devices made by the executor: name "copy H2D"/"copy D2H"/"copy D2D", value, bytes
  Fallback,    // a node of an accelerator session run on the CPU: name = node name, op_type, bytes moved for it
  Phase,       // a one-off step of loading or of a first run (reading a package, creating the CUDA context
               // or a library handle, capturing a CUDA graph...), or a collective of a data-parallel
               // group on the CPU ("gloo all-reduce") and DDP's wait for it: name = what it was
};
std::string_view kind_name(EventKind kind);

struct TensorDesc {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  enum class Kind : uint8_t { Tensor, Sequence, None } kind = Kind::Tensor;  // None: also an omitted input
  std::string str() const;  // "float32[1,3,224,224]", "sequence", "none"
};

// Tracks (Event::tid) that are not host threads: the host side of the executor's copies, and one
// track per device stream for device-timed events (kernels and copies as the GPU ran them).
constexpr uint32_t kCopiesTrack = 1u << 20;
constexpr uint32_t kDeviceTrackBase = (1u << 20) + 1;
constexpr uint32_t device_track(int device) { return kDeviceTrackBase + uint32_t(device); }

struct Event {
  EventKind kind = EventKind::Op;
  std::string name;     // node name (op type when the node has none), model name for SessionRun, "copy H2D"...
  std::string op_type;  // Op/Fallback: the op type (with domain prefix when not the default domain)
  std::string backend;  // "cpu" or "cuda"
  std::vector<TensorDesc> inputs;  // Op (host events only)
  int64_t start_ns = 0;    // host steady clock, relative to start() (device events: mapped onto it)
  int64_t end_ns = 0;      // == start_ns for instant events (Alloc/Free)
  uint32_t tid = 0;        // small sequential thread id (0: the first thread that recorded), or a track:
                           // kCopiesTrack for Copy, device_track(d) for device events
  int depth = 0;           // enclosing recorded ranges on this thread (a Loop body op is deeper than its Loop)
  int64_t bytes = 0;       // Alloc/Free/Copy; Fallback: bytes copied because of it (inputs down, outputs back)
  int64_t live_bytes = 0;  // Alloc/Free: bytes allocated while profiling and still alive afterwards
  int device = 0;          // device index (which GPU)
  int64_t stream = 0;      // 0: a host-timed event; 1: timed on the device by CUDA events (device d's stream)
  std::string value;       // Copy: the graph value copied ("" when not known)
  std::string fallback;    // Copy: the fallback node it was made for (its input, or its output going back)
  bool blocking = false;   // Copy: the host waited for it (device to host)
  bool on_device() const { return stream != 0; }
  double duration_ms() const { return double(end_ns - start_ns) * 1e-6; }
};

struct OpStats {
  std::string op_type;
  int64_t count = 0;
  double total_ms = 0, mean_ms = 0, share = 0;  // host time; share: fraction of all op time (0..1)
  int64_t device_count = 0;  // kernels of this op type timed on the device
  double device_ms = 0;      // their device time
};

// Nodes of one op type that ran on the CPU in an accelerator session.
struct FallbackStats {
  std::string op_type;
  std::vector<std::string> nodes;  // distinct node names, first seen first
  int64_t count = 0;               // executions
  int64_t bytes = 0;               // copied because of them
  double total_ms = 0;             // host time, from their first input copy to the end of the kernel
};

// The Phase events of one name.
struct PhaseStats {
  std::string name;
  int64_t count = 0;
  double total_ms = 0;
  double first_start_ms = 0, last_end_ms = 0;  // since the profile started: where it lies on the timeline
  std::vector<uint32_t> tids;                  // the threads it ran on (Event::tid), first seen first
};

struct Summary {
  std::vector<OpStats> ops;  // by total time, descending
  double op_ms = 0;          // sum of the durations of top-level ops (nested ones are inside their parent)
  double session_ms = 0;     // sum of SessionRun durations
  int64_t session_runs = 0;
  int64_t op_events = 0;
  int64_t alloc_count = 0, free_count = 0, alloc_bytes = 0, freed_bytes = 0, peak_live_bytes = 0;
  // Accelerator sessions: kernels timed on the device, copies, CPU fallbacks.
  int64_t device_events = 0;  // device-timed kernels
  double device_ms = 0;       // their total device time
  int64_t copy_count = 0, copy_bytes = 0, h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0;
  double copy_ms = 0;         // host time in copies
  double copy_device_ms = 0;  // device time of the copies timed on the device
  std::vector<FallbackStats> fallbacks;  // by total time, descending
  int64_t fallback_count = 0, fallback_bytes = 0;
  double fallback_ms = 0;
  std::vector<PhaseStats> phases;  // in order of first appearance
};

// The summary of a list of events (stop() fills Trace::summary with it; useful for traces built by hand).
Summary summarize(const std::vector<Event>& events);

struct Trace {
  std::vector<Event> events;                              // in start order
  std::vector<std::pair<uint32_t, std::string>> threads;  // tid -> name
  Summary summary;

  // Chrome trace-event format ("traceEvents": X, C and M events; ts/dur in microseconds).
  std::string chrome_json() const;
  void write_chrome_json(const std::string& path) const;  // throws ingot::Error when it cannot write
  // Top `top` op types by total time, then allocation totals; copies, fallbacks and phases when there are any.
  std::string summary_table(size_t top = 20) const;
  // One self-contained page (inline CSS/JS): timeline on a canvas and the summary table.
  std::string html_report(const std::string& title) const;
  void write_html(const std::string& path, const std::string& title) const;
};

namespace detail {
extern std::atomic<bool> g_enabled;
}

// Whether a profile is being recorded: the one check hooks make when off.
inline bool enabled() noexcept { return detail::g_enabled.load(std::memory_order_relaxed); }

// Starts recording (clears anything recorded before). Throws if already on.
void start();
// Stops recording and returns what was recorded with its summary. Throws if not on.
Trace stop();

// Profiles a scope: starts on construction; stop() returns the trace, or the destructor stops and
// stores it in `*out` (when given).
class ScopedProfile {
 public:
  explicit ScopedProfile(Trace* out = nullptr);
  ~ScopedProfile();
  ScopedProfile(const ScopedProfile&) = delete;
  ScopedProfile& operator=(const ScopedProfile&) = delete;
  Trace stop();

 private:
  Trace* out_;
  bool active_ = true;
};

}  // namespace ingot::profiler
INGOT_API_END
