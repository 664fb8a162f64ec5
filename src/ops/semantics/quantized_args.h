// The arguments of the quantized products (ai.ingot QuantizedConv / QuantizedMatMul, and ONNX's
// QLinearConv / QLinearMatMul, whose inputs are their first ones), validated once for every backend.
//
// The math, per output element of channel c (a convolution's output channel, a product's column):
//   acc  = sum (x - x_zp) * (w - w_zp[c]) + B[c]                      (int32, exact)
//   real = x_scale * w_scale[c] * acc  [+ R_scale * (R - R_zp), or + R when R is float32]
//               [+ float_bias[c]: QuantizedMatMul's input 9, dynamic quantization's bias]
//   real = activation(real)                                           ('', Relu, HardSwish, Sigmoid)
//   real = epilogue(real)       (a chain of unary ops and constant affine/clamp steps: FusedElementwise
//                                programs the fuse-quantized-epilogue pass took in, over x0)
//   Y    = saturate(round_half_even(real / Y_scale) + Y_zp)           (8-bit output)
//   Y    = real                                                       (float32 output)
// which is DequantizeLinear -> Conv/MatMul -> [Add] -> [activation] -> QuantizeLinear computed on the
// integers, the bias quantized to x_scale * w_scale[c] like ONNX's QLinearConv.
#pragma once
#include <ingot/tensor.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/kernel.h"
#include "ops/semantics/conv_geometry.h"
#include "ops/semantics/host_device.h"
#include "ops/semantics/reduce_axes.h"

namespace ingot::sem {

enum class QuantActivation { None, Relu, HardSwish, Sigmoid };

// One step of an epilogue chain (the `activation`, then the `epilogue` program): a unary function of
// the running value, with its constants. What oneDNN's eltwise post-ops compute.
struct EpilogueStep {
  enum class Kind : uint8_t { Relu, HardSwish, Sigmoid, Tanh, Exp, Abs, Sqrt, Linear, Clip };
  Kind kind = Kind::Linear;
  float a = 0, b = 0;  // Relu: slope below 0 (LeakyRelu); Linear: a * v + b; Clip: [a, b]
  double apply(double v) const;
};

// The steps of an `epilogue` program (fused_elementwise.h's text form over x0), or nullopt when it
// is not a chain of unary ops and affine/clamp steps with constants, each reading the previous result.
std::optional<std::vector<EpilogueStep>> epilogue_steps(std::string_view program);

struct QuantizedProductArgs {
  const Tensor* x = nullptr;  // 8-bit activations (input 0)
  const Tensor* w = nullptr;  // 8-bit weights (input 3)
  float x_scale = 1.0f;
  int32_t x_zp = 0;
  std::vector<float> w_scale;   // 1 or `channels` values
  std::vector<int32_t> w_zp;    // 1 or `channels` values
  const Tensor* bias = nullptr; // int32 [channels], or null
  const Tensor* float_bias = nullptr;  // float32 [channels] added to the real value (dynamic quantization), or null
  bool runtime_x = false;  // X_scale / X_zero_point computed per call (DynamicQuantizeLinear), not constants
  const Tensor* residual = nullptr;  // the output's shape, or null
  bool residual_quantized = false;
  float r_scale = 1.0f;
  int32_t r_zp = 0;
  QuantActivation act = QuantActivation::None;
  std::vector<EpilogueStep> steps;  // the activation (if any), then the epilogue program's steps
  DType y_dtype = DType::Float32;  // UInt8/Int8 (quantized) or Float32
  float y_scale = 1.0f;
  int32_t y_zp = 0;

  bool quantized_output() const { return y_dtype != DType::Float32; }
  float w_scale_of(int64_t c) const { return w_scale.size() == 1 ? w_scale[0] : w_scale[size_t(c)]; }
  int32_t w_zp_of(int64_t c) const { return w_zp.size() == 1 ? w_zp[0] : w_zp[size_t(c)]; }
};

// Reads and checks inputs 0-8 (and, for QuantizedConv, the residual 9-11 and `activation`) for a
// product with `channels` output channels and the given output shape (for the residual's check).
// `bias_index` is where the int32 bias is (QLinearConv and QuantizedConv: 8; QuantizedMatMul: 8;
// QLinearMatMul has none: -1).
QuantizedProductArgs quantized_product_args(const KernelContext& ctx, int64_t channels, int bias_index);
// The residual (inputs 9-11), checked against the output's shape.
void quantized_residual_args(const KernelContext& ctx, const Shape& out_shape, QuantizedProductArgs& a);

// QuantizedConv's (and QLinearConv's) geometry. `layout` "NHWC" (written by the channels-last pass):
// X, R and Y channels last, W [M, kernel..., C/group]; the window is that of the channels-first
// tensors.
struct QConvGeometry {
  int64_t batch = 0, channels = 0, out_channels = 0, group = 1;
  Window win;
  Shape out_shape;  // as Y is laid out
  bool nhwc = false;
};
QConvGeometry quantized_conv_geometry(const KernelContext& ctx, const Tensor& x, const Tensor& w);

// The epilogue in double for one accumulator of channel c (what a backend without a fused path,
// and the reference loops, compute): the value stored in Y, as double (8-bit outputs: the integer).
// `residual_index` is the element's index in R.
double quantized_epilogue(const QuantizedProductArgs& a, int64_t c, int32_t acc, int64_t residual_index);

// Writes elements [begin, end) of Y (allocated, a.y_dtype) from int32 accumulators laid out like Y;
// channel(i) is element i's channel. (Disjoint ranges may be written in parallel.)
template <class Channel>
void write_quantized_output(const QuantizedProductArgs& a, const std::vector<int32_t>& acc, Tensor& y,
                            Channel channel, int64_t begin, int64_t end) {
  auto fill = [&]<class T>(T* out) {
    for (int64_t i = begin; i < end; ++i) out[i] = T(quantized_epilogue(a, channel(i), acc[size_t(i)], i));
  };
  if (a.y_dtype == DType::UInt8) fill(y.data<uint8_t>());
  else if (a.y_dtype == DType::Int8) fill(y.data<int8_t>());
  else fill(y.data<float>());
}
template <class Channel>
void write_quantized_output(const QuantizedProductArgs& a, const std::vector<int32_t>& acc, Tensor& y,
                            Channel channel) {
  write_quantized_output(a, acc, y, channel, 0, int64_t(acc.size()));
}

// ---- the quantized pointwise ops ----------------------------------------------------------------
//
// ai.ingot.QuantizedReduceMean and ai.ingot.QuantizedMul, the integer forms of DequantizeLinear ->
// ReduceMean | GlobalAveragePool | Mul -> QuantizeLinear with per-tensor parameters (fuse-qdq-pointwise
// folds them after the layout step; onnxruntime's com.microsoft QLinearGlobalAveragePool and
// QLinearMul compute the same math). Per output element:
//   QuantizedReduceMean  Y = saturate(rint(float(sum_r (X - X_zp)) * m) + Y_zp),  m = X_scale / (count * Y_scale)
//   QuantizedMul         C = saturate(rint(float((A - A_zp) * (B - B_zp)) * m) + C_zp),  m = A_scale * B_scale / C_scale
// (B broadcast numpy-style against A). The sum and the product are exact in int32, m is rounded once
// to float32 and float(.) * m once, then rounded half to even (QuantizeLinear's rounding): every
// backend computes Requantize bit for bit; the float graph they replace differs only where its own
// float32 roundings land on the other side of a half step.

// v -> saturate(rint(float(v) * multiplier) + zero_point) in [lo, hi] (the output dtype's range).
struct Requantize {
  float multiplier = 1.0f;
  float zero_point = 0.0f;
  float lo = 0.0f, hi = 255.0f;
  INGOT_HD int32_t operator()(int32_t v) const {
    const float r = rintf(float(v) * multiplier) + zero_point;
    return int32_t(r < lo ? lo : (r > hi ? hi : r));
  }
};

struct QuantizedMeanArgs {
  ReduceAxes axes;     // from `axes` (all when absent) and `keepdims`
  int64_t count = 1;   // elements per mean
  int32_t x_zp = 0;
  Requantize rq;
};
// Inputs X, X_scale, X_zero_point, Y_scale, Y_zero_point (8-bit X and zero points of one dtype,
// positive float32 scales); attributes `axes` and `keepdims`.
QuantizedMeanArgs quantized_mean_args(const KernelContext& ctx, const Tensor& x);

struct QuantizedMulArgs {
  int32_t a_zp = 0, b_zp = 0;
  Requantize rq;
  Shape out_shape;  // A and B broadcast
};
// Inputs A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point (QLinearMul's).
QuantizedMulArgs quantized_mul_args(const KernelContext& ctx);

}  // namespace ingot::sem
