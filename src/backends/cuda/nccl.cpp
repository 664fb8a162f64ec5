// NCCL for data-parallel groups of CUDA processes. libnccl is opened with dlopen on the first
// connect (core/dynamic_library.h): a process that never joins a group does not load it. Rank 0's
// unique id travels through the group's store. Collectives run on a communication stream of the
// communicator's own, each after an event of the compute stream (so the gradients it reads are
// written), and join() makes the compute stream wait for that stream: the backward pass keeps
// queueing kernels while buckets are reduced, as DDP's overlap.
#include "backends/cuda/nccl.h"

#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "core/dynamic_library.h"

namespace ingot::cuda {
namespace {

struct Nccl {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
};

const Nccl& nccl() {
  static const Nccl n = [] {
    static DynamicLibrary lib({"libnccl.so.2", "libnccl.so"});
    Nccl n;
    lib.get(n.get_version, "ncclGetVersion");
    lib.get(n.get_unique_id, "ncclGetUniqueId");
    lib.get(n.comm_init_rank, "ncclCommInitRank");
    lib.get(n.comm_destroy, "ncclCommDestroy");
    lib.get(n.comm_abort, "ncclCommAbort");
    lib.get(n.comm_get_async_error, "ncclCommGetAsyncError");
    lib.get(n.all_reduce, "ncclAllReduce");
    lib.get(n.broadcast, "ncclBroadcast");
    lib.get(n.get_error_string, "ncclGetErrorString");
    lib.get(n.get_last_error, "ncclGetLastError");
    if (std::string why = lib.why_not(); !why.empty()) fail("the nccl backend needs NCCL: {}", why);
    return n;
  }();
  return n;
}

void check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  const char* detail = comm && nccl().get_last_error ? nccl().get_last_error(comm) : "";
  fail("NCCL {}: {}{}{}", what, nccl().get_error_string(r), detail && *detail ? ": " : "", detail ? detail : "");
}

ncclDataType_t nccl_dtype(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32: return ncclFloat32;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float64: return ncclFloat64;
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    default: fail("NCCL all-reduce: {} has no NCCL type", t.describe());
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const ConnectOptions& o) : device_(o.device_index), world_size_(o.world_size), timeout_(o.timeout) {
    const Nccl& n = nccl();
    INGOT_CUDA_CHECK(cudaSetDevice(device_));
    ncclUniqueId id;
    std::string key = o.prefix + "unique-id";
    if (o.rank == 0) {
      check(n.get_unique_id(&id), "ncclGetUniqueId");
      o.store->set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      std::vector<char> bytes = o.store->get(key, o.timeout);
      if (bytes.size() != sizeof(id.internal)) fail("NCCL: rank 0's unique id has {} bytes, not {}", bytes.size(), sizeof(id.internal));
      std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    }
    stream();  // the compute stream exists before the communicator's
    INGOT_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    INGOT_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
    INGOT_CUDA_CHECK(cudaEventCreateWithFlags(&communicated_, cudaEventDisableTiming));
    check(n.comm_init_rank(&comm_, o.world_size, id, o.rank), "ncclCommInitRank");
    int version = 0;
    n.get_version(&version);
    version_ = fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
  }

  ~NcclCommunicator() override {
    if (comm_) {
      cudaSetDevice(device_);
      cudaStreamSynchronize(comm_stream_);
      nccl().comm_destroy(comm_);
    }
    cudaEventDestroy(computed_);
    cudaEventDestroy(communicated_);
    cudaStreamDestroy(comm_stream_);
  }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    ncclDataType_t dt = nccl_dtype(t);
    after_compute();
    check(nccl().all_reduce(t.raw_data(), t.raw_data(), size_t(t.numel()), dt, nccl_op(op), comm_, comm_stream_),
          "all-reduce", comm_);
    in_flight_.push_back(t);
  }

  void broadcast(const Tensor& t, int root) override {
    after_compute();
    check(nccl().broadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, comm_, comm_stream_), "broadcast",
          comm_);
    in_flight_.push_back(t);
  }

  void join() override {
    INGOT_CUDA_CHECK(cudaSetDevice(device_));
    INGOT_CUDA_CHECK(cudaEventRecord(communicated_, comm_stream_));
    INGOT_CUDA_CHECK(cudaStreamWaitEvent(stream(), communicated_, 0));
    in_flight_.clear();  // later reuse of their memory is ordered after the wait on the compute stream
    check_async();
  }

  void barrier() override {
    INGOT_CUDA_CHECK(cudaSetDevice(device_));
    if (!barrier_buffer_.defined()) barrier_buffer_ = Tensor::zeros(DType::Float32, {1}, Device{DeviceType::CUDA, device_});
    all_reduce(barrier_buffer_, ReduceOp::Sum);
    join();
    // Waits for the communication stream with the group's timeout: a rank that never arrives is an
    // error (the communicator is aborted), not a hang.
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      cudaError_t e = cudaStreamQuery(comm_stream_);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) INGOT_CUDA_CHECK(e);
      check_async();
      if (std::chrono::steady_clock::now() > deadline) {
        nccl().comm_abort(comm_);
        comm_ = nullptr;
        fail("NCCL barrier: the other ranks did not arrive within {:.0f} s (communicator aborted)", timeout_.count() / 1000.0);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::string describe() const override { return fmt::format("NCCL {} ({} ranks)", version_, world_size_); }

 private:
  void after_compute() {
    if (!comm_) fail("NCCL: the communicator was aborted after an earlier error");
    INGOT_CUDA_CHECK(cudaSetDevice(device_));
    INGOT_CUDA_CHECK(cudaEventRecord(computed_, stream()));
    INGOT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, computed_, 0));
  }

  void check_async() {
    ncclResult_t async = ncclSuccess;
    check(nccl().comm_get_async_error(comm_, &async), "ncclCommGetAsyncError", comm_);
    check(async, "asynchronous error", comm_);
  }

  int device_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  std::string version_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t computed_ = nullptr, communicated_ = nullptr;
  std::vector<Tensor> in_flight_;
  Tensor barrier_buffer_;
};

}  // namespace

std::unique_ptr<Communicator> connect_nccl(const ConnectOptions& options) {
  return std::make_unique<NcclCommunicator>(options);
}

}  // namespace ingot::cuda
