// The text form of a cuDNN attention problem (backends/cuda/cudnn_attention_graph.h) without a GPU: a
// package stores it beside the engine choice and a later process builds the plan ahead from it, so
// a spec must come back exactly, and a malformed entry must come back as nothing (never built).
#ifdef INGOT_HAS_CUDA
#include <gtest/gtest.h>

#include "backends/cuda/cudnn_attention_graph.h"

namespace ingot {
namespace {

cuda::AttentionGraphSpec whisper_layer() {
  // Whisper-tiny's encoder at batch 32: Q, K, V, Y read as [B, T, H, D] (row stride H * D).
  cuda::AttentionGraphSpec s;
  s.dtype = DType::BFloat16;
  s.batch = 32, s.heads = 6, s.tq = 1500, s.tk = 1500, s.d = 64, s.dv = 64;
  for (int64_t* t : {s.q, s.k, s.v, s.y}) t[0] = 1500 * 384, t[1] = 64, t[2] = 384;
  s.k[0] = 7;  // every field its own value
  s.v[1] = 65;
  s.y[2] = 386;
  return s;
}

TEST(CudaAttentionSpec, TextRoundTripsEveryField) {
  const cuda::AttentionGraphSpec s = whisper_layer();
  const std::string text = cuda::to_text(s);
  const auto back = cuda::attention_spec_from_text(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(back->dtype, s.dtype);
  EXPECT_EQ(back->batch, s.batch);
  EXPECT_EQ(back->heads, s.heads);
  EXPECT_EQ(back->tq, s.tq);
  EXPECT_EQ(back->tk, s.tk);
  EXPECT_EQ(back->d, s.d);
  EXPECT_EQ(back->dv, s.dv);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(back->q[i], s.q[i]) << i;
    EXPECT_EQ(back->k[i], s.k[i]) << i;
    EXPECT_EQ(back->v[i], s.v[i]) << i;
    EXPECT_EQ(back->y[i], s.y[i]) << i;
  }
  EXPECT_EQ(cuda::to_text(*back), text);
}

TEST(CudaAttentionSpec, MalformedTextIsNothing) {
  const std::string good = cuda::to_text(whisper_layer());
  EXPECT_FALSE(cuda::attention_spec_from_text("").has_value());
  EXPECT_FALSE(cuda::attention_spec_from_text(good.substr(0, good.rfind(' '))).has_value()) << "a number short";
  EXPECT_FALSE(cuda::attention_spec_from_text(good + " 1").has_value()) << "a number over";
  EXPECT_FALSE(cuda::attention_spec_from_text(good + "x").has_value()) << "trailing text";
  cuda::AttentionGraphSpec f32 = whisper_layer();
  f32.dtype = DType::Float32;  // cuDNN's fused attention is taken for 16-bit types only
  EXPECT_FALSE(cuda::attention_spec_from_text(cuda::to_text(f32)).has_value());
  cuda::AttentionGraphSpec empty = whisper_layer();
  empty.tk = 0;
  EXPECT_FALSE(cuda::attention_spec_from_text(cuda::to_text(empty)).has_value());
}

}  // namespace
}  // namespace ingot
#endif
