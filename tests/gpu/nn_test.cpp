// CUDA MatMul, Gemm, Conv, ConvTranspose and ai.ingot FusedConv against the CPU kernels
// (src/backends/cuda/gemm.cu, kernels/matmul.cu, kernels/conv.cu).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/cuda/cudnn_conv_graph.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels/conv_pointwise.h"
#include "backends/cuda/kernels/conv_split_k.h"
#include "backends/cuda/kernels/gemm_3xtf32.h"
#include "core/tuning.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using Ints = std::vector<int64_t>;

// Library sums run in a different order than OpenBLAS / oneDNN: a little absolute slack for
// results that cancel.
double atol_for(DType dt) {
  switch (dt) {
    case DType::Float16: return 1e-2;
    case DType::BFloat16: return 6e-2;
    case DType::Float64: return 1e-9;
    default: return 1e-3;
  }
}
double rtol_for(DType dt) {
  switch (dt) {
    case DType::Float16: return 5e-3;
    case DType::BFloat16: return 2e-2;
    case DType::Float64: return 1e-9;
    default: return 1e-4;
  }
}

// Half-precision inputs stay in [-1, 1] so sums stay small next to their rounding.
Tensor rnd(DType dt, Shape shape, uint32_t seed) {
  const bool half = dt == DType::Float16 || dt == DType::BFloat16;
  return random_tensor(dt, std::move(shape), seed, half ? -1.0 : -2.0, half ? 1.0 : 2.0);
}

void check(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {},
           const std::string& domain = "") {
  const DType dt = inputs[0].dtype();
  expect_cuda_matches_cpu(op, inputs, attrs, 1, atol_for(dt), rtol_for(dt), domain);
}

const DType kGemmTypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
const DType kConvTypes[] = {DType::Float32, DType::Float16, DType::BFloat16};

// ---- MatMul ----

TEST(CudaMatMul, TwoDimensional) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    check("MatMul", {rnd(dt, {7, 13}, 1), rnd(dt, {13, 5}, 2)});
    check("MatMul", {rnd(dt, {65, 129}, 3), rnd(dt, {129, 33}, 4)});
    check("MatMul", {rnd(dt, {1, 1}, 5), rnd(dt, {1, 1}, 6)});
    check("MatMul", {rnd(dt, {3, 2048}, 7), rnd(dt, {2048, 40}, 8)});  // on the cold tier: K split across blocks
  }
}

TEST(CudaMatMul, Batched) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    check("MatMul", {rnd(dt, {3, 7, 13}, 1), rnd(dt, {3, 13, 5}, 2)});
    check("MatMul", {rnd(dt, {2, 3, 4, 9}, 3), rnd(dt, {2, 3, 9, 6}, 4)});
  }
}

// ai.ingot FusedMatMul: alpha (a folded score scale), bias and Relu in cuBLASLt's epilogue.
TEST(CudaMatMul, FusedAlphaBiasRelu) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    check("FusedMatMul", {rnd(dt, {2, 3, 5, 8}, 1), rnd(dt, {2, 3, 8, 5}, 2)}, {{"alpha", 0.125f}}, "ai.ingot");
    check("FusedMatMul", {rnd(dt, {4, 9}, 3), rnd(dt, {9, 6}, 4), rnd(dt, {6}, 5)},
          {{"alpha", -0.5f}, {"activation", std::string("Relu")}}, "ai.ingot");
    check("FusedMatMul", {rnd(dt, {3, 4, 9}, 6), rnd(dt, {6, 9}, 7), rnd(dt, {6}, 8)},
          {{"alpha", 2.0f}, {"transB", int64_t(1)}}, "ai.ingot");
    // A residual (cuBLASLt's C, read beside the output) through each batching path: strided batch,
    // one product, B shared (A's batch folded into M), the outer loop of a general broadcast.
    check("FusedMatMul", {rnd(dt, {2, 3, 5, 8}, 9), rnd(dt, {2, 3, 8, 5}, 10), Tensor(), rnd(dt, {2, 3, 5, 5}, 11)},
          {{"alpha", 0.125f}}, "ai.ingot");
    check("FusedMatMul", {rnd(dt, {4, 9}, 12), rnd(dt, {9, 6}, 13), rnd(dt, {6}, 14), rnd(dt, {4, 6}, 15)},
          {{"activation", std::string("Relu")}}, "ai.ingot");
    check("FusedMatMul", {rnd(dt, {3, 4, 9}, 16), rnd(dt, {6, 9}, 17), rnd(dt, {6}, 18), rnd(dt, {3, 4, 6}, 19)},
          {{"transB", int64_t(1)}}, "ai.ingot");
    check("FusedMatMul",
          {rnd(dt, {2, 1, 7, 13}, 20), rnd(dt, {1, 3, 13, 5}, 21), Tensor(), rnd(dt, {2, 3, 7, 5}, 22)}, {},
          "ai.ingot");
  }
}

// Float32 products on the 3xTF32 tensor-core kernel (INGOT_GEMM_3XTF32=2: every one it takes;
// gemm_3xtf32.cu) against the CPU, then the same with it off (cuBLASLt): M, N and K that are not
// multiples of its 128 x 128 x 32 tiles, a strided batch, A shared by a batch (stride 0), B
// transposed, alpha, bias, Relu, a residual, a long K, Gemm's C scaled by beta (in place). Then the
// default (1) takes a product whose grid fills the GPU and leaves a small one to cuBLASLt.
TEST(CudaMatMul, Float32On3xTf32MatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const DType f = DType::Float32;
  struct Case {
    std::string op;
    std::vector<Tensor> inputs;
    Attributes attrs;
    std::string domain;
  };
  const std::vector<Case> cases = {
      {"MatMul", {rnd(f, {300, 132}, 1), rnd(f, {132, 260}, 2)}, {}, ""},
      {"MatMul", {rnd(f, {3, 129, 36}, 3), rnd(f, {3, 36, 20}, 4)}, {}, ""},
      {"MatMul", {rnd(f, {130, 64}, 5), rnd(f, {2, 64, 132}, 6)}, {}, ""},
      {"FusedMatMul",
       {rnd(f, {2, 200, 384}, 7), rnd(f, {384, 256}, 8), rnd(f, {256}, 9)},
       {{"activation", std::string("Relu")}, {"alpha", 0.5f}},
       "ai.ingot"},
      {"FusedMatMul",
       {rnd(f, {200, 96}, 10), rnd(f, {68, 96}, 11), rnd(f, {68}, 12), rnd(f, {200, 68}, 13)},
       {{"transB", int64_t(1)}},
       "ai.ingot"},
      {"Gemm", {rnd(f, {64, 1536}, 14), rnd(f, {1536, 384}, 15), rnd(f, {384}, 16)}, {}, ""},
      {"Gemm", {rnd(f, {40, 24}, 17), rnd(f, {24, 16}, 18), rnd(f, {40, 16}, 19)}, {{"beta", 0.5f}}, ""},
  };
  for (const char* on : {"2", "0"}) {
    const ScopedEnv env("INGOT_GEMM_3XTF32", on);
    const int64_t before = cuda::tf32x3_calls();
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} [{}] x [{}] INGOT_GEMM_3XTF32={}", c.op, fmt::join(c.inputs[0].shape(), ","),
                               fmt::join(c.inputs[1].shape(), ","), on));
      check(c.op, c.inputs, c.attrs, c.domain);
    }
    EXPECT_EQ(cuda::tf32x3_calls() - before, std::string(on) == "2" ? int64_t(cases.size()) : 0);
  }
  const ScopedEnv env("INGOT_GEMM_3XTF32", "1");
  int64_t before = cuda::tf32x3_calls();
  check("MatMul", {rnd(f, {64, 64}, 20), rnd(f, {64, 64}, 21)});
  EXPECT_EQ(cuda::tf32x3_calls(), before) << "one block: left to cuBLASLt";
  check("MatMul", {rnd(f, {4, 512, 384}, 22), rnd(f, {384, 1152}, 23)});  // Whisper's q/k/v at batch 4
  EXPECT_EQ(cuda::tf32x3_calls() - before, 1) << "16 x 9 blocks: the kernel's";
}

// A stored product (a package's) warmed ahead: its plan is built from the stored choice and run once
// on scratch buffers of the call's alignment, so that the call itself finds the plan made and asks
// the store nothing; its result is the CPU's. Every form of the store's key is read back: dtypes,
// fused bias and Relu, a residual (beta), batches, a misaligned operand.
TEST(CudaMatMul, StoredProductsAreWarmedAhead) {
  INGOT_REQUIRE_GPU();
  struct Case {
    std::string op;
    std::vector<Tensor> inputs;
    Attributes attrs;
    std::string domain;
  };
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Case> cases = {
        {"MatMul", {rnd(dt, {7, 13}, 1), rnd(dt, {13, 5}, 2)}, {}, ""},
        {"MatMul", {rnd(dt, {3, 7, 13}, 3), rnd(dt, {3, 13, 5}, 4)}, {}, ""},
        {"FusedMatMul", {rnd(dt, {4, 9}, 5), rnd(dt, {9, 6}, 6), rnd(dt, {6}, 7)},
         {{"alpha", -0.5f}, {"activation", std::string("Relu")}}, "ai.ingot"},
        {"FusedMatMul", {rnd(dt, {4, 9}, 8), rnd(dt, {9, 6}, 9), rnd(dt, {6}, 10), rnd(dt, {4, 6}, 11)}, {}, "ai.ingot"},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.op);
      tuning::algorithms().clear();
      cuda::forget_cached_products();
      check(c.op, c.inputs, c.attrs, c.domain);  // measures and stores the choice
      const int64_t stored = int64_t(tuning::algorithms().with_prefix("cublaslt").size());
      ASSERT_GE(stored, 1);
      // As in a fresh process that loaded a package: the store holds the choice, no plan exists.
      cuda::forget_cached_products();
      EXPECT_EQ(cuda::warm_stored_products(), stored);
      const int64_t plans = cuda::cached_products();
      EXPECT_EQ(plans, stored);
      const tuning::Stats before = tuning::algorithms().stats();
      check(c.op, c.inputs, c.attrs, c.domain);
      EXPECT_EQ(cuda::cached_products(), plans) << "the call took the warmed plan";
      EXPECT_EQ(tuning::algorithms().stats().hits, before.hits) << "nothing looked up again";
      EXPECT_EQ(tuning::algorithms().stats().misses, before.misses);
    }
  }
  // A stored choice whose key does not parse (another format) is left alone.
  tuning::algorithms().clear();
  cuda::forget_cached_products();
  tuning::algorithms().put(fmt::format("cublaslt{}.matmul.{}|float32|garbage", cuda::lt().get_version(),
                                       cuda::arch_name()),
                           "x");
  EXPECT_EQ(cuda::warm_stored_products(), 0);
  tuning::algorithms().clear();
}

TEST(CudaMatMul, BroadcastBatch) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    check("MatMul", {rnd(dt, {2, 3, 7, 13}, 1), rnd(dt, {13, 5}, 2)});     // shared B: folded into M
    check("MatMul", {rnd(dt, {2, 3, 7, 13}, 3), rnd(dt, {1, 13, 5}, 4)});  // shared B with a unit batch dim
    check("MatMul", {rnd(dt, {7, 13}, 5), rnd(dt, {4, 13, 5}, 6)});        // shared A: batch stride 0
    check("MatMul", {rnd(dt, {1, 7, 13}, 7), rnd(dt, {2, 4, 13, 5}, 8)});
    check("MatMul", {rnd(dt, {2, 1, 7, 13}, 9), rnd(dt, {1, 3, 13, 5}, 10)});  // both broadcast: outer loop
    check("MatMul", {rnd(dt, {3, 1, 4, 6}, 11), rnd(dt, {2, 6, 5}, 12)});
    check("MatMul", {rnd(dt, {2, 3, 1, 4, 6}, 13), rnd(dt, {3, 2, 6, 5}, 14)});
  }
}

TEST(CudaMatMul, OneDimensional) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    check("MatMul", {rnd(dt, {13}, 1), rnd(dt, {13, 5}, 2)});
    check("MatMul", {rnd(dt, {7, 13}, 3), rnd(dt, {13}, 4)});
    check("MatMul", {rnd(dt, {13}, 5), rnd(dt, {13}, 6)});  // scalar result
    check("MatMul", {rnd(dt, {2, 3, 13}, 7), rnd(dt, {13}, 8)});
    check("MatMul", {rnd(dt, {13}, 9), rnd(dt, {2, 13, 5}, 10)});
  }
}

TEST(CudaMatMul, ZeroSized) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float16}) {
    check("MatMul", {rnd(dt, {0, 13}, 1), rnd(dt, {13, 5}, 2)});
    check("MatMul", {rnd(dt, {7, 0}, 3), rnd(dt, {0, 5}, 4)});  // empty sum: zeros
    check("MatMul", {rnd(dt, {0, 7, 4}, 5), rnd(dt, {4, 5}, 6)});
    check("MatMul", {rnd(dt, {3, 7, 0}, 7), rnd(dt, {3, 0, 5}, 8)});
  }
}

// ---- Gemm ----

TEST(CudaGemm, Transposes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t m = 7, n = 5, k = 13;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Tensor a = rnd(dt, ta ? Shape{k, m} : Shape{m, k}, 1);
        Tensor b = rnd(dt, tb ? Shape{n, k} : Shape{k, n}, 2);
        check("Gemm", {a, b}, {{"transA", ta}, {"transB", tb}});
        check("Gemm", {a, b, rnd(dt, {m, n}, 3)}, {{"transA", ta}, {"transB", tb}, {"alpha", 0.5f}, {"beta", 2.0f}});
      }
  }
}

TEST(CudaGemm, BiasShapes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kGemmTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t m = 9, n = 6, k = 11;
    Tensor a = rnd(dt, {m, k}, 1), b = rnd(dt, {k, n}, 2);
    for (const Shape& cs : {Shape{m, n}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{1, 1}, Shape{1}, Shape{}}) {
      SCOPED_TRACE(shape_str(cs));
      Tensor c = rnd(dt, cs, 3);
      check("Gemm", {a, b, c});                                                  // beta 1: bias epilogue for rows
      check("Gemm", {a, b, c}, {{"alpha", 1.5f}, {"beta", 0.25f}});              // scaled C
      check("Gemm", {a, b, c}, {{"alpha", -1.0f}, {"beta", 1.0f}, {"transB", 0}});
      check("Gemm", {a, b, c}, {{"beta", 0.0f}});                                // C ignored
    }
  }
}

TEST(CudaGemm, LargeAndOdd) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    check("Gemm", {rnd(dt, {200, 96}, 1), rnd(dt, {130, 96}, 2), rnd(dt, {130}, 3)}, {{"transB", 1}});
    check("Gemm", {rnd(dt, {1, 257}, 4), rnd(dt, {257, 3}, 5), rnd(dt, {1, 3}, 6)});
  }
}

TEST(CudaGemm, ZeroSized) {
  INGOT_REQUIRE_GPU();
  check("Gemm", {rnd(DType::Float32, {0, 4}, 1), rnd(DType::Float32, {4, 5}, 2)});
  check("Gemm", {rnd(DType::Float32, {3, 0}, 3), rnd(DType::Float32, {0, 5}, 4), rnd(DType::Float32, {5}, 5)});
  check("Gemm", {rnd(DType::Float32, {3, 0}, 6), rnd(DType::Float32, {0, 5}, 7), rnd(DType::Float32, {3, 5}, 8)},
        {{"beta", 0.5f}});
}

// ---- Conv ----

struct ConvCase {
  const char* name;
  Shape x, w;
  bool bias;
  Attributes attrs;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"3x3 pad 1", {2, 3, 7, 5}, {4, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}},
      {"3x3 no pad", {1, 3, 7, 5}, {4, 3, 3, 3}, false, {}},
      {"stride 2", {1, 3, 9, 8}, {5, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
      {"groups 2", {2, 4, 7, 6}, {6, 2, 3, 3}, true, {{"group", 2}, {"pads", Ints{1, 1, 1, 1}}}},
      {"depthwise", {1, 6, 10, 9}, {6, 1, 3, 3}, true, {{"group", 6}, {"pads", Ints{1, 1, 1, 1}}}},
      {"depthwise stride 2", {2, 8, 11, 7}, {8, 1, 3, 3}, false,
       {{"group", 8}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
      {"dilation 2", {1, 3, 11, 10}, {4, 3, 3, 3}, true, {{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}},
      {"pointwise", {2, 5, 6, 7}, {3, 5, 1, 1}, false, {}},
      {"1-D", {2, 3, 17}, {4, 3, 5}, true, {{"pads", Ints{2, 2}}}},
      {"1-D asymmetric stride 2", {2, 3, 17}, {4, 3, 5}, true, {{"pads", Ints{2, 1}}, {"strides", Ints{2}}}},
      {"3-D", {1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1, 1, 1}}}},
      {"3-D stride", {2, 2, 6, 5, 7}, {4, 2, 3, 2, 3}, false, {{"strides", Ints{2, 1, 2}}}},
      {"asymmetric pads", {1, 3, 7, 8}, {4, 3, 3, 3}, true, {{"pads", Ints{0, 1, 2, 0}}}},
      {"asymmetric pads stride 2", {2, 3, 8, 9}, {2, 3, 3, 2}, true,
       {{"pads", Ints{1, 0, 2, 1}}, {"strides", Ints{2, 2}}}},
      {"SAME_UPPER stride 2", {1, 3, 7, 8}, {4, 3, 3, 3}, true,
       {{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2, 2}}}},
      {"SAME_UPPER 4x4", {1, 3, 7, 8}, {4, 3, 4, 4}, false, {{"auto_pad", "SAME_UPPER"}}},
      {"SAME_LOWER 4x4", {1, 3, 7, 8}, {4, 3, 4, 4}, true, {{"auto_pad", "SAME_LOWER"}}},
      {"VALID stride 3", {1, 3, 10, 11}, {2, 3, 3, 3}, false, {{"auto_pad", "VALID"}, {"strides", Ints{3, 3}}}},
      {"kernel_shape attr", {1, 3, 7, 5}, {4, 3, 3, 2}, true, {{"kernel_shape", Ints{3, 2}}}},
  };
}

TEST(CudaConv, Float32Variants) {
  INGOT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in{rnd(DType::Float32, c.x, seed++), rnd(DType::Float32, c.w, seed++)};
    if (c.bias) in.push_back(rnd(DType::Float32, {c.w[0]}, seed++));
    check("Conv", in, c.attrs);
  }
}

TEST(CudaConv, HalfTypes) {
  INGOT_REQUIRE_GPU();
  const std::vector<ConvCase> cases = conv_cases();
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    uint32_t seed = 100;
    for (const ConvCase& c : cases) {
      SCOPED_TRACE(c.name);
      std::vector<Tensor> in{rnd(dt, c.x, seed++), rnd(dt, c.w, seed++)};
      if (c.bias) in.push_back(rnd(dt, {c.w[0]}, seed++));
      check("Conv", in, c.attrs);
    }
  }
}

TEST(CudaConv, LargerImage) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    check("Conv", {rnd(dt, {2, 16, 33, 31}, 1), rnd(dt, {32, 16, 3, 3}, 2), rnd(dt, {32}, 3)},
          {{"pads", Ints{1, 1, 1, 1}}});
  }
}

TEST(CudaConv, ZeroSized) {
  INGOT_REQUIRE_GPU();
  check("Conv", {rnd(DType::Float32, {0, 3, 5, 5}, 1), rnd(DType::Float32, {4, 3, 3, 3}, 2)});
  // No input channels: the output is the bias.
  check("Conv", {rnd(DType::Float32, {1, 0, 5, 5}, 3), rnd(DType::Float32, {4, 0, 3, 3}, 4),
                 rnd(DType::Float32, {4}, 5)});
}

// ---- ConvTranspose ----

std::vector<ConvCase> conv_transpose_cases() {
  return {
      {"stride 2 pads 1", {1, 3, 5, 4}, {3, 4, 3, 3}, true, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {"stride 1", {2, 3, 5, 6}, {3, 2, 3, 3}, false, {}},
      {"output_padding", {1, 3, 5, 4}, {3, 4, 3, 3}, true,
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}},
      {"output_padding no pads", {2, 2, 4, 5}, {2, 3, 3, 3}, false,
       {{"strides", Ints{3, 2}}, {"output_padding", Ints{2, 1}}}},
      {"asymmetric pads", {1, 3, 5, 4}, {3, 2, 3, 3}, true, {{"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 1, 0}}}},
      {"output_shape", {1, 3, 5, 4}, {3, 2, 3, 3}, true, {{"strides", Ints{2, 2}}, {"output_shape", Ints{10, 8}}}},
      {"output_shape larger", {1, 3, 3, 3}, {3, 2, 3, 3}, false,
       {{"strides", Ints{2, 2}}, {"output_shape", Ints{9, 10}}}},
      {"group 2", {1, 4, 5, 5}, {4, 3, 3, 3}, true, {{"group", 2}, {"strides", Ints{2, 2}}}},
      {"dilation 2", {1, 3, 5, 6}, {3, 2, 3, 3}, true, {{"dilations", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {"1-D stride 3", {2, 3, 7}, {3, 2, 4}, true, {{"strides", Ints{3}}}},
      {"3-D", {1, 2, 3, 4, 3}, {2, 3, 3, 3, 2}, true, {{"strides", Ints{2, 1, 2}}, {"pads", Ints{1, 0, 0, 1, 0, 1}}}},
      {"SAME_UPPER stride 2", {1, 3, 5, 4}, {3, 2, 3, 3}, true, {{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2, 2}}}},
      {"SAME_LOWER stride 2", {1, 3, 5, 4}, {3, 2, 3, 3}, false, {{"auto_pad", "SAME_LOWER"}, {"strides", Ints{2, 2}}}},
  };
}

TEST(CudaConvTranspose, Float32Variants) {
  INGOT_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const ConvCase& c : conv_transpose_cases()) {
    SCOPED_TRACE(c.name);
    const int64_t group = c.attrs.count("group") ? c.attrs.find("group")->second.i : 1;
    std::vector<Tensor> in{rnd(DType::Float32, c.x, seed++), rnd(DType::Float32, c.w, seed++)};
    if (c.bias) in.push_back(rnd(DType::Float32, {c.w[1] * group}, seed++));
    check("ConvTranspose", in, c.attrs);
  }
}

TEST(CudaConvTranspose, HalfTypes) {
  INGOT_REQUIRE_GPU();
  const std::vector<ConvCase> cases = conv_transpose_cases();
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    uint32_t seed = 100;
    for (const ConvCase& c : cases) {
      SCOPED_TRACE(c.name);
      const int64_t group = c.attrs.count("group") ? c.attrs.find("group")->second.i : 1;
      std::vector<Tensor> in{rnd(dt, c.x, seed++), rnd(dt, c.w, seed++)};
      if (c.bias) in.push_back(rnd(dt, {c.w[1] * group}, seed++));
      check("ConvTranspose", in, c.attrs);
    }
  }
}

// ---- FusedConv (ai.ingot) ----

TEST(CudaFusedConv, Variants) {
  INGOT_REQUIRE_GPU();
  const Attributes pad1{{"pads", Ints{1, 1, 1, 1}}};
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = rnd(dt, {2, 4, 9, 7}, 1), w = rnd(dt, {6, 4, 3, 3}, 2), b = rnd(dt, {6}, 3);
    Tensor r = rnd(dt, {2, 6, 9, 7}, 4);
    for (const char* act : {"", "Relu", "HardSwish"}) {
      SCOPED_TRACE(act);
      Attributes attrs = pad1;
      attrs["activation"] = act;
      check("FusedConv", {x, w}, attrs, "ai.ingot");
      check("FusedConv", {x, w, b}, attrs, "ai.ingot");
      check("FusedConv", {x, w, b, r}, attrs, "ai.ingot");
      check("FusedConv", {x, w, Tensor(), r}, attrs, "ai.ingot");
    }
    // Strided, asymmetric pads, groups, with residual and Relu.
    Tensor x2 = rnd(dt, {1, 4, 10, 9}, 5), w2 = rnd(dt, {4, 2, 3, 3}, 6), b2 = rnd(dt, {4}, 7);
    Tensor r2 = rnd(dt, {1, 4, 5, 4}, 8);
    check("FusedConv", {x2, w2, b2, r2},
          {{"activation", "Relu"}, {"group", 2}, {"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 1, 0}}}, "ai.ingot");
    // 1-D and pointwise.
    check("FusedConv", {rnd(dt, {2, 3, 11}, 9), rnd(dt, {5, 3, 3}, 10), rnd(dt, {5}, 11), rnd(dt, {2, 5, 9}, 12)},
          {{"activation", "Relu"}}, "ai.ingot");
    check("FusedConv", {rnd(dt, {1, 8, 5, 6}, 13), rnd(dt, {4, 8, 1, 1}, 14), rnd(dt, {4}, 15)},
          {{"activation", "Relu"}}, "ai.ingot");
  }
}

// Float32 FusedConv cases against the CPU with `flag` at `on` and at 0: `calls` (one of Ingot's own
// kernels' counters) must count every case with it on and none with it off.
struct F32ConvCase {
  Shape x, w;
  Attributes attrs;
  bool bias, residual;
};

void check_f32_conv_cases(const std::vector<F32ConvCase>& cases, const char* flag, int64_t (*calls)(),
                          uint32_t seed0, const char* on_value = "1") {
  for (const char* on : {on_value, "0"}) {
    const ScopedEnv env(flag, on);
    const int64_t before = calls();
    uint32_t seed = seed0;
    for (const F32ConvCase& c : cases) {
      SCOPED_TRACE(fmt::format("x [{}] w [{}] {}={}", fmt::join(c.x, ","), fmt::join(c.w, ","), flag, on));
      Tensor x = rnd(DType::Float32, c.x, seed++), w = rnd(DType::Float32, c.w, seed++);
      std::vector<Tensor> in{x, w};
      if (c.bias || c.residual) in.push_back(c.bias ? rnd(DType::Float32, {c.w[0]}, seed++) : Tensor());
      if (c.residual) {  // the output's shape, from the CPU
        const Tensor y = ops::call("FusedConv", {x, w}, c.attrs, 1, "ai.ingot")[0];
        in.push_back(rnd(DType::Float32, y.shape(), seed++));
      }
      check("FusedConv", in, c.attrs, "ai.ingot");
    }
    EXPECT_EQ(calls() - before, std::string(on) != "0" ? int64_t(cases.size()) : 0) << flag << "=" << on;
  }
}

// ResNet-50's layer1 conv3 at batch 8 (bias, residual, Relu) against the CPU: the default class of
// Ingot's 1x1 kernels; seeds seed .. seed + 3.
void check_resnet50_layer1_conv3(uint32_t seed) {
  const Tensor x = rnd(DType::Float32, {8, 64, 56, 56}, seed), w = rnd(DType::Float32, {256, 64, 1, 1}, seed + 1);
  check("FusedConv", {x, w, rnd(DType::Float32, {256}, seed + 2), rnd(DType::Float32, {8, 256, 56, 56}, seed + 3)},
        {{"activation", "Relu"}}, "ai.ingot");
}

// Float32 convolutions with few output pixels on the split-K kernel (conv_split_k.cu) against the
// CPU, and the same with it off (cuDNN): output channels and pixels that are not multiples of the
// 64 x 64 tile, reductions that are not a multiple of its 16-element slice, strides, dilations,
// asymmetric pads, 1-D, several images in one pixel tile, one split and many, every epilogue input.
TEST(CudaFusedConv, SplitKFloat32MatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const std::vector<F32ConvCase> cases = {
      {{1, 64, 7, 7}, {96, 64, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}, {"activation", "Relu"}}, true, true},
      {{1, 32, 15, 13},
       {70, 32, 3, 3},
       {{"strides", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"pads", Ints{1, 2, 2, 1}}},
       false,
       false},
      {{2, 300, 5, 5}, {130, 300, 1, 1}, {{"activation", "HardSwish"}}, true, false},
      {{1, 40, 50}, {33, 40, 5}, {{"pads", Ints{2, 2}}, {"activation", "Relu"}}, true, true},
      {{3, 48, 8, 8}, {20, 48, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}}, false, true},
      {{1, 32, 4, 4}, {8, 32, 1, 1}, {}, true, false},  // one split
      {{1, 512, 7, 7}, {512, 512, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}, {"activation", "Relu"}}, true, false},
  };
  check_f32_conv_cases(cases, "INGOT_CONV_SPLIT_K", cuda::split_k_conv_calls, 200);
}

// Float32 1x1 convolutions on Ingot's pointwise GEMM kernel (INGOT_CONV_POINTWISE=2: every one it
// takes; the split-K kernel, which takes small ones first, off): ResNet-50's layer1 conv3 shape
// (16-byte path, bias, residual, Relu), 7x7 images (49 pixels: element path, tiles across images),
// stride 2, input channels not a multiple of 4 or 8, 64 output channels and fewer (64-row tiles),
// 1-D, HardSwish, ragged tiles everywhere; with the switch off they go to cuDNN. Then the default
// (1) takes ResNet-50 b8's layer1 conv3 (a full grid of the 16-byte path) and leaves the rest.
TEST(CudaFusedConv, PointwiseFloat32MatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const std::vector<F32ConvCase> cases = {
      {{2, 64, 56, 56}, {256, 64, 1, 1}, {{"activation", "Relu"}}, true, true},
      {{3, 36, 7, 7}, {200, 36, 1, 1}, {{"activation", "HardSwish"}}, true, false},
      {{2, 30, 9, 10}, {70, 30, 1, 1}, {{"strides", Ints{2, 2}}}, false, true},
      {{2, 48, 100}, {33, 48, 1}, {{"activation", "Relu"}}, true, false},
      {{24, 1024, 14, 14}, {256, 1024, 1, 1}, {{"activation", "Relu"}}, true, true},
      {{4, 256, 20, 20}, {64, 256, 1, 1}, {{"activation", "Relu"}}, true, false},
      {{2, 3, 16, 16}, {16, 3, 1, 1}, {}, false, false},
      {{5, 20, 1, 1}, {130, 20, 1, 1}, {{"activation", "HardSwish"}}, true, true},  // squeeze-excite-like
  };
  const ScopedEnv no_split_k("INGOT_CONV_SPLIT_K", "0"), no_3xtf32("INGOT_GEMM_3XTF32", "0");
  check_f32_conv_cases(cases, "INGOT_CONV_POINTWISE", cuda::pointwise_conv_calls, 300, "2");
  {  // Padding on a 1x1 window is not the kernel's.
    const ScopedEnv env("INGOT_CONV_POINTWISE", "2");
    const int64_t before = cuda::pointwise_conv_calls();
    check("FusedConv", {rnd(DType::Float32, {1, 8, 5, 5}, 1), rnd(DType::Float32, {8, 8, 1, 1}, 2)},
          {{"pads", Ints{1, 1, 1, 1}}}, "ai.ingot");
    EXPECT_EQ(cuda::pointwise_conv_calls(), before);
  }
  const ScopedEnv env("INGOT_CONV_POINTWISE", "1");
  const int64_t before = cuda::pointwise_conv_calls();
  for (size_t i = 0; i < cases.size(); ++i) {  // none of the cases above is in the default's class
    const F32ConvCase& c = cases[i];
    check("FusedConv", {rnd(DType::Float32, c.x, 400 + uint32_t(i)), rnd(DType::Float32, c.w, 420 + uint32_t(i))},
          c.attrs, "ai.ingot");
  }
  EXPECT_EQ(cuda::pointwise_conv_calls(), before);
  check_resnet50_layer1_conv3(440);
  EXPECT_EQ(cuda::pointwise_conv_calls() - before, 1) << "the default takes ResNet-50's layer1 conv3";
}

// Float32 1x1 convolutions on the 3xTF32 tensor-core kernel (INGOT_GEMM_3XTF32=2: every one it
// takes; gemm_3xtf32.cu) against the CPU, and with it off: ResNet-50's layer1 conv3 (bias, residual,
// Relu), output channels and pixels that are not multiples of the 128 x 128 tile, input channels
// not a multiple of its 32-deep slices, a long reduction, 1-D, HardSwish, no bias. Then the default
// (1) takes the products whose grid fills the GPU and leaves a small one.
TEST(CudaFusedConv, PointwiseOn3xTf32MatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const std::vector<F32ConvCase> cases = {
      {{2, 64, 56, 56}, {256, 64, 1, 1}, {{"activation", "Relu"}}, true, true},
      {{3, 36, 14, 14}, {200, 36, 1, 1}, {{"activation", "HardSwish"}}, true, false},
      {{2, 48, 100}, {36, 48, 1}, {{"activation", "Relu"}}, true, false},
      {{4, 1024, 14, 14}, {256, 1024, 1, 1}, {{"activation", "Relu"}}, true, true},
      {{1, 8, 4, 4}, {12, 8, 1, 1}, {}, false, false},
  };
  const ScopedEnv no_split_k("INGOT_CONV_SPLIT_K", "0");
  check_f32_conv_cases(cases, "INGOT_GEMM_3XTF32", cuda::tf32x3_calls, 500, "2");
  const ScopedEnv env("INGOT_GEMM_3XTF32", "1");
  int64_t before = cuda::tf32x3_calls();
  check("FusedConv", {rnd(DType::Float32, {1, 8, 4, 4}, 520), rnd(DType::Float32, {12, 8, 1, 1}, 521)}, {}, "ai.ingot");
  EXPECT_EQ(cuda::tf32x3_calls(), before) << "one block: left to the other kernels";
  before = cuda::tf32x3_calls();
  check_resnet50_layer1_conv3(522);
  EXPECT_EQ(cuda::tf32x3_calls() - before, 1) << "the default takes ResNet-50's layer1 conv3 at batch 8";
}

// Layout "NHWC" (the channels-last pass's 16-bit layout): cuDNN's NHWC descriptors for 2-D
// convolutions with symmetric pads (the fused bias + Relu call where cuDNN takes it), transposed
// copies otherwise; the CPU computes the same through its channels-first kernel.
// Depthwise layers in NCHW (Ingot's kernel unless INGOT_DEPTHWISE_NCHW=0): 3x3 and 5x5 at strides 1
// and 2, output widths that are not a multiple of four columns, asymmetric pads, every epilogue
// input; one output large enough for four columns per thread on an H200, one for two.
TEST(CudaFusedConv, DepthwiseChannelsFirst) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    uint32_t seed = 60;
    for (auto [k, stride] : {std::pair{3, 1}, std::pair{3, 2}, std::pair{5, 1}, std::pair{5, 2}}) {
      SCOPED_TRACE(std::to_string(k) + "x" + std::to_string(k) + " stride " + std::to_string(stride));
      const int64_t c = 12, h = 9, wd = 11, pad = k / 2;
      const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
      Tensor x = rnd(dt, {2, c, h, wd}, seed++), w = rnd(dt, {c, 1, k, k}, seed++), b = rnd(dt, {c}, seed++);
      for (const char* act : {"Relu", "HardSwish"}) {
        check("FusedConv", {x, w, b, rnd(dt, {2, c, oh, ow}, seed++)},
              {{"activation", act}, {"group", c}, {"strides", Ints{stride, stride}}, {"pads", Ints{pad, pad, pad, pad}}},
              "ai.ingot");
      }
      check("FusedConv", {x, w}, {{"group", c}, {"strides", Ints{stride, stride}}, {"pads", Ints{0, pad, pad, 0}}},
            "ai.ingot");
    }
    check("FusedConv", {rnd(dt, {8, 96, 56, 56}, 90), rnd(dt, {96, 1, 3, 3}, 91), rnd(dt, {96}, 92)},
          {{"activation", "HardSwish"}, {"group", 96}, {"pads", Ints{1, 1, 1, 1}}}, "ai.ingot");
    check("FusedConv", {rnd(dt, {4, 72, 112, 112}, 93), rnd(dt, {72, 1, 5, 5}, 94), rnd(dt, {72}, 95)},
          {{"activation", "Relu"}, {"group", 72}, {"strides", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}, "ai.ingot");
  }
}

TEST(CudaFusedConv, ChannelsLast) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = rnd(dt, {2, 9, 7, 8}, 1), w = rnd(dt, {16, 3, 3, 8}, 2), b = rnd(dt, {16}, 3);
    Tensor r = rnd(dt, {2, 9, 7, 16}, 4);
    for (const char* act : {"", "Relu", "HardSwish"}) {
      SCOPED_TRACE(act);
      const Attributes attrs{{"pads", Ints{1, 1, 1, 1}}, {"activation", act}, {"layout", "NHWC"}};
      check("FusedConv", {x, w}, attrs, "ai.ingot");
      check("FusedConv", {x, w, b}, attrs, "ai.ingot");
      check("FusedConv", {x, w, b, r}, attrs, "ai.ingot");
      check("FusedConv", {x, w, Tensor(), r}, attrs, "ai.ingot");
    }
    // Strided with groups (and depthwise), pointwise, and asymmetric pads (through transposes).
    check("FusedConv", {rnd(dt, {1, 10, 9, 8}, 5), rnd(dt, {8, 3, 3, 4}, 6), rnd(dt, {8}, 7), rnd(dt, {1, 5, 5, 8}, 8)},
          {{"activation", "Relu"}, {"group", 2}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"layout", "NHWC"}},
          "ai.ingot");
    check("FusedConv", {rnd(dt, {2, 6, 6, 8}, 9), rnd(dt, {8, 3, 3, 1}, 10), rnd(dt, {8}, 11)},
          {{"activation", "Relu"}, {"group", 8}, {"pads", Ints{1, 1, 1, 1}}, {"layout", "NHWC"}}, "ai.ingot");
    check("FusedConv", {rnd(dt, {1, 5, 6, 8}, 12), rnd(dt, {4, 1, 1, 8}, 13), rnd(dt, {4}, 14)},
          {{"activation", "Relu"}, {"layout", "NHWC"}}, "ai.ingot");
    // Depthwise (Ingot's NHWC kernel): 5x5 strided with residual and HardSwish; dilated, no bias.
    check("FusedConv",
          {rnd(dt, {2, 9, 7, 16}, 19), rnd(dt, {16, 5, 5, 1}, 20), rnd(dt, {16}, 21), rnd(dt, {2, 5, 4, 16}, 22)},
          {{"activation", "HardSwish"}, {"group", 16}, {"strides", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}},
           {"layout", "NHWC"}},
          "ai.ingot");
    check("FusedConv", {rnd(dt, {1, 8, 8, 12}, 23), rnd(dt, {12, 3, 3, 1}, 24)},
          {{"group", 12}, {"dilations", Ints{2, 2}}, {"pads", Ints{2, 1, 2, 1}}, {"layout", "NHWC"}}, "ai.ingot");
    // The vectorized kernel (channels a multiple of 16 bytes' worth): 3x3 and 5x5 at strides 1 and 2,
    // output widths that are not a multiple of its four columns per thread, several blocks of
    // channels with a partial last one (264 channels), every epilogue input.
    for (auto [k, stride] : {std::pair{3, 1}, std::pair{3, 2}, std::pair{5, 1}, std::pair{5, 2}}) {
      SCOPED_TRACE(std::to_string(k) + "x" + std::to_string(k) + " stride " + std::to_string(stride));
      const int64_t c = 264, h = 9, wd = 11, pad = k / 2;
      const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
      const Attributes attrs{{"activation", "Relu"}, {"group", c}, {"strides", Ints{stride, stride}},
                             {"pads", Ints{pad, pad, pad, pad}}, {"layout", "NHWC"}};
      Tensor xv = rnd(dt, {2, h, wd, c}, 40), wv = rnd(dt, {c, k, k, 1}, 41), bv = rnd(dt, {c}, 42);
      check("FusedConv", {xv, wv, bv, rnd(dt, {2, oh, ow, c}, 43)}, attrs, "ai.ingot");
      check("FusedConv", {xv, wv}, {{"group", c}, {"strides", Ints{stride, stride}}, {"pads", Ints{0, pad, pad, 0}},
                                    {"layout", "NHWC"}}, "ai.ingot");
    }
    // Outputs large enough for four and two columns per thread on an H200 (the kernel takes fewer
    // where the GPU would have too few threads): 3x3 stride 1 with every epilogue input; 5x5 stride 2.
    {
      const int64_t c4 = dt == DType::Float32 ? 256 : 512, c2 = dt == DType::Float32 ? 192 : 384;
      check("FusedConv",
            {rnd(dt, {4, 56, 56, c4}, 50), rnd(dt, {c4, 3, 3, 1}, 51), rnd(dt, {c4}, 52), rnd(dt, {4, 56, 56, c4}, 53)},
            {{"activation", "HardSwish"}, {"group", c4}, {"pads", Ints{1, 1, 1, 1}}, {"layout", "NHWC"}}, "ai.ingot");
      check("FusedConv", {rnd(dt, {2, 112, 112, c2}, 54), rnd(dt, {c2, 5, 5, 1}, 55), rnd(dt, {c2}, 56)},
            {{"activation", "Relu"}, {"group", c2}, {"strides", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}},
             {"layout", "NHWC"}},
            "ai.ingot");
    }
    // An odd channel count (the last thread has one channel) spanning several blocks of channels.
    check("FusedConv", {rnd(dt, {2, 6, 5, 151}, 25), rnd(dt, {151, 3, 3, 1}, 26), rnd(dt, {151}, 27)},
          {{"activation", "Relu"}, {"group", 151}, {"pads", Ints{1, 1, 1, 1}}, {"layout", "NHWC"}}, "ai.ingot");
    check("FusedConv", {rnd(dt, {1, 10, 9, 4}, 15), rnd(dt, {4, 3, 3, 2}, 16), rnd(dt, {4}, 17), rnd(dt, {1, 5, 4, 4}, 18)},
          {{"activation", "Relu"}, {"group", 2}, {"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 1, 0}}, {"layout", "NHWC"}},
          "ai.ingot");
  }
}

// A convolution's engine choice is stored (as a package keeps it) and rebuilt from the store
// without asking cuDNN's heuristic or timing again; an entry cuDNN refuses falls back to the search.
TEST(CudaFusedConv, StoredChoicesAreRebuiltWithoutSearching) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");  // cuDNN's plans: not the split-K kernel
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    // ResNet's 3x3 convolution with bias and Relu (an operation graph cuDNN has engines for).
    const std::vector<Tensor> in = {rnd(dt, {1, 64, 28, 28}, 41), rnd(dt, {64, 64, 3, 3}, 42), rnd(dt, {64}, 43)};
    const Attributes attrs{{"activation", "Relu"}, {"pads", Ints{1, 1, 1, 1}}};
    tuning::algorithms().clear();
    check("FusedConv", in, attrs, "ai.ingot");  // searched and stored
    std::vector<std::pair<std::string, std::string>> stored;
    for (const auto& [key, value] : tuning::algorithms().entries()) {
      if (key.find(".convgraph2.") != std::string::npos) stored.emplace_back(key, value);
    }
    ASSERT_EQ(stored.size(), 1u) << "one graph-API choice stored";
    EXPECT_EQ(stored[0].second.rfind("engine=", 0), 0u) << stored[0].second;
    tuning::algorithms().clear();
    tuning::algorithms().put(stored[0].first, stored[0].second);
    check("FusedConv", in, attrs, "ai.ingot");  // rebuilt from the store
    EXPECT_EQ(tuning::algorithms().stats().misses, 0);
    EXPECT_EQ(tuning::algorithms().entries().size(), 1u) << "nothing searched, nothing added";
    EXPECT_EQ(tuning::algorithms().entries()[0].second, stored[0].second);
    // An engine this cuDNN does not have: the heuristic and the search again, and a right answer.
    tuning::algorithms().clear();
    tuning::algorithms().put(stored[0].first, "engine=987654;knobs=");
    check("FusedConv", in, attrs, "ai.ingot");
    EXPECT_EQ(tuning::algorithms().entries()[0].second.rfind("engine=", 0), 0u);
    EXPECT_NE(tuning::algorithms().entries()[0].second, "engine=987654;knobs=");
  }
  tuning::algorithms().clear();
}

// The plans of stored choices whose spec was stored beside them (a package's) are built ahead, on
// the thread a session's load starts (here called directly); a convolution takes the one built for
// its problem and its choice, and builds its own when the stored choice changed since.
TEST(CudaFusedConv, StoredPlansAreBuiltAheadAndTaken) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");  // cuDNN's plans: not the split-K kernel
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> in = {rnd(dt, {1, 32, 20, 20}, 61), rnd(dt, {32, 32, 3, 3}, 62), rnd(dt, {32}, 63)};
    const Attributes attrs{{"activation", "Relu"}, {"pads", Ints{1, 1, 1, 1}}};
    tuning::algorithms().clear();
    EXPECT_FALSE(cuda::ConvGraph::has_stored_plans());
    check("FusedConv", in, attrs, "ai.ingot");  // searched: the choice and its spec stored
    ASSERT_TRUE(cuda::ConvGraph::has_stored_plans());
    EXPECT_EQ(cuda::ConvGraph::prebuild_stored_plans(0), 1);
    const int64_t taken = cuda::ConvGraph::prebuilt_taken();
    check("FusedConv", in, attrs, "ai.ingot");
    EXPECT_EQ(cuda::ConvGraph::prebuilt_taken(), taken + 1) << "the plan built ahead is used";
    // Built ahead, then the stored choice changes (as another cuDNN's would): not taken, searched again.
    EXPECT_EQ(cuda::ConvGraph::prebuild_stored_plans(0), 1);
    for (const auto& [key, value] : tuning::algorithms().entries()) {
      if (key.find(".convgraph2.") != std::string::npos) tuning::algorithms().put(key, "engine=987654;knobs=");
    }
    check("FusedConv", in, attrs, "ai.ingot");
    EXPECT_EQ(cuda::ConvGraph::prebuilt_taken(), taken + 1);
  }
  tuning::algorithms().clear();
}

// The cold tier (cuda_runtime.h, INGOT_CUDA_COLD_KERNELS=1): a convolution whose stored plan a
// worker has queued or is building does not wait for it but runs on Ingot's tiled kernel (the result
// still the CPU's); once the plan is built, the next call takes it.
TEST(CudaFusedConv, ConvolutionsWhosePlanIsBeingBuiltRunOnTheColdTier) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");  // cuDNN's plans: not the split-K kernel
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  if (cuda::cold_kernels() != cuda::ColdKernels::WhilePreparing) GTEST_SKIP() << "INGOT_CUDA_COLD_KERNELS is not 1";
  int ran = 0;
  for (DType dt : kConvTypes) {
    for (const char* layout : {"NCHW", "NHWC"}) {
      for (bool with_residual : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {}{}", dtype_name(dt), layout, with_residual ? " residual" : ""));
        const bool last = std::string(layout) == "NHWC";
        // Odd sizes (tiles cut at every edge), stride 2, Relu, with and without a residual.
        const Shape xs = last ? Shape{2, 19, 23, 24} : Shape{2, 24, 19, 23};
        const Shape ws = last ? Shape{40, 3, 3, 24} : Shape{40, 24, 3, 3};
        const Shape rs = last ? Shape{2, 10, 12, 40} : Shape{2, 40, 10, 12};
        std::vector<Tensor> in = {rnd(dt, xs, 81), rnd(dt, ws, 82), rnd(dt, {40}, 83)};
        if (with_residual) in.push_back(rnd(dt, rs, 84));
        const Attributes attrs{{"activation", "Relu"},
                               {"pads", Ints{1, 1, 1, 1}},
                               {"strides", Ints{2, 2}},
                               {"layout", std::string(layout)}};
        tuning::algorithms().clear();
        check("FusedConv", in, attrs, "ai.ingot");  // searched: the choice and its spec stored
        // No graph engine for some problems (exact float32 with a residual: the legacy API runs them,
        // and nothing is queued): nothing for the cold tier to stand in for.
        const int queued = cuda::ConvGraph::queue_stored_plans();
        if (queued == 0) continue;
        ASSERT_EQ(queued, 1);
        ++ran;
        const int64_t cold = cuda::cold_kernel_calls(), taken = cuda::ConvGraph::prebuilt_taken();
        check("FusedConv", in, attrs, "ai.ingot");
        EXPECT_EQ(cuda::cold_kernel_calls(), cold + 1) << "the queued plan is not waited for";
        EXPECT_EQ(cuda::ConvGraph::prebuilt_taken(), taken);
        EXPECT_EQ(cuda::ConvGraph::build_queued_plans(0), 1);
        check("FusedConv", in, attrs, "ai.ingot");
        EXPECT_EQ(cuda::ConvGraph::prebuilt_taken(), taken + 1) << "the plan built meanwhile is taken";
        EXPECT_EQ(cuda::cold_kernel_calls(), cold + 1);
      }
    }
  }
  EXPECT_GE(ran, 2) << "the 16-bit channels-last cases, at least, have a graph engine";
  tuning::algorithms().clear();
}

// While a package's plans are prepared, the convolutions the legacy API runs (exact float32 with a
// residual: no graph engine) take the cold tier too; so does a long K over few tiles, split across
// blocks (K = 4608 over one 64 x 64 tile of 49 pixels: ResNet-50's last layers at batch 1).
TEST(CudaFusedConv, LegacyConvolutionsRunOnTheColdTierWhilePlansArePrepared) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");  // cuDNN's plans: not the split-K kernel
  // The legacy API's fused call for the residual (by default the graph runs the convolution and
  // bias, the epilogue kernel the residual: Float32ResidualAfterTheGraphMatchesTheCpu).
  const ScopedEnv legacy_residual("INGOT_CONV_RESIDUAL_AFTER", "0");
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  if (cuda::cold_kernels() == cuda::ColdKernels::Never) GTEST_SKIP() << "INGOT_CUDA_COLD_KERNELS=0";
  const bool preparing_only = cuda::cold_kernels() == cuda::ColdKernels::WhilePreparing;  // the default
  const Attributes attrs{{"activation", "Relu"}, {"pads", Ints{1, 1, 1, 1}}, {"layout", "NCHW"}};
  // Values in [-1/4, 1/4]: the sums of 4608 products stay O(1), so that float32 rounding in another
  // summation order stays within the tolerance taken relative to the result.
  auto small = [](Shape shape, uint32_t seed) { return random_tensor(DType::Float32, std::move(shape), seed, -0.25, 0.25); };
  const std::vector<Tensor> legacy = {small({1, 512, 7, 7}, 91), small({40, 512, 3, 3}, 92), small({40}, 93),
                                      small({1, 40, 7, 7}, 94)};
  if (!preparing_only) {  // INGOT_CUDA_COLD_KERNELS=2: every call on the cold tier
    const int64_t cold = cuda::cold_kernel_calls();
    check("FusedConv", legacy, attrs, "ai.ingot");
    EXPECT_EQ(cuda::cold_kernel_calls(), cold + 1);
    return;
  }
  tuning::algorithms().clear();
  // Something to prepare: a 16-bit channels-last convolution's stored plan, queued, no worker.
  const std::vector<Tensor> queued_conv = {rnd(DType::Float16, {1, 14, 14, 32}, 95),
                                           rnd(DType::Float16, {32, 3, 3, 32}, 96), rnd(DType::Float16, {32}, 97)};
  check("FusedConv", queued_conv, {{"pads", Ints{1, 1, 1, 1}}, {"layout", "NHWC"}}, "ai.ingot");
  ASSERT_GE(cuda::ConvGraph::queue_stored_plans(), 1);
  ASSERT_TRUE(cuda::ConvGraph::preparing());
  int64_t cold = cuda::cold_kernel_calls();
  check("FusedConv", legacy, attrs, "ai.ingot");
  EXPECT_EQ(cuda::cold_kernel_calls(), cold + 1) << "the legacy API's first call runs on the cold tier";
  EXPECT_GE(cuda::ConvGraph::build_queued_plans(0), 1);
  EXPECT_FALSE(cuda::ConvGraph::preparing());
  cold = cuda::cold_kernel_calls();
  check("FusedConv", legacy, attrs, "ai.ingot");
  EXPECT_EQ(cuda::cold_kernel_calls(), cold) << "prepared: cuDNN's legacy API runs it";
  tuning::algorithms().clear();
}

// A plan cuDNN serializes (runtime-compiled engines: those of ResNet-50's float16 channels-last
// convolutions on the H200) is stored beside its choice and loaded by a later process instead of
// compiled again; a serialized plan stored for another choice is not used.
TEST(CudaFusedConv, SerializedPlansAreLoadedInsteadOfCompiled) {
  INGOT_REQUIRE_GPU();
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  const ScopedEnv serialized_plans("INGOT_CUDNN_SERIALIZED_PLANS", "1");  // read at every use
  int serialized = 0;
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> in = {rnd(dt, {1, 56, 56, 64}, 71), rnd(dt, {64, 3, 3, 64}, 72), rnd(dt, {64}, 73)};
    const Attributes attrs{{"activation", "Relu"}, {"pads", Ints{1, 1, 1, 1}}, {"layout", "NHWC"}};
    tuning::algorithms().clear();
    check("FusedConv", in, attrs, "ai.ingot");
    std::vector<std::pair<std::string, std::string>> kept;
    bool has_plan = false;
    for (const auto& [key, value] : tuning::algorithms().entries()) {
      const bool plan = key.find(".convplan2.") != std::string::npos;
      if (plan || key.find(".convgraph2.") != std::string::npos) kept.emplace_back(key, value);
      has_plan |= plan;
    }
    if (!has_plan) continue;  // a precompiled engine: nothing to serialize
    ++serialized;
    tuning::algorithms().clear();
    for (const auto& [key, value] : kept) tuning::algorithms().put(key, value);
    const int64_t loaded = cuda::ConvGraph::plans_loaded();
    check("FusedConv", in, attrs, "ai.ingot");
    EXPECT_EQ(cuda::ConvGraph::plans_loaded(), loaded + 1) << "the serialized plan is loaded";
    EXPECT_EQ(tuning::algorithms().stats().misses, 0);
    tuning::algorithms().clear();
    for (const auto& [key, value] : kept) {
      const bool choice = key.find(".convgraph2.") != std::string::npos;
      tuning::algorithms().put(key, choice ? "engine=987654;knobs=" : value);
    }
    check("FusedConv", in, attrs, "ai.ingot");
    EXPECT_EQ(cuda::ConvGraph::plans_loaded(), loaded + 1) << "a plan serialized for another choice is not used";
  }
  EXPECT_GT(serialized, 0) << "no dtype's chosen engine had a serialized plan";
  tuning::algorithms().clear();
}

// Whatever the graph path concluded for a convolution with a residual (an engine, or that none runs
// it: then the legacy path does), stored, is what a later call uses without asking the heuristic.
TEST(CudaFusedConv, StoredConclusionsForResidualConvolutionsAreReused) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");  // cuDNN's plans: not the split-K kernel
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  for (DType dt : kConvTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> in = {rnd(dt, {1, 64, 14, 14}, 51), rnd(dt, {256, 64, 1, 1}, 52), rnd(dt, {256}, 53),
                                    rnd(dt, {1, 256, 14, 14}, 54)};
    const Attributes attrs{{"activation", "Relu"}};
    tuning::algorithms().clear();
    check("FusedConv", in, attrs, "ai.ingot");
    const auto first = tuning::algorithms().entries();
    size_t graph_entries = 0;
    for (const auto& [key, value] : first) graph_entries += key.find(".convgraph2.") != std::string::npos;
    ASSERT_EQ(graph_entries, 1u) << "the graph path's conclusion is stored, engine or none";
    tuning::algorithms().clear();
    for (const auto& [key, value] : first) tuning::algorithms().put(key, value);
    check("FusedConv", in, attrs, "ai.ingot");
    EXPECT_EQ(tuning::algorithms().stats().misses, 0);
    EXPECT_EQ(tuning::algorithms().entries(), first);
  }
  tuning::algorithms().clear();
}

// Float32 with a residual: cuDNN's graph computes the convolution and bias (no graph engine takes
// the residual), the epilogue kernel the residual and Relu (INGOT_CONV_RESIDUAL_AFTER; 0: the legacy
// fused call). Both against the CPU; the stored conclusions name the graph each built.
TEST(CudaFusedConv, Float32ResidualAfterTheGraphMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  const ScopedEnv cudnn_only("INGOT_CONV_SPLIT_K", "0");
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  if (cuda::cold_kernels() == cuda::ColdKernels::Always) GTEST_SKIP() << "every call on the cold tier (INGOT_CUDA_COLD_KERNELS=2)";
  struct Case {
    Shape x, w, y;
    Attributes attrs;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 64, 14, 14}, {256, 64, 1, 1}, {2, 256, 14, 14}, {{"activation", "Relu"}}, true},
      {{1, 32, 9, 11}, {48, 32, 3, 3}, {1, 48, 9, 11}, {{"pads", Ints{1, 1, 1, 1}}}, false},
      {{3, 16, 40}, {24, 16, 3}, {3, 24, 20}, {{"pads", Ints{1, 1}}, {"strides", Ints{2}}, {"activation", "Relu"}}, true},
      {{1, 8, 6, 6}, {12, 8, 1, 1}, {1, 12, 6, 6}, {{"activation", "HardSwish"}}, true},
  };
  for (const char* on : {"1", "0"}) {
    ScopedEnv env("INGOT_CONV_RESIDUAL_AFTER", on);
    tuning::algorithms().clear();
    uint32_t seed = 300;
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("x [{}] w [{}] residual after {}", fmt::join(c.x, ","), fmt::join(c.w, ","), on));
      const Tensor x = rnd(DType::Float32, c.x, seed++), w = rnd(DType::Float32, c.w, seed++);
      const Tensor b = c.bias ? rnd(DType::Float32, {c.w[0]}, seed++) : Tensor();
      check("FusedConv", {x, w, b, rnd(DType::Float32, c.y, seed++)}, c.attrs, "ai.ingot");
    }
    size_t split = 0, whole = 0;
    for (const auto& [key, value] : tuning::algorithms().entries()) {
      if (key.find(".convgraph2.") == std::string::npos) continue;
      split += key.find("|r=0|") != std::string::npos;
      whole += key.find("|r=1|") != std::string::npos;
    }
    if (std::string(on) == "1") {
      EXPECT_EQ(split, cases.size()) << "each convolution's graph without its residual";
      EXPECT_EQ(whole, 0u);
    } else {
      EXPECT_EQ(whole, cases.size()) << "each convolution's graph with its residual (an engine or none)";
    }
  }
  tuning::algorithms().clear();
}

TEST(CudaFusedConv, RepeatedCallsReuseThePlan) {
  INGOT_REQUIRE_GPU();
  // The same shapes twice (plan cached per node in a graph; eager calls exercise the build each time).
  Tensor x = rnd(DType::Float32, {1, 3, 8, 8}, 1), w = rnd(DType::Float32, {4, 3, 3, 3}, 2);
  for (int i = 0; i < 2; ++i) {
    check("FusedConv", {x, w, rnd(DType::Float32, {4}, 3)}, {{"activation", "Relu"}, {"pads", Ints{1, 1, 1, 1}}},
          "ai.ingot");
  }
}

}  // namespace
}  // namespace ingot::gpu_test
