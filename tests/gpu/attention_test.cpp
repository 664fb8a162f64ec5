// ai.ingot.Attention on the GPU against its CPU kernel (itself checked against a float64 reference and
// the unfused graph in tests/unit/passes_test.cpp). float16/bfloat16/float32 with head sizes 32, 64
// and 128 take the flash kernel (float32 by 3xTF32 products); float64, other head sizes and leading
// dims that do not fold into two levels the materialized path (scripts/gpu-test.sh runs these tests
// again with INGOT_FLASH_ATTENTION=0: every case through the materialized path). Sequence
// lengths that are not multiples of the 64-row tiles, masks of every broadcast shape, K and V
// shared across heads, and batches that do not fold into two grid levels. Unmasked 16-bit attention
// goes to cuDNN's fused engines by default (INGOT_CUDNN_ATTENTION): the flash tests switch it off,
// CudnnFusedAttention* runs it.
#include <ingot/attribute.h>
#include <fmt/format.h>

#include "backends/cuda/cudnn_attention_graph.h"
#include "core/tuning.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

struct Case {
  Shape q, k, v;
  Shape mask;                       // empty: no mask
  std::vector<int64_t> transposed;  // the attribute: Q, K, V, Y as [B, T, H, D]
  float scale = 0.125f;
};

void expect_attention_matches(DType dt, uint32_t seed, Shape q, Shape k, Shape v, Shape mask = {},
                              std::vector<int64_t> transposed = {}) {
  const Case c{std::move(q), std::move(k), std::move(v), std::move(mask), std::move(transposed)};
  SCOPED_TRACE(fmt::format("{} q {} k {} v {} mask {}", dtype_name(dt), shape_str(c.q), shape_str(c.k), shape_str(c.v),
                           c.mask.empty() ? "none" : shape_str(c.mask)));
  std::vector<Tensor> inputs = {random_tensor(dt, c.q, seed, -2, 2), random_tensor(dt, c.k, seed + 1, -2, 2),
                                random_tensor(dt, c.v, seed + 2, -1, 1)};
  if (!c.mask.empty()) inputs.push_back(random_tensor(dt, c.mask, seed + 3, -4, 0));
  Attributes attrs;
  attrs["scale"] = Attribute(c.scale);
  if (!c.transposed.empty()) attrs["transposed"] = Attribute(c.transposed);
  // 16-bit: the flash kernel rounds the probabilities to the input type before P V (as
  // FlashAttention does); the CPU keeps them in float32.
  const double atol = dt == DType::Float16 ? 4e-3 : dt == DType::BFloat16 ? 3e-2 : -1;
  expect_cuda_matches_cpu("Attention", inputs, attrs, 1, atol, atol, "ai.ingot");
}

TEST(CudaAttention, FlashKernelMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv flash_only("INGOT_CUDNN_ATTENTION", "0");
  uint32_t seed = 1;
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32}) {
    for (int64_t d : {32, 64, 128}) {
      // One tile, ragged tiles on both sides, a long key sequence, a single query row.
      for (auto [tq, tk] : {std::pair<int64_t, int64_t>{64, 64}, {77, 131}, {150, 1500}, {1, 5}}) {
        expect_attention_matches(dt, seed++, {2, 3, tq, d}, {2, 3, tk, d}, {2, 3, tk, d});
      }
    }
  }
  // Grids that fill the GPU (float32 takes one m-tile per warp below the SM count, two above).
  for (DType dt : {DType::Float32, DType::Float16}) expect_attention_matches(dt, seed++, {70, 3, 150, 64}, {70, 3, 150, 64}, {70, 3, 150, 64});
}

// Float32's 3xTF32 operands split by an integer add (INGOT_TF32_FAST_SPLIT=1, the default) and by
// the conversion instruction (0): the same cases, the same tolerance.
TEST(CudaAttention, Float32BothSplitsMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  for (const char* fast : {"1", "0"}) {
    SCOPED_TRACE(std::string("INGOT_TF32_FAST_SPLIT=") + fast);
    const ScopedEnv env("INGOT_TF32_FAST_SPLIT", fast);
    uint32_t seed = 500;
    for (int64_t d : {32, 64, 128}) {
      for (auto [tq, tk] : {std::pair<int64_t, int64_t>{64, 64}, {77, 131}, {150, 1500}, {1, 5}}) {
        expect_attention_matches(DType::Float32, seed++, {2, 3, tq, d}, {2, 3, tk, d}, {2, 3, tk, d});
      }
    }
    expect_attention_matches(DType::Float32, seed++, {70, 3, 150, 64}, {70, 3, 150, 64}, {70, 3, 150, 64});
    expect_attention_matches(DType::Float32, seed++, {2, 3, 77, 64}, {2, 3, 131, 64}, {2, 3, 131, 64},
                             {2, 1, 77, 131});
  }
}

TEST(CudaAttention, FlashKernelTakesBroadcastMasksAndSharedKeys) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv flash_only("INGOT_CUDNN_ATTENTION", "0");
  uint32_t seed = 100;
  const int64_t b = 2, h = 3, tq = 70, tk = 90, d = 64;
  for (DType dt : {DType::Float16, DType::BFloat16, DType::Float32}) {
    // Padding mask per batch, one mask for all, a full mask, a per-head one without batch.
    for (const Shape& mask : {Shape{b, 1, 1, tk}, Shape{tq, tk}, Shape{b, h, tq, tk}, Shape{h, 1, tk}, Shape{1, tk}}) {
      expect_attention_matches(dt, seed++, {b, h, tq, d}, {b, h, tk, d}, {b, h, tk, d}, mask);
    }
    // Multi-query attention: one K/V head for every query head; K/V shared by the batch.
    expect_attention_matches(dt, seed++, {b, h, tq, d}, {b, 1, tk, d}, {b, 1, tk, d});
    expect_attention_matches(dt, seed++, {b, h, tq, d}, {1, h, tk, d}, {1, h, tk, d}, {b, 1, 1, tk});
    // [B, T, H, D] operands (Whisper's after fuse_attention), with and without the result's layout.
    expect_attention_matches(dt, seed++, {b, tq, h, d}, {b, tk, h, d}, {b, tk, h, d}, {}, {1, 1, 1, 1});
    expect_attention_matches(dt, seed++, {b, tq, h, d}, {b, h, tk, d}, {b, tk, 1, d}, {b, 1, 1, tk}, {1, 0, 1, 0});
    // Rank 3 ([B*H, T, D], transformers' bmm form) and rank 2 (no batch).
    expect_attention_matches(dt, seed++, {6, tq, d}, {6, tk, d}, {6, tk, d});
    expect_attention_matches(dt, seed++, {tq, d}, {tk, d}, {tk, d});
  }
}

// cuDNN's fused flash attention (cudnn_attention_graph.h) against the CPU: the Whisper-tiny encoder's
// layout ([B, T, H, D] operands, head size 64, 1500 frames cut to 150), ragged lengths, head sizes
// 64 and 128, both 16-bit types. On Hopper cuDNN has engines for all of these: the test checks that
// they ran there rather than the flash kernel.
TEST(CudaAttention, CudnnFusedAttentionMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv on("INGOT_CUDNN_ATTENTION", "1");
  const int64_t before = cuda::AttentionGraph::runs();
  uint32_t seed = 400;
  int cases = 0;
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    expect_attention_matches(dt, seed++, {2, 150, 6, 64}, {2, 150, 6, 64}, {2, 150, 6, 64}, {}, {1, 1, 1, 1});
    expect_attention_matches(dt, seed++, {2, 3, 77, 64}, {2, 3, 131, 64}, {2, 3, 131, 64});
    expect_attention_matches(dt, seed++, {2, 3, 64, 128}, {2, 3, 200, 128}, {2, 3, 200, 128});
    expect_attention_matches(dt, seed++, {6, 33, 64}, {6, 70, 64}, {6, 70, 64});
    cases += 4;
  }
  const int64_t ran = cuda::AttentionGraph::runs() - before;
  if (cuda::arch_name() == "sm_90") {
    EXPECT_EQ(ran, cases) << "cuDNN's fused attention did not take every case";
  }
  // Masked attention stays on the flash kernel.
  const int64_t masked_before = cuda::AttentionGraph::runs();
  expect_attention_matches(DType::Float16, seed++, {2, 3, 70, 64}, {2, 3, 90, 64}, {2, 3, 90, 64}, {2, 1, 1, 90});
  EXPECT_EQ(cuda::AttentionGraph::runs(), masked_before);
}

// A package's attention plans are built ahead from the spec stored beside the choice (what the CUDA
// backend does on a thread of its own when a package loads): the next run takes the plan built ahead,
// searches nothing and gives the same result.
TEST(CudaAttention, CudnnPlansAreBuiltAheadFromTheStore) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv on("INGOT_CUDNN_ATTENTION", "1");
  if (cuda::arch_name() != "sm_90") GTEST_SKIP() << "cuDNN's fused attention engines are checked on Hopper";
  const DType dt = DType::Float16;
  std::vector<Tensor> inputs = {random_tensor(dt, {2, 37, 4, 64}, 500, -2, 2),
                                random_tensor(dt, {2, 53, 4, 64}, 501, -2, 2),
                                random_tensor(dt, {2, 53, 4, 64}, 502, -1, 1)};
  for (Tensor& t : inputs) t = t.to(Device{DeviceType::CUDA, 0});
  Attributes attrs;
  attrs["scale"] = Attribute(0.125f);
  attrs["transposed"] = Attribute(std::vector<int64_t>{1, 1, 1, 1});
  const Tensor first = ops::call("Attention", inputs, attrs, 1, "ai.ingot")[0];
  ASSERT_TRUE(cuda::AttentionGraph::has_stored_plans());
  cuda::AttentionGraph::forget_shared();
  const int64_t prebuilt = cuda::AttentionGraph::prebuilt(), runs = cuda::AttentionGraph::runs();
  EXPECT_GE(cuda::AttentionGraph::prebuild_stored_plans(), 1);
  EXPECT_GT(cuda::AttentionGraph::prebuilt(), prebuilt);
  const int64_t handles = cuda::AttentionGraph::build_handles();
  EXPECT_LE(handles, 1) << "one build handle per device, whatever the number of packages loaded";
  EXPECT_EQ(cuda::AttentionGraph::prebuild_stored_plans(), 0) << "built once";
  cuda::AttentionGraph::forget_shared();
  EXPECT_GE(cuda::AttentionGraph::prebuild_stored_plans(), 1) << "built again, on the same handle";
  EXPECT_EQ(cuda::AttentionGraph::build_handles(), handles);
  const tuning::Stats before = tuning::algorithms().stats();
  // Another signature of the same problem (a new node state) takes the shared plan built ahead.
  attrs["scale"] = Attribute(0.25f);
  (void)ops::call("Attention", inputs, attrs, 1, "ai.ingot");
  cuda::synchronize();
  EXPECT_EQ(cuda::AttentionGraph::runs(), runs + 1);
  EXPECT_EQ(tuning::algorithms().stats().misses, before.misses) << "nothing searched";
  attrs["scale"] = Attribute(0.125f);
  expect_close(first.to(Device::cpu()), ops::call("Attention", inputs, attrs, 1, "ai.ingot")[0], 0, 0,
               "the same plan, the same result");
}

TEST(CudaAttention, MaterializedPathMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  uint32_t seed = 200;
  // float64 and head sizes the flash kernel does not take (40; D != Dv).
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16}) {
    expect_attention_matches(dt, seed++, {2, 3, 33, 40}, {2, 3, 50, 40}, {2, 3, 50, 40}, {2, 1, 1, 50});
    expect_attention_matches(dt, seed++, {2, 3, 33, 64}, {2, 3, 50, 64}, {2, 3, 50, 32});
  }
  for (DType dt : {DType::Float64, DType::Float32, DType::Float16}) {
    // Leading dims [2, 3, 4] whose K broadcasts over the middle one only: no two-level fold, one
    // product per batch.
    expect_attention_matches(dt, seed++, {2, 3, 4, 20, 64}, {2, 1, 4, 30, 64}, {2, 1, 4, 30, 64});
  }
  // A mask and [B, T, H, D] operands through cuBLASLt's leading dimensions (float32 and float16 take
  // the flash kernel here, the materialized path in the INGOT_FLASH_ATTENTION=0 run).
  expect_attention_matches(DType::Float64, seed++, {2, 3, 20, 64}, {2, 3, 30, 64}, {2, 3, 30, 64}, {3, 20, 30});
  expect_attention_matches(DType::Float64, seed++, {2, 20, 3, 64}, {2, 30, 3, 64}, {2, 30, 3, 64}, {}, {1, 1, 1, 1});
}

TEST(CudaAttention, EmptyKeysGiveZeros) {
  INGOT_REQUIRE_GPU();
  expect_attention_matches(DType::Float16, 300, {2, 5, 64}, {2, 0, 64}, {2, 0, 64});
}

}  // namespace
}  // namespace ingot::gpu_test
