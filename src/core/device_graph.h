// Recording a device's queued work once and replaying it (CUDA graphs). The executor captures a
// whole run of a static-shape model and afterwards launches it with one call, which removes the
// per-kernel host cost that dominates small models on a fast GPU. A backend that can capture
// returns one from Backend::graphs() (core/backend.h); the runtime only sees this interface.
//
// Memory: every block the device allocator hands out or takes back while a capture is on belongs
// to the capture's pool. A block freed during the capture may be handed out again later in the
// same capture (the replay runs in capture order on one stream, so that reuse stays ordered), but
// no block of the pool goes back to the shared cache until the graph is destroyed; blocks still
// held by live tensors then are returned when those tensors die.
#pragma once
#include <ingot/tensor.h>

#include <memory>
#include <string>

namespace ingot {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Enqueues the captured work on the device's stream (returns without waiting for it).
  virtual void replay() = 0;
  virtual size_t nodes() const = 0;  // device operations in the graph (kernels, copies, memsets)
};

struct DeviceGraphs {
  virtual ~DeviceGraphs() = default;
  // Starts capturing the work the calling thread queues on `device`'s stream.
  virtual void begin_capture(int device) = 0;
  // Ends the capture. Returns the graph, or nullptr with `why` set when the captured work cannot be
  // replayed (something waited for the device or copied from pageable memory while capturing).
  // Always leaves capture mode, also after an exception in the captured code.
  virtual std::unique_ptr<DeviceGraph> end_capture(int device, std::string* why) = 0;
};

}  // namespace ingot
