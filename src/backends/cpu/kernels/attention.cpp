// ai.ingot.Attention on the CPU: S = scale * Q K^T (OpenBLAS), + mask, softmax along each row,
// Y = S V (OpenBLAS), for a chunk of batches at a time: the scores live in one buffer of at most
// kChunkScores values (or one batch's) instead of tensors of the graph. The softmax is the Softmax
// kernel's (maximum ignoring NaN, float32 or float64 accumulation); 16-bit inputs compute in
// float32 like MatMul's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/softmax_row.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/attention_args.h"

namespace ingot {
namespace {

// Batches per pass: their scores are at most kChunkScores values (16 MiB of float32; one batch's
// when that is more). The three phases run over a whole chunk (every product, then every softmax
// row, then every product) rather than block by block: OpenBLAS's threads and the pool's would
// otherwise take turns on the cores for every small block (Whisper-tiny's attention, 2 threads: 2x
// slower block by block).
constexpr int64_t kChunkScores = int64_t(1) << 22;

// Scratch of `n` values: a buffer each thread keeps and reuses up to kChunkScores values (a fresh one
// costs its page faults on every call), a temporary one beyond (one batch's scores of a long
// sequence are not kept for the life of the thread).
template <class T>
T* scratch(size_t n, std::vector<T>& temporary) {
  thread_local std::vector<T> kept;
  if (n > size_t(kChunkScores)) {
    temporary.resize(n);
    return temporary.data();
  }
  if (kept.size() < n) kept.resize(n);
  return kept.data();
}

template <class T>
void attention(const sem::AttentionArgs& a, const T* q, const T* k, const T* v, const T* mask, T* y) {
  const int64_t tq = a.tq, tk = a.tk, d = a.d;
  const int64_t matrix = std::max<int64_t>(1, tq * tk);
  const int64_t chunk = std::clamp<int64_t>(kChunkScores / matrix, 1, std::max<int64_t>(1, a.batch));
  std::vector<T> large_scores;
  T* const scores = scratch<T>(size_t(chunk * tq * tk), large_scores);
  thread_local std::vector<T> kt_buffer;  // K^T of one batch: small next to the scores, kept like them
  if (kt_buffer.size() < size_t(tk * d)) kt_buffer.resize(size_t(tk * d));
  T* const kt = kt_buffer.data();
  for (int64_t b0 = 0; b0 < a.batch; b0 += chunk) {
    const int64_t nb = std::min(chunk, a.batch - b0);
    for (int64_t b = 0; b < nb; ++b) {
      // K^T first: OpenBLAS's NN product measured ~25% faster than NT at Whisper's [1500, 64] K.
      // A serial loop, not cpu::copy_strided: waking the pool between OpenBLAS calls made Whisper's
      // attention ~30% slower (its threads and OpenBLAS's take turns on the cores).
      const T* kb = k + a.offset(a.k_lead, b0 + b);
      for (int64_t i = 0; i < tk; ++i)
        for (int64_t j = 0; j < d; ++j) kt[j * tk + i] = kb[i * a.k_row + j];
      cpu::gemm<T>(false, false, tq, tk, d, a.scale, q + a.offset(a.q_lead, b0 + b), a.q_row, kt, tk, 0.0,
                   scores + b * tq * tk, tk);
    }
    if (tk > 0) {
      parallel_for(nb * tq, std::max<int64_t>(1, (1 << 14) / tk), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t b = i / tq, r = i - b * tq;
          T* row = scores + i * tk;
          if (mask) {
            const T* m = mask + a.offset(a.mask_lead, b0 + b) + r * a.mask_q;
            for (int64_t j = 0; j < tk; ++j) row[j] += m[j * a.mask_k];
          }
          cpu::softmax_row(row, row, tk);
        }
      });
    }
    for (int64_t b = 0; b < nb; ++b) {
      cpu::gemm<T>(false, false, tq, a.dv, tk, 1.0, scores + b * tq * tk, tk, v + a.offset(a.v_lead, b0 + b), a.v_row,
                   0.0, y + a.offset(a.y_lead, b0 + b), a.y_row);
    }
  }
}

void attention_kernel(KernelContext& ctx) {
  const sem::AttentionArgs a = sem::attention_args(ctx);
  Tensor& y = ctx.allocate(0, ctx.input(0).dtype(), a.out_shape);
  if (y.numel() == 0) return;
  const DType dt = y.dtype();
  const bool half = dt == DType::Float16 || dt == DType::BFloat16;
  const DType compute = half ? DType::Float32 : dt;
  auto in = [&](size_t i) { return half ? ctx.input(i).cast(compute) : ctx.input(i); };
  const Tensor q = in(0), k = in(1), v = in(2), mask = a.has_mask ? in(3) : Tensor();
  Tensor out = half ? Tensor::empty(compute, y.shape()) : y;
  dispatch<DType::Float32, DType::Float64>(compute, [&]<class T>() {
    attention<T>(a, q.data<T>(), k.data<T>(), v.data<T>(), a.has_mask ? mask.data<T>() : nullptr, out.data<T>());
  });
  if (half) copy_tensor(out.cast(dt), y);
}

}  // namespace

INGOT_CPU_KERNEL(Attention, attention_kernel).domain(kIngotDomain).versions(1).dtypes({INGOT_FLOAT_TYPES});

}  // namespace ingot
