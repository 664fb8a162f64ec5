// The quantized pointwise ops on the GPU (kernels/quantized_pointwise.cu) against the CPU kernels,
// which tests/unit/quantized_pointwise_test.cpp checks against a float64 reference. Both compute
// ops/semantics/quantized_args.h's Requantize on exact int32 sums and products, so they agree bit
// for bit. The shapes take each of the CUDA engines' ways: the channels-last spatial means of
// MobileNetV3 (16-byte and 8-byte vectors of channels) and ResNet-50's head, channels-first rows,
// a general reduction; the squeeze-excitation gate's mid-axis broadcast (16- and 8-byte vectors),
// the repeat broadcast, equal shapes and a general broadcast.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

constexpr const char* kIngot = "ai.ingot";

Tensor scalar_f(float v) { return Tensor::from_vector(std::vector<float>{v}, {}); }
Tensor zero_point(DType t, int v) {
  return t == DType::UInt8 ? Tensor::from_vector(std::vector<uint8_t>{uint8_t(v)}, {})
                           : Tensor::from_vector(std::vector<int8_t>{int8_t(v)}, {});
}
Tensor ints(DType t, uint32_t seed, const Shape& shape) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(t == DType::UInt8 ? 0 : -128, t == DType::UInt8 ? 255 : 127);
  Tensor x = Tensor::empty(t, shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DType::UInt8) x.data<uint8_t>()[i] = uint8_t(dist(gen));
    else x.data<int8_t>()[i] = int8_t(dist(gen));
  }
  return x;
}

TEST(CudaQuantizedPointwise, MeansMatchTheCpuExactly) {
  INGOT_REQUIRE_GPU();
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
    DType dtype;
    int x_zp, y_zp;
  };
  const std::vector<Case> cases{
      {{32, 14, 14, 672}, {1, 2}, DType::Int8, 0, 0},     // 16-byte vectors
      {{32, 28, 28, 72}, {1, 2}, DType::Int8, 0, 0},      // 8-byte vectors
      {{32, 7, 7, 2048}, {1, 2}, DType::Int8, 0, 0},      // ResNet-50's head
      {{2, 9, 9, 20}, {1, 2}, DType::UInt8, 130, 101},    // scalar columns
      {{4, 16, 56, 56}, {2, 3}, DType::UInt8, 7, 250},    // channels-first rows
      {{6, 5, 300}, {0, 2}, DType::Int8, -4, 3},          // a general reduction
      {{1, 40000}, {}, DType::UInt8, 128, 128},           // everything, split across blocks
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape));
    Attributes attrs{{"keepdims", Attribute(int64_t(1))}};
    if (!c.axes.empty()) attrs["axes"] = Attribute(c.axes);
    expect_cuda_matches_cpu("QuantizedReduceMean",
                            {ints(c.dtype, 1, c.shape), scalar_f(0.043f), zero_point(c.dtype, c.x_zp), scalar_f(0.011f),
                             zero_point(c.dtype, c.y_zp)},
                            attrs, 1, 0.0, 0.0, kIngot);
  }
}

TEST(CudaQuantizedPointwise, ProductsMatchTheCpuExactly) {
  INGOT_REQUIRE_GPU();
  struct Case {
    Shape a, b;
    DType dtype;
    int zp;
  };
  const std::vector<Case> cases{
      {{32, 14, 14, 672}, {32, 1, 1, 672}, DType::Int8, 0},  // the gate, 16-byte vectors
      {{32, 1, 1, 72}, {32, 28, 28, 72}, DType::Int8, 0},    // the gate first, 8-byte vectors
      {{2, 5, 5, 20}, {2, 1, 1, 20}, DType::UInt8, 9},       // the gate, bytes
      {{3, 7, 64}, {64}, DType::UInt8, 200},                 // a repeated row
      {{1000}, {1000}, DType::Int8, -2},                     // equal shapes
      {{2, 1, 4, 1}, {1, 3, 1, 5}, DType::Int8, 1},          // a general broadcast
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.a) + " x " + shape_str(c.b));
    expect_cuda_matches_cpu("QuantizedMul",
                            {ints(c.dtype, 2, c.a), scalar_f(0.05f), zero_point(c.dtype, c.zp), ints(c.dtype, 3, c.b),
                             scalar_f(0.0079f), zero_point(c.dtype, 0), scalar_f(0.02f), zero_point(c.dtype, c.zp)},
                            {}, 1, 0.0, 0.0, kIngot);
  }
}

}  // namespace
}  // namespace ingot::gpu_test
