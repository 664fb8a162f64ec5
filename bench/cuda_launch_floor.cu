// CUDA's own host cost per asynchronous call on this machine (no Ingot code): an empty kernel, a
// kernel with the parameters of an elementwise binary op, a 4-byte cudaMemsetAsync and an event
// record, each timed as autograd_bench.cpp's host_ns (200 back-to-back calls, the stream drained
// between samples, median of 15). The floor under an eager CUDA op's host time.
//
//   ingot-bench-cuda-launch [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

__global__ void empty_kernel() {}

struct Functor {
  double s;
};
__global__ void binary_like_kernel(const float* a, const float* b, float* y, long long n, Functor f) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i] * float(f.s);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class Fn>
double host_ns(cudaStream_t s, Fn fn) {
  const int calls = 200, samples = 15;
  for (int i = 0; i < calls; ++i) fn();
  check(cudaStreamSynchronize(s), "sync");
  std::vector<double> t;
  for (int k = 0; k < samples; ++k) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls);
    check(cudaStreamSynchronize(s), "sync");
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json = argv[i + 1];
  }
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  float* buf = nullptr;
  check(cudaMalloc(&buf, 3 * sizeof(float)), "malloc");
  cudaEvent_t e;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  const double empty = host_ns(s, [&] { empty_kernel<<<1, 256, 0, s>>>(); });
  const double binary = host_ns(s, [&] { binary_like_kernel<<<1, 256, 0, s>>>(buf, buf + 1, buf + 2, 1, Functor{1.0}); });
  const double memset = host_ns(s, [&] { check(cudaMemsetAsync(buf, 0, 4, s), "memset"); });
  const double event = host_ns(s, [&] { check(cudaEventRecord(e, s), "event record"); });
  const double last_error = host_ns(s, [&] { (void)cudaGetLastError(); });
  char out[512];
  std::snprintf(out, sizeof out,
                "{\n  \"empty_kernel_host_ns\": %.1f,\n  \"binary_kernel_host_ns\": %.1f,\n  \"memset_host_ns\": %.1f,\n"
                "  \"event_record_host_ns\": %.1f,\n  \"get_last_error_host_ns\": %.1f\n}\n",
                empty, binary, memset, event, last_error);
  std::fputs(out, stdout);
  if (!json.empty()) std::ofstream(json) << out;
  return 0;
}
