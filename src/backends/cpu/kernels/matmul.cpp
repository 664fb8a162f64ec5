// MatMul (numpy semantics: batch broadcasting, 1-D operands), Gemm and ai.ingot FusedMatMul (MatMul
// with B optionally transposed, then residual, bias and Relu applied row by row while the rows are in cache).
// Floating types go to OpenBLAS (half types through float32); integer types use a plain loop.
#include <algorithm>
#include <vector>

#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/nn_util.h"
#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

using cpu::gemm;

// Half types compute in float32: convert the inputs, run, convert the result back.
bool is_half(DType dt) { return dt == DType::Float16 || dt == DType::BFloat16; }

// What FusedMatMul applies to each row of N outputs: y = relu?(y + bias? + residual?), the
// residual laid out like y.
template <class T>
void bias_act_rows(T* y, int64_t rows, int64_t n, const T* bias, bool relu, const T* residual) {
  if (!bias && !relu && !residual) return;
  parallel_for(rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, n)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* row = y + r * n;
      if (residual) {
        const T* res = residual + r * n;
        for (int64_t j = 0; j < n; ++j) row[j] += res[j];
      }
      if (bias && relu) {
        for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j] + bias[j], T(0));
      } else if (bias) {
        for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
      } else if (relu) {
        for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j], T(0));
      }
    }
  });
}

// MatMul, and FusedMatMul's product (B's last two axes swapped when trans_b, scaled by alpha) with
// its epilogue: bias (N elements, or nullptr), a residual of the output's shape (or nullptr) and an
// optional Relu on the result.
void matmul_impl(KernelContext& ctx, bool trans_b, const Tensor* bias_in, bool relu, double alpha = 1.0,
                 const Tensor* residual_in = nullptr) {
  const Tensor& a_in = ctx.input(0);
  const Tensor& b_in = ctx.input(1);
  if (a_in.dtype() != b_in.dtype()) {
    fail("input 1 (B): expected {} like A, got {}", dtype_name(a_in.dtype()), dtype_name(b_in.dtype()));
  }
  if (a_in.rank() == 0 || b_in.rank() == 0) {
    fail("MatMul operands must have rank >= 1, got A {} and B {}", shape_str(a_in.shape()), shape_str(b_in.shape()));
  }
  if (trans_b && b_in.rank() < 2) fail("input 1 (B): transB needs rank >= 2, got {}", shape_str(b_in.shape()));
  // 1-D operands become matrices ([K] -> [1,K] for A, [K,1] for B); that axis is dropped afterwards.
  Shape as = a_in.shape(), bs = b_in.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  if (trans_b) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k) {
    fail("MatMul: A {} has {} columns but B {} has {} rows", shape_str(a_in.shape()), k, shape_str(b_in.shape()),
         bs[bs.size() - 2]);
  }
  if (bias_in) {
    if (bias_in->dtype() != a_in.dtype()) {
      fail("input 2 (bias): expected {} like A, got {}", dtype_name(a_in.dtype()), dtype_name(bias_in->dtype()));
    }
    if (bias_in->numel() != n || (bias_in->rank() > 0 && bias_in->dim(-1) != n)) {
      fail("input 2 (bias): expected {} elements, got {}", n, shape_str(bias_in->shape()));
    }
  }
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes({a_batch, b_batch});
  Shape out_shape = batch;
  if (a_in.rank() > 1) out_shape.push_back(m);
  if (b_in.rank() > 1) out_shape.push_back(n);
  if (residual_in && (residual_in->dtype() != a_in.dtype() || residual_in->shape() != out_shape)) {
    fail("input 3 (residual): expected {}{} like the product, got {}", dtype_name(a_in.dtype()), shape_str(out_shape),
         residual_in->describe());
  }
  Tensor& y = ctx.allocate(0, a_in.dtype(), out_shape);
  if (y.numel() == 0) return;

  const bool half = is_half(a_in.dtype());
  Tensor a = half ? a_in.cast(DType::Float32) : a_in;
  Tensor b = half ? b_in.cast(DType::Float32) : b_in;
  Tensor out = half ? Tensor::empty(DType::Float32, y.shape()) : y;
  Tensor bias = bias_in ? (half ? bias_in->cast(DType::Float32) : *bias_in) : Tensor();
  Tensor residual = residual_in ? (half ? residual_in->cast(DType::Float32) : *residual_in) : Tensor();
  const int64_t batches = shape_numel(batch);
  const int64_t ldb = trans_b ? k : n;
  const bool b_shared = shape_numel(b_batch) == 1;  // one B for every batch: fold A's batch into M
  dispatch<DType::Float32, DType::Float64, INGOT_INT_TYPES>(a.dtype(), [&]<class T>() {
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* cp = out.data<T>();
    if (b_shared && shape_numel(a_batch) == batches) {
      gemm<T>(false, trans_b, batches * m, n, k, alpha, ap, k, bp, ldb, 0.0, cp, n);
    } else {
      std::vector<int64_t> sa = broadcast_strides(a_batch, batch), sb = broadcast_strides(b_batch, batch);
      std::vector<int64_t> index(batch.size(), 0);
      for (int64_t i = 0; i < batches; ++i) {
        int64_t oa = 0, ob = 0;
        for (size_t d = 0; d < batch.size(); ++d) {
          oa += index[d] * sa[d];
          ob += index[d] * sb[d];
        }
        gemm<T>(false, trans_b, m, n, k, alpha, ap + oa * m * k, k, bp + ob * k * n, ldb, 0.0, cp + i * m * n, n);
        for (int64_t d = int64_t(batch.size()) - 1; d >= 0 && ++index[size_t(d)] == batch[size_t(d)]; --d) {
          index[size_t(d)] = 0;
        }
      }
    }
    if constexpr (std::is_floating_point_v<T>) {
      bias_act_rows<T>(cp, out.numel() / n, n, bias.defined() ? bias.data<T>() : nullptr, relu,
                       residual.defined() ? residual.data<T>() : nullptr);
    }
  });
  if (half) copy_tensor(out.cast(y.dtype()), y);
}

void matmul(KernelContext& ctx) { matmul_impl(ctx, false, nullptr, false); }

void fused_matmul_kernel(KernelContext& ctx) {
  const std::string& activation = ctx.attr_string("activation");
  if (!activation.empty() && activation != "Relu") fail("activation: expected '' or 'Relu', got '{}'", activation);
  matmul_impl(ctx, ctx.attr_int("transB") != 0, ctx.has_input(2) ? &ctx.input(2) : nullptr, activation == "Relu",
              ctx.attr_float("alpha"), ctx.has_input(3) ? &ctx.input(3) : nullptr);
}

void gemm_kernel(KernelContext& ctx) {
  const Tensor& a_in = ctx.input(0);
  const Tensor& b_in = ctx.input(1);
  if (a_in.rank() != 2) fail("input 0 (A): expected rank 2, got {}", shape_str(a_in.shape()));
  if (b_in.rank() != 2) fail("input 1 (B): expected rank 2, got {}", shape_str(b_in.shape()));
  if (a_in.dtype() != b_in.dtype()) {
    fail("input 1 (B): expected {} like A, got {}", dtype_name(a_in.dtype()), dtype_name(b_in.dtype()));
  }
  const bool trans_a = ctx.attr_int("transA") != 0, trans_b = ctx.attr_int("transB") != 0;
  const int64_t m = trans_a ? a_in.dim(1) : a_in.dim(0), k = trans_a ? a_in.dim(0) : a_in.dim(1);
  const int64_t kb = trans_b ? b_in.dim(1) : b_in.dim(0), n = trans_b ? b_in.dim(0) : b_in.dim(1);
  if (k != kb) {
    fail("Gemm: A {} (transA={}) and B {} (transB={}) disagree on K ({} vs {})", shape_str(a_in.shape()), int(trans_a),
         shape_str(b_in.shape()), int(trans_b), k, kb);
  }
  const double alpha = ctx.attr_float("alpha");
  double beta = ctx.attr_float("beta");
  const bool has_c = ctx.has_input(2) && beta != 0;
  Tensor& y = ctx.allocate(0, a_in.dtype(), {m, n});
  if (y.numel() == 0) return;

  const bool half = is_half(a_in.dtype());
  Tensor a = half ? a_in.cast(DType::Float32) : a_in;
  Tensor b = half ? b_in.cast(DType::Float32) : b_in;
  Tensor out = half ? Tensor::empty(DType::Float32, y.shape()) : y;
  Tensor c;
  if (has_c) {
    const Tensor& c_in = ctx.input(2);
    if (c_in.rank() > 2) fail("input 2 (C): expected rank <= 2, got {}", shape_str(c_in.shape()));
    if (broadcast_shapes({c_in.shape(), Shape{m, n}}) != Shape{m, n}) {
      fail("input 2 (C): shape {} does not broadcast to [{},{}]", shape_str(c_in.shape()), m, n);
    }
    c = c_in.dtype() == out.dtype() ? c_in : c_in.cast(out.dtype());
  }
  dispatch<DType::Float32, DType::Float64, INGOT_INT_TYPES>(out.dtype(), [&]<class T>() {
    T* yp = out.data<T>();
    if (has_c) {
      // Y starts as C broadcast to [M,N]; the product then accumulates onto it scaled by beta.
      std::vector<int64_t> st = broadcast_strides(c.shape(), {m, n});
      const T* cp = c.data<T>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) yp[i * n + j] = cp[i * st[0] + j * st[1]];
    }
    gemm<T>(trans_a, trans_b, m, n, k, alpha, a.data<T>(), a.dim(1), b.data<T>(), b.dim(1), has_c ? beta : 0.0, yp, n);
  });
  if (half) copy_tensor(out.cast(y.dtype()), y);
}

}  // namespace

INGOT_CPU_KERNEL(MatMul, matmul).versions(1).dtypes({INGOT_FLOAT_TYPES, INGOT_INT_TYPES});
INGOT_CPU_KERNEL(Gemm, gemm_kernel).versions(1).dtypes({INGOT_FLOAT_TYPES, INGOT_INT_TYPES});
INGOT_CPU_KERNEL(FusedMatMul, fused_matmul_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
