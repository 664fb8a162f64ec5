// Backends: what the core and the runtime need of one kind of device, one object per backend
// registered at static initialization (ggml's backend table, ONNX Runtime's execution providers).
// Tensors allocate and copy through it, the executor asks it for graph capture and its name, the
// profiler for device timing, and
// kernels register per (op, backend, dtypes) in ops/kernel.h; the runtime never names a backend.
// What a backend can run is asked of its kernels at placement (KernelDef::rejects, rejects_types).
#pragma once
#include <ingot/tensor.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/collectives.h"
#include "core/device_graph.h"
#include "core/device_timer.h"

namespace ingot {

// Memory of one device kind.
struct DeviceMemory {
  virtual ~DeviceMemory() = default;
  virtual void* allocate(size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* ptr, int device_index) = 0;
  // Copies between this device and the host, or within this device.
  // Asynchronous with respect to the host where the device allows it, except copies to the host,
  // which return with the data in place.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = 0;
  virtual void fill_zero(void* dst, size_t nbytes, int device_index) = 0;
  // Waits until all work queued on the device has finished.
  virtual void synchronize(int device_index) = 0;
  // Whether the device exists on this machine (a CUDA build may run where there is no GPU).
  virtual bool available(int device_index) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  // Lower case and static ("cpu", "cuda"): profiles, placement reports, messages.
  virtual std::string_view name() const = 0;
  virtual DeviceMemory& memory() = 0;
  // Capture and replay of the work queued on a device (CUDA graphs); nullptr where it cannot.
  virtual DeviceGraphs* graphs() { return nullptr; }
  // Device-side timing for the profiler and NVTX ranges (core/device_timer.h); nullptr where it has none.
  virtual const DeviceTimer* timer() { return nullptr; }
  // The queue the backend's kernels run on for this device (a cudaStream_t for CUDA), for code
  // outside Ingot that enqueues work beside them (extension kernels); nullptr where there is none.
  virtual void* native_stream(int device_index) { return nullptr; }
  // The architecture of device `device_index` as compilers name it ("sm_90"); "" when the device is
  // not there (a CUDA build on a machine without a GPU) or the backend has no such notion.
  virtual std::string arch(int device_index) { return ""; }
  // A device's one-off set-up started ahead, on threads of the backend's own, so that the caller's
  // host work overlaps it; the device's first use waits for what is still under way (and gets its
  // errors). start_async: what any use needs (CUDA: driver, context and stream, cuBLASLt), called
  // before a session reads its model. prepare_async, called once the model is read: starts what the
  // model's stored tuning choices will need (core/tuning.h; CUDA: the cuDNN libraries they use, and
  // workers that build the plans of stored convolution choices once the context exists), then waits
  // for what start_async began (a session's load returns with its device ready). Both do nothing
  // where the device is missing or the backend has nothing to start.
  virtual void start_async(int device_index) {}
  virtual void prepare_async(int device_index) {}
  // This process's end of a data-parallel group over this device kind's tensors
  // (core/collectives.h); throws naming what is missing where the backend cannot communicate.
  virtual std::unique_ptr<Communicator> connect(const ConnectOptions& options);

  // The name in upper case, as messages write it ("no CUDA kernel for Resize").
  std::string label() const;
};

// Registers a backend for its device type (once; a second one for the same type throws).
void register_backend(Backend& backend);
Backend* find_backend(DeviceType type);  // nullptr when this build has none
Backend* find_backend(std::string_view name);
std::vector<Backend*> backends();  // every registered one, CPU first
// The backend of `type`, or an error naming the device when this build has none.
Backend& backend_for(Device device);

}  // namespace ingot
