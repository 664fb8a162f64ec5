// What the runtime and the allocator call to feed the profiler. Each call site first checks
// `profiler::enabled()` (one relaxed load and a predictable branch); everything here runs only when
// a profile is on.
#pragma once
#include <ingot/profiler.h>

#include <string_view>
#include <vector>

namespace ingot {
struct Value;  // ops/kernel.h; declared here so that core (Storage) can include this header
}

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
  void end_op(const std::string& node_name, const std::string& domain, const std::string& op_type,
              std::string_view backend, const std::vector<const Value*>& inputs);
  void end_session(const std::string& model_name);

 private:
  int64_t start_ns_ = 0;
  int depth_ = 0;
  bool active_ = false;
};

void record_alloc(const void* ptr, size_t bytes, int device);
void record_free(const void* ptr);

}  // namespace ingot::profiler::detail
