// The terminal summary: op types by total time (and their device time in accelerator sessions),
// then allocation totals, then copies and CPU fallbacks when there were any.
#include <fmt/format.h>
#include <ingot/profiler.h>

#include "core/strings.h"

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
  bool device = s.device_events > 0;
  out += fmt::format("{:<{}}  {:>7}  {:>10}  {:>9}  {:>7}", "op type", width, "count", "total ms", "mean ms", "share");
  out += device ? fmt::format("  {:>10}\n", "gpu ms") : "\n";
  for (size_t i = 0; i < s.ops.size() && i < top; ++i) {
    const OpStats& op = s.ops[i];
    out += fmt::format("{:<{}}  {:>7}  {:>10.3f}  {:>9.4f}  {:>6.1f}%", op.op_type, width, op.count, op.total_ms,
                       op.mean_ms, op.share * 100);
    if (!device) {
      out += "\n";
    } else if (op.device_count > 0) {
      out += fmt::format("  {:>10.3f}\n", op.device_ms);
    } else {
      out += fmt::format("  {:>10}\n", "-");
    }
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
  if (device) out += fmt::format("gpu: {} kernels, {:.3f} ms of device time\n", s.device_events, s.device_ms);
  if (device || s.copy_count > 0 || s.fallback_count > 0) {
    out += fmt::format("copies: {} ({}; H2D {}, D2H {}, D2D {}), {:.3f} ms host", s.copy_count, bytes_str(s.copy_bytes),
                       bytes_str(s.h2d_bytes), bytes_str(s.d2h_bytes), bytes_str(s.d2d_bytes), s.copy_ms);
    out += s.copy_device_ms > 0 ? fmt::format(", {:.3f} ms device\n", s.copy_device_ms) : "\n";
    if (s.fallbacks.empty()) {
      out += "fallbacks: none\n";
    } else {
      std::string ops = join(s.fallbacks, ", ", [](const FallbackStats& f) {
        return fmt::format("{} x{} ({:.3f} ms, {} copied; nodes: {})", f.op_type, f.count, f.total_ms,
                           bytes_str(f.bytes), join(f.nodes, " "));
      });
      out += fmt::format("fallbacks (ran on the CPU): {}; total {} ({} op type{}), {:.3f} ms, {} copied for them\n", ops,
                         s.fallback_count, s.fallbacks.size(), s.fallbacks.size() == 1 ? "" : "s", s.fallback_ms,
                         bytes_str(s.fallback_bytes));
    }
  }
  if (!s.phases.empty()) {
    // Phases nest (a cuDNN handle created inside the first run's first convolution): each is its own time.
    // Where each lies on the timeline (ms since the profile started, first start to last end) and on
    // which threads: what overlapped what in a cold start.
    out += "phases (one-off steps, nested ones inside their parent's time; from-to: ms since the profile started):\n";
    size_t w = 5;
    for (const PhaseStats& p : s.phases) w = std::max(w, p.name.size());
    auto thread_name = [&](uint32_t tid) {
      for (const auto& [id, name] : threads) {
        if (id == tid && !name.empty()) return name;
      }
      return fmt::format("thread {}", tid);
    };
    for (const PhaseStats& p : s.phases) {
      std::string times = p.count > 1 ? fmt::format("{} times", p.count) : "";
      out += fmt::format("  {:<{}}  {:>10.3f} ms  {:>9}  {:>8.1f}-{:<8.1f}  {}\n", p.name, w, p.total_ms, times,
                         p.first_start_ms, p.last_end_ms, join(p.tids, ", ", thread_name));
    }
  }
  return out;
}

}  // namespace ingot::profiler
