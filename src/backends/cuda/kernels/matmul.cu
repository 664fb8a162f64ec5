// MatMul (numpy batch broadcasting, 1-D operands), Gemm and ai.ingot FusedMatMul (bias and Relu in
// cuBLASLt's epilogue, a residual as its C with beta 1) on cuBLASLt through cuda::gemm.
// Semantics and validation mirror src/backends/cpu/kernels/matmul.cpp. Floating types only; the
// integer types stay on the CPU kernel.
//
// MatMul batching: a B shared by every batch folds A's batches into M (one plain GEMM); batch
// dims that are either full or fully broadcast run as one strided-batched call (stride 0 for a
// broadcast operand); any other broadcast pattern loops over the outer batch dims with a
// strided-batched call over the innermost batch dim.
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "core/broadcast.h"

namespace ingot {
namespace {

using cuda::GemmArgs;

#define INGOT_CUDA_GEMM_TYPES DType::Float32, DType::Float16, DType::BFloat16, DType::Float64

// MatMul, and FusedMatMul's product (B's last two axes swapped when trans_b, scaled by alpha) with
// its bias (N elements, or nullptr) and activation in cuBLASLt's epilogue.
void matmul_impl(KernelContext& ctx, bool trans_b, const Tensor* bias, cuda::Epilogue epilogue, float alpha = 1.0f,
                 const Tensor* residual = nullptr) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) {
    fail("input 1 (B): expected {} like A, got {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  }
  if (a.rank() == 0 || b.rank() == 0) {
    fail("MatMul operands must have rank >= 1, got A {} and B {}", shape_str(a.shape()), shape_str(b.shape()));
  }
  if (trans_b && b.rank() < 2) fail("input 1 (B): transB needs rank >= 2, got {}", shape_str(b.shape()));
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  if (trans_b) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k) {
    fail("MatMul: A {} has {} columns but B {} has {} rows", shape_str(a.shape()), k, shape_str(b.shape()),
         bs[bs.size() - 2]);
  }
  if (bias) {
    if (bias->dtype() != a.dtype()) {
      fail("input 2 (bias): expected {} like A, got {}", dtype_name(a.dtype()), dtype_name(bias->dtype()));
    }
    if (bias->numel() != n || (bias->rank() > 0 && bias->dim(-1) != n)) {
      fail("input 2 (bias): expected {} elements, got {}", n, shape_str(bias->shape()));
    }
  }
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes({a_batch, b_batch});
  Shape out_shape = batch;
  if (a.rank() > 1) out_shape.push_back(m);
  if (b.rank() > 1) out_shape.push_back(n);
  if (residual && (residual->dtype() != a.dtype() || residual->shape() != out_shape)) {
    fail("input 3 (residual): expected {}{} like the product, got {}", dtype_name(a.dtype()), shape_str(out_shape),
         residual->describe());
  }
  Tensor& y = ctx.allocate(0, a.dtype(), out_shape);
  if (y.numel() == 0) return;

  const int64_t batches = shape_numel(batch);
  const int64_t na = shape_numel(a_batch), nb = shape_numel(b_batch);
  const size_t elem = dtype_size(a.dtype());
  GemmArgs g;
  g.dtype = a.dtype();
  g.trans_b = trans_b;
  g.n = n;
  g.k = k;
  g.lda = k;
  g.ldb = trans_b ? k : n;
  g.ldc = n;
  g.alpha = alpha;
  g.beta = residual ? 1.0f : 0.0f;  // the residual as cuBLASLt's C, read beside the output
  g.bias = bias ? bias->raw_data() : nullptr;
  g.epilogue = epilogue;
  const char* rp = residual ? static_cast<const char*>(residual->raw_data()) : nullptr;
  if (nb == 1 && na == batches) {
    // One B for every batch: A's batches stack into the rows of one product.
    g.m = batches * m;
    g.a = a.raw_data();
    g.b = b.raw_data();
    g.c = y.raw_data();
    g.c_in = rp;
    cuda::gemm(g);
    return;
  }
  g.m = m;
  if ((na == batches || na == 1) && (nb == batches || nb == 1)) {
    g.batch = batches;
    g.a = a.raw_data();
    g.b = b.raw_data();
    g.c = y.raw_data();
    g.c_in = rp;
    g.stride_a = na == 1 ? 0 : m * k;
    g.stride_b = nb == 1 ? 0 : k * n;
    g.stride_c = m * n;
    cuda::gemm(g);
    return;
  }
  // General broadcast: the innermost batch dim is strided-batched, the outer ones loop.
  const std::vector<int64_t> sa = broadcast_strides(a_batch, batch), sb = broadcast_strides(b_batch, batch);
  const size_t rank = batch.size();  // >= 1 here (otherwise both batch counts are 1)
  const int64_t inner = batch[rank - 1];
  const int64_t outer = batches / inner;
  g.batch = inner;
  g.stride_a = sa[rank - 1] * m * k;
  g.stride_b = sb[rank - 1] * k * n;
  g.stride_c = m * n;
  std::vector<int64_t> index(rank, 0);
  const char* ap = static_cast<const char*>(a.raw_data());
  const char* bp = static_cast<const char*>(b.raw_data());
  char* cp = static_cast<char*>(y.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      oa += index[d] * sa[d];
      ob += index[d] * sb[d];
    }
    g.a = ap + size_t(oa * m * k) * elem;
    g.b = bp + size_t(ob * k * n) * elem;
    g.c = cp + size_t(o * inner * m * n) * elem;
    g.c_in = rp ? rp + size_t(o * inner * m * n) * elem : nullptr;
    cuda::gemm(g);
    for (int64_t d = int64_t(rank) - 2; d >= 0 && ++index[size_t(d)] == batch[size_t(d)]; --d) index[size_t(d)] = 0;
  }
}

void matmul_kernel(KernelContext& ctx) { matmul_impl(ctx, false, nullptr, cuda::Epilogue::None); }

void fused_matmul_kernel(KernelContext& ctx) {
  const std::string& activation = ctx.attr_string("activation");
  if (!activation.empty() && activation != "Relu") fail("activation: expected '' or 'Relu', got '{}'", activation);
  matmul_impl(ctx, ctx.attr_int("transB") != 0, ctx.has_input(2) ? &ctx.input(2) : nullptr,
              activation == "Relu" ? cuda::Epilogue::Relu : cuda::Epilogue::None, ctx.attr_float("alpha"),
              ctx.has_input(3) ? &ctx.input(3) : nullptr);
}

// y[i, j] = c[i * s0 + j * s1]: C broadcast to [M, N].
template <class T>
__global__ void broadcast_c_kernel(T* y, const T* c, int64_t m, int64_t n, int64_t s0, int64_t s1) {
  const int64_t total = m * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, col = i - r * n;
    y[i] = c[r * s0 + col * s1];
  }
}

void gemm_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2) fail("input 0 (A): expected rank 2, got {}", shape_str(a.shape()));
  if (b.rank() != 2) fail("input 1 (B): expected rank 2, got {}", shape_str(b.shape()));
  if (a.dtype() != b.dtype()) {
    fail("input 1 (B): expected {} like A, got {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  }
  const bool trans_a = ctx.attr_int("transA") != 0, trans_b = ctx.attr_int("transB") != 0;
  const int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb) {
    fail("Gemm: A {} (transA={}) and B {} (transB={}) disagree on K ({} vs {})", shape_str(a.shape()), int(trans_a),
         shape_str(b.shape()), int(trans_b), k, kb);
  }
  const float alpha = ctx.attr_float("alpha");
  const float beta = ctx.attr_float("beta");
  const bool has_c = ctx.has_input(2) && beta != 0;
  const Tensor* c = nullptr;
  if (has_c) {
    c = &ctx.input(2);
    if (c->rank() > 2) fail("input 2 (C): expected rank <= 2, got {}", shape_str(c->shape()));
    if (broadcast_shapes({c->shape(), Shape{m, n}}) != Shape{m, n}) {
      fail("input 2 (C): shape {} does not broadcast to [{},{}]", shape_str(c->shape()), m, n);
    }
    if (c->dtype() != a.dtype()) {
      fail("input 2 (C): expected {} like A, got {}", dtype_name(a.dtype()), dtype_name(c->dtype()));
    }
  }
  Tensor& y = ctx.allocate(0, a.dtype(), {m, n});
  if (y.numel() == 0) return;

  GemmArgs g;
  g.dtype = a.dtype();
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.raw_data();
  g.lda = a.dim(1);
  g.b = b.raw_data();
  g.ldb = b.dim(1);
  g.c = y.raw_data();
  g.ldc = n;
  g.alpha = alpha;
  g.beta = 0.0f;
  if (has_c) {
    // A row vector C ([N] or [1,N]) with beta 1 is exactly cuBLASLt's bias epilogue.
    const bool row_vector = c->numel() == n && (c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1)) &&
                            (c->rank() == 1 ? c->dim(0) == n : c->dim(1) == n);
    if (row_vector && beta == 1.0f) {
      g.bias = c->raw_data();
    } else {
      const std::vector<int64_t> st = broadcast_strides(c->shape(), {m, n});
      cuda::dispatch_device<INGOT_CUDA_GEMM_TYPES>(a.dtype(), [&]<class T>() {
        broadcast_c_kernel<T><<<cuda::blocks_for(m * n), cuda::kThreads, 0, cuda::stream()>>>(
            cuda::ptr<T>(y), cuda::ptr<const T>(*c), m, n, st[0], st[1]);
        INGOT_CUDA_LAUNCH_CHECK();
      });
      g.beta = beta;
    }
  }
  cuda::gemm(g);
}

}  // namespace

INGOT_CUDA_KERNEL(MatMul, matmul_kernel).versions(1).dtypes({INGOT_CUDA_GEMM_TYPES});
INGOT_CUDA_KERNEL(Gemm, gemm_kernel).versions(1).dtypes({INGOT_CUDA_GEMM_TYPES});
INGOT_CUDA_KERNEL(FusedMatMul, fused_matmul_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_CUDA_GEMM_TYPES});

}  // namespace ingot
