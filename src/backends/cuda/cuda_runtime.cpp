#include "backends/cuda/cuda_runtime.h"

#include <ingot/tensor.h>

#include "backends/cuda/cudnn_attention_graph.h"
#include "backends/cuda/cudnn_conv_graph.h"
#include "backends/cuda/nccl.h"
#include "core/dynamic_library.h"
#include "backends/cuda/gemm.h"
#include "core/flags.h"
#include "core/backend.h"
#include "profiler/hooks.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ingot::cuda {

[[noreturn]] void fail_cuda(const char* call, const char* detail, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  fail("CUDA call {} failed: {} ({}:{})", call, detail, base ? base + 1 : file, line);
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

namespace {

constexpr int kMaxDevices = 16;

// Size classes: 512-byte steps up to 1 MiB, 2 MiB steps above. A freed block is kept under its
// class and handed out again only for the same class, so reuse never wastes more than one step.
size_t size_class(size_t n) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20;
  if (n <= (size_t(1) << 20)) return (std::max<size_t>(n, 1) + kSmall - 1) / kSmall * kSmall;
  return (n + kLarge - 1) / kLarge * kLarge;
}

struct DeviceState {
  std::once_flag init;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Pinned staging for host<->device copies: two halves, each with an event so a half is reused
  // only after the copy that last read or wrote it is done.
  char* pinned = nullptr;
  size_t pinned_half = 0;
  std::array<cudaEvent_t, 2> pinned_done{};
  int next_half = 0;
  std::mutex staging_mu;  // the halves serve one copy at a time (copies may come from several threads)
  std::atomic<bool> staging_started{false};  // allocate_staging is under way or done
  bool capturing = false;  // a CUDA graph capture is on (core/device_graph.h)
};

// Blocks belong to the shared cache (pool 0) or to a CUDA graph's pool (core/device_graph.h): a
// capture takes every block it allocates or frees into its pool, reuses them only within itself,
// and gives them back when its graph is destroyed.
struct Allocator {
  struct Block {
    size_t size;
    int pool;
  };
  struct Pool {
    std::map<size_t, std::vector<void*>> free;
  };
  std::mutex mu;
  std::array<std::map<size_t, std::vector<void*>>, kMaxDevices> cached;
  std::array<std::unordered_map<void*, Block>, kMaxDevices> live;
  std::unordered_map<int, Pool> pools;
  std::array<int, kMaxDevices> capturing{};  // the pool of the capture on each device, 0: none
  int next_pool = 1;
  // Workspaces replaced while graphs exist: a graph may still use them, so they are kept until
  // the last graph is gone.
  std::array<std::vector<void*>, kMaxDevices> retired;
  MemoryStats stats;

  void* allocate(size_t nbytes, int device) {
    size_t n = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu);
    int pool = capturing[size_t(device)];
    void* p = nullptr;
    if (pool) p = take(pools[pool].free[n]);
    if (!p) p = take(cached[size_t(device)][n]);
    if (!p) {
      INGOT_CUDA_CHECK(cudaSetDevice(device));
      cudaError_t err = cudaMalloc(&p, n);
      if (err == cudaErrorMemoryAllocation) {
        // Out of memory: give the cache back to the driver and try once more.
        (void)cudaGetLastError();
        release_cached(device);
        err = cudaMalloc(&p, n);
      }
      if (err != cudaSuccess) {
        (void)cudaGetLastError();  // clear it: the process stays usable
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fail("CUDA out of memory on cuda:{}: asked for {} bytes; {} allocated by Ingot, {} free of {} on the device "
             "({})",
             device, nbytes, stats.allocated, free_b, total_b, cudaGetErrorString(err));
      }
      stats.reserved += n;
      ++stats.cuda_mallocs;
    }
    live[size_t(device)][p] = {n, pool};
    stats.allocated += n;
    stats.peak_allocated = std::max(stats.peak_allocated, stats.allocated);
    return p;
  }

  void deallocate(void* p, int device) {
    std::lock_guard<std::mutex> lock(mu);
    auto& l = live[size_t(device)];
    auto it = l.find(p);
    if (it == l.end()) return;  // not ours (cannot happen for Storage-owned memory)
    auto [n, pool] = it->second;
    stats.allocated -= n;
    l.erase(it);
    if (!pool) pool = capturing[size_t(device)];  // freed while capturing: the graph may use it
    if (auto pit = pools.find(pool); pool && pit != pools.end()) {
      pit->second.free[n].push_back(p);
    } else {
      cached[size_t(device)][n].push_back(p);
    }
  }

  int begin_pool(int device) {
    std::lock_guard<std::mutex> lock(mu);
    int id = next_pool++;
    pools[id];
    capturing[size_t(device)] = id;
    return id;
  }
  void end_capture(int device) {
    std::lock_guard<std::mutex> lock(mu);
    capturing[size_t(device)] = 0;
  }
  // The graph of pool `id` is gone: its free blocks go back to the cache, its live ones when freed.
  void release_pool(int id, int device) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = pools.find(id);
    if (it == pools.end()) return;
    for (auto& [n, blocks] : it->second.free) {
      auto& bucket = cached[size_t(device)][n];
      bucket.insert(bucket.end(), blocks.begin(), blocks.end());
    }
    pools.erase(it);
    for (auto& [p, b] : live[size_t(device)]) {
      if (b.pool == id) b.pool = 0;
    }
    if (!pools.empty()) return;
    for (size_t d = 0; d < retired.size(); ++d) {
      for (void* p : retired[d]) {
        size_t n = live[d].at(p).size;
        stats.allocated -= n;
        live[d].erase(p);
        cached[d][n].push_back(p);
      }
      retired[d].clear();
    }
  }
  // A workspace being replaced: freed now, or kept while a graph may still use it.
  void retire_workspace(void* p, int device) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!pools.empty()) {
        retired[size_t(device)].push_back(p);
        return;
      }
    }
    deallocate(p, device);
  }

  static void* take(std::vector<void*>& bucket) {
    if (bucket.empty()) return nullptr;
    void* p = bucket.back();
    bucket.pop_back();
    return p;
  }

  // Caller holds mu.
  void release_cached(int device) {
    for (auto& [n, blocks] : cached[size_t(device)]) {
      for (void* p : blocks) {
        cudaFree(p);
        stats.reserved -= n;
      }
      blocks.clear();
    }
  }
};

Allocator& allocator() {
  static Allocator* a = new Allocator();  // outlives static tensors destroyed at exit
  return *a;
}

std::array<DeviceState, kMaxDevices>& states() {
  static auto* s = new std::array<DeviceState, kMaxDevices>();
  return *s;
}

int current_device() {
  int d = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// Loads a process makes on threads of their own while the first goes on with its cold start; joined at
// exit (a thread still inside dlopen when the libraries' destructors run would be a crash).
class BackgroundLoads {
 public:
  ~BackgroundLoads() { join_all(); }
  void join_all() {
    for (;;) {  // a load may start another (the context starts cuBLASLt's)
      std::thread t;
      {
        std::lock_guard lock(mu_);
        if (loads_.empty()) return;
        t = std::move(loads_.back().thread);
        loads_.pop_back();
      }
      t.join();
    }
  }
  void start(std::function<void()> load) {
    std::vector<std::thread> finished;  // returned already: joined outside the lock
    std::unique_lock lock(mu_);
    for (auto it = loads_.begin(); it != loads_.end();) {
      if (it->done->load()) {
        finished.push_back(std::move(it->thread));
        it = loads_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    loads_.push_back({std::thread([load = std::move(load), done] {
      try {
        load();
      } catch (...) {
        // the thread that needs it gets the error
      }
      done->store(true);
    }), done});
    lock.unlock();
    for (auto& t : finished) t.join();
  }

 private:
  std::mutex mu_;
  struct Load {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set when the load has returned
  };
  std::vector<Load> loads_;
};

BackgroundLoads& background_loads() {
  static BackgroundLoads loads;
  return loads;
}

// cuBLASLt's static initializers take 60-85 ms (H200 machine), during which the process's other
// dlopen calls (cuDNN's sub-libraries) wait for the loader's lock: they run on a thread of their
// own from a CUDA session's early start (once the driver is up) or the device's first use. A
// process that never multiplies matrices on the GPU pays one core's 60-85 ms.
void start_loading_cublaslt() {
  static std::once_flag started;
  std::call_once(started, [] { background_loads().start([] { lt(); }); });
}

// The pinned halves staged_copy uses (caller: the device is current).
void allocate_staging(DeviceState& s) {
  std::lock_guard lock(s.staging_mu);
  if (s.pinned) return;
  profiler::detail::PhaseScope phase("pinned staging buffers");
  const size_t half = size_t(16) << 20;
  char* pinned = nullptr;
  INGOT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 2 * half, cudaHostAllocDefault));
  // Not recorded here: an event never recorded is complete for cudaEventSynchronize, and this runs
  // on a background thread that may overlap a CUDA graph capture on the device's stream (a record
  // there joins the capture, and synchronizing on a captured event fails: "invalid argument").
  for (auto& e : s.pinned_done) INGOT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  s.pinned_half = half;
  s.pinned = pinned;
}

// cuDNN 9 opens its sub-libraries when first needed: the graph API and its engines took 20-30 ms
// of a cold session's first convolution on the H200. A loaded package whose stored choices include
// graph-API convolutions opens them ahead (no context needed), beside the driver's start; cuDNN's own
// dlopen then finds them loaded. Never closed, like cuDNN's; a name that does not open is left to
// cuDNN to report. (The legacy API's convolutions opened none of libcudnn_ops/cnn there.)
void preload_cudnn_graph_libraries() {
  profiler::detail::PhaseScope phase("preload cuDNN libraries");
  for (const char* name :
       {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9"}) {
    (void)dlopen(name, RTLD_NOW | RTLD_LOCAL);
  }
}

DeviceState& state(int device) {
  if (device < 0 || device >= std::min(device_count(), kMaxDevices)) {
    fail("CUDA device {} does not exist ({} visible)", device, device_count());
  }
  DeviceState& s = states()[size_t(device)];
  std::call_once(s.init, [&] {
    profiler::detail::PhaseScope phase("CUDA context and stream");
    INGOT_CUDA_CHECK(cudaSetDevice(device));
    INGOT_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    start_loading_cublaslt();
  });
  return s;
}

DeviceState& current() { return state(current_device()); }

bool early_start() { return flags::enabled("INGOT_CUDA_EARLY_START"); }

bool device_exists(int device) { return device >= 0 && device < std::min(device_count(), kMaxDevices); }

// The background loads are joined before the CUDA runtime's own teardown at exit, which it
// registered when it initialized (on the start thread, for a session whose load began before any
// CUDA call): handlers registered later run first. Called once the runtime is up.
void join_background_loads_at_exit() {
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit([] { background_loads().join_all(); }); });
}

// Host<->device copy through the pinned staging halves.
void staged_copy(void* dst, const void* src, size_t nbytes, bool to_device, int device) {
  DeviceState& s = state(device);
  if (s.capturing) {
    fail("a copy between host and cuda:{} was asked for while capturing a CUDA graph (it cannot be replayed)",
         device);
  }
  std::unique_lock lock(s.staging_mu, std::try_to_lock);
  if (!lock.owns_lock() || !s.pinned) {
    // The halves are being pinned (or serve another thread's copy): straight from pageable memory.
    // The CUDA runtime stages such a copy itself and returns once the source may be reused; one to
    // the host has arrived when the stream is synchronized.
    INGOT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                     s.stream));
    if (!to_device) {
      INGOT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      // Pinning 32 MB takes 12-18 ms, and holds the process's memory map meanwhile: every mmap
      // (a large malloc, cudaMalloc) on other threads waits for it (a package's first run on an H100
      // waited 13-19 ms so). So the halves are pinned after the first copy to the host (a first
      // output), in the background; copies go from pageable memory until they exist.
      if (!s.staging_started.exchange(true)) {
        background_loads().start([device] {
          INGOT_CUDA_CHECK(cudaSetDevice(device));
          allocate_staging(states()[size_t(device)]);
        });
      }
    }
    return;
  }
  for (size_t done = 0; done < nbytes;) {
    size_t n = std::min(s.pinned_half, nbytes - done);
    int h = s.next_half;
    s.next_half ^= 1;
    char* stage = s.pinned + size_t(h) * s.pinned_half;
    INGOT_CUDA_CHECK(cudaEventSynchronize(s.pinned_done[size_t(h)]));
    if (to_device) {
      std::memcpy(stage, static_cast<const char*>(src) + done, n);
      INGOT_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + done, stage, n, cudaMemcpyHostToDevice, s.stream));
      INGOT_CUDA_CHECK(cudaEventRecord(s.pinned_done[size_t(h)], s.stream));
    } else {
      INGOT_CUDA_CHECK(
          cudaMemcpyAsync(stage, static_cast<const char*>(src) + done, n, cudaMemcpyDeviceToHost, s.stream));
      INGOT_CUDA_CHECK(cudaEventRecord(s.pinned_done[size_t(h)], s.stream));
      INGOT_CUDA_CHECK(cudaEventSynchronize(s.pinned_done[size_t(h)]));
      std::memcpy(static_cast<char*>(dst) + done, stage, n);
    }
    done += n;
  }
}

class CudaMemory final : public DeviceMemory {
 public:
  void* allocate(size_t nbytes, int device_index) override {
    state(device_index);  // stream exists before memory is handed out
    return allocator().allocate(nbytes, device_index);
  }
  void deallocate(void* ptr, int device_index) override { allocator().deallocate(ptr, device_index); }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) override {
    if (nbytes == 0) return;
    bool dst_gpu = dst_device.type == DeviceType::CUDA, src_gpu = src_device.type == DeviceType::CUDA;
    if (dst_gpu && src_gpu) {
      if (dst_device.index == src_device.index) {
        INGOT_CUDA_CHECK(cudaSetDevice(dst_device.index));
        INGOT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, state(dst_device.index).stream));
      } else {
        // Across devices: both streams' earlier work must be done first.
        INGOT_CUDA_CHECK(cudaStreamSynchronize(state(src_device.index).stream));
        INGOT_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
      }
    } else if (dst_gpu) {
      INGOT_CUDA_CHECK(cudaSetDevice(dst_device.index));
      staged_copy(dst, src, nbytes, true, dst_device.index);
    } else {
      INGOT_CUDA_CHECK(cudaSetDevice(src_device.index));
      staged_copy(dst, src, nbytes, false, src_device.index);
    }
  }
  void fill_zero(void* dst, size_t nbytes, int device_index) override {
    INGOT_CUDA_CHECK(cudaSetDevice(device_index));
    INGOT_CUDA_CHECK(cudaMemsetAsync(dst, 0, nbytes, state(device_index).stream));
  }
  bool available(int device_index) override { return device_index >= 0 && device_index < device_count(); }
  void synchronize(int device_index) override {
    if (state(device_index).capturing) {
      fail("something waited for cuda:{} while a CUDA graph was being captured (it cannot be replayed)",
           device_index);
    }
    INGOT_CUDA_CHECK(cudaSetDevice(device_index));
    INGOT_CUDA_CHECK(cudaStreamSynchronize(state(device_index).stream));
  }
};

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, size_t nodes, int pool, int device)
      : exec_(exec), nodes_(nodes), pool_(pool), device_(device) {}
  ~CudaGraph() override {
    cudaGraphExecDestroy(exec_);
    allocator().release_pool(pool_, device_);
  }
  void replay() override {
    INGOT_CUDA_CHECK(cudaSetDevice(device_));
    INGOT_CUDA_CHECK(cudaGraphLaunch(exec_, state(device_).stream));
  }
  size_t nodes() const override { return nodes_; }

 private:
  cudaGraphExec_t exec_;
  size_t nodes_;
  int pool_, device_;
};

class CudaGraphs final : public DeviceGraphs {
 public:
  void begin_capture(int device) override {
    DeviceState& s = state(device);
    if (s.capturing) fail("a CUDA graph capture is already on for cuda:{}", device);
    INGOT_CUDA_CHECK(cudaSetDevice(device));
    // Relaxed: library calls inside the capture (cuDNN, cuBLASLt) may query or allocate.
    INGOT_CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeRelaxed));
    s.capturing = true;
    pool_[size_t(device)] = allocator().begin_pool(device);
  }
  std::unique_ptr<DeviceGraph> end_capture(int device, std::string* why) override {
    DeviceState& s = state(device);
    if (!s.capturing) fail("no CUDA graph capture is on for cuda:{}", device);
    s.capturing = false;
    allocator().end_capture(device);
    int pool = pool_[size_t(device)];
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(s.stream, &graph);
    cudaGraphExec_t exec = nullptr;
    size_t nodes = 0;
    if (err == cudaSuccess) err = cudaGraphGetNodes(graph, nullptr, &nodes);
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      if (why) *why = cudaGetErrorString(err);
      allocator().release_pool(pool, device);
      return nullptr;
    }
    return std::make_unique<CudaGraph>(exec, nodes, pool, device);
  }

 private:
  std::array<int, kMaxDevices> pool_{};
};

struct CudaBackend final : Backend {
  DeviceType type() const override { return DeviceType::CUDA; }
  std::string_view name() const override { return "cuda"; }
  DeviceMemory& memory() override { return memory_; }
  DeviceGraphs* graphs() override { return &graphs_; }
  const DeviceTimer* timer() override { return device_timer(); }
  void* native_stream(int) override { return stream(); }  // the current device's: kernels run with theirs current
  std::unique_ptr<Communicator> connect(const ConnectOptions& options) override { return connect_nccl(options); }
  std::string arch(int device_index) override {
    if (device_index >= device_count()) return "";
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index) != cudaSuccess) {
      (void)cudaGetLastError();
      return "";
    }
    return "sm_" + std::to_string(major) + std::to_string(minor);
  }
  void start_async(int device_index) override {
    if (!early_start() || device_index < 0 || device_index >= kMaxDevices) return;
    if (started_[size_t(device_index)].exchange(true)) return;  // once per device
    background_loads().start([device_index] {
      if (!device_exists(device_index)) return;  // the session's own checks say so
      // Once the driver has started (loading it beside the driver's start slowed both, and the
      // package's read: the H200 machine), beside the context's creation: it needs no context.
      start_loading_cublaslt();
      INGOT_CUDA_CHECK(cudaSetDevice(device_index));  // this thread's current device only
      state(device_index);
    });
  }
  void prepare_async(int device_index) override {
    if (!early_start() || device_index < 0 || device_index >= kMaxDevices) return;
    // Before waiting for the context (the driver may still be starting): the cuDNN libraries the
    // stored choices will load, and the workers that build their plans once the context exists.
    if (flags::enabled("INGOT_CUDNN_PRELOAD") && ConvGraph::has_stored_plans())
      background_loads().start(preload_cudnn_graph_libraries);
    if (const int64_t workers = flags::integer("INGOT_CUDNN_PREBUILD"); workers > 0) {
      if (const int queued = ConvGraph::queue_stored_plans(); queued > 0) {
        // A few plans per worker at least: each worker makes a cuDNN handle of its own (~3.5 ms).
        for (int64_t i = 0; i < std::min<int64_t>(workers, (queued + 3) / 4); ++i) {
          background_loads().start([device_index] {
            if (!device_exists(device_index)) return;
            INGOT_CUDA_CHECK(cudaSetDevice(device_index));
            state(device_index);
            ConvGraph::build_queued_plans(device_index);
          });
        }
      }
    }
    if (flags::integer("INGOT_CUDNN_PREBUILD") > 0 && AttentionGraph::has_stored_plans()) {
      background_loads().start([device_index] {
        if (!device_exists(device_index)) return;
        INGOT_CUDA_CHECK(cudaSetDevice(device_index));
        state(device_index);
        AttentionGraph::prebuild_stored_plans();
      });
    }
    if (flags::enabled("INGOT_CUBLASLT_WARMUP")) {
      background_loads().start([device_index] {
        if (!device_exists(device_index)) return;
        INGOT_CUDA_CHECK(cudaSetDevice(device_index));
        state(device_index);
        warm_stored_products();
      });
    }
    if (!device_exists(device_index)) return;
    // The context start_async began: a session's load returns with its device ready (no thread is
    // still creating it when a process that only loaded a session exits). The caller's current
    // device is left as it was.
    state(device_index);
    join_background_loads_at_exit();
  }
  std::array<std::atomic<bool>, kMaxDevices> started_{};
  CudaMemory memory_;
  CudaGraphs graphs_;
};

const bool g_registered = [] {
  static CudaBackend backend;
  register_backend(backend);
  return true;
}();

}  // namespace

bool available() { return device_count() > 0; }

int device_count() {
  static int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

std::string device_name(int device) {
  cudaDeviceProp p{};
  INGOT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p.name;
}

int sm_count(int device) {
  static std::array<int, kMaxDevices> counts{};
  if (!counts[size_t(device)]) {
    INGOT_CUDA_CHECK(cudaDeviceGetAttribute(&counts[size_t(device)], cudaDevAttrMultiProcessorCount, device));
  }
  return counts[size_t(device)];
}

std::string arch_name() {
  static std::array<std::string, kMaxDevices> names;
  const int d = current_device();
  if (names[size_t(d)].empty()) {
    int major = 0, minor = 0;
    INGOT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d));
    INGOT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d));
    names[size_t(d)] = "sm_" + std::to_string(major) + std::to_string(minor);
  }
  return names[size_t(d)];
}

cudaStream_t stream() { return current().stream; }

void synchronize() {
  DeviceState& s = current();
  if (s.capturing) fail("a kernel waited for the GPU while a CUDA graph was being captured (it cannot be replayed)");
  INGOT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

const CublasLt& lt() {
  static const std::pair<CublasLt, std::string> loaded = [] {
    profiler::detail::PhaseScope phase("load cuBLASLt");
    CublasLt a;
    static DynamicLibrary lib({"libcublasLt.so.13", "libcublasLt.so"});
    lib.get(a.create, "cublasLtCreate");
    lib.get(a.get_version, "cublasLtGetVersion");
    lib.get(a.matmul_desc_create, "cublasLtMatmulDescCreate");
    lib.get(a.matmul_desc_destroy, "cublasLtMatmulDescDestroy");
    lib.get(a.matmul_desc_set_attribute, "cublasLtMatmulDescSetAttribute");
    lib.get(a.matrix_layout_create, "cublasLtMatrixLayoutCreate");
    lib.get(a.matrix_layout_destroy, "cublasLtMatrixLayoutDestroy");
    lib.get(a.matrix_layout_set_attribute, "cublasLtMatrixLayoutSetAttribute");
    lib.get(a.matmul_preference_create, "cublasLtMatmulPreferenceCreate");
    lib.get(a.matmul_preference_destroy, "cublasLtMatmulPreferenceDestroy");
    lib.get(a.matmul_preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute");
    lib.get(a.matmul_algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    lib.get(a.matmul_algo_check, "cublasLtMatmulAlgoCheck");
    lib.get(a.matmul, "cublasLtMatmul");
    return std::pair{a, lib.why_not()};
  }();
  if (!loaded.second.empty()) fail("cuBLASLt is not available: {}", loaded.second);
  return loaded.first;
}

cublasLtHandle_t cublaslt() {
  DeviceState& s = current();
  if (!s.lt) {
    const CublasLt& api = lt();
    profiler::detail::PhaseScope phase("cuBLASLt handle");
    INGOT_CUBLAS_CHECK(api.create(&s.lt));
  }
  return s.lt;
}

std::string cudnn_key_prefix() { return "cudnn" + std::to_string(cudnnGetVersion()) + "."; }

cudnnHandle_t cudnn() {
  DeviceState& s = current();
  if (!s.dnn) {
    profiler::detail::PhaseScope phase("cuDNN handle");
    INGOT_CUDNN_CHECK(cudnnCreate(&s.dnn));
    INGOT_CUDNN_CHECK(cudnnSetStream(s.dnn, s.stream));
  }
  return s.dnn;
}

bool capturing() {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  INGOT_CUDA_CHECK(cudaStreamIsCapturing(stream(), &capture));
  return capture != cudaStreamCaptureStatusNone;
}

ColdKernels cold_kernels() {
  static const ColdKernels mode = ColdKernels(std::clamp<int64_t>(flags::integer("INGOT_CUDA_COLD_KERNELS"), 0, 2));
  return mode;
}

namespace {
std::atomic<int64_t> g_cold_calls{0};
}  // namespace
void count_cold_kernel_call() { g_cold_calls.fetch_add(1, std::memory_order_relaxed); }
int64_t cold_kernel_calls() { return g_cold_calls.load(std::memory_order_relaxed); }

std::optional<size_t> fastest_of(size_t n, const std::function<bool(size_t)>& run) {
  if (capturing()) return std::nullopt;
  cudaEvent_t start = nullptr, stop = nullptr;
  INGOT_CUDA_CHECK(cudaEventCreate(&start));
  INGOT_CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = std::numeric_limits<float>::infinity();
  std::optional<size_t> best;
  for (size_t i = 0; i < n; ++i) {
    if (!run(i)) continue;  // warm-up, and whether the candidate runs at all
    float ms = std::numeric_limits<float>::infinity();
    for (int rep = 0; rep < 3; ++rep) {
      INGOT_CUDA_CHECK(cudaEventRecord(start, stream()));
      run(i);
      INGOT_CUDA_CHECK(cudaEventRecord(stop, stream()));
      INGOT_CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      INGOT_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms = std::min(ms, t);
    }
    if (!best || ms < best_ms) best_ms = ms, best = i;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

void* workspace(size_t nbytes) {
  DeviceState& s = current();
  if (nbytes > s.workspace_bytes) {
    int device = current_device();
    if (s.workspace) allocator().retire_workspace(s.workspace, device);  // stream-ordered reuse
    s.workspace = allocator().allocate(nbytes, device);
    s.workspace_bytes = nbytes;
  }
  return s.workspace;
}

MemoryStats memory_stats() {
  std::lock_guard<std::mutex> lock(allocator().mu);
  return allocator().stats;
}

void reset_peak_memory() {
  std::lock_guard<std::mutex> lock(allocator().mu);
  allocator().stats.peak_allocated = allocator().stats.allocated;
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(allocator().mu);
  for (int d = 0; d < std::min(device_count(), kMaxDevices); ++d) allocator().release_cached(d);
}

}  // namespace ingot::cuda
