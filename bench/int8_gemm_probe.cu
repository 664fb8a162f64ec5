// Is cuBLASLt's int8 GEMM a route to int8 convolutions faster than fp16 on this GPU (issue 22)?
// ResNet-50's 1x1 convolutions at batch 32 as GEMMs, channels last: Y[M = N*H*W, Cout] =
// X[M, Cin] W[Cout, Cin]^T, each timed three ways with cuBLASLt only (no Ingot code):
//   fp16   fp16 operands and output, float32 accumulation, bias + ReLU epilogue (what an fp16
//          package's fused 1x1 convolution computes);
//   int8   int8 operands and output, int32 accumulation, a float32 scale per output channel
//          (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO), float32 bias + ReLU epilogue: the
//          whole requantized layer in one call, as a symmetric per-channel int8 package needs it;
//   int8+r the int8 case with a residual added (beta 1 over an int8 C, as ResNet's block ends need);
//   int32  int8 operands, int32 output (the layer would still need an epilogue pass).
// The best of cuBLASLt's first 8 heuristic algorithms per case, mean of 50 calls after 10 warm-ups
// (CUDA events), and TOPS = 2 M N K / time. A case cuBLASLt refuses prints why.
//
//   ingot-bench-int8-gemm [--batch 32]
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

bool ok(cublasStatus_t s, const char* what, std::string* why) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  if (why) *why = std::string(what) + ": status " + std::to_string(int(s));
  return false;
}

struct Case {
  const char* layer;
  int64_t hw, cin, cout;  // spatial size (H = W), channels in and out
};

// One GEMM configuration: operand and output types, compute and scale types, epilogue.
struct Config {
  const char* name;
  cudaDataType_t ab, d, scale, bias;
  cublasComputeType_t compute;
  bool vector_alpha, epilogue, residual = false;  // residual: D = alpha AB + 1 * C, C an int8 input
};

// Mean milliseconds per call of the best of the first 8 heuristic algorithms, or a negative value
// with `why` filled in when cuBLASLt has none for the configuration.
double time_gemm(cublasLtHandle_t lt, const Config& c, int64_t m, int64_t n, int64_t k, const void* x,
                 const void* w, void* y, const void* alpha, const void* bias, void* workspace, size_t ws_bytes,
                 cudaStream_t stream, std::string* why) {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  double best = -1;
  // Column-major view: D[n, m] (= Y row-major [m, n]) = op(A)[n, k] * B[k, m], A = W stored [k, n]
  // column-major (row-major [n, k]) transposed, B = X stored [k, m] column-major: the "TN" form
  // cuBLASLt's integer kernels require.
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  do {
    if (!ok(cublasLtMatmulDescCreate(&desc, c.compute, c.scale), "matmul desc", why)) break;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    if (c.vector_alpha) {
      const cublasLtPointerMode_t mode = c.residual ? CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST
                                                    : CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
      if (!ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode)),
              "alpha vector", why))
        break;
    }
    if (c.epilogue) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
      const cudaDataType_t bt = c.bias;
      if (!ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)),
              "bias type", why))
        break;
    }
    cublasLtMatrixLayoutCreate(&la, c.ab, k, n, k);
    cublasLtMatrixLayoutCreate(&lb, c.ab, k, m, k);
    cublasLtMatrixLayoutCreate(&ld, c.d, n, m, n);
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
    cublasLtMatmulHeuristicResult_t results[8];
    int found = 0;
    if (!ok(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 8, results, &found), "heuristic", why))
      break;
    if (found == 0) {
      if (why) *why = "no algorithm";
      break;
    }
    const float one = 1.0f, zero = 0.0f, beta_f = c.residual ? 1.0f : 0.0f;
    const int32_t one_i = 1, zero_i = 0;
    const void* a_ptr = c.vector_alpha ? alpha : (c.scale == CUDA_R_32I ? static_cast<const void*>(&one_i) : &one);
    const void* b_ptr = c.scale == CUDA_R_32I ? static_cast<const void*>(&zero_i) : c.residual ? &beta_f : &zero;
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    for (int i = 0; i < found; ++i) {
      auto call = [&] {
        return cublasLtMatmul(lt, desc, a_ptr, w, la, x, lb, b_ptr, y, ld, y, ld, &results[i].algo, workspace,
                              ws_bytes, stream);
      };
      if (call() != CUBLAS_STATUS_SUCCESS) continue;
      for (int r = 0; r < 10; ++r) call();
      check(cudaEventRecord(start, stream), "record");
      for (int r = 0; r < 50; ++r) call();
      check(cudaEventRecord(stop, stream), "record");
      check(cudaEventSynchronize(stop), "sync");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
      if (best < 0 || ms / 50 < best) best = ms / 50;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best < 0 && why) *why = "every algorithm failed to run";
  } while (false);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (desc) cublasLtMatmulDescDestroy(desc);
  check(cudaGetLastError(), "a cuBLASLt call");
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 32;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: ingot-bench-int8-gemm [--batch N]\n");
      return 2;
    }
  }
  // ResNet-50's 1x1 convolutions (stride 1), one of each shape.
  const Case cases[] = {{"conv2_x reduce", 56, 256, 64},  {"conv2_x expand", 56, 64, 256},
                        {"conv3_x reduce", 28, 512, 128}, {"conv3_x expand", 28, 128, 512},
                        {"conv4_x reduce", 14, 1024, 256}, {"conv4_x expand", 14, 256, 1024},
                        {"conv5_x reduce", 7, 2048, 512}, {"conv5_x expand", 7, 512, 2048}};
  const Config configs[] = {
      {"fp16", CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUDA_R_16F, CUBLAS_COMPUTE_32F, false, true},
      {"int8", CUDA_R_8I, CUDA_R_8I, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32I, true, true},
      {"int8+r", CUDA_R_8I, CUDA_R_8I, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32I, true, true, true},
      {"int32", CUDA_R_8I, CUDA_R_32I, CUDA_R_32I, CUDA_R_32I, CUBLAS_COMPUTE_32I, false, false},
  };
  constexpr int kConfigs = int(sizeof(configs) / sizeof(configs[0]));
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device");
  int lt_version = int(cublasLtGetVersion());
  std::printf("# %s, cuBLASLt %d, batch %lld\n", prop.name, lt_version, static_cast<long long>(batch));
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasLtCreate failed\n");
    return 1;
  }
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  const size_t ws_bytes = size_t(32) << 20;
  void *workspace, *x, *w, *y, *alpha, *bias;
  int64_t max_x = 0, max_w = 0, max_y = 0, max_c = 0;
  for (const Case& c : cases) {
    const int64_t m = batch * c.hw * c.hw;
    max_x = std::max(max_x, m * c.cin);
    max_w = std::max(max_w, c.cin * c.cout);
    max_y = std::max(max_y, m * c.cout);
    max_c = std::max(max_c, c.cout);
  }
  check(cudaMalloc(&workspace, ws_bytes), "malloc");
  check(cudaMalloc(&x, size_t(max_x) * 2), "malloc");
  check(cudaMalloc(&w, size_t(max_w) * 2), "malloc");
  check(cudaMalloc(&y, size_t(max_y) * 4), "malloc");
  check(cudaMalloc(&alpha, size_t(max_c) * 4), "malloc");
  check(cudaMalloc(&bias, size_t(max_c) * 4), "malloc");
  // Small values: int8 bytes 0x01, fp16 halves of 0x0101 (~1.5e-5), scales and biases 0.
  check(cudaMemset(x, 1, size_t(max_x) * 2), "memset");
  check(cudaMemset(w, 1, size_t(max_w) * 2), "memset");
  check(cudaMemset(alpha, 0, size_t(max_c) * 4), "memset");
  check(cudaMemset(bias, 0, size_t(max_c) * 4), "memset");
  std::printf("| layer | M x N x K | fp16 ms | int8 ms | int8 TOPS | int8/fp16 time | int8 + residual ms | int32-out ms |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  double total[kConfigs] = {};
  for (const Case& c : cases) {
    const int64_t m = batch * c.hw * c.hw, n = c.cout, k = c.cin;
    double ms[kConfigs];
    std::string why[kConfigs];
    for (int i = 0; i < kConfigs; ++i) {
      ms[i] = time_gemm(lt, configs[i], m, n, k, x, w, y, alpha, bias, workspace, ws_bytes, stream, &why[i]);
      if (ms[i] > 0) total[i] += ms[i];
    }
    auto cell = [&](int i) {
      char buf[96];
      if (ms[i] > 0) std::snprintf(buf, sizeof buf, "%.4f", ms[i]);
      else std::snprintf(buf, sizeof buf, "%s (%s)", "-", why[i].c_str());
      return std::string(buf);
    };
    const double tops = ms[1] > 0 ? 2.0 * double(m) * double(n) * double(k) / (ms[1] * 1e9) : 0;
    std::printf("| %s | %lld x %lld x %lld | %s | %s | %.0f | %s | %s | %s |\n", c.layer, static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k), cell(0).c_str(), cell(1).c_str(), tops,
                ms[0] > 0 && ms[1] > 0 ? (std::to_string(ms[1] / ms[0]).substr(0, 4) + "x").c_str() : "-",
                cell(2).c_str(), cell(3).c_str());
  }
  std::printf("| all eight | | %.4f | %.4f | | %.2fx | %.4f | %.4f |\n", total[0], total[1],
              total[0] > 0 ? total[1] / total[0] : 0.0, total[2], total[3]);
  cublasLtDestroy(lt);
  return 0;
}
