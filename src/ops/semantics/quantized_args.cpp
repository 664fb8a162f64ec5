#include "ops/semantics/quantized_args.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/broadcast.h"
#include "ops/semantics/fused_elementwise.h"

namespace ingot::sem {

namespace {

bool is_8bit(DType d) { return d == DType::UInt8 || d == DType::Int8; }

float scalar_float(const KernelContext& ctx, size_t index, const char* name) {
  const Tensor& s = ctx.input(index);
  if (s.dtype() != DType::Float32 || s.numel() != 1) {
    fail("input {} ({}): expected one float32 value, got {}", index, name, s.describe());
  }
  const float v = s.data<float>()[0];
  if (!(v > 0.0f) || !std::isfinite(v)) fail("input {} ({}): expected a positive finite scale, got {}", index, name, v);
  return v;
}

// A zero point of dtype `like` (one value), 0 when the input is absent.
int32_t scalar_zero_point(const KernelContext& ctx, size_t index, DType like, const char* name) {
  if (!ctx.has_input(index)) return 0;
  const Tensor& z = ctx.input(index);
  if (z.dtype() != like || z.numel() != 1) {
    fail("input {} ({}): expected one {} value like its data, got {}", index, name, dtype_name(like), z.describe());
  }
  return int32_t(z.item_int());
}

}  // namespace

double EpilogueStep::apply(double v) const {
  switch (kind) {
    case Kind::Relu: return v < 0 ? double(a) * v : v;
    case Kind::HardSwish: return v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0);
    case Kind::Sigmoid: return 1.0 / (1.0 + std::exp(-v));
    case Kind::Tanh: return std::tanh(v);
    case Kind::Exp: return std::exp(v);
    case Kind::Abs: return std::abs(v);
    case Kind::Sqrt: return std::sqrt(v);
    case Kind::Linear: return double(a) * v + double(b);
    case Kind::Clip: return std::clamp(v, double(a), double(b));
  }
  return v;
}

std::optional<std::vector<EpilogueStep>> epilogue_steps(std::string_view text) {
  using fused::Op;
  using fused::Operand;
  using K = EpilogueStep::Kind;
  fused::Program prog;
  try {
    prog = fused::Program::parse(text, 1);
  } catch (const Error&) {
    return std::nullopt;
  }
  std::vector<EpilogueStep> steps;
  constexpr float kMax = std::numeric_limits<float>::max();
  for (size_t k = 0; k < prog.instrs.size(); ++k) {
    const fused::Instr& in = prog.instrs[k];
    auto is_prev = [&](const Operand& o) {
      return k == 0 ? o.kind == Operand::Kind::Input && o.index == 0
                    : o.kind == Operand::Kind::Temp && o.index == int32_t(k - 1);
    };
    const bool unary = fused::arity(in.op) == 1;
    if (unary) {
      if (!is_prev(in.a)) return std::nullopt;
      switch (in.op) {
        case Op::Relu: steps.push_back({K::Relu, 0, 0}); break;
        case Op::HardSwish: steps.push_back({K::HardSwish, 0, 0}); break;
        case Op::Sigmoid: steps.push_back({K::Sigmoid, 0, 0}); break;
        case Op::Tanh: steps.push_back({K::Tanh, 0, 0}); break;
        case Op::Exp: steps.push_back({K::Exp, 0, 0}); break;
        case Op::Abs: steps.push_back({K::Abs, 0, 0}); break;
        case Op::Sqrt: steps.push_back({K::Sqrt, 0, 0}); break;
        case Op::Neg: steps.push_back({K::Linear, -1, 0}); break;
        default: return std::nullopt;
      }
      continue;
    }
    // A binary step: the previous value and a constant, in either order where the op commutes.
    const bool prev_first = is_prev(in.a) && in.b.kind == Operand::Kind::Const;
    const bool prev_second = is_prev(in.b) && in.a.kind == Operand::Kind::Const;
    if (!prev_first && !prev_second) return std::nullopt;
    const float c = prev_first ? in.b.value : in.a.value;
    switch (in.op) {
      case Op::Add: steps.push_back({K::Linear, 1, c}); break;
      case Op::Mul: steps.push_back({K::Linear, c, 0}); break;
      case Op::Sub: steps.push_back(prev_first ? EpilogueStep{K::Linear, 1, -c} : EpilogueStep{K::Linear, -1, c}); break;
      case Op::Div:
        if (!prev_first || c == 0) return std::nullopt;
        steps.push_back({K::Linear, 1 / c, 0});
        break;
      case Op::Max: steps.push_back({K::Clip, c, kMax}); break;
      case Op::Min: steps.push_back({K::Clip, -kMax, c}); break;
      case Op::LeakyRelu:
        if (!prev_first) return std::nullopt;
        steps.push_back({K::Relu, c, 0});
        break;
      default: return std::nullopt;
    }
  }
  return steps;
}

QuantizedProductArgs quantized_product_args(const KernelContext& ctx, int64_t channels, int bias_index) {
  QuantizedProductArgs a;
  a.x = &ctx.input(0);
  a.w = &ctx.input(3);
  if (!is_8bit(a.x->dtype())) fail("input 0 (X): expected uint8 or int8, got {}", a.x->describe());
  if (!is_8bit(a.w->dtype())) fail("input 3 (W): expected uint8 or int8, got {}", a.w->describe());
  a.x_scale = scalar_float(ctx, 1, "X_scale");
  a.x_zp = scalar_zero_point(ctx, 2, a.x->dtype(), "X_zero_point");

  const Tensor& ws = ctx.input(4);
  if (ws.dtype() != DType::Float32 || (ws.numel() != 1 && ws.numel() != channels)) {
    fail("input 4 (W_scale): expected 1 or {} (output channels) float32 values, got {}", channels, ws.describe());
  }
  a.w_scale = ws.to_vector<float>();
  for (float s : a.w_scale) {
    if (!(s > 0.0f) || !std::isfinite(s)) fail("input 4 (W_scale): expected positive finite scales, got {}", s);
  }
  if (ctx.has_input(5)) {
    const Tensor& wz = ctx.input(5);
    if (wz.dtype() != a.w->dtype() || (wz.numel() != 1 && wz.numel() != channels)) {
      fail("input 5 (W_zero_point): expected 1 or {} {} values like W, got {}", channels, dtype_name(a.w->dtype()),
           wz.describe());
    }
    for (int64_t v : wz.to_int64_vector()) a.w_zp.push_back(int32_t(v));
  } else {
    a.w_zp = {0};
  }

  // The output: ai.ingot's ops say its dtype; QLinearConv/QLinearMatMul take Y_zero_point's.
  if (ctx.has_attr("output_dtype") || ctx.def().find_attr("output_dtype")) {
    a.y_dtype = DType(ctx.attr_int("output_dtype"));
  } else {
    a.y_dtype = ctx.input(7).dtype();
  }
  if (!is_8bit(a.y_dtype) && a.y_dtype != DType::Float32) {
    fail("attribute 'output_dtype': expected uint8, int8 or float32, got {}", dtype_name(a.y_dtype));
  }
  if (a.quantized_output()) {
    if (!ctx.has_input(6) || !ctx.has_input(7)) fail("an 8-bit output needs Y_scale (input 6) and Y_zero_point (input 7)");
    a.y_scale = scalar_float(ctx, 6, "Y_scale");
    a.y_zp = scalar_zero_point(ctx, 7, a.y_dtype, "Y_zero_point");
  }

  if (bias_index >= 0 && ctx.has_input(size_t(bias_index))) {
    const Tensor& b = ctx.input(size_t(bias_index));
    if (b.dtype() != DType::Int32 || b.numel() != channels) {
      fail("input {} (B): expected int32[{}], got {}", bias_index, channels, b.describe());
    }
    a.bias = &b;
  }

  a.runtime_x = !ctx.input_is_constant(1) || (ctx.has_input(2) && !ctx.input_is_constant(2));
  if (ctx.def().domain == kIngotDomain && ctx.def().name == "QuantizedMatMul" && ctx.has_input(9)) {
    const Tensor& fb = ctx.input(9);
    if (fb.dtype() != DType::Float32 || fb.numel() != channels)
      fail("input 9 (float_bias): expected float32[{}], got {}", channels, fb.describe());
    if (a.quantized_output()) fail("input 9 (float_bias): only with a float32 output");
    a.float_bias = &fb;
  }
  if (ctx.has_attr("activation") || ctx.def().find_attr("activation")) {
    const std::string& act = ctx.attr_string("activation");
    if (act == "Relu") a.act = QuantActivation::Relu;
    else if (act == "HardSwish") a.act = QuantActivation::HardSwish;
    else if (act == "Sigmoid") a.act = QuantActivation::Sigmoid;
    else if (!act.empty()) fail("attribute 'activation': expected '', 'Relu', 'HardSwish' or 'Sigmoid', got '{}'", act);
  }
  using K = EpilogueStep::Kind;
  if (a.act == QuantActivation::Relu) a.steps.push_back({K::Relu, 0, 0});
  if (a.act == QuantActivation::HardSwish) a.steps.push_back({K::HardSwish, 0, 0});
  if (a.act == QuantActivation::Sigmoid) a.steps.push_back({K::Sigmoid, 0, 0});
  if (ctx.def().find_attr("epilogue") && !ctx.attr_string("epilogue").empty()) {
    auto steps = epilogue_steps(ctx.attr_string("epilogue"));
    if (!steps) {
      fail("attribute 'epilogue': '{}' is not a chain of unary ops and steps with constants over x0",
           ctx.attr_string("epilogue"));
    }
    a.steps.insert(a.steps.end(), steps->begin(), steps->end());
  }
  return a;
}

void quantized_residual_args(const KernelContext& ctx, const Shape& out_shape, QuantizedProductArgs& a) {
  if (!ctx.has_input(9)) return;
  const Tensor& r = ctx.input(9);
  if (r.shape() != out_shape) {
    fail("input 9 (R): expected the output's shape {}, got {}", shape_str(out_shape), r.describe());
  }
  a.residual = &r;
  a.residual_quantized = is_8bit(r.dtype());
  if (a.residual_quantized) {
    if (!ctx.has_input(10)) fail("input 9 (R) is {}: it needs R_scale (input 10)", dtype_name(r.dtype()));
    a.r_scale = scalar_float(ctx, 10, "R_scale");
    a.r_zp = scalar_zero_point(ctx, 11, r.dtype(), "R_zero_point");
  } else if (r.dtype() != DType::Float32) {
    fail("input 9 (R): expected uint8, int8 or float32, got {}", r.describe());
  }
}

double quantized_epilogue(const QuantizedProductArgs& a, int64_t c, int32_t acc, int64_t residual_index) {
  double real = double(a.x_scale) * double(a.w_scale_of(c)) * double(acc);
  if (a.float_bias) real += double(a.float_bias->data<float>()[c]);
  if (a.residual) {
    if (a.residual_quantized) {
      const double r = a.residual->dtype() == DType::UInt8 ? double(a.residual->data<uint8_t>()[residual_index])
                                                           : double(a.residual->data<int8_t>()[residual_index]);
      real += double(a.r_scale) * (r - double(a.r_zp));
    } else {
      real += double(a.residual->data<float>()[residual_index]);
    }
  }
  for (const EpilogueStep& s : a.steps) real = s.apply(real);
  if (!a.quantized_output()) return real;
  const double lo = a.y_dtype == DType::UInt8 ? 0.0 : -128.0, hi = a.y_dtype == DType::UInt8 ? 255.0 : 127.0;
  return std::clamp(std::nearbyint(real / double(a.y_scale)) + double(a.y_zp), lo, hi);
}

QConvGeometry quantized_conv_geometry(const KernelContext& ctx, const Tensor& x_in, const Tensor& w_in) {
  QConvGeometry g;
  g.nhwc = ctx.has_attr("layout") && ctx.attr_string("layout") == "NHWC";
  if (ctx.has_attr("layout") && !g.nhwc && ctx.attr_string("layout") != "NCHW")
    fail("attribute 'layout': expected 'NCHW' or 'NHWC', got '{}'", ctx.attr_string("layout"));
  if (x_in.rank() < 3 || x_in.rank() > 5)
    fail("input 0 (X): expected rank 3 to 5 ([N,C,spatial...]), got {}", x_in.describe());
  if (w_in.rank() != x_in.rank())
    fail("input 3 (W) {}: expected rank {} like X {}", w_in.describe(), x_in.rank(), x_in.describe());
  const Shape x = g.nhwc ? channels_first(x_in.shape()) : x_in.shape();
  const Shape w = g.nhwc ? channels_first(w_in.shape()) : w_in.shape();
  g.batch = x[0];
  g.channels = x[1];
  g.out_channels = w[0];
  g.group = ctx.attr_int("group");
  if (g.group < 1 || g.channels != w[1] * g.group || g.out_channels % g.group != 0) {
    fail("input 3 (W) {} does not fit X {} with group {}", w_in.describe(), x_in.describe(), g.group);
  }
  Ints kernel = spatial_dims(w);
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != kernel) {
    fail("attribute 'kernel_shape' {} does not match W {}", shape_str(ctx.attr_ints("kernel_shape")), w_in.describe());
  }
  g.win = resolve_window(ctx, spatial_dims(x), kernel);
  g.out_shape = {g.batch, g.out_channels};
  g.out_shape.insert(g.out_shape.end(), g.win.out.begin(), g.win.out.end());
  if (g.nhwc) g.out_shape = channels_last(g.out_shape);
  return g;
}

namespace {

// The 8-bit dtype of input `index`, and the requantization to `out_dtype` at scale
// `in_scale / out_scale` (`in_scale`: the input scales' product, over the count of a mean).
DType eight_bit_input(const KernelContext& ctx, size_t index, const char* name) {
  const Tensor& t = ctx.input(index);
  if (!is_8bit(t.dtype())) fail("input {} ({}): expected uint8 or int8, got {}", index, name, t.describe());
  return t.dtype();
}

Requantize requantize_to(DType out_dtype, double multiplier, int32_t zero_point) {
  Requantize r;
  r.multiplier = float(multiplier);
  if (!(r.multiplier > 0.0f) || !std::isfinite(r.multiplier))
    fail("the requantization multiplier {} (input scale / output scale) is not a positive finite float32", multiplier);
  r.zero_point = float(zero_point);
  r.lo = out_dtype == DType::UInt8 ? 0.0f : -128.0f;
  r.hi = out_dtype == DType::UInt8 ? 255.0f : 127.0f;
  return r;
}

}  // namespace

QuantizedMeanArgs quantized_mean_args(const KernelContext& ctx, const Tensor& x) {
  const DType dt = eight_bit_input(ctx, 0, "X");
  QuantizedMeanArgs a;
  a.axes = reduce_axes(x.shape(), ctx.has_attr("axes") ? ctx.attr_ints("axes") : std::vector<int64_t>{},
                       ctx.attr_int("keepdims") != 0, false);
  for (size_t d = 0; d < a.axes.reduced.size(); ++d) {
    if (a.axes.reduced[d]) a.count *= x.dim(int64_t(d));
  }
  if (a.count == 0) fail("input 0 (X) {}: the mean over an empty axis is undefined", x.describe());
  // |sum| <= 255 * count must fit the int32 accumulators.
  if (a.count > (int64_t(1) << 23)) fail("input 0 (X) {}: {} elements per mean exceed the int32 sum", x.describe(), a.count);
  const float x_scale = scalar_float(ctx, 1, "X_scale"), y_scale = scalar_float(ctx, 3, "Y_scale");
  a.x_zp = scalar_zero_point(ctx, 2, dt, "X_zero_point");
  a.rq = requantize_to(dt, double(x_scale) / (double(a.count) * double(y_scale)), scalar_zero_point(ctx, 4, dt, "Y_zero_point"));
  return a;
}

QuantizedMulArgs quantized_mul_args(const KernelContext& ctx) {
  const DType dt = eight_bit_input(ctx, 0, "A");
  if (eight_bit_input(ctx, 3, "B") != dt)
    fail("input 3 (B) {}: expected the dtype of input 0 (A) {}", ctx.input(3).describe(), ctx.input(0).describe());
  QuantizedMulArgs a;
  const float a_scale = scalar_float(ctx, 1, "A_scale"), b_scale = scalar_float(ctx, 4, "B_scale");
  const float c_scale = scalar_float(ctx, 6, "C_scale");
  a.a_zp = scalar_zero_point(ctx, 2, dt, "A_zero_point");
  a.b_zp = scalar_zero_point(ctx, 5, dt, "B_zero_point");
  a.rq = requantize_to(dt, double(a_scale) * double(b_scale) / double(c_scale), scalar_zero_point(ctx, 7, dt, "C_zero_point"));
  a.out_shape = broadcast_shapes({ctx.input(0).shape(), ctx.input(3).shape()});
  return a;
}

}  // namespace ingot::sem
