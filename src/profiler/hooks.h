// What the runtime and the allocator call to feed the profiler. Each call site first checks
// `profiler::enabled()` (one relaxed load and a predictable branch); everything here runs only when
// a profile is on.
#pragma once
#include <ingot/profiler.h>

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ingot {
struct Value;  // ops/kernel.h; declared here so that core (Storage) can include this header
struct Node;   // graph/graph.h
}  // namespace ingot

namespace ingot::profiler::detail {

// The executor's per-op hooks are on: a profile is being recorded, or NVTX ranges are wanted without
// one (INGOT_NVTX=1 in a CUDA build). The one relaxed load and branch per op when off.
extern std::atomic<bool> g_op_hooks;
inline bool op_hooks() noexcept { return g_op_hooks.load(std::memory_order_relaxed); }

// The profiler's clock (time-stamp counter ticks or steady-clock ns; converted at stop()).
int64_t clock_ticks();

enum class CopyKind : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice };

// What the profiler remembers about one node during one profile, kept by the caller that runs the
// node (the executor: one per plan step) so that recording an op finds the node, its backend and its
// last input shapes without a lookup. Stale (another profile's) caches are recognized and refilled.
// Used by one thread at a time (the thread running the node's session).
struct NodeCache {
  static constexpr size_t kInlineWords = 15;  // a node's inputs up to this encoding length compare inline

  uint64_t generation = 0;            // the profile it belongs to (0: none)
  uint32_t id = 0;                    // the node's index in that profile
  uint8_t backend = 0;                // the index of `backend_name` in that profile
  bool outputs_interned = false;      // a fallback's: its output names are interned (for its copies)
  const char* backend_name = nullptr; // the (static) backend string the node last ran on
  const void* log = nullptr;          // the recording thread's log that holds them
  uint64_t last_inputs = UINT64_MAX;  // where its last input shapes are encoded in that log
  uint32_t last_words = 0;            // that encoding's length in words
  int64_t words[kInlineWords];        // and the encoding itself when it fits
};

// One timed range on the calling thread (an op, a session run). Trivial to construct, so the
// executor keeps one on the stack and calls begin() only when profiling; a range left by an
// exception just restores the nesting depth and records nothing.
class Range {
 public:
  Range() = default;
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

  void begin();
  // An op's range, begun when op_hooks() is on: records it when profiling (with device markers
  // around it when `on_device`), pushes an NVTX range when the backend has them.
  void begin_op(const Node& node, bool on_device);
  // A copy's range (no nesting depth), begun when enabled(): device markers when `on_device`.
  void begin_copy(bool on_device);
  bool active() const { return active_; }
  // Records the node by pointer: its name and op type are copied the first time a profile sees it
  // (forget_nodes() drops those pointers before they can dangle). `backend` must be a string with
  // static storage ("cpu"): it is kept as a view until stop().
  // `fallback`: the node belongs on an accelerator but ran on the CPU (also recorded as a Fallback).
  // `cache`: the caller's NodeCache for this node (nullptr: looked up by address).
  void end_op(const Node& node, std::string_view backend, const std::vector<const Value*>& inputs,
              bool fallback = false, NodeCache* cache = nullptr);
  void end_session(const std::string& model_name);
  // A Phase's range: `name` must have static storage (it is kept as a pointer until stop()).
  void end_phase(const char* name);
  // A copy made for a node's input: the value is slot `slot` of the graph whose name -> slot table is
  // `slots` (slot < 0: not known); `for_fallback`: the reader is a fallback node; `from_fallback`:
  // the value was written by one.
  void end_copy(CopyKind kind, int64_t bytes, int device, const std::unordered_map<std::string, int>* slots, int slot,
                bool for_fallback, bool from_fallback);

 private:
  int64_t start_ticks_ = 0;  // profiler clock (profiler.cpp)
  int64_t device_token_ = -1;
  int depth_ = 0;
  bool active_ = false;
  bool recording_ = false;  // a profile is being recorded (not only NVTX)
  bool nvtx_ = false;       // pushed an NVTX range
};

// Times a one-off step (a Phase event) while a profile is on: loading a model, creating a library
// handle, capturing a CUDA graph. `name` must be a string literal. Nothing is recorded when the scope
// is left by an exception.
class PhaseScope {
 public:
  explicit PhaseScope(const char* name) : name_(name) {
    if (enabled()) range_.begin();
  }
  ~PhaseScope() {
    if (range_.active() && std::uncaught_exceptions() == exceptions_) range_.end_phase(name_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Range range_;
  const char* name_;
  int exceptions_ = std::uncaught_exceptions();
};

// Called before Nodes that a profile may have seen are destroyed (Executor's destructor: the Executor
// holds the model, so no Node it ran dies before it), so that a new Node at a reused address is not
// taken for the old one.
void forget_nodes();  // (also the executor's name -> slot tables)

void record_alloc(const void* ptr, size_t bytes, int device);
void record_free(const void* ptr);

}  // namespace ingot::profiler::detail
