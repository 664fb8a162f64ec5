// Chrome trace-event JSON (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
// "X" complete events for ranges, "C" counters for live bytes, "M" metadata naming the threads and
// the tracks that are not threads (Copies, one per GPU stream: sorted after the threads).
// chrome://tracing and https://ui.perfetto.dev open it as is. Fallbacks and copies carry a "cname"
// (chrome://tracing's reserved colours: "terrible" is red, "yellow") so they stand out; Perfetto
// colours by name, and its track names say the rest.
#include <ingot/error.h>
#include <ingot/profiler.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace ingot::profiler {

namespace {

double us(int64_t ns) { return double(ns) * 1e-3; }

// chrome://tracing's reserved colour names.
const char* cname(const Event& e) {
  if (e.kind == EventKind::Fallback) return "terrible";  // red
  if (e.kind == EventKind::Copy) return "yellow";
  return nullptr;
}

}  // namespace

std::string Trace::chrome_json() const {
  using nlohmann::json;
  const int pid = 1;
  json list = json::array();
  list.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "ingot"}}}});
  for (const auto& [tid, name] : threads) {
    list.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    if (tid >= kCopiesTrack) {  // tracks after the host threads, in tid order (Copies, GPU 0 stream, ...)
      list.push_back({{"ph", "M"},
                      {"name", "thread_sort_index"},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", {{"name", name}, {"sort_index", int64_t(tid)}}}});
    }
  }
  for (const Event& e : events) {
    switch (e.kind) {
      case EventKind::Op:
      case EventKind::SessionRun:
      case EventKind::Copy:
      case EventKind::Phase:
      case EventKind::Fallback: {
        json args = {{"backend", e.backend}, {"depth", e.depth}};
        if (e.on_device()) {
          args["device"] = e.device;
          args["stream"] = e.stream;
          args["timed_on"] = "device";
        }
        if (e.kind == EventKind::Copy) {
          args["bytes"] = e.bytes;
          args["value"] = e.value;
          args["blocking"] = e.blocking;
          if (!e.fallback.empty()) args["fallback"] = e.fallback;
        }
        if (e.kind == EventKind::Fallback) {
          args["op_type"] = e.op_type;
          args["bytes"] = e.bytes;
        }
        if (e.kind == EventKind::Op && !e.on_device()) {
          args["op_type"] = e.op_type;
          json shapes = json::array(), dtypes = json::array();
          for (const TensorDesc& d : e.inputs) {
            shapes.push_back(d.kind == TensorDesc::Kind::Tensor ? json(d.shape) : json(nullptr));
            dtypes.push_back(d.kind == TensorDesc::Kind::Tensor ? std::string(dtype_name(d.dtype)) : d.str());
          }
          args["input_shapes"] = std::move(shapes);
          args["input_dtypes"] = std::move(dtypes);
        }
        if (e.kind == EventKind::Op && e.on_device()) args["op_type"] = e.op_type;
        // Copies are named by direction and value ("copy D2H x"); the category says "copy".
        std::string name = e.kind == EventKind::Copy && !e.value.empty() ? e.name + " " + e.value : e.name;
        if (e.kind == EventKind::Fallback) name = "fallback " + e.name + " (" + e.op_type + ")";
        json x = {{"ph", "X"},
                  {"name", std::move(name)},
                  {"cat", e.kind == EventKind::Op ? e.op_type : std::string(kind_name(e.kind))},
                  {"ts", us(e.start_ns)},
                  {"dur", us(e.end_ns - e.start_ns)},
                  {"pid", pid},
                  {"tid", e.tid},
                  {"args", std::move(args)}};
        if (const char* c = cname(e)) x["cname"] = c;
        list.push_back(std::move(x));
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
