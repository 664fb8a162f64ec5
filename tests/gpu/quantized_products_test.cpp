// The int8 products on the GPU (kernels/quantized_products.cu) against the CPU kernels, which
// tests/unit/quantized_products_test.cpp checks against a float64 reference of the quantized math.
// The int32 accumulation is exact on both; an 8-bit output may differ by one step where float32
// requantization lands on the other side of a rounding tie. The cases cover each of the CUDA
// kernel's ways: Ingot's implicit GEMM and cuDNN's int8 graph with the whole epilogue (symmetric int8,
// channels last), cuDNN
// then the epilogue kernel (a zero point on Y, HardSwish), the depthwise kernel, the direct kernel
// (uint8 activations, channels first, depthwise), cuBLASLt's int8 GEMM (uint8 X shifted, int8 X) and
// the direct product.
#include <gtest/gtest.h>
#include <ingot/quantize.h>
#include <ingot/session.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../unit/test_util.h"
#include "backends/cuda/cudnn_conv_graph.h"
#include "backends/cuda/kernels/quantized_products.h"
#include "core/npy.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

constexpr const char* kIngot = "ai.ingot";

template <class T>
Tensor random_ints(std::mt19937& gen, const Shape& shape, int lo, int hi) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> v(size_t(shape_numel(shape)));
  for (T& x : v) x = T(dist(gen));
  return Tensor::from_vector(v, shape);
}
Tensor scalar_f(float v) { return Tensor::from_vector(std::vector<float>{v}, {}); }
Tensor zero_point(DType t, int v) {
  return t == DType::UInt8 ? Tensor::from_vector(std::vector<uint8_t>{uint8_t(v)}, {})
                           : Tensor::from_vector(std::vector<int8_t>{int8_t(v)}, {});
}
Tensor ints(DType t, std::mt19937& gen, const Shape& shape) {
  return t == DType::UInt8 ? random_ints<uint8_t>(gen, shape, 0, 255) : random_ints<int8_t>(gen, shape, -128, 127);
}

struct ConvCase {
  std::string name;
  int64_t n = 2, c = 32, h = 14, w = 14, m = 64, kernel = 3, stride = 1, pad = 1, group = 1;
  bool nhwc = true;
  DType x_dtype = DType::Int8, y_dtype = DType::Int8;
  int x_zp = 0, y_zp = 0;
  DType r_dtype = DType::Undefined;  // Undefined: no residual; Float32: a float residual
  int r_zp = 0;
  std::string act, epilogue;
};

void check_conv(const ConvCase& c, uint32_t seed) {
  SCOPED_TRACE(c.name);
  std::mt19937 gen(seed);
  const int64_t oh = (c.h + 2 * c.pad - c.kernel) / c.stride + 1, ow = (c.w + 2 * c.pad - c.kernel) / c.stride + 1;
  const Shape x_shape = c.nhwc ? Shape{c.n, c.h, c.w, c.c} : Shape{c.n, c.c, c.h, c.w};
  const Shape w_shape = c.nhwc ? Shape{c.m, c.kernel, c.kernel, c.c / c.group} : Shape{c.m, c.c / c.group, c.kernel, c.kernel};
  const Shape y_shape = c.nhwc ? Shape{c.n, oh, ow, c.m} : Shape{c.n, c.m, oh, ow};
  std::vector<float> w_scale;
  std::uniform_real_distribution<float> sdist(0.002f, 0.02f);
  for (int64_t i = 0; i < c.m; ++i) w_scale.push_back(sdist(gen));
  std::vector<Tensor> in{ints(c.x_dtype, gen, x_shape),
                         scalar_f(0.031f),
                         zero_point(c.x_dtype, c.x_zp),
                         random_ints<int8_t>(gen, w_shape, -127, 127),
                         Tensor::from_vector(w_scale, {c.m}),
                         zero_point(DType::Int8, 0)};
  const bool quantized = c.y_dtype != DType::Float32;
  in.push_back(quantized ? scalar_f(0.27f) : Tensor());
  in.push_back(quantized ? zero_point(c.y_dtype, c.y_zp) : Tensor());
  in.push_back(random_ints<int32_t>(gen, {c.m}, -5000, 5000));
  if (c.r_dtype == DType::Float32) {
    in.push_back(random_tensor(DType::Float32, y_shape, seed + 1, -3, 3));
  } else if (c.r_dtype != DType::Undefined) {
    in.push_back(ints(c.r_dtype, gen, y_shape));
    in.push_back(scalar_f(0.19f));
    in.push_back(zero_point(c.r_dtype, c.r_zp));
  }
  Attributes attrs{{"group", Attribute(c.group)},
                   {"strides", Attribute(std::vector<int64_t>{c.stride, c.stride})},
                   {"pads", Attribute(std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad})},
                   {"activation", Attribute(c.act)},
                   {"epilogue", Attribute(c.epilogue)},
                   {"layout", Attribute(std::string(c.nhwc ? "NHWC" : "NCHW"))},
                   {"output_dtype", Attribute(int64_t(c.y_dtype))}};
  expect_cuda_matches_cpu("QuantizedConv", in, attrs, 1, quantized ? 1.0 : 1e-3, quantized ? 0.0 : 1e-4, kIngot);
}

// A case named `name`, the defaults changed by `edit`.
template <class Edit>
ConvCase conv_case(std::string name, Edit edit) {
  ConvCase c;
  c.name = std::move(name);
  edit(c);
  return c;
}

TEST(CudaQuantizedProducts, ConvolutionsMatchTheCpuOnEveryPath) {
  INGOT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  auto add = [&](std::string name, auto edit) { cases.push_back(conv_case(std::move(name), edit)); };
  // cuDNN with the whole epilogue.
  add("int8 symmetric, Relu", [](ConvCase& c) { c.act = "Relu"; });
  add("int8 symmetric, int8 residual (zero point 3), Relu", [](ConvCase& c) {
    c.act = "Relu";
    c.r_dtype = DType::Int8;
    c.r_zp = 3;
  });
  add("int8 symmetric, float residual, float output", [](ConvCase& c) {
    c.r_dtype = DType::Float32;
    c.y_dtype = DType::Float32;
  });
  add("int8 symmetric, 1x1 stride 2, no activation", [](ConvCase& c) {
    c.kernel = 1;
    c.pad = 0;
    c.stride = 2;
  });
  add("int8 symmetric, Relu6 as a clip", [](ConvCase& c) { c.epilogue = "Max(x0, 0); Min(t0, 6)"; });
  // cuDNN, then the epilogue kernel.
  add("int8 output with a zero point", [](ConvCase& c) { c.y_zp = 5; });
  add("HardSwish", [](ConvCase& c) { c.act = "HardSwish"; });
  add("uint8 residual", [](ConvCase& c) {
    c.r_dtype = DType::UInt8;
    c.r_zp = 121;
    c.act = "Relu";
  });
  // The direct kernel.
  add("uint8 activations, channels first", [](ConvCase& c) {
    c.nhwc = false;
    c.x_dtype = DType::UInt8;
    c.x_zp = 117;
    c.y_dtype = DType::UInt8;
    c.y_zp = 100;
  });
  add("asymmetric int8 activations, channels last", [](ConvCase& c) { c.x_zp = -9; });
  add("depthwise, stride 2", [](ConvCase& c) {
    c.group = 32;
    c.m = 32;
    c.stride = 2;
    c.act = "Relu";
  });
  add("3 input channels (unaligned)", [](ConvCase& c) {
    c.c = 3;
    c.kernel = 7;
    c.pad = 3;
    c.stride = 2;
  });
  uint32_t seed = 1;
  for (const ConvCase& c : cases) check_conv(c, seed++);
}

// Depthwise convolutions channels last on the vectorized int8 kernel (INGOT_INT8_DEPTHWISE=1) with
// the lean epilogue (INGOT_INT8_DEPTHWISE_LEAN=1: the cases with int8 X and Y at zero point 0) and
// the generic one, and on the direct kernel: windows 3 and 5, strides 1 and 2, zero points on X and
// Y, residuals, odd widths (a thread's last columns past the edge), float output, Relu, a clip and
// HardSwish; 24, 72 and 120 channels (not multiples of 16: 8 a thread), 960 at 7 x 7 (MobileNetV3's
// late layers: 512 channels x 25 taps of weights staged per block).
TEST(CudaQuantizedProducts, DepthwiseKernelMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  auto add = [&](std::string name, auto edit) {  // one filter per channel
    cases.push_back(conv_case(std::move(name), [&](ConvCase& c) {
      edit(c);
      c.group = c.m = c.c;
    }));
  };
  add("3x3 stride 2, Relu", [](ConvCase& c) { c.act = "Relu"; c.stride = 2; });
  add("3x3 stride 1, int8 zero point -9, float output, 7 wide", [](ConvCase& c) {
    c.c = 64;
    c.w = 7;
    c.x_zp = -9;
    c.y_dtype = DType::Float32;
  });
  add("5x5 stride 1, uint8 in and out, HardSwish, uint8 residual, 13x13", [](ConvCase& c) {
    c.c = 48;
    c.h = c.w = 13;
    c.kernel = 5;
    c.pad = 2;
    c.x_dtype = DType::UInt8;
    c.x_zp = 117;
    c.y_dtype = DType::UInt8;
    c.y_zp = 100;
    c.act = "HardSwish";
    c.r_dtype = DType::UInt8;
    c.r_zp = 121;
  });
  add("5x5 stride 2, int8 residual, batch 3", [](ConvCase& c) {
    c.n = 3;
    c.c = 96;
    c.h = c.w = 17;
    c.kernel = 5;
    c.pad = 2;
    c.stride = 2;
    c.r_dtype = DType::Int8;
    c.r_zp = 3;
  });
  add("24 channels", [](ConvCase& c) { c.c = 24; });  // 8 channels per thread from here on
  add("5x5 stride 2, 72 channels, Relu, 11 wide", [](ConvCase& c) {
    c.c = 72;
    c.h = 9;
    c.w = 11;
    c.kernel = 5;
    c.pad = 2;
    c.stride = 2;
    c.act = "Relu";
  });
  add("3x3 stride 1, 120 channels, uint8 in, HardSwish, batch 2", [](ConvCase& c) {
    c.n = 2;
    c.c = 120;
    c.x_dtype = DType::UInt8;
    c.x_zp = 131;
    c.act = "HardSwish";
  });
  add("5x5 stride 1, 960 channels, 7x7, HardSwish, batch 4", [](ConvCase& c) {
    c.n = 4;
    c.c = 960;
    c.h = c.w = 7;
    c.kernel = 5;
    c.pad = 2;
    c.act = "HardSwish";
  });
  add("3x3 stride 1, 72 channels, 20x19, int8 zero point -5, HardSwish, int8 residual", [](ConvCase& c) {
    c.c = 72;
    c.h = 20;
    c.w = 19;
    c.x_zp = -5;
    c.act = "HardSwish";
    c.r_dtype = DType::Int8;
    c.r_zp = -2;
  });
  add("3x3 stride 2, 32 channels, Relu6 as a clip, 15x15", [](ConvCase& c) {
    c.h = c.w = 15;
    c.stride = 2;
    c.epilogue = "Max(x0, 0); Min(t0, 6)";
  });
  // The dp2a kernel's shapes: 4 channel words a block row (16 channels, 64 items a block), and 50
  // words (a second block of 18), 5 x 5 stride 2 with X's zero point on padding rows and columns.
  add("3x3 stride 1, 16 channels, 30x30, Relu, batch 2", [](ConvCase& c) {
    c.c = 16;
    c.h = c.w = 30;
    c.act = "Relu";
  });
  add("5x5 stride 2, 200 channels, 14x14, int8 zero point 7, HardSwish, int8 residual", [](ConvCase& c) {
    c.c = 200;
    c.kernel = 5;
    c.pad = 2;
    c.stride = 2;
    c.x_zp = 7;
    c.act = "HardSwish";
    c.r_dtype = DType::Int8;
    c.r_zp = 1;
  });
  const auto lean_case = [](const ConvCase& c) {
    return c.x_dtype == DType::Int8 && c.y_dtype == DType::Int8 && c.y_zp == 0 &&
           (c.r_dtype == DType::Undefined || c.r_dtype == DType::Int8);
  };
  const int64_t lean_cases = std::count_if(cases.begin(), cases.end(), lean_case);
  ASSERT_GE(lean_cases, 9);
  uint32_t seed = 40;
  struct Switches {
    const char *kernel, *lean, *dp2a;
  };
  for (const Switches& sw : {Switches{"1", "1", "1"}, Switches{"1", "1", "0"}, Switches{"1", "0", "1"},
                             Switches{"0", "1", "1"}}) {
    SCOPED_TRACE(fmt::format("INGOT_INT8_DEPTHWISE={} INGOT_INT8_DEPTHWISE_LEAN={} INGOT_INT8_DEPTHWISE_DP2A={}",
                             sw.kernel, sw.lean, sw.dp2a));
    const ScopedEnv depthwise("INGOT_INT8_DEPTHWISE", sw.kernel), lean_env("INGOT_INT8_DEPTHWISE_LEAN", sw.lean),
        dp2a_env("INGOT_INT8_DEPTHWISE_DP2A", sw.dp2a),
        lean_forms("INGOT_INT8_IMMA_LEAN", "1");  // the lean epilogue's master switch
    const int64_t before = cuda::int8_depthwise_lean_calls(), dp2a_before = cuda::int8_depthwise_dp2a_calls();
    for (const ConvCase& c : cases) check_conv(c, seed++);
    const bool lean_ran = sw.kernel[0] == '1' && sw.lean[0] == '1';
    EXPECT_EQ(cuda::int8_depthwise_lean_calls() - before, lean_ran ? lean_cases : 0);
    EXPECT_EQ(cuda::int8_depthwise_dp2a_calls() - dp2a_before, lean_ran && sw.dp2a[0] == '1' ? lean_cases : 0);
  }
}

// Symmetric int8 convolutions on cuDNN whose input channels are a multiple of 8 but not of 16
// (MobileNetV3's 24, 40, 72, 120), with X as it is (INGOT_INT8_CUDNN_UNPADDED=1: where cuDNN has an
// engine) and padded to 16 per call (0), Ingot's pointwise kernel kept out: 1x1 expansions and
// projections with and without a residual, a 3x3, and a squeeze-excitation block's 1x1 on [N, 1, 1, C].
TEST(CudaQuantizedProducts, ChannelsByEightOnCudnnMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  if (!cuda::ConvGraph::enabled()) GTEST_SKIP() << "cuDNN's graph API is off (INGOT_CUDNN_GRAPH=0)";
  std::vector<ConvCase> cases;
  auto add = [&](std::string name, auto edit) { cases.push_back(conv_case(std::move(name), edit)); };
  add("1x1 24 -> 72, batch 4, 28x28, Relu", [](ConvCase& c) {
    c.n = 4;
    c.c = 24;
    c.m = 72;
    c.h = c.w = 28;
    c.kernel = 1;
    c.pad = 0;
    c.act = "Relu";
  });
  add("1x1 120 -> 40, int8 residual (zero point 2)", [](ConvCase& c) {
    c.c = 120;
    c.m = 40;
    c.kernel = 1;
    c.pad = 0;
    c.r_dtype = DType::Int8;
    c.r_zp = 2;
  });
  add("1x1 40 -> 240, HardSwish (cuDNN, then the epilogue kernel)", [](ConvCase& c) {
    c.c = 40;
    c.m = 240;
    c.kernel = 1;
    c.pad = 0;
    c.act = "HardSwish";
  });
  add("3x3 72 -> 32, Relu6 as a clip", [](ConvCase& c) {
    c.c = 72;
    c.epilogue = "Max(x0, 0); Min(t0, 6)";
  });
  add("1x1 on [32, 1, 1, 72] -> 24, Relu", [](ConvCase& c) {
    c.n = 32;
    c.c = 72;
    c.m = 24;
    c.h = c.w = 1;
    c.kernel = 1;
    c.pad = 0;
    c.act = "Relu";
  });
  uint32_t seed = 90;
  const ScopedEnv pointwise("INGOT_INT8_POINTWISE", "0"), imma("INGOT_INT8_IMMA", "0");
  for (const char* unpadded : {"1", "0"}) {
    SCOPED_TRACE(std::string("INGOT_INT8_CUDNN_UNPADDED=") + unpadded);
    const ScopedEnv env("INGOT_INT8_CUDNN_UNPADDED", unpadded);
    const int64_t before = cuda::int8_cudnn_unpadded_calls();
    for (const ConvCase& c : cases) check_conv(c, seed++);
    const int64_t took = cuda::int8_cudnn_unpadded_calls() - before;
    if (unpadded[0] == '0') {
      EXPECT_EQ(took, 0);
    }
    std::printf("INGOT_INT8_CUDNN_UNPADDED=%s: cuDNN took %lld of %zu cases with X unpadded\n", unpadded,
                static_cast<long long>(took), cases.size());
  }
}

// Symmetric int8 convolutions channels last on Ingot's implicit GEMM (INGOT_INT8_IMMA=1), then
// the same cases on cuDNN's int8 engines: each tile shape (64 x 64 for small problems, 128 x 64
// where K <= 64, 128 x 128), M and K that end part-way through a tile, an odd K (unpaired stores),
// channels padded to 16 (3) and channel counts whose 64-byte K blocks straddle taps (48, 80), 1x1,
// 3x3, 5x5 and 7x7 windows with strides, each form of the epilogue, outputs stored four channels
// at a time (K a multiple of 4) and one at a time (odd K).
TEST(CudaQuantizedProducts, ImplicitGemmMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  auto add = [&](std::string name, auto edit) { cases.push_back(conv_case(std::move(name), edit)); };
  add("3x3, Relu (64 x 64 tiles)", [](ConvCase& c) { c.act = "Relu"; });
  add("3x3, 64 -> 256, batch 16, 28x28 (128 x 128 tiles)", [](ConvCase& c) {
    c.n = 16;
    c.c = 64;
    c.h = c.w = 28;
    c.m = 256;
    c.act = "Relu";
  });
  add("1x1, 64 -> 64, batch 8, 56x56 (128 x 64 tiles), int8 residual", [](ConvCase& c) {
    c.n = 8;
    c.c = c.m = 64;
    c.h = c.w = 56;
    c.kernel = 1;
    c.pad = 0;
    c.r_dtype = DType::Int8;
    c.r_zp = 3;
  });
  add("1x1 stride 2, 80 -> 37 (odd K), 15x15", [](ConvCase& c) {
    c.c = 80;
    c.m = 37;
    c.h = c.w = 15;
    c.kernel = 1;
    c.pad = 0;
    c.stride = 2;
  });
  add("5x5 stride 2, 48 channels, float residual, float output", [](ConvCase& c) {
    c.c = 48;
    c.h = c.w = 17;
    c.kernel = 5;
    c.pad = 2;
    c.stride = 2;
    c.r_dtype = DType::Float32;
    c.y_dtype = DType::Float32;
  });
  add("7x7 stride 2, 3 channels (padded to 16), 33x33", [](ConvCase& c) {
    c.c = 3;
    c.h = c.w = 33;
    c.kernel = 7;
    c.pad = 3;
    c.stride = 2;
    c.act = "Relu";
  });
  add("uint8 output at zero point 100, HardSwish", [](ConvCase& c) {
    c.y_dtype = DType::UInt8;
    c.y_zp = 100;
    c.act = "HardSwish";
  });
  add("Relu6 as a clip, uint8 residual", [](ConvCase& c) {
    c.epilogue = "Max(x0, 0); Min(t0, 6)";
    c.r_dtype = DType::UInt8;
    c.r_zp = 121;
  });
  // The tile chosen per layer, then each tile forced on every case, the lean epilogue 4 channels a
  // step instead of 16, the generic epilogue where the lean one would run, then cuDNN.
  struct Run {
    const char *kernel, *tile, *lean, *vec16;
  };
  const std::vector<Run> runs = {{"1", "-1", "1", "1"}, {"1", "0", "1", "1"},  {"1", "1", "1", "1"},
                                 {"1", "2", "1", "1"},  {"1", "-1", "1", "0"}, {"1", "-1", "0", "1"},
                                 {"0", "-1", "1", "1"}};
  uint32_t seed = 70;
  for (const auto& [kernel, tile, lean, vec16] : runs) {
    SCOPED_TRACE(fmt::format("INGOT_INT8_IMMA={} INGOT_INT8_IMMA_TILE={} INGOT_INT8_IMMA_LEAN={} INGOT_INT8_IMMA_VEC16={}",
                             kernel, tile, lean, vec16));
    const ScopedEnv imma("INGOT_INT8_IMMA", kernel), imma_tile("INGOT_INT8_IMMA_TILE", tile),
        imma_lean("INGOT_INT8_IMMA_LEAN", lean), imma_vec16("INGOT_INT8_IMMA_VEC16", vec16);
    const int64_t before = cuda::int8_implicit_gemm_calls();
    for (const ConvCase& c : cases) check_conv(c, seed++);
    EXPECT_EQ(cuda::int8_implicit_gemm_calls() - before, kernel[0] == '1' ? int64_t(cases.size()) : 0)
        << "each case runs on the implicit GEMM exactly when it is on";
  }
}

// Symmetric int8 1x1 stride-1 convolutions channels last on the persistent pointwise kernel
// (INGOT_INT8_POINTWISE=2: every one it takes; 1: its rule), then on the other paths: one K block (64) and several (256, and 80: a
// last block part-filled), channels padded to 16 (24 -> 32), pixels that end part-way through a
// 128-row tile, output channels that end part-way through a 64-column tile (48, 80, 272), more
// tiles than the grid has blocks (each block walks several, across n-tiles and with two K blocks
// each), int8 residuals with zero points, Relu and a clip, and a stem convolution's 1x1 product
// after its im2col. Every case has the lean epilogue (an int8 output at zero point 0); the other
// forms fall through.
TEST(CudaQuantizedProducts, PointwiseKernelMatchesTheCpu) {
  INGOT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  auto add = [&](std::string name, auto edit) {
    cases.push_back(conv_case(std::move(name), [&](ConvCase& c) {
      c.kernel = 1;
      c.pad = 0;
      edit(c);
    }));
  };
  add("64 -> 256, batch 8, 56x56, int8 residual (zero point 3), Relu", [](ConvCase& c) {
    c.n = 8;
    c.c = 64;
    c.m = 256;
    c.h = c.w = 56;
    c.r_dtype = DType::Int8;
    c.r_zp = 3;
    c.act = "Relu";
  });
  add("256 -> 64, 13x11 (143 pixels)", [](ConvCase& c) {
    c.n = 1;
    c.c = 256;
    c.m = 64;
    c.h = 13;
    c.w = 11;
  });
  add("320 -> 32, batch 2, 7x7 (K past 256: the accumulators converted by I2F)", [](ConvCase& c) {
    c.n = 2;
    c.c = 320;
    c.m = 32;
    c.h = c.w = 7;
    c.r_dtype = DType::Int8;
  });
  add("80 -> 48, batch 3, 9x9, Relu6 as a clip", [](ConvCase& c) {
    c.n = 3;
    c.c = 80;
    c.m = 48;
    c.h = c.w = 9;
    c.epilogue = "Max(x0, 0); Min(t0, 6)";
  });
  add("24 -> 80 (channels padded to 32), batch 2, 20x20, int8 residual (zero point -7)", [](ConvCase& c) {
    c.n = 2;
    c.c = 24;
    c.m = 80;
    c.h = c.w = 20;
    c.r_dtype = DType::Int8;
    c.r_zp = -7;
  });
  // 500 tiles, five n-tiles a row of tiles (so a block's tiles change n-tile), two K blocks each.
  add("80 -> 272, batch 8, 40x40, int8 residual (zero point 11)", [](ConvCase& c) {
    c.n = 8;
    c.c = 80;
    c.m = 272;
    c.h = c.w = 40;
    c.r_dtype = DType::Int8;
    c.r_zp = 11;
  });
  add("40 -> 240 (channels padded to 48), batch 2, 14x14, HardSwish (MobileNetV3's expansion)", [](ConvCase& c) {
    c.n = 2;
    c.c = 40;
    c.m = 240;
    c.h = c.w = 14;
    c.act = "HardSwish";
  });
  add("160 -> 960, batch 4, 7x7, HardSwish", [](ConvCase& c) {
    c.n = 4;
    c.c = 160;
    c.m = 960;
    c.h = c.w = 7;
    c.act = "HardSwish";
  });
  // 112 -> 672 at 14 x 14, batch 32 (MobileNetV3's features.12): within rule 1's channel limits with
  // 539 tiles, so only INGOT_INT8_POINTWISE_HARDSWISH keeps it off the kernel under rule 1.
  add("112 -> 672, batch 32, 14x14, HardSwish", [](ConvCase& c) {
    c.n = 32;
    c.c = 112;
    c.m = 672;
    c.h = c.w = 14;
    c.act = "HardSwish";
  });
  add("a 7x7 stride-2 stem on 3 channels, Relu: im2col (INGOT_INT8_STEM), then this kernel over 160", [](ConvCase& c) {
    c.c = 3;
    c.h = c.w = 33;
    c.kernel = 7;
    c.pad = 3;
    c.stride = 2;
    c.act = "Relu";
  });
  constexpr int64_t kHardSwishCases = 3;
  uint32_t seed = 150;
  int64_t ran_with_hardswish = -1;
  for (const auto& [mode, hardswish] : std::vector<std::pair<const char*, const char*>>{
           {"2", "0"}, {"1", "1"}, {"1", "0"}, {"0", "1"}}) {
    SCOPED_TRACE(fmt::format("INGOT_INT8_POINTWISE={} INGOT_INT8_POINTWISE_HARDSWISH={}", mode, hardswish));
    const ScopedEnv pointwise("INGOT_INT8_POINTWISE", mode), hs("INGOT_INT8_POINTWISE_HARDSWISH", hardswish);
    const int64_t before = cuda::int8_pointwise_calls();
    for (const ConvCase& c : cases) check_conv(c, seed++);
    const int64_t ran = cuda::int8_pointwise_calls() - before;
    if (mode[0] == '2') {
      EXPECT_EQ(ran, int64_t(cases.size())) << "every case runs on the pointwise kernel";
    } else if (mode[0] == '0') {
      EXPECT_EQ(ran, 0) << "the pointwise kernel is off";
    } else if (hardswish[0] == '1') {
      // The rule (at most two K blocks, two tiles per block) takes the first case (784 tiles on a
      // GPU of up to 196 SMs at two blocks each) and, with the switch, the HardSwish layers; not the
      // stem (three K blocks).
      EXPECT_TRUE(ran >= 1 + kHardSwishCases && ran < int64_t(cases.size())) << ran << " cases ran on it";
      ran_with_hardswish = ran;
    } else {
      EXPECT_EQ(ran, ran_with_hardswish - kHardSwishCases) << "without the switch no HardSwish layer runs on it";
    }
  }
}

// Stem convolutions (fewer than 16 input channels) as im2col and a 1x1 convolution
// (INGOT_INT8_STEM=1) on cuDNN's int8 engines and on the implicit GEMM, each with the im2col byte by
// byte and as runs of a kernel row's adjacent bytes (INGOT_INT8_STEM_RUN), then with each tap's
// channels padded to 16 instead: ResNet-50's 7x7 stride-2 conv1 on 3 channels, MobileNetV3's 3x3 stride-2
// first convolution with HardSwish (cuDNN, then the epilogue kernel), 1 channel 5x5 with a float
// output, 8 channels 3x3 with an int8 residual, R S C past a multiple of 16 (3 x 3 x 4 = 36
// columns padded to 48), 7x7 over 3 channels with a partial column tile, 5x5 over 2, odd sizes,
// output rows of 300 and 151 pixels.
TEST(CudaQuantizedProducts, StemConvolutionsThroughIm2colMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  auto add = [&](std::string name, auto edit) { cases.push_back(conv_case(std::move(name), edit)); };
  add("7x7 stride 2, 3 channels, Relu, 29x31, batch 2", [](ConvCase& c) {
    c.c = 3;
    c.h = 29;
    c.w = 31;
    c.kernel = 7;
    c.pad = 3;
    c.stride = 2;
    c.act = "Relu";
  });
  add("3x3 stride 2, 3 channels, 16 out, HardSwish", [](ConvCase& c) {
    c.c = 3;
    c.m = 16;
    c.h = c.w = 17;
    c.stride = 2;
    c.act = "HardSwish";
  });
  add("5x5, 1 channel, float output", [](ConvCase& c) {
    c.c = 1;
    c.kernel = 5;
    c.pad = 2;
    c.y_dtype = DType::Float32;
  });
  add("3x3, 8 channels, int8 residual, batch 3", [](ConvCase& c) {
    c.n = 3;
    c.c = 8;
    c.r_dtype = DType::Int8;
    c.r_zp = 0;
    c.act = "Relu";
  });
  add("3x3, 4 channels (36 columns padded to 48), 37 out, no padding", [](ConvCase& c) {
    c.c = 4;
    c.m = 37;
    c.pad = 0;
  });
  add("7x7 stride 2, 3 channels, no activation, batch 2, 65 out (a partial column tile)", [](ConvCase& c) {
    c.c = 3;
    c.n = 2;
    c.m = 65;
    c.h = 21;
    c.w = 19;
    c.kernel = 7;
    c.pad = 3;
    c.stride = 2;
  });
  add("5x5 stride 2 along odd sizes, 2 channels, Relu, 17 out", [](ConvCase& c) {
    c.c = 2;
    c.m = 17;
    c.h = 13;
    c.w = 11;
    c.kernel = 5;
    c.pad = 2;
    c.stride = 2;
    c.act = "Relu";
  });
  add("3x3, 3 channels, 300 wide (three 128-pixel tiles, the last partial)", [](ConvCase& c) {
    c.c = 3;
    c.n = 1;
    c.h = 4;
    c.w = 300;
    c.m = 16;
  });
  add("7x7 stride 2, 3 channels, 301 wide (151 output pixels a row)", [](ConvCase& c) {
    c.c = 3;
    c.n = 1;
    c.h = 9;
    c.w = 301;
    c.kernel = 7;
    c.pad = 3;
    c.stride = 2;
    c.m = 32;
  });
  struct Run {
    const char *stem, *imma, *run;
  };
  uint32_t seed = 110;
  for (const auto& [stem, imma, run] :
       std::vector<Run>{{"1", "0", "0"}, {"1", "0", "1"}, {"1", "1", "1"}, {"1", "1", "0"}, {"0", "0", "0"}}) {
    SCOPED_TRACE(fmt::format("INGOT_INT8_STEM={} INGOT_INT8_IMMA={} INGOT_INT8_STEM_RUN={}", stem, imma, run));
    const ScopedEnv stem_switch("INGOT_INT8_STEM", stem), imma_switch("INGOT_INT8_IMMA", imma),
        run_switch("INGOT_INT8_STEM_RUN", run);
    const int64_t before = cuda::int8_stem_calls();
    for (const ConvCase& c : cases) check_conv(c, seed++);
    // The stem's 1x1 product runs on path 1 (INGOT_INT8_IMMA) or path 2 (cuDNN's graph API).
    const bool one_by_one = imma[0] == '1' || cuda::ConvGraph::enabled();
    EXPECT_EQ(cuda::int8_stem_calls() - before, stem[0] == '1' && one_by_one ? int64_t(cases.size()) : 0)
        << "each case runs as a stem convolution exactly when the switch is on and a path takes its 1x1 product";
  }
}

void check_matmul(DType x_dtype, int x_zp, DType w_dtype, int64_t m, int64_t k, int64_t n, DType y_dtype, bool relu,
                  uint32_t seed) {
  SCOPED_TRACE(fmt::format("x {} zp {}, w {}, m={} k={} n={}, y {}", dtype_name(x_dtype), x_zp, dtype_name(w_dtype), m,
                           k, n, dtype_name(y_dtype)));
  std::mt19937 gen(seed);
  std::vector<float> w_scale;
  std::uniform_real_distribution<float> sdist(0.002f, 0.02f);
  for (int64_t i = 0; i < n; ++i) w_scale.push_back(sdist(gen));
  const bool quantized = y_dtype != DType::Float32;
  std::vector<Tensor> in{ints(x_dtype, gen, {m, k}),
                         scalar_f(0.03f),
                         zero_point(x_dtype, x_zp),
                         ints(w_dtype, gen, {k, n}),
                         Tensor::from_vector(w_scale, {n}),
                         zero_point(w_dtype, w_dtype == DType::UInt8 ? 128 : 0),
                         quantized ? scalar_f(0.5f) : Tensor(),
                         quantized ? zero_point(y_dtype, 0) : Tensor(),
                         random_ints<int32_t>(gen, {n}, -5000, 5000)};
  Attributes attrs{{"activation", Attribute(std::string(relu ? "Relu" : ""))},
                   {"output_dtype", Attribute(int64_t(y_dtype))}};
  expect_cuda_matches_cpu("QuantizedMatMul", in, attrs, 1, quantized ? 1.0 : 1e-3, quantized ? 0.0 : 1e-4, kIngot);
}

TEST(CudaQuantizedProducts, MatrixProductsMatchTheCpu) {
  INGOT_REQUIRE_GPU();
  // Int8 W at zero point 0 with K and N multiples of 4: cuBLASLt, or (INGOT_INT8_SMALL_MATMUL, at most
  // 64 rows, K a multiple of 16) the dp4a kernel. The last case is neither (uint8 W, odd sizes): the
  // direct product.
  for (const char* small : {"1", "0"}) {
    SCOPED_TRACE(fmt::format("INGOT_INT8_SMALL_MATMUL={}", small));
    const ScopedEnv small_switch("INGOT_INT8_SMALL_MATMUL", small);
    const int64_t before = cuda::int8_small_matmul_calls();
    check_matmul(DType::Int8, 0, DType::Int8, 64, 256, 128, DType::Int8, true, 1);
    check_matmul(DType::UInt8, 117, DType::Int8, 50, 64, 32, DType::UInt8, false, 2);      // X shifted
    check_matmul(DType::Int8, -7, DType::Int8, 33, 512, 1000, DType::Float32, false, 3);   // float out
    check_matmul(DType::Int8, 0, DType::Int8, 32, 2048, 1000, DType::Float32, false, 5);   // ResNet-50's fc
    check_matmul(DType::Int8, 5, DType::Int8, 3, 48, 12, DType::Int8, true, 6);            // a partial block
    check_matmul(DType::Int8, 0, DType::Int8, 1, 960, 1280, DType::Float32, false, 9);     // batch 1
    check_matmul(DType::UInt8, 128, DType::Int8, 40, 32, 20, DType::UInt8, true, 10);     // shift cancels zp
    check_matmul(DType::Int8, 0, DType::Int8, 65, 64, 32, DType::Int8, false, 7);          // too many rows
    check_matmul(DType::Int8, 0, DType::Int8, 8, 36, 16, DType::Int8, false, 8);           // K not a multiple of 16
    check_matmul(DType::UInt8, 3, DType::UInt8, 17, 30, 9, DType::UInt8, true, 4);
    EXPECT_EQ(cuda::int8_small_matmul_calls() - before, small[0] == '1' ? 7 : 0)
        << "the seven products of at most 64 rows with K a multiple of 16 run on the dp4a kernel exactly when the "
           "switch is on";
  }
}

// A small residual network with a squeeze-excitation block, quantized symmetrically (int8 activations
// at zero point 0, what the cuDNN path takes) and asymmetrically: every node runs on the GPU, the
// products as QuantizedConv / QuantizedMatMul, the means and the gate as QuantizedReduceMean /
// QuantizedMul, and the outputs match the CPU session's.
TEST(CudaQuantizedProducts, QdqResidualNetworkRunsInInt8OnTheGpu) {
  INGOT_REQUIRE_GPU();
  using namespace ingot::testing;
  onnx::GraphProto g;
  g.set_name("qdq_residual");
  std::mt19937 rng(3);
  *g.add_input() = static_tensor_info("x", onnx::TensorProto::FLOAT, {2, 16, 12, 12});
  *g.add_output() = static_tensor_info("y", onnx::TensorProto::FLOAT, {2, 10});
  add_random_initializer(g, "w1", {32, 16, 3, 3}, rng, -0.2f, 0.2f);
  add_random_initializer(g, "b1", {32}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w2", {32, 32, 3, 3}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w3", {10, 32}, rng, -0.1f, 0.1f);
  auto conv = [&](const std::string& x, const std::string& w, const std::string& y, bool bias) {
    std::vector<std::string> ins{x, w};
    if (bias) ins.push_back("b1");
    auto node = make_node("Conv", ins, {y});
    auto* pads = node.add_attribute();
    pads->set_name("pads");
    pads->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 4; ++i) pads->add_ints(1);
    *g.add_node() = node;
  };
  conv("x", "w1", "c1", true);
  *g.add_node() = make_node("Relu", {"c1"}, {"r1"});
  conv("r1", "w2", "c2", false);
  *g.add_node() = make_node("Add", {"c2", "r1"}, {"s"});
  *g.add_node() = make_node("Relu", {"s"}, {"r2"});
  // A squeeze-excitation block: the means and the gate's product in int8 (QuantizedReduceMean,
  // QuantizedMul), the gate's HardSigmoid in its convolution's epilogue.
  add_random_initializer(g, "w4", {8, 32, 1, 1}, rng, -0.3f, 0.3f);
  add_random_initializer(g, "b4", {8}, rng, -0.1f, 0.1f);
  add_random_initializer(g, "w5", {32, 8, 1, 1}, rng, -0.5f, 0.5f);
  add_random_initializer(g, "b5", {32}, rng, -0.1f, 0.1f);
  *g.add_node() = make_node("GlobalAveragePool", {"r2"}, {"m"});
  *g.add_node() = make_node("Conv", {"m", "w4", "b4"}, {"s1"});
  *g.add_node() = make_node("Relu", {"s1"}, {"s1r"});
  *g.add_node() = make_node("Conv", {"s1r", "w5", "b5"}, {"s2"});
  *g.add_node() = make_node("HardSigmoid", {"s2"}, {"gate"});
  *g.add_node() = make_node("Mul", {"r2", "gate"}, {"e"});
  *g.add_node() = make_node("GlobalAveragePool", {"e"}, {"p"});
  *g.add_node() = make_node("Flatten", {"p"}, {"f"});
  auto gemm = make_node("Gemm", {"f", "w3"}, {"y"});
  auto* tb = gemm.add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  *g.add_node() = gemm;
  const std::string model = save_model(model_with(g, 13), "qdq_residual.onnx");
  auto calib = temp_dir() / "qdq_residual_calib";
  std::filesystem::create_directories(calib);
  for (uint32_t i = 0; i < 4; ++i)
    save_npy((calib / (std::to_string(i) + ".npy")).string(), random_tensor(DType::Float32, {2, 16, 12, 12}, 70 + i));
  Tensor x = random_tensor(DType::Float32, {2, 16, 12, 12}, 99);
  for (bool symmetric : {true, false}) {
    SCOPED_TRACE(symmetric ? "symmetric" : "asymmetric");
    QuantizeSettings s;
    s.calibration = {calib.string()};
    s.symmetric = symmetric;
    const std::string qdq = (temp_dir() / (symmetric ? "qdq_residual.s8.onnx" : "qdq_residual.u8.onnx")).string();
    quantize(model, qdq, s);
    SessionOptions o;
    o.device = Device{DeviceType::CUDA, 0};
    o.outputs_on_device = true;
    Session gpu = Session::load(qdq, o);
    EXPECT_TRUE(gpu.fallbacks().empty()) << gpu.fallback_summary();
    Tensor y_gpu = gpu.run({x})[0];
    Tensor y_cpu = Session::load(qdq).run({x})[0];
    // One requantization step of difference somewhere can move a logit by a few of its steps.
    expect_close(y_cpu, y_gpu, 0.05, 0.02, "QDQ residual network, GPU vs CPU");
  }
}

}  // namespace
}  // namespace ingot::gpu_test
