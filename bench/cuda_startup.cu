// The floor of a GPU process's cold start, with no Ingot code: how long CUDA itself takes from
// process start to each of the steps an inference process needs (the driver, the primary context,
// a stream, a first kernel launch (CUDA loads modules lazily: the first launch pays for it), cuDNN's
// and cuBLASLt's handles, a first weight upload), and process exit. Ingot's own share of a cold
// start is `ingot run`'s time minus this (docs/PERFORMANCE.md "Cold start (H200)").
//
//   ingot-bench-cuda-startup [--upload-mb N]
//
// Prints one line per step: milliseconds since the process started (from /proc/self/stat's start
// time, so dynamic loading before main counts) and the step's own time. Run it several times: the
// first run of a machine pays for reading the libraries from disk. The last line is the end of
// main: a caller that times the whole process (scripts/gpu-test.sh `startup`) gets the cost of
// exit (atexit handlers, CUDA's teardown) as its wall time minus that.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Milliseconds since this process started (CLOCK_BOOTTIME vs /proc/self/stat's starttime, field
// 22, in clock ticks: 10 ms resolution on most kernels; the steps' own times are exact).
double process_age_ms() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  std::getline(f, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  const double start_s = std::strtod(field.c_str(), nullptr) / double(sysconf(_SC_CLK_TCK));
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return (double(now.tv_sec) + double(now.tv_nsec) * 1e-9 - start_s) * 1e3;
}

// A kernel of this program's own module: its first launch loads the module (lazy loading, the
// default since CUDA 12.2), the next ones only launch.
__global__ void touch(float* p) { p[threadIdx.x] += 1.0f; }

using Clock = std::chrono::steady_clock;
Clock::time_point g_main;
double g_age_at_main = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "cuda_startup: %s failed\n", what);
    std::exit(1);
  }
}

template <class F>
void step(const char* name, F&& f) {
  const auto t0 = Clock::now();
  f();
  const auto t1 = Clock::now();
  const double since_main = std::chrono::duration<double, std::milli>(t1 - g_main).count();
  std::printf("%-34s %9.1f ms since start %9.1f ms\n", name, g_age_at_main + since_main,
              std::chrono::duration<double, std::milli>(t1 - t0).count());
}

}  // namespace

int main(int argc, char** argv) {
  g_main = Clock::now();
  g_age_at_main = process_age_ms();
  size_t upload_mb = 100;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--upload-mb") == 0) upload_mb = size_t(std::atol(argv[i + 1]));
  }
  std::printf("%-34s %9.1f ms since start (process start to main: loading and linking)\n", "main", g_age_at_main);
  int n = 0;
  step("cudaGetDeviceCount (driver init)", [&] { check(cudaGetDeviceCount(&n) == cudaSuccess && n > 0, "cudaGetDeviceCount"); });
  step("cudaFree(0) (primary context)", [&] { check(cudaFree(nullptr) == cudaSuccess, "cudaFree"); });
  cudaStream_t stream = nullptr;
  step("cudaStreamCreate", [&] {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
  });
  cudnnHandle_t dnn = nullptr;
  step("cudnnCreate", [&] { check(cudnnCreate(&dnn) == CUDNN_STATUS_SUCCESS, "cudnnCreate"); });
  void* lt_lib = nullptr;
  step("dlopen libcublasLt", [&] {
    lt_lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    check(lt_lib != nullptr, "dlopen(libcublasLt.so.13)");
  });
  step("cublasLtCreate", [&] {
    auto create = reinterpret_cast<decltype(&cublasLtCreate)>(dlsym(lt_lib, "cublasLtCreate"));
    cublasLtHandle_t h = nullptr;
    check(create && create(&h) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate");
  });
  void* device = nullptr;
  void* pinned = nullptr;
  const size_t bytes = upload_mb << 20;
  std::vector<char> host(bytes, 1);
  step("cudaMalloc", [&] { check(cudaMalloc(&device, bytes) == cudaSuccess, "cudaMalloc"); });
  step("first kernel launch (module load)", [&] {
    touch<<<1, 32, 0, stream>>>(static_cast<float*>(device));
    check(cudaStreamSynchronize(stream) == cudaSuccess, "first kernel launch");
  });
  step("second kernel launch", [&] {
    touch<<<1, 32, 0, stream>>>(static_cast<float*>(device));
    check(cudaStreamSynchronize(stream) == cudaSuccess, "second kernel launch");
  });
  step("cudaHostAlloc 32 MB", [&] { check(cudaHostAlloc(&pinned, 32 << 20, cudaHostAllocDefault) == cudaSuccess, "cudaHostAlloc"); });
  step("upload (pageable, cudaMemcpy)", [&] {
    check(cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy");
  });
  step("upload (staged through pinned)", [&] {
    const size_t half = 16 << 20;
    for (size_t done = 0; done < bytes; done += half) {
      const size_t k = std::min(half, bytes - done);
      char* stage = static_cast<char*>(pinned) + ((done / half) % 2) * half;
      check(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
      std::memcpy(stage, host.data() + done, k);
      check(cudaMemcpyAsync(static_cast<char*>(device) + done, stage, k, cudaMemcpyHostToDevice, stream) == cudaSuccess,
            "cudaMemcpyAsync");
    }
    check(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
  });
  std::printf("(upload: %zu MB)\n", upload_mb);
  std::printf("%-34s %9.1f ms since start\n", "end of main", g_age_at_main + std::chrono::duration<double, std::milli>(Clock::now() - g_main).count());
  return 0;
}
