// cuda::gemm on cuBLASLt. Row-major operands are handed to cuBLASLt (column-major) through the
// transpose identity: row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
// row-major buffer read column-major is its transpose. So cuBLASLt's "A" is our B (n x k after
// its op), its "B" is our A, and D is n x m column-major with leading dimension ldc. Our bias
// (n values, one per column of row-major C) is then one value per row of the column-major D,
// which is what CUBLASLT_EPILOGUE_BIAS expects.
//
// Per distinct problem (shape, strides, dtype, epilogue, pointer alignments, device) the matmul
// descriptor, the layouts and the algorithm are built once and kept in a small map. The algorithm
// is the fastest of up to kCandidates heuristic results, timed on the first call's operands and
// kept in core/tuning.h (so packages store it; see choose_algorithm).
// When cuBLASLt has no algorithm for an epilogue (or the dtype is float64), the product runs
// without it and a small kernel applies bias and activation afterwards. A stored algorithm is
// taken without asking the heuristic; a loaded package's stored problems can be planned and run
// once ahead on scratch buffers (warm_stored_products), so that their kernels load off the first
// run's path.
#include <cublasLt.h>

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/gemm_3xtf32.h"
#include "backends/cuda/kernels/tiled_product.cuh"
#include "core/tuning.h"
#include "profiler/hooks.h"

namespace ingot::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kMaxPlans = 512;
constexpr int kCandidates = 8;  // heuristic results timed once per problem

cudaDataType_t cuda_dtype(DType dt) {
  switch (dt) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float64: return CUDA_R_64F;
    case DType::Int8: return CUDA_R_8I;
    default: fail("cuda::gemm: unsupported dtype {}", dtype_name(dt));
  }
}

// Largest power of two (<= 256) dividing the address and, for batches, the batch stride in bytes.
uint32_t alignment(const void* p, int64_t stride_elems, int64_t batch, size_t elem) {
  uint64_t v = uint64_t(reinterpret_cast<uintptr_t>(p));
  if (batch > 1 && stride_elems != 0) v |= uint64_t(stride_elems) * elem;
  uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a >>= 1;
  return a;
}

// ---- epilogue fallback: c[b, i, j] = act(c[b, i, j] + bias[j]) ----

__device__ __forceinline__ float gelu_tanh(float x) {
  // cuBLASLt's GELU epilogue is the tanh approximation; the fallback matches it.
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
}
__device__ __forceinline__ double gelu_tanh(double x) {
  const double k0 = 0.7978845608028654, k1 = 0.044715;
  return 0.5 * x * (1.0 + tanh(k0 * (x + k1 * x * x * x)));
}

template <class T>
__global__ void bias_act_kernel(T* c, const T* bias, int64_t batch, int64_t m, int64_t n, int64_t ldc,
                                int64_t stride_c, int act) {
  using C = compute_t<T>;
  const int64_t total = batch * m * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % n, r = (i / n) % m, b = i / (n * m);
    T* p = c + b * stride_c + r * ldc + j;
    C v = load(*p);
    if (bias) v += load(bias[j]);
    if (act == 1) {
      v = v > C(0) ? v : C(0);
    } else if (act == 2) {
      v = gelu_tanh(v);
    }
    *p = store<T>(v);
  }
}

// c = c_in over [batch, m, n] with c's leading dimension and batch stride (both laid out alike).
template <class T>
__global__ void copy_matrix_kernel(T* c, const T* c_in, int64_t batch, int64_t m, int64_t n, int64_t ldc,
                                   int64_t stride_c) {
  const int64_t total = batch * m * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / (m * n), r = (i / n) % m, col = i % n;
    const int64_t at = b * stride_c + r * ldc + col;
    c[at] = c_in[at];
  }
}

// k == 0: c = beta * c (or 0), the empty product.
template <class T>
__global__ void scale_kernel(T* c, int64_t batch, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, float beta) {
  using C = compute_t<T>;
  const int64_t total = batch * m * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % n, r = (i / n) % m, b = i / (n * m);
    T* p = c + b * stride_c + r * ldc + j;
    *p = beta == 0.0f ? store<T>(C(0)) : store<T>(C(beta) * load(*p));
  }
}

void apply_bias_act(const GemmArgs& g, bool bias, bool act) {
  const int code = !act ? 0 : g.epilogue == Epilogue::Relu ? 1 : 2;
  const int64_t total = g.batch * g.m * g.n;
  dispatch_device<DType::Float32, DType::Float16, DType::BFloat16, DType::Float64>(g.dtype, [&]<class T>() {
    bias_act_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(
        static_cast<T*>(g.c), bias ? static_cast<const T*>(g.bias) : nullptr, g.batch, g.m, g.n, g.ldc, g.stride_c,
        code);
    INGOT_CUDA_LAUNCH_CHECK();
  });
}

// ---- the cold tier: the product on Ingot's tiled kernel (cuda_runtime.h, cold_kernels()) ----

template <class T, bool Trans>  // op(A): m x k; stored k x m when transposed
struct MatrixA {
  static constexpr bool k_inner = !Trans;
  using Line = const T*;  // row i of op(A)
  const T* p;
  int64_t ld, stride;
  __device__ Line line(int64_t z, int64_t i) const { return p + z * stride + (Trans ? i : i * ld); }
  __device__ float operator()(Line l, int64_t kk) const { return float(load(l[Trans ? kk * ld : kk])); }
};

template <class T, bool Trans>  // op(B): k x n; stored n x k when transposed
struct MatrixB {
  static constexpr bool k_inner = Trans;
  using Line = const T*;  // column j of op(B)
  const T* p;
  int64_t ld, stride;
  __device__ Line line(int64_t z, int64_t j) const { return p + z * stride + (Trans ? j * ld : j); }
  __device__ float operator()(Line l, int64_t kk) const { return float(load(l[Trans ? kk : kk * ld])); }
};

// c = act(alpha * acc + beta * c_in + bias), rounded once (as cuBLASLt's fused epilogue).
template <class T>
struct ProductStore {
  T* c;
  const T *c_in, *bias;
  int64_t ldc, stride_c;
  float alpha, beta;
  Epilogue act;
  __device__ void operator()(int64_t z, int64_t i, int64_t j, float acc) const {
    const int64_t at = z * stride_c + i * ldc + j;
    float v = alpha * acc;
    if (beta != 0.0f) v += beta * float(load(c_in[at]));
    if (bias) v += float(load(bias[j]));
    if (act == Epilogue::Relu) v = v > 0.0f ? v : 0.0f;  // NaN -> 0, like the epilogue kernel
    if (act == Epilogue::Gelu) v = gelu_tanh(v);
    c[at] = store<T>(v);
  }
};

void run_cold_product(const GemmArgs& g) {
  profiler::detail::PhaseScope phase("matrix product on the cold tier");
  count_cold_kernel_call();
  dispatch_device<DType::Float32, DType::Float16, DType::BFloat16>(g.dtype, [&]<class T>() {
    const ProductStore<T> out{static_cast<T*>(g.c),
                              static_cast<const T*>(g.c_in ? g.c_in : g.c),
                              static_cast<const T*>(g.bias),
                              g.ldc,
                              g.stride_c,
                              g.alpha,
                              g.beta,
                              g.epilogue};
    const auto* a = static_cast<const T*>(g.a);
    const auto* b = static_cast<const T*>(g.b);
    auto launch = [&](auto ma, auto mb) { launch_tiled_product(g.m, g.n, g.k, g.batch, ma, mb, out); };
    auto with_b = [&](auto ma) {
      if (g.trans_b) {
        launch(ma, MatrixB<T, true>{b, g.ldb, g.stride_b});
      } else {
        launch(ma, MatrixB<T, false>{b, g.ldb, g.stride_b});
      }
    };
    if (g.trans_a) {
      with_b(MatrixA<T, true>{a, g.lda, g.stride_a});
    } else {
      with_b(MatrixA<T, false>{a, g.lda, g.stride_a});
    }
  });
}

// ---- plans ----

struct Key {
  int device;
  DType dtype;
  bool trans_a, trans_b, tf32, has_bias, beta_nonzero;
  Epilogue epilogue;
  int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
  uint32_t align_a, align_b, align_c, align_bias;
  auto tie() const {
    return std::tie(device, dtype, trans_a, trans_b, tf32, has_bias, beta_nonzero, epilogue, m, n, k, lda, ldb, ldc,
                    stride_a, stride_b, stride_c, batch, align_a, align_b, align_c, align_bias);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// An algorithm the heuristic offered, with the workspace it needs.
struct Candidate {
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

struct Plan {
  std::vector<Candidate> candidates;  // the heuristic's, best first
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool fused_bias = false, fused_act = false;  // done by cuBLASLt's epilogue

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() { release(); }
  void release() {
    // Destroy failures are not actionable here (and must not throw from a destructor).
    if (la) lt().matrix_layout_destroy(la);
    if (lb) lt().matrix_layout_destroy(lb);
    if (lc) lt().matrix_layout_destroy(lc);
    if (desc) lt().matmul_desc_destroy(desc);
    la = lb = lc = nullptr;
    desc = nullptr;
  }
};

std::mutex g_mutex;
std::atomic<int> g_warming{0};  // warm_stored_products calls running: the cold tier's window
std::map<Key, std::unique_ptr<Plan>>& plans() {
  static auto* m = new std::map<Key, std::unique_ptr<Plan>>();  // leaked: outlives static destruction order
  return *m;
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  INGOT_CUBLAS_CHECK(lt().matrix_layout_create(&l, t, uint64_t(rows), uint64_t(cols), ld));
  if (batch > 1) {
    int32_t count = int32_t(batch);
    INGOT_CUBLAS_CHECK(lt().matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    INGOT_CUBLAS_CHECK(
        lt().matrix_layout_set_attribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

// Makes the descriptors for `g` with or without the fused epilogue.
void describe(Plan& p, const GemmArgs& g, const Key& key, bool fuse) {
  p.release();
  const cudaDataType_t t = cuda_dtype(g.dtype);
  const bool f64 = g.dtype == DType::Float64, i8 = g.dtype == DType::Int8;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F
                                      : i8 ? CUBLAS_COMPUTE_32I
                                           : (key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const cudaDataType_t scale = f64 ? CUDA_R_64F : i8 ? CUDA_R_32I : CUDA_R_32F;
  const cudaDataType_t out = i8 ? CUDA_R_32I : t;
  INGOT_CUBLAS_CHECK(lt().matmul_desc_create(&p.desc, compute, scale));
  // cuBLASLt's A is our B, its B is our A (see the top of the file).
  cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  INGOT_CUBLAS_CHECK(lt().matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  INGOT_CUBLAS_CHECK(lt().matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  p.fused_bias = false;
  p.fused_act = false;
  if (fuse) {
    const bool bias = g.bias != nullptr;
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
    switch (g.epilogue) {
      case Epilogue::None: ep = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
      case Epilogue::Relu: ep = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
      case Epilogue::Gelu: ep = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    }
    INGOT_CUBLAS_CHECK(lt().matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    if (bias) {
      // The heuristic reads the pointer's alignment; the pointer itself is set again per call.
      INGOT_CUBLAS_CHECK(
          lt().matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
      int32_t bias_type = int32_t(t);
      INGOT_CUBLAS_CHECK(
          lt().matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    p.fused_bias = bias;
    p.fused_act = g.epilogue != Epilogue::None;
  }
  p.la = make_layout(t, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.batch, g.stride_b);
  p.lb = make_layout(t, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.batch, g.stride_a);
  p.lc = make_layout(out, g.n, g.m, g.ldc, g.batch, g.stride_c);
}

// Asks the heuristic for the candidates of the plan `describe` made; false when it has none (or
// rejects the fused epilogue).
bool ask_heuristic(Plan& p, const Key& key, bool fuse) {
  profiler::detail::PhaseScope phase("cuBLASLt heuristic");
  cublasLtMatmulPreference_t pref = nullptr;
  INGOT_CUBLAS_CHECK(lt().matmul_preference_create(&pref));
  uint64_t ws = kWorkspaceBytes;
  cublasStatus_t st =
      lt().matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  // Our A/B are cuBLASLt's B/A.
  const uint32_t aligns[4] = {key.align_b, key.align_a, key.align_c, key.align_c};
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i) {
    st = lt().matmul_preference_set_attribute(pref, which[i], &aligns[i], sizeof(uint32_t));
  }
  cublasLtMatmulHeuristicResult_t results[kCandidates]{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = lt().matmul_algo_get_heuristic(cublaslt(), p.desc, p.la, p.lb, p.lc, p.lc, pref, kCandidates, results,
                                        &found);
  }
  lt().matmul_preference_destroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  if (st != CUBLAS_STATUS_SUCCESS) {
    // An epilogue the library rejects outright: let the caller retry without it.
    if (fuse) return false;
    fail_cuda("cublasLtMatmulAlgoGetHeuristic", cublas_status_name(st), __FILE__, __LINE__);
  }
  p.candidates.clear();
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back({results[i].algo, results[i].workspaceSize});
  }
  if (p.candidates.empty()) return false;
  p.algo = p.candidates[0].algo;  // the heuristic's first choice until measured
  p.workspace = p.candidates[0].workspace;
  return true;
}

// The process-wide key of a problem in core/tuning.h (the plan key without device and pointer
// alignments' device, plus cuBLASLt's version and the arch, which decide what an algorithm means).
std::string tuning_key(const Key& k, bool fused) {
  return fmt::format("cublaslt{}.matmul.{}|{}|tA={}|tB={}|tf32={}|bias={}|beta={}|ep={}|fused={}|m={}|n={}|k={}|"
                     "ld={},{},{}|batch={}|stride={},{},{}|align={},{},{},{}",
                     lt().get_version(), arch_name(), dtype_name(k.dtype), int(k.trans_a), int(k.trans_b),
                     int(k.tf32), int(k.has_bias), int(k.beta_nonzero), int(k.epilogue), int(fused), k.m, k.n, k.k,
                     k.lda, k.ldb, k.ldc, k.batch, k.stride_a, k.stride_b, k.stride_c, k.align_a, k.align_b,
                     k.align_c, k.align_bias);
}

// Stored choices are the algorithm's opaque bytes and its workspace size.
std::string encode(const Candidate& c) {
  std::string s(sizeof(c.algo) + sizeof(uint64_t), '\0');
  const uint64_t ws = c.workspace;
  std::memcpy(s.data(), &c.algo, sizeof(c.algo));
  std::memcpy(s.data() + sizeof(c.algo), &ws, sizeof(ws));
  return s;
}
bool decode(const std::string& s, Candidate& c) {
  if (s.size() != sizeof(c.algo) + sizeof(uint64_t)) return false;
  uint64_t ws = 0;
  std::memcpy(&c.algo, s.data(), sizeof(c.algo));
  std::memcpy(&ws, s.data() + sizeof(c.algo), sizeof(ws));
  c.workspace = size_t(ws);
  return c.workspace <= kWorkspaceBytes;
}

// The algorithm stored for the plan `describe` made (a package's, or this process's), if cuBLASLt
// still accepts it: the plan needs no heuristic query then (the first in a process costs ~70 ms on
// the H200: a package's first matrix product waited for it).
bool take_stored(Plan& p, const std::string& tuning_key) {
  const std::optional<std::string> stored = tuning::algorithms().peek(tuning_key);
  Candidate c;
  cublasLtMatmulHeuristicResult_t check{};
  if (!stored || !decode(*stored, c) ||
      lt().matmul_algo_check(cublaslt(), p.desc, p.la, p.lb, p.lc, p.lc, &c.algo, &check) != CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > kWorkspaceBytes) {
    return false;
  }
  (void)tuning::algorithms().find(tuning_key);  // counted as found
  p.candidates = {{c.algo, std::max(c.workspace, check.workspaceSize)}};
  p.algo = c.algo;
  p.workspace = p.candidates[0].workspace;
  return true;
}

// Where a product runs: the device's stream and shared workspace, or a warm-up's own.
struct Launch {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;  // kWorkspaceBytes; nullptr: the device's shared workspace
};

void run_plan(const Plan& p, const GemmArgs& g, const cublasLtMatmulAlgo_t& algo, size_t ws_bytes,
              Launch on = {stream(), nullptr}) {
  void* ws = ws_bytes == 0 ? nullptr : on.workspace ? on.workspace : workspace(ws_bytes);
  const void* c_in = g.c_in ? g.c_in : g.c;
  if (g.dtype == DType::Float64) {
    const double alpha = g.alpha, beta = g.beta;
    INGOT_CUBLAS_CHECK(lt().matmul(cublaslt(), p.desc, &alpha, g.b, p.la, g.a, p.lb, &beta, c_in, p.lc, g.c, p.lc,
                                      &algo, ws, ws_bytes, on.stream));
  } else if (g.dtype == DType::Int8) {
    const int32_t alpha = 1, beta = 0;
    INGOT_CUBLAS_CHECK(lt().matmul(cublaslt(), p.desc, &alpha, g.b, p.la, g.a, p.lb, &beta, c_in, p.lc, g.c, p.lc,
                                      &algo, ws, ws_bytes, on.stream));
  } else {
    const float alpha = g.alpha, beta = g.beta;
    INGOT_CUBLAS_CHECK(lt().matmul(cublaslt(), p.desc, &alpha, g.b, p.la, g.a, p.lb, &beta, c_in, p.lc, g.c, p.lc,
                                      &algo, ws, ws_bytes, on.stream));
  }
}

// The plan-cache key of a call: its problem, and its pointers' alignments.
Key key_of(const GemmArgs& g) {
  const size_t elem = dtype_size(g.dtype);
  Key key{};
  INGOT_CUDA_CHECK(cudaGetDevice(&key.device));
  key.dtype = g.dtype;
  key.trans_a = g.trans_a;
  key.trans_b = g.trans_b;
  key.tf32 = g.dtype == DType::Float32 && allow_tf32();
  key.has_bias = g.bias != nullptr;
  key.beta_nonzero = g.beta != 0.0f;
  key.epilogue = g.epilogue;
  key.m = g.m;
  key.n = g.n;
  key.k = g.k;
  key.lda = g.lda;
  key.ldb = g.ldb;
  key.ldc = g.ldc;
  key.batch = g.batch;
  key.stride_a = g.batch > 1 ? g.stride_a : 0;
  key.stride_b = g.batch > 1 ? g.stride_b : 0;
  key.stride_c = g.batch > 1 ? g.stride_c : 0;
  key.align_a = alignment(g.a, g.stride_a, g.batch, elem);
  key.align_b = alignment(g.b, g.stride_b, g.batch, elem);
  const size_t c_elem = g.dtype == DType::Int8 ? sizeof(int32_t) : elem;
  key.align_c = alignment(g.c, g.stride_c, g.batch, c_elem);
  if (g.c_in) key.align_c = std::min(key.align_c, alignment(g.c_in, g.stride_c, g.batch, c_elem));
  key.align_bias = g.bias ? alignment(g.bias, 0, 1, elem) : 0;
  return key;
}

// The plan of a stored choice for `g`, fused epilogue first when `try_fuse` (a package's, or this
// process's choice, if cuBLASLt still accepts it); false when none is stored or accepted.
bool stored_plan(Plan& p, const GemmArgs& g, const Key& key, bool try_fuse, bool* fused) {
  for (bool fuse : {true, false}) {
    if (fuse && !try_fuse) continue;
    describe(p, g, key, fuse);
    if (take_stored(p, tuning_key(key, fuse))) {
      *fused = fuse;
      return true;
    }
  }
  return false;
}

// Chooses the plan's algorithm once per problem: a choice stored in core/tuning.h (a package's,
// or this process's) if cuBLASLt still accepts it, else the fastest of the heuristic's candidates
// timed on the call's own operands (when the call overwrites its output, beta 0, and no CUDA graph
// is being captured; otherwise the heuristic's first). Measured choices are stored, so
// `ingot convert --device cuda` keeps them in the package.
void choose_algorithm(Plan& p, const GemmArgs& g, const std::string& key) {
  profiler::detail::PhaseScope phase("cuBLASLt algorithm");
  if (auto stored = tuning::algorithms().find(key)) {
    Candidate c;
    cublasLtMatmulHeuristicResult_t check{};
    if (decode(*stored, c) &&
        lt().matmul_algo_check(cublaslt(), p.desc, p.la, p.lb, p.lc, p.lc, &c.algo, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= kWorkspaceBytes) {
      p.algo = c.algo;
      p.workspace = std::max(c.workspace, check.workspaceSize);
      return;
    }
  }
  // Timing runs the product several times: only when it overwrites its output (beta 0, or C read
  // from another buffer).
  if (p.candidates.size() < 2 || (g.beta != 0.0f && (!g.c_in || g.c_in == g.c))) return;
  const std::optional<size_t> best = fastest_of(p.candidates.size(), [&](size_t i) {
    run_plan(p, g, p.candidates[i].algo, p.candidates[i].workspace);
    return true;
  });
  if (!best) return;  // capturing: the heuristic's first
  p.algo = p.candidates[*best].algo;
  p.workspace = p.candidates[*best].workspace;
  tuning::algorithms().put(key, encode(p.candidates[*best]));
}

// Whether this product runs on the cold tier: while the warm-up is loading the package's products
// (it holds the plans' lock while CUDA loads a kernel), any product whose plan is not made yet, or
// whose plan cannot be looked at because the lock is held.
bool cold_product(const GemmArgs& g, const Key& key) {
  const ColdKernels mode = cold_kernels();
  if (mode == ColdKernels::Never) return false;
  if (g.dtype != DType::Float32 && g.dtype != DType::Float16 && g.dtype != DType::BFloat16) return false;
  if (!tiled_product_fits(g.m, g.n, g.batch)) return false;
  if (mode == ColdKernels::Always) return true;
  if (g_warming.load(std::memory_order_acquire) == 0 || capturing()) return false;
  std::unique_lock<std::mutex> lock(g_mutex, std::try_to_lock);
  return !lock.owns_lock() || !plans().count(key);
}

}  // namespace

void gemm(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) fail("cuda::gemm: negative sizes");
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const bool want_act = g.epilogue != Epilogue::None;
  if (g.dtype == DType::Int8) {
    if (g.trans_a || !g.trans_b || g.alpha != 1.0f || g.beta != 0.0f || g.bias || want_act)
      fail("cuda::gemm: int8 products take A as is, B transposed, alpha 1, beta 0, no bias or epilogue");
    if (g.k == 0) {
      for (int64_t b = 0; b < g.batch; ++b) {
        INGOT_CUDA_CHECK(cudaMemset2DAsync(static_cast<int32_t*>(g.c) + b * g.stride_c, size_t(g.ldc) * 4, 0,
                                           size_t(g.n) * 4, size_t(g.m), stream()));
      }
      return;
    }
  }
  if (g.k == 0) {
    const int64_t total = g.batch * g.m * g.n;
    dispatch_device<DType::Float32, DType::Float16, DType::BFloat16, DType::Float64>(g.dtype, [&]<class T>() {
      if (g.c_in && g.c_in != g.c && g.beta != 0.0f) {  // the empty product: c = beta * c_in
        copy_matrix_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(
            static_cast<T*>(g.c), static_cast<const T*>(g.c_in), g.batch, g.m, g.n, g.ldc, g.stride_c);
        INGOT_CUDA_LAUNCH_CHECK();
      }
      scale_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(static_cast<T*>(g.c), g.batch, g.m, g.n, g.ldc,
                                                                     g.stride_c, g.beta);
      INGOT_CUDA_LAUNCH_CHECK();
    });
    if (g.bias || want_act) apply_bias_act(g, g.bias != nullptr, want_act);
    return;
  }

  if (gemm_on_tf32x3(g)) return;  // float32 on the tensor cores: no plan to build or look up
  const Key key = key_of(g);
  if (cold_product(g, key)) {
    run_cold_product(g);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& cache = plans();
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxPlans) cache.clear();
    auto plan = std::make_unique<Plan>();
    // float64 runs without epilogues (cuBLASLt has none for it); others try the fused epilogue first:
    // a stored choice for either form, else the heuristic's candidates (then timed).
    const bool try_fuse = (g.bias || want_act) && g.dtype != DType::Float64;
    bool fused = false;
    const bool found = stored_plan(*plan, g, key, try_fuse, &fused);
    if (!found) {
      describe(*plan, g, key, try_fuse);
      fused = try_fuse && ask_heuristic(*plan, key, true);
      if (!fused) {
        if (try_fuse) describe(*plan, g, key, false);
        if (!ask_heuristic(*plan, key, false)) {
          fail("cuda::gemm: cuBLASLt has no algorithm for {} m={} n={} k={} batch={} (transA={}, transB={})",
               dtype_name(g.dtype), g.m, g.n, g.k, g.batch, int(g.trans_a), int(g.trans_b));
        }
      }
    }
    if (plan->fused_bias) {
      INGOT_CUBLAS_CHECK(
          lt().matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
    }
    if (!found) choose_algorithm(*plan, g, tuning_key(key, fused));
    it = cache.emplace(key, std::move(plan)).first;
  }
  Plan& p = *it->second;
  if (p.fused_bias) {
    INGOT_CUBLAS_CHECK(
        lt().matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  run_plan(p, g, p.algo, p.workspace);
  const bool need_bias = g.bias && !p.fused_bias, need_act = want_act && !p.fused_act;
  if (need_bias || need_act) apply_bias_act(g, need_bias, need_act);
}


namespace {

// A stored choice's problem, read back from its tuning key (tuning_key's format after the prefix).
struct StoredProblem {
  GemmArgs args;  // no pointers
  bool fused = false;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0;
};

std::optional<StoredProblem> parse_problem(const std::string& text) {
  const size_t bar = text.find('|');
  if (bar == std::string::npos) return std::nullopt;
  StoredProblem p;
  GemmArgs& g = p.args;
  g.dtype = dtype_from_name(text.substr(0, bar));
  int ta, tb, tf32, bias, beta, ep, fused, used = 0;
  long long m, n, k, lda, ldb, ldc, batch, sa, sb, sc;
  unsigned aa, ab, ac, abias;
  if (std::sscanf(text.c_str() + bar,
                  "|tA=%d|tB=%d|tf32=%d|bias=%d|beta=%d|ep=%d|fused=%d|m=%lld|n=%lld|k=%lld|ld=%lld,%lld,%lld|"
                  "batch=%lld|stride=%lld,%lld,%lld|align=%u,%u,%u,%u%n",
                  &ta, &tb, &tf32, &bias, &beta, &ep, &fused, &m, &n, &k, &lda, &ldb, &ldc, &batch, &sa, &sb, &sc,
                  &aa, &ab, &ac, &abias, &used) != 21 ||
      text[bar + size_t(used)] != '\0') {
    return std::nullopt;
  }
  if (g.dtype == DType::Undefined || m <= 0 || n <= 0 || k <= 0 || batch <= 0 || ep < 0 || ep > 2 ||
      tf32 != int(g.dtype == DType::Float32 && allow_tf32())) {
    return std::nullopt;  // the empty product has no plan; another TF32 setting, another key
  }
  g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc, g.batch = batch;
  g.stride_a = sa, g.stride_b = sb, g.stride_c = sc;
  g.beta = beta ? 1.0f : 0.0f;
  g.epilogue = Epilogue(ep);
  p.fused = fused;
  p.align_a = aa, p.align_b = ab, p.align_c = ac, p.align_bias = bias ? abias : 0;
  return p;
}

// Bytes a row-major operand of `rows` rows spans (batches `stride` elements apart), plus room to
// shift its start to a smaller alignment; a multiple of 256, so the next operand starts aligned.
size_t span_bytes(int64_t rows, int64_t ld, int64_t batch, int64_t stride, size_t elem) {
  const size_t bytes = size_t((batch > 1 ? stride * (batch - 1) : 0) + rows * ld) * elem;
  return (bytes + 255) / 256 * 256 + 256;
}

}  // namespace

int warm_stored_products() {
  // The cold tier's window opens before cuBLASLt is needed here: lt() may still be waiting for the
  // library's static initializers, and a product of the first run should not wait with it.
  g_warming.fetch_add(1, std::memory_order_acq_rel);
  struct Warming {
    ~Warming() { g_warming.fetch_sub(1, std::memory_order_acq_rel); }
  } warming;
  const std::string prefix = fmt::format("cublaslt{}.matmul.{}|", lt().get_version(), arch_name());
  const auto stored = tuning::algorithms().with_prefix(prefix);
  if (stored.empty()) return 0;
  profiler::detail::PhaseScope phase("cuBLASLt products warmed ahead");
  cudaStream_t s = nullptr;
  INGOT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* ws = nullptr;
  std::vector<void*> scratch;
  struct Release {  // everything this made, once its work is done
    cudaStream_t& s;
    void*& ws;
    std::vector<void*>& scratch;
    ~Release() {
      (void)cudaStreamSynchronize(s);
      for (void* p : scratch) (void)cudaFree(p);
      if (ws) (void)cudaFree(ws);
      (void)cudaStreamDestroy(s);
    }
  } release{s, ws, scratch};
  int warmed = 0;
  for (const auto& [tuning_key_text, choice] : stored) {
    const std::optional<StoredProblem> problem = parse_problem(tuning_key_text.substr(prefix.size()));
    if (!problem) continue;
    GemmArgs g = problem->args;
    const size_t elem = dtype_size(g.dtype), c_elem = g.dtype == DType::Int8 ? sizeof(int32_t) : elem;
    const size_t bytes_a = span_bytes(g.trans_a ? g.k : g.m, g.lda, g.batch, g.stride_a, elem);
    const size_t bytes_b = span_bytes(g.trans_b ? g.n : g.k, g.ldb, g.batch, g.stride_b, elem);
    const size_t bytes_c = span_bytes(g.m, g.ldc, g.batch, g.stride_c, c_elem);
    const size_t bytes_bias = problem->align_bias ? span_bytes(1, g.n, 1, 0, elem) : 0;
    // Zeroed scratch for the operands (a package's products are small at batch 1; a larger
    // one is skipped rather than holding the device's memory for it).
    const size_t total = bytes_a + bytes_b + bytes_c + bytes_bias;
    if (total > (size_t(256) << 20)) continue;
    // Each operand's start shifted to the alignment the stored call had (the key names it).
    auto place = [&](char* base) {
      auto at = [](char* start, uint32_t align) { return start + (align < 256 ? align : 0); };
      g.a = at(base, problem->align_a);
      g.b = at(base + bytes_a, problem->align_b);
      g.c = at(base + bytes_a + bytes_b, problem->align_c);
      if (problem->align_bias) g.bias = at(base + bytes_a + bytes_b + bytes_c, problem->align_bias);
      return key_of(g);
    };
    {
      // Planned already (an earlier session's load of the package): nothing to allocate. The key
      // reads only the pointers' alignments: an address aligned like cudaMalloc's stands in.
      std::lock_guard<std::mutex> lock(g_mutex);
      if (plans().count(place(reinterpret_cast<char*>(uintptr_t(1) << 32)))) continue;
    }
    char* base = nullptr;
    if (cudaMalloc(&base, total) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    scratch.push_back(base);
    INGOT_CUDA_CHECK(cudaMemsetAsync(base, 0, total, s));
    const Key key = place(base);
    if (key.align_a != problem->align_a || key.align_b != problem->align_b || key.align_c != problem->align_c ||
        key.align_bias != problem->align_bias) {
      continue;  // not reproducible here
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& cache = plans();
    if (cache.count(key) || cache.size() >= kMaxPlans) continue;
    auto plan = std::make_unique<Plan>();
    describe(*plan, g, key, problem->fused);
    if (!take_stored(*plan, tuning_key_text)) continue;
    if (plan->fused_bias) {
      INGOT_CUBLAS_CHECK(
          lt().matmul_desc_set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
    }
    if (!ws) INGOT_CUDA_CHECK(cudaMalloc(&ws, kWorkspaceBytes));  // only when something is left to warm
    run_plan(*plan, g, plan->algo, plan->workspace, {s, ws});
    cache.emplace(key, std::move(plan));
    ++warmed;
  }
  return warmed;
}

int64_t cached_products() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return int64_t(plans().size());
}

void forget_cached_products() {
  std::lock_guard<std::mutex> lock(g_mutex);
  plans().clear();
}

}  // namespace ingot::cuda
