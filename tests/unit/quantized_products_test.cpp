// The fused integer products (ai.ingot QuantizedConv / QuantizedMatMul, and ONNX's QLinearConv on the
// same kernel) against a float64 reference of the quantized math written here, independently of the
// kernels: the int32 accumulation is exact, so an 8-bit output may differ from the reference only
// where float32 arithmetic in the requantization lands on the other side of a rounding tie (at most
// one step), and a float32 output only by float32 rounding. Each convolution case runs eagerly and
// as a one-node graph with constant parameters (what an int8 package runs: oneDNN's primitives).
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/qconv_int16.h"
#include "scoped_env.h"
#include "graph/graph.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace ingot {
namespace {

constexpr const char* kIngot = "ai.ingot";

template <class T>
Tensor random_tensor(std::mt19937& gen, const Shape& shape, int lo, int hi) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> v(size_t(shape_numel(shape)));
  for (T& x : v) x = T(dist(gen));
  return Tensor::from_vector(v, shape);
}

Tensor scalar_f(float v) { return Tensor::from_vector(std::vector<float>{v}, {}); }
template <class T>
Tensor scalar_q(int v) {
  return Tensor::from_vector(std::vector<T>{T(v)}, {});
}

double value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::UInt8: return t.data<uint8_t>()[i];
    case DType::Int8: return t.data<int8_t>()[i];
    case DType::Int32: return t.data<int32_t>()[i];
    default: return t.data<float>()[i];
  }
}

double activation(const std::string& act, double v) {
  if (act == "Relu") return std::max(v, 0.0);
  if (act == "HardSwish") return v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0);
  if (act == "Sigmoid") return 1.0 / (1.0 + std::exp(-v));
  return v;
}

struct ConvCase {
  Shape x_shape;  // [N, C, H, W]
  int64_t out_channels = 8, kernel = 3, stride = 1, pad = 1, group = 1;
  DType x_dtype = DType::UInt8, y_dtype = DType::UInt8;
  bool per_channel = true, bias = true, residual = false;
  bool nhwc = false;  // layout "NHWC" (the channels-last pass's form): X, W and R permuted, Y permuted back
  std::string act{};
  std::string epilogue{};                       // a program over x0, applied after act
  std::function<double(double)> epilogue_fn{};  // the same, written here
};

void check_conv_output(const ConvCase& c, const Tensor& y, const Shape& out_shape, const Tensor& x, const Tensor& wq,
                       const std::vector<float>& w_scale, const std::vector<int32_t>& bias, const Tensor& r,
                       float x_scale, float y_scale, float r_scale, int x_zp, int y_zp, int r_zp);

// One ai.ingot node in a graph of its own: the inputs at `fed` are the graph's inputs, the others
// initializers (constants, as in a package), run by an Executor.
Tensor run_with_constant_parameters(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs,
                                    const std::vector<size_t>& fed) {
  auto model = std::make_shared<Model>();
  model->opsets[""] = 17;
  model->opsets[kIngot] = 1;
  model->graph = std::make_shared<Graph>();
  Graph& g = *model->graph;
  Node node;
  node.op_type = op;
  node.domain = kIngot;
  node.name = "node";
  node.attrs = attrs;
  node.outputs = {"y"};
  std::vector<Value> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      node.inputs.push_back("");
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    node.inputs.push_back(name);
    if (std::find(fed.begin(), fed.end(), i) != fed.end()) {
      g.inputs.push_back({name, {ValueKind::Tensor, inputs[i].dtype(), std::nullopt}});
      feeds.emplace_back(inputs[i]);
    } else {
      g.initializers[name] = inputs[i];
    }
  }
  g.outputs.push_back({"y", {ValueKind::Tensor, DType::Undefined, std::nullopt}});
  g.nodes.push_back(node);
  Executor executor(model, Device::cpu());
  return executor.run(feeds).outputs.at(0).tensor;
}

// Dequantized operands, the real convolution in float64, then the requantization.
void check_conv(const ConvCase& c, uint32_t seed) {
  std::mt19937 gen(seed);
  const int64_t n = c.x_shape[0], ch = c.x_shape[1], h = c.x_shape[2], w = c.x_shape[3];
  const int64_t m = c.out_channels, icg = ch / c.group, k = c.kernel;
  const bool u8 = c.x_dtype == DType::UInt8;
  Tensor x = u8 ? random_tensor<uint8_t>(gen, c.x_shape, 0, 255) : random_tensor<int8_t>(gen, c.x_shape, -128, 127);
  const int x_zp = u8 ? 117 : -9;
  Tensor wq = random_tensor<int8_t>(gen, {m, icg, k, k}, -127, 127);
  std::vector<float> w_scale;
  std::uniform_real_distribution<float> sdist(0.002f, 0.02f);
  for (int64_t i = 0; i < (c.per_channel ? m : 1); ++i) w_scale.push_back(sdist(gen));
  const float x_scale = 0.031f, y_scale = 0.27f, r_scale = 0.19f;
  const int y_zp = c.y_dtype == DType::UInt8 ? 100 : 3, r_zp = 121;
  std::vector<int32_t> bias;
  std::uniform_int_distribution<int> bdist(-5000, 5000);
  for (int64_t i = 0; i < m; ++i) bias.push_back(bdist(gen));
  const int64_t oh = (h + 2 * c.pad - k) / c.stride + 1, ow = (w + 2 * c.pad - k) / c.stride + 1;
  const Shape out_shape{n, m, oh, ow};
  Tensor r = random_tensor<uint8_t>(gen, out_shape, 0, 255);

  std::vector<Tensor> inputs{x, scalar_f(x_scale), u8 ? scalar_q<uint8_t>(x_zp) : scalar_q<int8_t>(x_zp), wq,
                             Tensor::from_vector(w_scale, {int64_t(w_scale.size())}), scalar_q<int8_t>(0)};
  const bool quantized = c.y_dtype != DType::Float32;
  inputs.push_back(quantized ? scalar_f(y_scale) : Tensor());
  inputs.push_back(quantized ? (c.y_dtype == DType::UInt8 ? scalar_q<uint8_t>(y_zp) : scalar_q<int8_t>(y_zp)) : Tensor());
  inputs.push_back(c.bias ? Tensor::from_vector(bias, {m}) : Tensor());
  if (c.residual) {
    inputs.push_back(r);
    inputs.push_back(scalar_f(r_scale));
    inputs.push_back(scalar_q<uint8_t>(r_zp));
  }
  Attributes attrs{{"group", Attribute(c.group)},
                   {"strides", Attribute(std::vector<int64_t>{c.stride, c.stride})},
                   {"pads", Attribute(std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad})},
                   {"activation", Attribute(c.act)},
                   {"epilogue", Attribute(c.epilogue)},
                   {"output_dtype", Attribute(int64_t(c.y_dtype))}};
  if (c.nhwc) {
    for (size_t i : {size_t(0), size_t(3), size_t(9)})
      if (i < inputs.size()) inputs[i] = ops::transpose(inputs[i], {0, 2, 3, 1});
    attrs["layout"] = Attribute(std::string("NHWC"));
  }
  // Eagerly (scales and zero points are inputs like any other: oneDNN's runtime-parameter
  // primitives, or the reference loops), and as a one-node graph whose parameters are constants (an
  // int8 package's form: oneDNN's primitives with the parameters built in).
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "as a graph with constant parameters" : "eagerly");
    Tensor y = graph ? run_with_constant_parameters("QuantizedConv", inputs, attrs, {0, 9})
                     : ops::call("QuantizedConv", inputs, attrs, 1, kIngot)[0];
    if (c.nhwc) y = ops::transpose(y, {0, 3, 1, 2});
    check_conv_output(c, y, out_shape, x, wq, w_scale, bias, r, x_scale, y_scale, r_scale, x_zp, y_zp, r_zp);
  }
}

void check_conv_output(const ConvCase& c, const Tensor& y, const Shape& out_shape, const Tensor& x, const Tensor& wq,
                       const std::vector<float>& w_scale, const std::vector<int32_t>& bias, const Tensor& r,
                       float x_scale, float y_scale, float r_scale, int x_zp, int y_zp, int r_zp) {
  const int64_t n = c.x_shape[0], ch = c.x_shape[1], h = c.x_shape[2], w = c.x_shape[3];
  const int64_t m = c.out_channels, icg = ch / c.group, ocg = m / c.group, k = c.kernel;
  const int64_t oh = out_shape[2], ow = out_shape[3];
  const bool quantized = c.y_dtype != DType::Float32;
  ASSERT_EQ(y.dtype(), c.y_dtype);
  ASSERT_EQ(y.shape(), out_shape);

  int worst = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t g = oc / ocg;
          const double ws = w_scale[c.per_channel ? size_t(oc) : 0];
          double real = c.bias ? double(bias[size_t(oc)]) * x_scale * ws : 0.0;
          for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t ki = 0; ki < k; ++ki)
              for (int64_t kj = 0; kj < k; ++kj) {
                const int64_t yi = i * c.stride - c.pad + ki, xj = j * c.stride - c.pad + kj;
                if (yi < 0 || yi >= h || xj < 0 || xj >= w) continue;  // padding is real 0
                const double xv = (value_at(x, ((b * ch + g * icg + ic) * h + yi) * w + xj) - x_zp) * x_scale;
                const double wv = value_at(wq, ((oc * icg + ic) * k + ki) * k + kj) * ws;
                real += xv * wv;
              }
          const int64_t idx = ((b * m + oc) * oh + i) * ow + j;
          if (c.residual) real += (value_at(r, idx) - r_zp) * r_scale;
          real = activation(c.act, real);
          if (c.epilogue_fn) real = c.epilogue_fn(real);
          const double got = value_at(y, idx);
          if (!quantized) {
            ASSERT_NEAR(got, real, 1e-4 + 1e-5 * std::abs(real)) << "element " << idx;
            continue;
          }
          const double lo = c.y_dtype == DType::UInt8 ? 0 : -128, hi = c.y_dtype == DType::UInt8 ? 255 : 127;
          const double expected = std::clamp(std::nearbyint(real / y_scale) + y_zp, lo, hi);
          worst = std::max(worst, int(std::abs(got - expected)));
          ASSERT_LE(std::abs(got - expected), 1.0) << "element " << idx << " real " << real;
        }
  EXPECT_LE(worst, 1);
}

TEST(QuantizedConv, U8PerChannelWithBiasMatchesFloat64Reference) {
  check_conv({.x_shape = {2, 16, 9, 11}}, 1);
}

TEST(QuantizedConv, ResidualAndReluMatchFloat64Reference) {
  check_conv({.x_shape = {1, 16, 8, 8}, .out_channels = 16, .residual = true, .act = "Relu"}, 2);
}

// Channels last (the layout of int8 packages on the CPU, oneDNN's int8 layout): residuals with Relu,
// HardSwish, a scaling step and into a float output; depthwise, 1x1 and strided windows.
TEST(QuantizedConv, ChannelsLastResidualsAndWindows) {
  check_conv({.x_shape = {1, 24, 9, 7}, .out_channels = 24, .kernel = 1, .pad = 0, .residual = true, .nhwc = true,
              .act = "Relu"},
             51);
  check_conv({.x_shape = {2, 16, 8, 8}, .out_channels = 16, .residual = true, .nhwc = true}, 52);
  check_conv({.x_shape = {1, 16, 8, 8}, .out_channels = 16, .per_channel = false, .residual = true, .nhwc = true,
              .act = "HardSwish"},
             53);
  ConvCase scaled{.x_shape = {1, 8, 6, 6}, .out_channels = 8, .kernel = 1, .pad = 0, .residual = true, .nhwc = true,
                  .act = "Relu"};
  scaled.epilogue = "Mul(x0, 1.5)";
  scaled.epilogue_fn = [](double v) { return v * 1.5; };
  check_conv(scaled, 54);
  check_conv({.x_shape = {1, 24, 13, 11}, .out_channels = 24, .stride = 2, .group = 24, .nhwc = true, .act = "Relu"}, 55);
  check_conv({.x_shape = {1, 8, 7, 7}, .out_channels = 8, .y_dtype = DType::Float32, .residual = true, .nhwc = true}, 56);
}

// Depthwise 3x3 at stride 1 channels last: on CPUs with AVX-512 VNNI + VBMI the kernel of
// qdepthwise.cpp (a row of three taps per dot product), elsewhere oneDNN's. Channel counts of one,
// one and a half and three and a half 16-channel chunks (24: BlazeFace's), 56 (its largest), uint8
// and int8 X with zero points, int8 Y, Relu, without bias, per-tensor weights, images one or two
// pixels wide or tall (every output a border one), batch 2.
TEST(QuantizedConv, Depthwise3x3ChannelsLastMatchesFloat64Reference) {
  uint32_t seed = 60;
  for (int64_t ch : {16, 24, 8, 56, 48}) {
    SCOPED_TRACE(ch);
    check_conv({.x_shape = {2, ch, 9, 13}, .out_channels = ch, .group = ch, .nhwc = true}, seed++);
  }
  check_conv({.x_shape = {1, 24, 7, 6}, .out_channels = 24, .group = 24, .x_dtype = DType::Int8, .y_dtype = DType::Int8,
              .nhwc = true, .act = "Relu"},
             seed++);
  check_conv({.x_shape = {1, 24, 5, 5}, .out_channels = 24, .group = 24, .per_channel = false, .bias = false,
              .nhwc = true},
             seed++);
  for (Shape shape : {Shape{1, 24, 1, 9}, Shape{1, 24, 8, 2}, Shape{1, 24, 1, 1}, Shape{1, 24, 2, 2}}) {
    check_conv({.x_shape = shape, .out_channels = 24, .group = 24, .nhwc = true, .act = "Relu"}, seed++);
  }
}

TEST(QuantizedConv, HardSwishAndSigmoidApplyInTheRealDomain) {
  check_conv({.x_shape = {1, 8, 7, 7}, .out_channels = 16, .act = "HardSwish"}, 3);
  check_conv({.x_shape = {1, 8, 7, 7}, .out_channels = 16, .residual = true, .act = "Sigmoid"}, 4);
}

TEST(QuantizedConv, DepthwiseStridedAndGroupedMatchFloat64Reference) {
  check_conv({.x_shape = {1, 32, 12, 12}, .out_channels = 32, .kernel = 5, .stride = 2, .pad = 2, .group = 32}, 5);
  check_conv({.x_shape = {1, 16, 10, 10}, .out_channels = 8, .group = 4}, 6);
}

TEST(QuantizedConv, SignedActivationsPerTensorAndFloatOutput) {
  check_conv({.x_shape = {1, 8, 6, 6}, .x_dtype = DType::Int8, .y_dtype = DType::Int8, .per_channel = false}, 7);
  check_conv({.x_shape = {1, 8, 6, 6}, .y_dtype = DType::Float32, .residual = false, .act = "Relu"}, 8);
}

// Epilogue programs (what fuse-quantized-epilogue writes): PP-OCR's HardSwish and learnable affine,
// a HardSigmoid written as affine + clamp, a LeakyRelu, into 8-bit and float outputs.
// Single steps and consecutive steps of one kind (which oneDNN 2.6 gets wrong unless merged).
TEST(QuantizedConv, EpilogueStepsAndConsecutiveStepsOfOneKind) {
  for (auto [text, fn] : std::vector<std::pair<std::string, std::function<double(double)>>>{
           {"Mul(x0, 2)", [](double v) { return v * 2; }},
           {"Add(x0, 1)", [](double v) { return v + 1; }},
           {"HardSwish(x0); Add(t0, 1)", [](double v) { return activation("HardSwish", v) + 1; }},
           {"Max(x0, 0); Min(t0, 1)", [](double v) { return std::clamp(v, 0.0, 1.0); }}}) {
    for (DType dt : {DType::Float32, DType::UInt8}) {
      ConvCase c{.x_shape = {1, 8, 7, 7}, .out_channels = 16, .y_dtype = dt};
      c.epilogue = text;
      c.epilogue_fn = fn;
      SCOPED_TRACE(text + (dt == DType::UInt8 ? " u8" : " f32"));
      check_conv(c, 31);
    }
  }
}

TEST(QuantizedConv, EpilogueProgramsMatchFloat64Reference) {
  ConvCase affine{.x_shape = {1, 8, 7, 7}, .out_channels = 16};
  affine.epilogue = "HardSwish(x0); Mul(t0, 0.476323098); Add(t1, -0.0075732437)";
  affine.epilogue_fn = [](double v) { return activation("HardSwish", v) * double(0.476323098f) + double(-0.0075732437f); };
  check_conv(affine, 21);
  ConvCase hard_sigmoid{.x_shape = {1, 8, 7, 7}, .out_channels = 16, .y_dtype = DType::Float32};
  hard_sigmoid.epilogue = "Mul(x0, 0.200000003); Add(t0, 0.5); Max(t1, 0); Min(t2, 1)";
  hard_sigmoid.epilogue_fn = [](double v) { return std::clamp(v * double(0.2f) + 0.5, 0.0, 1.0); };
  check_conv(hard_sigmoid, 22);
  // Into 8 bits (a squeeze-excitation gate): the affine, the clamp, then the division by Y_scale.
  hard_sigmoid.y_dtype = DType::Int8;
  hard_sigmoid.x_dtype = DType::Int8;
  check_conv(hard_sigmoid, 24);
  ConvCase leaky{.x_shape = {1, 8, 7, 7}, .out_channels = 16, .residual = true};
  leaky.epilogue = "LeakyRelu(x0, 0.100000001); Sub(t0, 0.25)";
  leaky.epilogue_fn = [](double v) { return (v < 0 ? double(0.1f) * v : v) - 0.25; };
  check_conv(leaky, 23);
}

TEST(QuantizedConv, PointwiseWithoutBias) {
  check_conv({.x_shape = {1, 24, 16, 16}, .out_channels = 48, .kernel = 1, .pad = 0, .bias = false}, 9);
}

// QuantizedMatMul: A [B, T, K] u8 times a constant [K, N] s8 with per-column scales and bias.
void check_matmul(DType y_dtype, const std::string& act, uint32_t seed, bool float_bias = false) {
  std::mt19937 gen(seed);
  const int64_t b = 2, t = 5, k = 37, n = 19;
  Tensor a = random_tensor<uint8_t>(gen, {b, t, k}, 0, 255);
  Tensor wq = random_tensor<int8_t>(gen, {k, n}, -127, 127);
  std::vector<float> w_scale;
  std::uniform_real_distribution<float> sdist(0.002f, 0.02f);
  for (int64_t i = 0; i < n; ++i) w_scale.push_back(sdist(gen));
  std::vector<int32_t> bias;
  std::uniform_int_distribution<int> bdist(-3000, 3000);
  for (int64_t i = 0; i < n; ++i) bias.push_back(bdist(gen));
  const float a_scale = 0.05f, y_scale = 0.4f;
  const int a_zp = 128, y_zp = 7;
  const bool quantized = y_dtype != DType::Float32;
  std::vector<Tensor> inputs{a,
                             scalar_f(a_scale),
                             scalar_q<uint8_t>(a_zp),
                             wq,
                             Tensor::from_vector(w_scale, {n}),
                             scalar_q<int8_t>(0),
                             quantized ? scalar_f(y_scale) : Tensor(),
                             quantized ? scalar_q<int8_t>(y_zp) : Tensor(),
                             float_bias ? Tensor() : Tensor::from_vector(bias, {n})};
  // Dynamic quantization's float32 bias (input 9): the same values in real units.
  std::vector<float> real_bias;
  for (int64_t j = 0; j < n; ++j) real_bias.push_back(float(double(bias[size_t(j)]) * a_scale * w_scale[size_t(j)]));
  if (float_bias) inputs.push_back(Tensor::from_vector(real_bias, {n}));
  Attributes attrs{{"activation", Attribute(act)}, {"output_dtype", Attribute(int64_t(y_dtype))}};
  Tensor y = ops::call("QuantizedMatMul", inputs, attrs, 1, kIngot)[0];
  ASSERT_EQ(y.shape(), (Shape{b, t, n}));
  for (int64_t row = 0; row < b * t; ++row)
    for (int64_t j = 0; j < n; ++j) {
      double real = float_bias ? double(real_bias[size_t(j)]) : double(bias[size_t(j)]) * a_scale * w_scale[size_t(j)];
      for (int64_t p = 0; p < k; ++p)
        real += (value_at(a, row * k + p) - a_zp) * a_scale * value_at(wq, p * n + j) * w_scale[size_t(j)];
      real = activation(act, real);
      const double got = value_at(y, row * n + j);
      if (!quantized) {
        ASSERT_NEAR(got, real, 1e-4 + 1e-5 * std::abs(real));
      } else {
        const double expected = std::clamp(std::nearbyint(real / y_scale) + y_zp, -128.0, 127.0);
        ASSERT_LE(std::abs(got - expected), 1.0) << "row " << row << " column " << j;
      }
    }
}

TEST(QuantizedMatMul, PerColumnScalesBiasAndReluMatchFloat64Reference) {
  check_matmul(DType::Int8, "Relu", 11);
  check_matmul(DType::Int8, "", 12);
  check_matmul(DType::Float32, "", 13);
  check_matmul(DType::Float32, "Relu", 14, true);
}

// The int16 kernels (qconv_int16.cpp: what CPUs without a VNNI dot product run) forced on whatever
// this CPU is, and forced off (oneDNN where it is exact, else the reference loops), against the same
// float64 references: a 5x5 stride-2 stem of 3 channels (K = 75, odd), 1x1 layers with residuals,
// odd and non-multiple-of-8 channel counts (column and channel tails), signed X and Y, float output,
// per-tensor weights without bias, steps done in vectors and lane by lane (Sigmoid), depthwise 3x3
// and 5x5 windows at strides 1 and 2, and matrix products (K = 37, N = 19).

TEST(QuantizedConv, Int16KernelsMatchFloat64Reference) {
  for (const char* mode : {"1", "0"}) {
    SCOPED_TRACE(std::string("INGOT_CPU_INT8_INT16=") + mode);
    const testing::ScopedEnv scoped("INGOT_CPU_INT8_INT16", mode);
    const int64_t calls = cpu::int16_product_calls();
    uint32_t seed = 80;
    check_conv({.x_shape = {1, 3, 17, 15}, .out_channels = 24, .kernel = 5, .stride = 2, .pad = 2, .nhwc = true,
                .act = "Relu"},
               seed++);
    check_conv({.x_shape = {2, 24, 9, 7}, .out_channels = 40, .kernel = 1, .pad = 0, .residual = true, .nhwc = true,
                .act = "Relu"},
               seed++);
    check_conv({.x_shape = {1, 13, 6, 5}, .out_channels = 21, .kernel = 3, .x_dtype = DType::Int8,
                .y_dtype = DType::Int8, .residual = true, .nhwc = true},
               seed++);
    check_conv({.x_shape = {1, 20, 5, 6}, .out_channels = 12, .kernel = 1, .pad = 0, .y_dtype = DType::Float32,
                .per_channel = false, .bias = false, .nhwc = true, .act = "HardSwish"},
               seed++);
    check_conv({.x_shape = {1, 16, 7, 7}, .out_channels = 16, .residual = true, .nhwc = true, .act = "Sigmoid"}, seed++);
    ConvCase affine{.x_shape = {1, 8, 7, 7}, .out_channels = 16, .nhwc = true};
    affine.epilogue = "HardSwish(x0); Mul(t0, 0.476323098); Add(t1, -0.0075732437)";
    affine.epilogue_fn = [](double v) {
      return activation("HardSwish", v) * double(0.476323098f) + double(-0.0075732437f);
    };
    check_conv(affine, seed++);
    for (int64_t ch : {24, 40, 5}) {
      SCOPED_TRACE(ch);
      check_conv({.x_shape = {1, ch, 9, 8}, .out_channels = ch, .group = ch, .nhwc = true, .act = "Relu"}, seed++);
      check_conv({.x_shape = {2, ch, 11, 10}, .out_channels = ch, .kernel = 5, .stride = 2, .pad = 2, .group = ch,
                  .x_dtype = DType::Int8, .y_dtype = DType::Int8, .residual = false, .nhwc = true},
                 seed++);
    }
    check_conv({.x_shape = {1, 24, 6, 6}, .out_channels = 24, .stride = 2, .group = 24, .residual = true, .nhwc = true},
               seed++);
    check_matmul(DType::Int8, "Relu", seed++);
    check_matmul(DType::Float32, "Relu", seed++, true);
    if (std::string(mode) == "1") EXPECT_GT(cpu::int16_product_calls(), calls);
    else EXPECT_EQ(cpu::int16_product_calls(), calls);
  }
}

// Int8 graphs pool on the 8-bit values (fuse-qdq): the 2x2 stride-2 fast path against the max taken
// here, for both signs and with the indices output.
TEST(QuantizedGraphOps, MaxPool2x2OnEightBitValues) {
  std::mt19937 gen(3);
  for (DType dt : {DType::UInt8, DType::Int8}) {
    Tensor x = dt == DType::UInt8 ? random_tensor<uint8_t>(gen, {2, 3, 9, 10}, 0, 255)
                                  : random_tensor<int8_t>(gen, {2, 3, 9, 10}, -128, 127);
    Attributes attrs{{"kernel_shape", Attribute(std::vector<int64_t>{2, 2})},
                     {"strides", Attribute(std::vector<int64_t>{2, 2})}};
    std::vector<Tensor> out = ops::call("MaxPool", {x}, attrs, 2);
    ASSERT_EQ(out[0].shape(), (Shape{2, 3, 4, 5}));
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          double best = -1e9;
          int64_t at = -1;
          for (int64_t di = 0; di < 2; ++di)
            for (int64_t dj = 0; dj < 2; ++dj) {
              const int64_t k = (p * 9 + 2 * i + di) * 10 + 2 * j + dj;
              if (value_at(x, k) > best) {
                best = value_at(x, k);
                at = k;
              }
            }
          const int64_t o = (p * 4 + i) * 5 + j;
          ASSERT_EQ(value_at(out[0], o), best);
          ASSERT_EQ(out[1].data<int64_t>()[o], at);
        }
  }
}

TEST(QuantizedConv, BadScalesAndDtypesNameTheInput) {
  std::mt19937 gen(1);
  Tensor x = random_tensor<uint8_t>(gen, {1, 4, 5, 5}, 0, 255);
  Tensor w = random_tensor<int8_t>(gen, {6, 4, 3, 3}, -127, 127);
  auto call = [&](Tensor w_scale, Tensor xin) {
    return testing::error_of([&] {
      ops::call("QuantizedConv",
                {xin, scalar_f(0.1f), scalar_q<uint8_t>(0), w, w_scale, scalar_q<int8_t>(0), scalar_f(0.1f),
                 scalar_q<uint8_t>(0)},
                {}, 1, kIngot);
    });
  };
  EXPECT_NE(call(Tensor::from_vector(std::vector<float>{0.1f, 0.2f}, {2}), x).find("W_scale"), std::string::npos);
  EXPECT_NE(call(scalar_f(-1.0f), x).find("positive"), std::string::npos);
  EXPECT_NE(call(scalar_f(0.1f), x.cast(DType::Float32)).find("X"), std::string::npos);
}

}  // namespace
}  // namespace ingot
