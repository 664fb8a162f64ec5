// CUDA elementwise kernels against the CPU kernels (src/backends/cuda/kernels/elementwise_*.cu).
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

const DType kFloats[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};

TEST(CudaElementwise, UnaryMathAllFloatTypes) {
  INGOT_REQUIRE_GPU();
  // Odd sizes exercise the vectorized body and the scalar tail.
  for (DType dt : kFloats) {
    Tensor x = random_tensor(dt, {3, 7, 5}, 1, -3, 3);
    Tensor pos = random_tensor(dt, {1037}, 2, 0.1, 4);
    Tensor unit = random_tensor(dt, {33}, 3, -0.9, 0.9);
    for (const char* op : {"Relu", "Abs", "Neg", "Sign", "Exp", "Ceil", "Floor", "Round", "Sin", "Cos", "Tan",
                           "Atan", "Sinh", "Cosh", "Asinh", "Erf", "Sigmoid", "Tanh", "Softplus", "Softsign",
                           "HardSwish", "Mish", "IsNaN", "IsInf"}) {
      SCOPED_TRACE(op);
      expect_cuda_matches_cpu(op, {x});
    }
    for (const char* op : {"Sqrt", "Log", "Reciprocal", "Acosh"}) {
      SCOPED_TRACE(op);
      expect_cuda_matches_cpu(op, {op == std::string("Acosh") ? random_tensor(dt, {1037}, 4, 1.1, 5) : pos});
    }
    for (const char* op : {"Asin", "Acos", "Atanh"}) expect_cuda_matches_cpu(op, {unit});
  }
}

TEST(CudaElementwise, ActivationsWithAttributes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloats) {
    Tensor x = random_tensor(dt, {2, 3, 17}, 5, -4, 4);
    expect_cuda_matches_cpu("LeakyRelu", {x}, {{"alpha", 0.3f}});
    expect_cuda_matches_cpu("Elu", {x}, {{"alpha", 0.7f}});
    expect_cuda_matches_cpu("Selu", {x});
    expect_cuda_matches_cpu("Celu", {x}, {{"alpha", 2.0f}});
    expect_cuda_matches_cpu("HardSigmoid", {x}, {{"alpha", 0.25f}, {"beta", 0.4f}});
    expect_cuda_matches_cpu("ThresholdedRelu", {x}, {{"alpha", 0.5f}});
    expect_cuda_matches_cpu("Shrink", {x}, {{"bias", 0.5f}, {"lambd", 1.0f}});
  }
}

TEST(CudaElementwise, IntegerUnary) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Int32, DType::Int64, DType::Int8}) {
    Tensor x = random_tensor(dt, {5, 9}, 6, -50, 50);
    for (const char* op : {"Relu", "Abs", "Neg", "Sign"}) expect_cuda_matches_cpu(op, {x});
  }
  expect_cuda_matches_cpu("Abs", {random_tensor(DType::UInt8, {19}, 7, 0, 200)});
  expect_cuda_matches_cpu("Not", {random_tensor(DType::Bool, {4, 5}, 8)});
}

TEST(CudaElementwise, NaNAndInfinity) {
  INGOT_REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({nan, inf, -inf, 1.5f, -2.0f, 0.0f}, {6});
  Tensor y = Tensor::from_vector<float>({1.0f, nan, 3.0f, nan, -5.0f, 0.0f}, {6});
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "IsNaN", "IsInf", "Abs", "Exp"}) expect_cuda_matches_cpu(op, {x});
  for (const char* op : {"Max", "Min", "Add", "Mul", "Div", "Equal", "Less", "Greater"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {x, y});
  }
  expect_cuda_matches_cpu("IsInf", {x}, {{"detect_negative", int64_t(0)}});
  expect_cuda_matches_cpu("Clip", {x, Tensor::scalar(-1.0f), Tensor::scalar(1.0f)});
}

TEST(CudaElementwise, BinaryBroadcasting) {
  INGOT_REQUIRE_GPU();
  // Same shape (vectorized path), scalars and trailing-axes rows on either side (the repeat path,
  // vectorized or not), per-channel bias, outer-product and both-sides broadcasts; a broadcast over
  // middle axes on either side (the NHWC squeeze-excite scale [N, 1, 1, C]: vectorized when C is a
  // multiple of the vector, and its NCHW form [N, C, 1, 1]).
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 1031}, {4, 1031}}, {{2, 3, 5}, {}},   {{}, {6, 41}},          {{3, 5, 16}, {16}},
      {{16}, {3, 5, 16}},     {{5, 1027}, {1, 1027}}, {{2, 7, 3}, {7, 3}}, {{1, 8, 6, 6}, {1, 8, 1, 1}},
      {{7, 1}, {1, 9}},       {{2, 1, 4, 1}, {3, 1, 5}}, {{0, 3}, {1, 3}}, {{}, {}},
      {{4, 6, 5, 16}, {4, 1, 1, 16}}, {{3, 1, 1, 24}, {3, 7, 2, 24}}, {{4, 16, 6, 5}, {4, 16, 1, 1}},
      {{3, 7, 5}, {3, 1, 5}}};
  for (DType dt : kFloats) {
    for (const auto& [sa, sb] : shapes) {
      Tensor a = random_tensor(dt, sa, 9, -3, 3), b = random_tensor(dt, sb, 10, 0.5, 3);
      for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "LessOrEqual", "Greater",
                             "GreaterOrEqual", "PRelu"}) {
        if (op == std::string("PRelu") && shape_numel(sb) > shape_numel(sa)) continue;
        SCOPED_TRACE(op);
        expect_cuda_matches_cpu(op, {a, b});
      }
      Tensor base = random_tensor(dt, sa, 11, 0.5, 2);
      expect_cuda_matches_cpu("Pow", {base, b});
      expect_cuda_matches_cpu("Mod", {a, b}, {{"fmod", int64_t(1)}});
    }
  }
}

TEST(CudaElementwise, IntegerAndBoolBinary) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Int32, DType::Int64, DType::UInt8, DType::Int16}) {
    Tensor a = random_tensor(dt, {3, 4, 5}, 12, 0, 100), b = random_tensor(dt, {4, 1}, 13, 0, 100);
    for (const char* op : {"Add", "Sub", "Mul", "Max", "Min", "Equal", "Less", "Greater"}) expect_cuda_matches_cpu(op, {a, b});
  }
  Tensor p = random_tensor(DType::Bool, {6, 7}, 14), q = random_tensor(DType::Bool, {7}, 15);
  for (const char* op : {"And", "Or", "Xor", "Equal"}) expect_cuda_matches_cpu(op, {p, q});
  Tensor u = random_tensor(DType::UInt32, {10}, 16, 0, 1000), s = random_tensor(DType::UInt32, {10}, 17, 0, 8);
  expect_cuda_matches_cpu("BitShift", {u, s}, {{"direction", std::string("LEFT")}});
  expect_cuda_matches_cpu("BitShift", {u, s}, {{"direction", std::string("RIGHT")}});
}

TEST(CudaElementwise, PowWithIntegerExponent) {
  INGOT_REQUIRE_GPU();
  Tensor a = random_tensor(DType::Float32, {2, 5}, 18, 0.5, 2), e = random_tensor(DType::Int64, {5}, 19, 0, 3);
  expect_cuda_matches_cpu("Pow", {a, e});
}

TEST(CudaElementwise, Variadic) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float16, DType::Int32}) {
    Tensor a = random_tensor(dt, {3, 1, 4}, 20), b = random_tensor(dt, {5, 1}, 21), c = random_tensor(dt, {4}, 22);
    for (const char* op : {"Sum", "Max", "Min"}) {
      expect_cuda_matches_cpu(op, {a});
      expect_cuda_matches_cpu(op, {a, b, c});
    }
    if (dt != DType::Int32) expect_cuda_matches_cpu("Mean", {a, b, c});
  }
}

TEST(CudaElementwise, WhereAndClip) {
  INGOT_REQUIRE_GPU();
  Tensor c = random_tensor(DType::Bool, {3, 1, 6}, 23);
  for (DType dt : {DType::Float32, DType::Float16, DType::Int64, DType::Bool, DType::Int8}) {
    Tensor a = random_tensor(dt, {4, 6}, 24), b = random_tensor(dt, {1}, 25);
    expect_cuda_matches_cpu("Where", {c, a, b});
  }
  for (DType dt : kFloats) {
    Tensor x = random_tensor(dt, {129}, 26, -3, 3);
    expect_cuda_matches_cpu("Clip", {x, random_tensor(dt, {}, 27, -1, -0.5), random_tensor(dt, {}, 28, 0.5, 1)});
    expect_cuda_matches_cpu("Clip", {x, Tensor(), random_tensor(dt, {}, 29, 0.5, 1)});
    expect_cuda_matches_cpu("Clip", {x});
  }
  expect_cuda_matches_cpu("Clip", {random_tensor(DType::Int32, {40}, 30, -100, 100), Tensor::scalar<int32_t>(-7),
                                   Tensor::scalar<int32_t>(9)});
}

TEST(CudaElementwise, CastBetweenAllTypes) {
  INGOT_REQUIRE_GPU();
  const DType types[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8,
                         DType::Int32,   DType::Int64,   DType::UInt8,    DType::Bool};
  for (DType from : types) {
    Tensor x = random_tensor(from, {3, 37}, 31, -100, 100);
    for (DType to : types) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      expect_cuda_matches_cpu("Cast", {x}, {{"to", int64_t(to)}});
    }
  }
  // Saturation and NaN -> 0 for float -> integer.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor edge = Tensor::from_vector<float>({nan, 1e20f, -1e20f, 300.f, -300.f, 2.7f}, {6});
  for (DType to : {DType::Int8, DType::UInt8, DType::Int32, DType::Int64}) {
    expect_cuda_matches_cpu("Cast", {edge}, {{"to", int64_t(to)}});
  }
}

TEST(CudaElementwise, LargeAddUsesEveryElement) {
  INGOT_REQUIRE_GPU();
  // Several grid-stride rounds and a view at an odd element offset (unaligned: the scalar path).
  Tensor a = random_tensor(DType::Float32, {3, 1 << 20}, 32), b = random_tensor(DType::Float32, {3, 1 << 20}, 33);
  expect_cuda_matches_cpu("Add", {a, b});
  const int64_t n = 3 * (1 << 20) + 1;
  Tensor big = random_tensor(DType::Float32, {n}, 34);
  Tensor view = big.slice_rows(1, n);
  Tensor gpu_view = big.to(Device{DeviceType::CUDA, 0}).slice_rows(1, n);
  Tensor expected = ops::add(view, view);
  Tensor actual = ops::add(gpu_view, gpu_view);
  expect_close(expected, actual, 1e-6, 1e-6, "Add on a view at a 4-byte offset");
}

}  // namespace
}  // namespace ingot::gpu_test
