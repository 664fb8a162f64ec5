// Chrome trace-event JSON (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
// "X" complete events for ranges, "C" counters for live bytes, "M" metadata naming the threads.
// chrome://tracing and https://ui.perfetto.dev open it as is.
#include <ingot/error.h>
#include <ingot/profiler.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace ingot::profiler {

namespace {

double us(int64_t ns) { return double(ns) * 1e-3; }

}  // namespace

std::string Trace::chrome_json() const {
  using nlohmann::json;
  const int pid = 1;
  json list = json::array();
  list.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "ingot"}}}});
  for (const auto& [tid, name] : threads) {
    list.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::Op:
      case EventKind::SessionRun:
      case EventKind::Copy:
      case EventKind::Fallback: {
        json args = {{"backend", e.backend}, {"depth", e.depth}};
        if (e.kind == EventKind::Op) {
          args["op_type"] = e.op_type;
          json shapes = json::array(), dtypes = json::array();
          for (const TensorDesc& d : e.inputs) {
            shapes.push_back(d.kind == TensorDesc::Kind::Tensor ? json(d.shape) : json(nullptr));
            dtypes.push_back(d.kind == TensorDesc::Kind::Tensor ? std::string(dtype_name(d.dtype)) : d.str());
          }
          args["input_shapes"] = std::move(shapes);
          args["input_dtypes"] = std::move(dtypes);
        }
        list.push_back({{"ph", "X"},
                        {"name", e.name},
                        {"cat", e.kind == EventKind::Op ? e.op_type : std::string(kind_name(e.kind))},
                        {"ts", us(e.start_ns)},
                        {"dur", us(e.end_ns - e.start_ns)},
                        {"pid", pid},
                        {"tid", e.tid},
                        {"args", std::move(args)}});
        break;
      }
      case EventKind::Alloc:
      case EventKind::Free:
        // One process-wide counter: live bytes are not per thread.
        list.push_back({{"ph", "C"},
                        {"name", "live bytes"},
                        {"cat", "memory"},
                        {"ts", us(e.start_ns)},
                        {"pid", pid},
                        {"tid", 0},
                        {"args", {{"live_bytes", e.live_bytes}}}});
        break;
    }
  }
  json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

void Trace::write_chrome_json(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write the trace to '{}'", path);
  f << chrome_json() << "\n";
  if (!f) fail("cannot write the trace to '{}'", path);
}

}  // namespace ingot::profiler
