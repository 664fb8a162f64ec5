// The CUDA backend's runtime: device discovery, the stream every kernel runs on, library handles,
// a scratch workspace, and checked calls. Everything is created lazily on first use, so a CUDA
// build loads and runs CPU models on a machine without a GPU.
//
// Ordering model: one stream per device. Kernels and device-to-device copies are enqueued on it
// and never wait; the host waits only when it needs device data (a device-to-host copy, a CPU
// fallback reading a device value, returning outputs). Freed device memory goes back to the
// caching allocator at once: the single stream orders its reuse after every earlier use.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <ingot/error.h>

#include "core/device_timer.h"
#include "core/math_mode.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ingot::cuda {

// True when the driver reports at least one device (never throws).
bool available();
int device_count();
std::string device_name(int device = 0);
int sm_count(int device = 0);
std::string arch_name();  // the current device's architecture: "sm_90"

cudaStream_t stream();  // the current device's stream
// Kernel and copy times from CUDA events, NVTX ranges (backends/cuda/profiler_cuda.cpp).
const DeviceTimer* device_timer();
void synchronize();     // waits for the stream; surfaces asynchronous kernel faults as ingot::Error

// cuBLASLt's entry points, from libcublasLt opened with dlopen on first use
// (core/dynamic_library.h): linked, its static initializers cost 70-90 ms at every process start. lt()
// fails with the reason when the library or an entry point is missing.
struct CublasLt {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) matrix_layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) matmul_preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) matmul_preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic = nullptr;
  decltype(&cublasLtMatmulAlgoCheck) matmul_algo_check = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};
const CublasLt& lt();
cublasLtHandle_t cublaslt();  // the current device's handle
cudnnHandle_t cudnn();  // bound to stream()
// "cudnn<version>.": what the tuning keys of cuDNN's choices start with (core/tuning.h), so that
// another cuDNN measures again.
std::string cudnn_key_prefix();
// Scratch memory for library calls (cuBLASLt, cuDNN), valid until the next call on this stream
// that asks for a workspace. Grows on demand.
void* workspace(size_t nbytes);

// Measures alternatives of one library call (cuBLASLt algorithms, cuDNN engines) on the stream:
// run(i) enqueues candidate i and says whether it was accepted; each accepted one runs once to
// warm up and three times timed with CUDA events, and the index of the fastest comes back. Nothing
// comes back when none ran, or while a CUDA graph is being captured (nothing runs then: the caller
// keeps the library's own preference and stores no measurement).
std::optional<size_t> fastest_of(size_t n, const std::function<bool(size_t)>& run);

// Whether the current stream is being captured into a CUDA graph.
bool capturing();

// The cold tier (kernels/tiled_product.cuh): a package's first run does not wait for the cuDNN plans
// and cuBLASLt kernels that background threads are still preparing (their first build or load in a
// fresh process costs milliseconds each); convolutions and matrix products whose plan is not ready
// yet run on Ingot's own tiled kernel instead; in that mode never while a CUDA graph is captured
// (the capture waits, so a replayed graph always has the libraries' kernels).
// INGOT_CUDA_COLD_KERNELS: 0 never, 1 while preparing (the default: ResNet-50's first output 64-96
// ms sooner in fp32 and ~190 in fp16 on an H100, docs/PERFORMANCE.md), 2 always (tests and A/B runs,
// captures included).
enum class ColdKernels { Never, WhilePreparing, Always };
ColdKernels cold_kernels();
void count_cold_kernel_call();  // by the cold tier's callers
int64_t cold_kernel_calls();    // how many ran in this process (tests)

// TF32 for float32 matrix products and convolutions: ingot::allow_tf32() (core/math_mode.h),
// off by default (exact float32); SessionOptions::allow_tf32 turns it on.
using ingot::allow_tf32;
using ingot::set_allow_tf32;

// Caching allocator statistics (bytes).
struct MemoryStats {
  size_t allocated = 0;       // handed out to tensors now
  size_t reserved = 0;        // held from the driver (allocated + cached)
  size_t peak_allocated = 0;  // since process start or reset_peak()
  size_t cuda_mallocs = 0;    // calls that reached cudaMalloc
};
MemoryStats memory_stats();
void reset_peak_memory();
void empty_cache();  // returns every cached (free) block to the driver

[[noreturn]] void fail_cuda(const char* call, const char* detail, const char* file, int line);
const char* cublas_status_name(cublasStatus_t s);

}  // namespace ingot::cuda

// Every CUDA, cuBLAS and cuDNN call is checked; the executor adds the node and op to the message.
#define INGOT_CUDA_CHECK(expr)                                                                       \
  do {                                                                                               \
    cudaError_t ingot_err_ = (expr);                                                                 \
    if (ingot_err_ != cudaSuccess) ::ingot::cuda::fail_cuda(#expr, cudaGetErrorString(ingot_err_), \
                                                            __FILE__, __LINE__);                     \
  } while (0)
#define INGOT_CUBLAS_CHECK(expr)                                                                        \
  do {                                                                                                  \
    cublasStatus_t ingot_st_ = (expr);                                                                  \
    if (ingot_st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      ::ingot::cuda::fail_cuda(#expr, ::ingot::cuda::cublas_status_name(ingot_st_), __FILE__, __LINE__); \
  } while (0)
#define INGOT_CUDNN_CHECK(expr)                                                                                    \
  do {                                                                                                             \
    cudnnStatus_t ingot_st_ = (expr);                                                                              \
    if (ingot_st_ != CUDNN_STATUS_SUCCESS) ::ingot::cuda::fail_cuda(#expr, cudnnGetErrorString(ingot_st_), __FILE__, \
                                                                     __LINE__);                                    \
  } while (0)
// After a kernel launch: catches bad launch configurations at once (faults inside the kernel
// surface at the next synchronizing call).
#define INGOT_CUDA_LAUNCH_CHECK() INGOT_CUDA_CHECK(cudaGetLastError())
