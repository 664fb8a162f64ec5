// What the runtime and the allocator call to feed the profiler. Each call site first checks
// `profiler::enabled()` (one relaxed load and a predictable branch); everything here runs only when
// a profile is on.
#pragma once
#include <ingot/profiler.h>

#include <string_view>
#include <vector>

namespace ingot {
struct Value;  // ops/kernel.h; declared here so that core (Storage) can include this header
struct Node;   // graph/graph.h
}  // namespace ingot

namespace ingot::profiler::detail {

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
  bool active() const { return active_; }
  // Records the node by pointer: its name and op type are copied the first time a profile sees it
  // (forget_nodes() drops those pointers before they can dangle). `backend` must be a string with
  // static storage ("cpu"): it is kept as a view until stop().
  void end_op(const Node& node, std::string_view backend, const std::vector<const Value*>& inputs);
  void end_session(const std::string& model_name);

 private:
  int64_t start_ticks_ = 0;  // profiler clock (profiler.cpp)
  int depth_ = 0;
  bool active_ = false;
};

// Called before Nodes that a profile may have seen are destroyed (Executor's destructor: the Executor
// holds the model, so no Node it ran dies before it), so that a new Node at a reused address is not
// taken for the old one.
void forget_nodes();

void record_alloc(const void* ptr, size_t bytes, int device);
void record_free(const void* ptr);

}  // namespace ingot::profiler::detail
