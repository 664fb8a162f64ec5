// The CPU backend's specialised paths against direct float64 reference loops written here: the
// depthwise 3x3/5x5 convolution rows (interior columns vectorized, border columns and rows outside
// the image handled separately), MaxPool 2x2 stride 2, the host allocator's block cache, and
// cpu::gemm's split of a large product across the thread pool.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include "backends/cpu/kernels/gemm.h"
#include "core/thread_pool.h"

#include <omp.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace ingot {
namespace {

using Ints = std::vector<int64_t>;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct Depthwise {
  int64_t n, c, h, w, k, stride_h, stride_w, pad_t, pad_l, pad_b, pad_r;
  bool bias;
};

void expect_depthwise_matches(const Depthwise& p) {
  SCOPED_TRACE(testing::Message() << "input " << p.h << "x" << p.w << " kernel " << p.k << " strides " << p.stride_h
                                  << "," << p.stride_w << " pads " << p.pad_t << "," << p.pad_l << "," << p.pad_b << ","
                                  << p.pad_r << " bias " << p.bias);
  const std::vector<float> x = random_values(size_t(p.n * p.c * p.h * p.w), 11);
  const std::vector<float> w = random_values(size_t(p.c * p.k * p.k), 12);
  const std::vector<float> b = random_values(size_t(p.c), 13);
  const int64_t oh = (p.h + p.pad_t + p.pad_b - p.k) / p.stride_h + 1;
  const int64_t ow = (p.w + p.pad_l + p.pad_r - p.k) / p.stride_w + 1;
  std::vector<Tensor> inputs{Tensor::from_vector(x, {p.n, p.c, p.h, p.w}), Tensor::from_vector(w, {p.c, 1, p.k, p.k})};
  if (p.bias) inputs.push_back(Tensor::from_vector(b, {p.c}));
  Attributes attrs{
      {"group", p.c}, {"strides", Ints{p.stride_h, p.stride_w}}, {"pads", Ints{p.pad_t, p.pad_l, p.pad_b, p.pad_r}}};
  Tensor y = ops::call("Conv", inputs, attrs)[0];
  ASSERT_EQ(y.shape(), (Shape{p.n, p.c, oh, ow}));
  const std::vector<float> got = y.to_vector<float>();
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = p.bias ? b[size_t(c)] : 0.0;
          for (int64_t a = 0; a < p.k; ++a)
            for (int64_t e = 0; e < p.k; ++e) {
              const int64_t ih = i * p.stride_h - p.pad_t + a, iw = j * p.stride_w - p.pad_l + e;
              if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
              acc +=
                  double(x[size_t(((n * p.c + c) * p.h + ih) * p.w + iw)]) * double(w[size_t((c * p.k + a) * p.k + e)]);
            }
          const size_t at = size_t(((n * p.c + c) * oh + i) * ow + j);
          ASSERT_NEAR(got[at], acc, 1e-5) << "at n " << n << " c " << c << " row " << i << " column " << j;
        }
}

TEST(DepthwiseConvFastPath, MatchesReferenceAtBordersAndStrides) {
  const std::vector<Depthwise> cases = {
      {1, 3, 16, 37, 3, 1, 1, 1, 1, 1, 1, true},  // BlazeFace body: 3x3, same padding; width not a multiple of 8
      {2, 4, 10, 21, 3, 2, 2, 0, 0, 1, 1, true},  // BlazeFace downsampling: pads only at the end, odd width
      {1, 2, 9, 20, 3, 2, 2, 0, 0, 1, 1, false},  // the same with even width, no bias
      {1, 2, 12, 30, 5, 1, 1, 2, 2, 2, 2, true},  // 5x5 same padding
      {1, 2, 11, 27, 5, 2, 2, 2, 1, 1, 2, true},  // 5x5 stride 2, asymmetric pads
      {1, 2, 3, 3, 5, 1, 1, 2, 2, 2, 2, true},    // input narrower than the kernel: border columns only
      {1, 2, 1, 1, 3, 1, 1, 1, 1, 1, 1, true},    // a single pixel
      {1, 2, 8, 19, 3, 2, 1, 1, 1, 1, 1, true},   // different vertical and horizontal strides
      {1, 2, 6, 12, 3, 1, 2, 0, 1, 0, 0, true},   // horizontal stride 2 only
      {1, 2, 7, 9, 3, 1, 1, 3, 3, 3, 3, true},    // pads wider than the kernel: rows and columns of bias only
      {1, 2, 6, 40, 3, 1, 1, 0, 0, 0, 0, true},   // no padding
  };
  for (const Depthwise& p : cases) expect_depthwise_matches(p);
}

TEST(MaxPoolFastPath, TwoByTwoStrideTwoMatchesReference) {
  for (Shape shape : {Shape{2, 3, 8, 16}, Shape{1, 2, 7, 9}, Shape{1, 1, 2, 2}, Shape{1, 1, 3, 5}}) {
    SCOPED_TRACE(shape_str(shape));
    std::vector<float> x = random_values(size_t(shape_numel(shape)), 21);
    x[0] = -1e30f;  // large negative values must still win over nothing
    Tensor y = ops::call("MaxPool", {Tensor::from_vector(x, shape)},
                         {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}})[0];
    const int64_t planes = shape[0] * shape[1], ih = shape[2], iw = shape[3], oh = ih / 2, ow = iw / 2;
    ASSERT_EQ(y.shape(), (Shape{shape[0], shape[1], oh, ow}));
    const std::vector<float> got = y.to_vector<float>();
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const float* base = x.data() + (p * ih + 2 * i) * iw + 2 * j;
          const float expected = std::max(std::max(base[0], base[1]), std::max(base[iw], base[iw + 1]));
          ASSERT_EQ(got[size_t((p * oh + i) * ow + j)], expected) << "plane " << p << " at " << i << "," << j;
        }
  }
}

TEST(MaxPoolFastPath, CeilModeOverhangStillCoversTheLastColumn) {
  // 1x5 input, ceil_mode: the last window holds column 4 only (the fast path must not take this).
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 1, 2, 5});
  Tensor y =
      ops::call("MaxPool", {x}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}})[0];
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{7, 9, 10}));
}

// C = alpha op(A) op(B) + beta C with padded leading dimensions, at 2 threads: shapes that split by
// rows of C (m large) and by columns (m small, n large), every transpose combination, against a
// float64 loop. Single-threaded OpenBLAS computes each slice, so the slices' pointer offsets and
// leading dimensions are what is checked.
TEST(CpuGemm, SlicesAcrossThreadsMatchAFloat64Reference) {
  const int before = num_threads();
  set_num_threads(2);
  struct Shape3 {
    int64_t m, n, k;
  };
  uint32_t seed = 40;
  for (Shape3 s : {Shape3{96, 80, 70}, Shape3{8, 640, 120}, Shape3{3, 5, 7}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << "m " << s.m << " n " << s.n << " k " << s.k << " ta " << ta << " tb " << tb);
        const int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k, b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
        const int64_t lda = a_cols + 3, ldb = b_cols + 2, ldc = s.n + 5;
        const std::vector<float> a = random_values(size_t(a_rows * lda), seed++);
        const std::vector<float> b = random_values(size_t(b_rows * ldb), seed++);
        std::vector<float> c = random_values(size_t(s.m * ldc), seed++);
        const std::vector<float> c0 = c;
        const double alpha = 0.5, beta = 0.25;
        cpu::gemm<float>(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            if (j >= s.n) {  // the padding between rows is left alone
              ASSERT_EQ(c[size_t(i * ldc + j)], c0[size_t(i * ldc + j)]);
              continue;
            }
            double want = beta * double(c0[size_t(i * ldc + j)]);
            for (int64_t p = 0; p < s.k; ++p) {
              const double av = ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)];
              const double bv = tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)];
              want += alpha * av * bv;
            }
            ASSERT_NEAR(c[size_t(i * ldc + j)], want, 1e-4) << "C[" << i << "][" << j << "]";
          }
        }
      }
    }
  }
  set_num_threads(before);
}

// Kernels call cpu::gemm from the threads of a parallel loop (attention: one product per head), and
// cpu::gemm's own slices do too: the OpenBLAS build linked must allow calls from several threads at
// once. Its serial build does not (its buffers race: "BLAS : Bad memory unallocation", wrong
// products for every head but the first). Products large enough to pack through those buffers.
TEST(CpuGemm, ConcurrentCallsFromAParallelLoopAreEachRight) {
  const int before = num_threads();
  set_num_threads(16);
  // OpenBLAS's OpenMP build sets OpenMP's team size when told its own: the team must stay Ingot's.
  EXPECT_EQ(omp_get_max_threads(), 16);
  const int64_t m = 150, n = 256, k = 192, count = 32;
  std::vector<std::vector<float>> a, b;
  for (int64_t h = 0; h < count; ++h) {
    a.push_back(random_values(size_t(m * k), uint32_t(100 + h)));
    b.push_back(random_values(size_t(k * n), uint32_t(200 + h)));
  }
  std::vector<std::vector<float>> c(size_t(count), std::vector<float>(size_t(m * n)));
  for (int round = 0; round < 5; ++round) {
    cpu_pool().parallel_for(count, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t h = lo; h < hi; ++h) {
        cpu::gemm<float>(false, false, m, n, k, 1.0, a[size_t(h)].data(), k, b[size_t(h)].data(), n, 0.0,
                         c[size_t(h)].data(), n);
      }
    });
    for (int64_t h = 0; h < count; ++h) {
      for (int64_t i = 0; i < m; i += 7) {
        for (int64_t j = 0; j < n; j += 5) {
          double want = 0;
          for (int64_t p = 0; p < k; ++p) want += double(a[size_t(h)][size_t(i * k + p)]) * b[size_t(h)][size_t(p * n + j)];
          ASSERT_NEAR(c[size_t(h)][size_t(i * n + j)], want, 1e-3) << "round " << round << " product " << h;
        }
      }
    }
  }
  EXPECT_EQ(omp_get_max_threads(), 16);
  set_num_threads(before);
}

TEST(HostAllocator, LargeBlocksAreReusedSafelyAcrossThreads) {
  // Large tensors go through the block cache: blocks freed by one thread are handed to others, so
  // every tensor must still own its block exclusively while it lives.
  auto worker = [](uint32_t seed, bool* ok) {
    std::mt19937 gen(seed);
    for (int round = 0; round < 200; ++round) {
      const int64_t numel = int64_t(16384 + gen() % 300000);  // 64 KiB .. ~1.2 MiB of float32
      Tensor t = Tensor::empty(DType::Float32, {numel});
      float* data = t.data<float>();
      for (int64_t i = 0; i < numel; i += 1024) data[i] = float(seed) + float(i);
      std::this_thread::yield();
      for (int64_t i = 0; i < numel; i += 1024) {
        if (data[i] != float(seed) + float(i)) *ok = false;
      }
    }
  };
  bool ok_a = true, ok_b = true;
  std::thread a(worker, 1u, &ok_a), b(worker, 2u, &ok_b);
  a.join();
  b.join();
  EXPECT_TRUE(ok_a);
  EXPECT_TRUE(ok_b);
}

}  // namespace
}  // namespace ingot
