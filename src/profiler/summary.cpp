// The terminal summary: op types by total time, then allocation totals.
#include <fmt/format.h>
#include <ingot/profiler.h>

namespace ingot::profiler {

namespace {

std::string bytes_str(int64_t b) {
  if (b >= (int64_t(1) << 30)) return fmt::format("{:.2f} GiB", double(b) / double(int64_t(1) << 30));
  if (b >= (1 << 20)) return fmt::format("{:.2f} MiB", double(b) / double(1 << 20));
  if (b >= (1 << 10)) return fmt::format("{:.1f} KiB", double(b) / double(1 << 10));
  return fmt::format("{} B", b);
}

}  // namespace

std::string Trace::summary_table(size_t top) const {
  const Summary& s = summary;
  std::string out;
  size_t width = 7;  // "op type"
  for (size_t i = 0; i < s.ops.size() && i < top; ++i) width = std::max(width, s.ops[i].op_type.size());
  out +=
      fmt::format("{:<{}}  {:>7}  {:>10}  {:>9}  {:>7}\n", "op type", width, "count", "total ms", "mean ms", "share");
  for (size_t i = 0; i < s.ops.size() && i < top; ++i) {
    const OpStats& op = s.ops[i];
    out += fmt::format("{:<{}}  {:>7}  {:>10.3f}  {:>9.4f}  {:>6.1f}%\n", op.op_type, width, op.count, op.total_ms,
                       op.mean_ms, op.share * 100);
  }
  if (s.ops.size() > top) out += fmt::format("({} more op types)\n", s.ops.size() - top);
  out += fmt::format("ops: {} events, {:.3f} ms", s.op_events, s.op_ms);
  if (s.session_runs > 0) {
    out += fmt::format("; session runs: {}, {:.3f} ms ({:.3f} ms per run)", s.session_runs, s.session_ms,
                       s.session_ms / double(s.session_runs));
  }
  out += "\n";
  out += fmt::format("allocations: {} ({}), frees: {} ({}), peak live: {}\n", s.alloc_count, bytes_str(s.alloc_bytes),
                     s.free_count, bytes_str(s.freed_bytes), bytes_str(s.peak_live_bytes));
  return out;
}

}  // namespace ingot::profiler
