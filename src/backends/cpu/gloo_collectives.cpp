// The CPU backend's Communicator (core/collectives.h): Gloo, from the plugin libingot_gloo.so
// (backends/cpu/gloo_plugin.h), driven by a worker thread of its own so that a queued all-reduce
// runs while the caller's backward pass goes on; join() waits for the queue.
#include <dlfcn.h>
#include <fmt/format.h>
#include <ingot/error.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "backends/cpu/gloo_plugin.h"
#include "core/dynamic_library.h"
#include "core/flags.h"
#include "profiler/hooks.h"

namespace ingot::cpu {
namespace {

// Where the plugin is looked for: INGOT_GLOO_PLUGIN (a path), the folder of the binary holding this
// code (libingot.so, or a program linked with the static library), then the build and install
// folders this library was configured with.
std::vector<std::string> plugin_candidates() {
  std::vector<std::string> paths;
  if (std::string path = flags::text("INGOT_GLOO_PLUGIN"); !path.empty()) paths.push_back(path);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_candidates), &info) && info.dli_fname) {
    std::filesystem::path self = std::filesystem::weakly_canonical(info.dli_fname);
    paths.push_back((self.parent_path() / kGlooPluginName).string());
    paths.push_back((self.parent_path().parent_path() / kGlooPluginName).string());
  }
#ifdef INGOT_PLUGIN_BUILD_DIR
  paths.push_back(std::string(INGOT_PLUGIN_BUILD_DIR) + "/" + kGlooPluginName);
#endif
#ifdef INGOT_PLUGIN_INSTALL_DIR
  paths.push_back(std::string(INGOT_PLUGIN_INSTALL_DIR) + "/" + kGlooPluginName);
#endif
  return paths;
}

GlooConnect gloo_connect() {
  static GlooConnect connect = [] {
    std::vector<std::string> paths = plugin_candidates();
    std::string tried;
    static std::vector<std::unique_ptr<DynamicLibrary>> opened;  // kept for the process
    for (const std::string& p : paths) {
      if (!std::filesystem::exists(p)) continue;
      auto& lib = opened.emplace_back(std::make_unique<DynamicLibrary>(std::initializer_list<const char*>{p.c_str()}));
      GlooConnect fn = nullptr;
      lib->get(fn, kGlooConnectSymbol);
      if (lib->why_not().empty()) return fn;
      tried += fmt::format("; {}: {}", p, lib->why_not());
    }
    if (tried.empty()) tried = "; looked in " + fmt::format("{}", fmt::join(paths, ", "));
    fail("the gloo backend needs {} (built when Debian's libgloo-dev is installed; INGOT_GLOO_PLUGIN names "
         "another){}", kGlooPluginName, tried);
    return GlooConnect(nullptr);
  }();
  return connect;
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const ConnectOptions& o) : world_size_(o.world_size) {
    GlooConnect connect = gloo_connect();
    try {
      group_.reset(connect(o.store, o.prefix.c_str(), o.rank, o.world_size, int64_t(o.timeout.count())));
    } catch (const std::exception& e) {
      fail("gloo: rank {} could not connect to the other {} rank(s): {}", o.rank, o.world_size - 1, e.what());
    }
    worker_ = std::thread([this] { work(); });
  }

  ~GlooCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    DType dt = t.dtype();
    bool is_float = dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16;
    if (op == ReduceOp::Avg && !is_float)
      fail("gloo all-reduce: an average of {} (only float tensors average)", t.describe());
    if (!is_float && dt != DType::UInt8 && dt != DType::Int8 && dt != DType::Int16 && dt != DType::Int32 &&
        dt != DType::Int64)
      fail("gloo all-reduce: {} has no reduction on the CPU (float32/64, float16 and integers do)", t.describe());
    enqueue("gloo all-reduce", [this, t, op, dt] {
      ReduceOp gop = op == ReduceOp::Avg ? ReduceOp::Sum : op;
      group_->all_reduce(t.raw_data(), size_t(t.numel()), int(dt), gop);
      if (op == ReduceOp::Avg) divide(t, world_size_);
    });
  }

  void broadcast(const Tensor& t, int root) override {
    enqueue("gloo broadcast", [this, t, root] { group_->broadcast(t.raw_data(), t.nbytes(), root); });
  }

  void join() override {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      lock.unlock();
      std::rethrow_exception(e);
    }
  }

  void barrier() override {
    enqueue("gloo barrier", [this] { group_->barrier(); });
    join();
  }

  std::string describe() const override { return fmt::format("gloo over TCP on this host ({} ranks)", world_size_); }

 private:
  static void divide(const Tensor& t, int n) {
    if (t.dtype() == DType::Float32) {
      for (float& v : t.span<float>()) v /= float(n);
    } else if (t.dtype() == DType::Float64) {
      for (double& v : t.span<double>()) v /= double(n);
    } else {
      Tensor f = t.cast(DType::Float32);
      for (float& v : f.span<float>()) v /= float(n);
      Tensor back = f.cast(t.dtype());
      std::memcpy(t.raw_data(), back.raw_data(), t.nbytes());
    }
  }

  // `name` (static): the operation's phase in a profile, on the communicator's thread (a timeline
  // shows it beside the backward pass it overlaps).
  void enqueue(const char* name, std::function<void()> op) {
    {
      std::lock_guard lock(mutex_);
      if (error_) {  // a failed group stays failed: report it rather than queue behind it
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
      }
      queue_.emplace_back(name, std::move(op));
    }
    wake_.notify_one();
  }

  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      auto [name, op] = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      bool failed = error_ != nullptr;
      lock.unlock();
      if (!failed) {
        try {
          profiler::detail::PhaseScope phase(name);
          op();
        } catch (const std::exception& e) {
          std::lock_guard relock(mutex_);
          error_ = std::make_exception_ptr(Error(fmt::format("gloo: {}", e.what())));
        }
      }
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  int world_size_;
  std::unique_ptr<GlooGroup> group_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<const char*, std::function<void()>>> queue_;
  bool busy_ = false, stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Communicator> connect_gloo(const ConnectOptions& options) {
  return std::make_unique<GlooCommunicator>(options);
}

}  // namespace ingot::cpu
