// Quantization kernels: QuantizeLinear / DequantizeLinear (per tensor and per axis),
// DynamicQuantizeLinear, and the integer (MatMulInteger, ConvInteger) and quantized-linear
// (QLinearMatMul, QLinearConv) products. Products accumulate exactly in int32 on zero-point-shifted
// operands; requantization multiplies by the combined scale in double and rounds half to even,
// matching the ONNX reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

constexpr int64_t kGrain = 1 << 14;

// Quantized storage types accepted for zero points and quantized data.
#define INGOT_QUANT_TYPES DType::UInt8, DType::Int8, DType::UInt16, DType::Int16

// Splits `shape` around `axis` for per-axis parameters: outer x channels x inner.
struct AxisSplit {
  int64_t outer = 1, channels = 1, inner = 1;
};

AxisSplit split_at(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < int64_t(shape.size()); ++i) {
    if (i < axis)
      s.outer *= shape[size_t(i)];
    else if (i == axis)
      s.channels = shape[size_t(i)];
    else
      s.inner *= shape[size_t(i)];
  }
  return s;
}

// Scale and zero point of a (de)quantization, expanded to one value per channel of `split`.
struct QuantParams {
  AxisSplit split;
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
};

// Validates input `scale_index` (and the optional zero point after it) against x: a scalar (or one
// element) means per tensor; a 1-D tensor of x.dim(axis) values means per axis (opset >= 13).
QuantParams quant_params(const KernelContext& ctx, const Tensor& x, size_t scale_index) {
  if (ctx.attr_int("block_size") != 0) fail("attribute 'block_size': blocked quantization is not supported");
  const Tensor& scale = ctx.input(scale_index);
  if (!is_floating(scale.dtype())) {
    fail("input {} (scale): expected a float tensor, got {}", scale_index, scale.describe());
  }
  QuantParams p;
  const bool per_tensor = scale.numel() == 1 && scale.rank() <= 1;
  if (per_tensor) {
    p.split.inner = x.numel();
  } else {
    if (ctx.opset() < 13) {
      fail("input {} (scale): opset {} takes a scalar scale, got {}", scale_index, ctx.opset(), scale.describe());
    }
    if (scale.rank() != 1)
      fail("input {} (scale): expected a scalar or 1-D tensor, got {}", scale_index, scale.describe());
    int64_t axis = normalize_axis(ctx.attr_int("axis"), x.rank(), "attribute 'axis'");
    p.split = split_at(x.shape(), axis);
    if (scale.dim(0) != p.split.channels) {
      fail("input {} (scale) {}: expected {} values for axis {} of x {}", scale_index, scale.describe(),
           p.split.channels, axis, shape_str(x.shape()));
    }
  }
  p.scale = sem::to_vector_as<float>(scale);
  p.zero_point.assign(p.scale.size(), 0);
  if (ctx.has_input(scale_index + 1)) {
    const Tensor& zp = ctx.input(scale_index + 1);
    if (zp.shape() != scale.shape() && !(zp.numel() == 1 && per_tensor)) {
      fail("input {} (zero_point) {}: expected the shape of the scale {}", scale_index + 1, zp.describe(),
           scale.describe());
    }
    p.zero_point = zp.to_int64_vector();
  }
  return p;
}

template <class Q>
void quantize_loop(const float* x, Q* y, const QuantParams& p) {
  constexpr float lo = float(std::numeric_limits<Q>::lowest()), hi = float(std::numeric_limits<Q>::max());
  const int64_t rows = p.split.outer * p.split.channels, inner = p.split.inner;
  if (rows * inner == 0) return;
  parallel_for(rows * inner, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin / inner; row * inner < end; ++row) {
      const size_t c = size_t(row % p.split.channels);
      const float s = p.scale[c], zp = float(p.zero_point[c]);
      const int64_t b = std::max(begin, row * inner), e = std::min(end, (row + 1) * inner);
      for (int64_t i = b; i < e; ++i) {
        // nearbyint rounds half to even in the default rounding mode; NaN maps to the zero point.
        float q = std::nearbyint(x[i] / s);
        q = (q == q ? q : 0.0f) + zp;
        y[i] = Q(q < lo ? lo : (q > hi ? hi : q));
      }
    }
  });
}

void quantize_linear(KernelContext& ctx) {
  const Tensor& x_in = ctx.input(0);
  if (!is_floating(x_in.dtype()) && x_in.dtype() != DType::Int32) {
    fail("input 0 (x): expected a float or int32 tensor, got {}", x_in.describe());
  }
  const Tensor x = x_in.dtype() == DType::Float32 ? x_in : x_in.cast(DType::Float32);
  QuantParams p = quant_params(ctx, x, 1);
  DType out_dtype = DType::UInt8;
  if (ctx.has_input(2)) {
    out_dtype = ctx.input(2).dtype();
  } else if (ctx.attr_int("output_dtype") != 0) {
    out_dtype = DType(ctx.attr_int("output_dtype"));
  }
  Tensor& y = ctx.allocate(0, out_dtype, x.shape());
  dispatch<INGOT_QUANT_TYPES>(out_dtype, [&]<class Q>() { quantize_loop<Q>(x.data<float>(), y.data<Q>(), p); });
}

void dequantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  QuantParams p = quant_params(ctx, x, 1);
  if (ctx.has_input(2) && ctx.input(2).dtype() != x.dtype()) {
    fail("input 2 (x_zero_point): expected dtype {} like x, got {}", dtype_name(x.dtype()), ctx.input(2).describe());
  }
  Tensor yf = Tensor::empty(DType::Float32, x.shape());
  float* y = yf.data<float>();
  const int64_t rows = p.split.outer * p.split.channels, inner = p.split.inner;
  dispatch<INGOT_QUANT_TYPES, DType::Int32>(x.dtype(), [&]<class Q>() {
    if (rows * inner == 0) return;
    const Q* xs = x.data<Q>();
    parallel_for(rows * inner, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin / inner; row * inner < end; ++row) {
        const size_t c = size_t(row % p.split.channels);
        const float s = p.scale[c], zp = float(p.zero_point[c]);
        const int64_t b = std::max(begin, row * inner), e = std::min(end, (row + 1) * inner);
        for (int64_t i = b; i < e; ++i) y[i] = (float(xs[i]) - zp) * s;
      }
    });
  });
  // The output takes the scale's dtype (float16/bfloat16 scales from opset 19).
  DType out_dtype = ctx.input(1).dtype();
  ctx.set_output(0, out_dtype == DType::Float32 ? yf : yf.cast(out_dtype));
}

void dynamic_quantize_linear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32) fail("input 0 (x): expected float32, got {}", x.describe());
  const float* xs = x.data<float>();
  const int64_t n = x.numel();
  // The range always includes 0 so that 0 is exactly representable.
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, xs[i]);
    hi = std::max(hi, xs[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  float zp = 0.0f;
  if (scale > 0.0f) zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  Tensor& y = ctx.allocate(0, DType::UInt8, x.shape());
  QuantParams p;
  p.split.inner = n;
  p.scale = {scale > 0.0f ? scale : 1.0f};  // an all-zero input quantizes to zeros
  p.zero_point = {int64_t(zp)};
  quantize_loop<uint8_t>(xs, y.data<uint8_t>(), p);
  ctx.allocate(1, DType::Float32, {}).data<float>()[0] = scale;
  ctx.allocate(2, DType::UInt8, {}).data<uint8_t>()[0] = uint8_t(zp);
}

// ---- Integer products -------------------------------------------------------------------------

// x as int32 with its zero point subtracted; element i uses zp[zp_index(i)].
template <class Index>
std::vector<int32_t> shifted_int32(const Tensor& x, const std::vector<int64_t>& zp, Index zp_index) {
  std::vector<int32_t> out(size_t(x.numel()));
  dispatch<DType::UInt8, DType::Int8>(x.dtype(), [&]<class Q>() {
    const Q* xs = x.data<Q>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = int32_t(xs[i]) - int32_t(zp[zp_index(int64_t(i))]);
  });
  return out;
}

std::vector<int64_t> zero_points(const KernelContext& ctx, size_t index, DType data_dtype, const char* name) {
  if (!ctx.has_input(index)) return {0};
  const Tensor& zp = ctx.input(index);
  if (zp.dtype() != data_dtype) {
    fail("input {} ({}): expected dtype {} like its data, got {}", index, name, dtype_name(data_dtype), zp.describe());
  }
  return zp.to_int64_vector();
}

void check_int8(const Tensor& t, size_t index, const char* name) {
  if (t.dtype() != DType::UInt8 && t.dtype() != DType::Int8) {
    fail("input {} ({}): expected uint8 or int8, got {}", index, name, t.describe());
  }
}

// An int32 matrix product with numpy MatMul semantics (1-D promotion, batch broadcasting).
struct IntMatMul {
  Shape out_shape;
  int64_t m = 1, k = 1, n = 1;
  std::vector<int32_t> result;
};

IntMatMul int_matmul(const std::vector<int32_t>& a, Shape as, const std::vector<int32_t>& b, Shape bs) {
  if (as.empty() || bs.empty())
    fail("MatMul operands must have rank >= 1, got {} and {}", shape_str(as), shape_str(bs));
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  IntMatMul r;
  r.m = as[as.size() - 2];
  r.k = as.back();
  r.n = bs.back();
  if (bs[bs.size() - 2] != r.k) fail("inner dimensions differ: A {} and B {}", shape_str(as), shape_str(bs));
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shapes({a_batch, b_batch});
  std::vector<int64_t> a_str = broadcast_strides(a_batch, batch), b_str = broadcast_strides(b_batch, batch);
  const int64_t nb = shape_numel(batch), m = r.m, k = r.k, n = r.n;
  r.result.assign(size_t(nb * m * n), 0);
  parallel_for(nb * m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t bi = row / m, i = row % m, a_off = 0, b_off = 0, rem = bi;
      for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
        int64_t coord = rem % batch[size_t(d)];
        rem /= batch[size_t(d)];
        a_off += coord * a_str[size_t(d)];
        b_off += coord * b_str[size_t(d)];
      }
      const int32_t* arow = a.data() + (a_off * m + i) * k;
      const int32_t* bmat = b.data() + b_off * k * n;
      int32_t* out = r.result.data() + row * n;
      for (int64_t p = 0; p < k; ++p) {
        const int32_t av = arow[p];
        const int32_t* brow = bmat + p * n;
        for (int64_t j = 0; j < n; ++j) out[j] += av * brow[j];
      }
    }
  });
  r.out_shape = batch;
  if (!a_vec) r.out_shape.push_back(m);
  if (!b_vec) r.out_shape.push_back(n);
  return r;
}

// A's zero point: one value, or one per row of A (shape [M] or [..., M, 1]).
std::vector<int32_t> shifted_a(const Tensor& a, const std::vector<int64_t>& zp, size_t index) {
  const int64_t k = a.dim(-1), rows = a.numel() / std::max<int64_t>(k, 1);
  const int64_t m = a.rank() >= 2 ? a.dim(-2) : 1;
  if (zp.size() == 1) return shifted_int32(a, zp, [](int64_t) { return 0; });
  if (int64_t(zp.size()) == m) return shifted_int32(a, zp, [&](int64_t i) { return (i / k) % m; });
  if (int64_t(zp.size()) == rows) return shifted_int32(a, zp, [&](int64_t i) { return i / k; });
  fail("input {} (a_zero_point): expected 1 or {} (rows of A {}) values, got {}", index, m, a.describe(), zp.size());
}

// B's zero point: one value, or one per column of B (shape [N] or [..., 1, N]).
std::vector<int32_t> shifted_b(const Tensor& b, const std::vector<int64_t>& zp, size_t index) {
  const int64_t n = b.rank() >= 2 ? b.dim(-1) : 1;
  const int64_t k = b.rank() >= 2 ? b.dim(-2) : b.dim(0);
  if (zp.size() == 1) return shifted_int32(b, zp, [](int64_t) { return 0; });
  if (int64_t(zp.size()) == n) return shifted_int32(b, zp, [&](int64_t i) { return i % n; });
  if (int64_t(zp.size()) * k == b.numel()) {
    return shifted_int32(b, zp, [&](int64_t i) { return (i / (k * n)) * n + i % n; });
  }
  fail("input {} (b_zero_point): expected 1 or {} (columns of B {}) values, got {}", index, n, b.describe(), zp.size());
}

void matmul_integer(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  check_int8(a, 0, "A");
  check_int8(b, 1, "B");
  std::vector<int32_t> ai = shifted_a(a, zero_points(ctx, 2, a.dtype(), "a_zero_point"), 2);
  std::vector<int32_t> bi = shifted_b(b, zero_points(ctx, 3, b.dtype(), "b_zero_point"), 3);
  IntMatMul r = int_matmul(ai, a.shape(), bi, b.shape());
  Tensor& y = ctx.allocate(0, DType::Int32, r.out_shape);
  std::memcpy(y.data<int32_t>(), r.result.data(), r.result.size() * sizeof(int32_t));
}

float scalar_scale(const KernelContext& ctx, size_t index, const char* name) {
  const Tensor& s = ctx.input(index);
  if (!is_floating(s.dtype()) || s.numel() != 1)
    fail("input {} ({}): expected one float value, got {}", index, name, s.describe());
  return float(s.item_double());
}

// Requantizes int32 accumulators: y = saturate(rint(acc * multiplier[c]) + y_zp), where c is the
// channel of each value (`channel(i)`).
template <class Channel>
void requantize(const std::vector<int32_t>& acc, const std::vector<float>& multiplier, const Tensor& y_zp, Tensor& y,
                Channel channel) {
  const double zp = double(y_zp.item_int());
  dispatch<DType::UInt8, DType::Int8>(y.dtype(), [&]<class Q>() {
    constexpr double lo = std::numeric_limits<Q>::lowest(), hi = std::numeric_limits<Q>::max();
    Q* out = y.data<Q>();
    for (size_t i = 0; i < acc.size(); ++i) {
      double v = std::nearbyint(double(acc[i]) * double(multiplier[size_t(channel(int64_t(i)))])) + zp;
      out[i] = Q(std::clamp(v, lo, hi));
    }
  });
}

// Combined scales a_scale[i] * b_scale[j] / y_scale, computed in float like the ONNX reference.
std::vector<float> per_channel_scales(const Tensor& s, int64_t channels, size_t index, const char* name) {
  if (!is_floating(s.dtype())) fail("input {} ({}): expected a float tensor, got {}", index, name, s.describe());
  std::vector<float> v = sem::to_vector_as<float>(s);
  if (v.size() == 1) return std::vector<float>(size_t(channels), v[0]);
  if (int64_t(v.size()) != channels) {
    fail("input {} ({}): expected 1 or {} values, got {}", index, name, channels, s.describe());
  }
  return v;
}

void qlinear_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  check_int8(a, 0, "a");
  check_int8(b, 3, "b");
  const Tensor& y_zp = ctx.input(7);
  check_int8(y_zp, 7, "y_zero_point");
  if (y_zp.numel() != 1) fail("input 7 (y_zero_point): expected one value, got {}", y_zp.describe());
  std::vector<int32_t> ai = shifted_a(a, zero_points(ctx, 2, a.dtype(), "a_zero_point"), 2);
  std::vector<int32_t> bi = shifted_b(b, zero_points(ctx, 5, b.dtype(), "b_zero_point"), 5);
  IntMatMul r = int_matmul(ai, a.shape(), bi, b.shape());
  // Per-row a_scale and per-column b_scale, flattened to one multiplier per (row, column).
  const int64_t m = r.m, n = r.n;
  std::vector<float> as = per_channel_scales(ctx.input(1), m, 1, "a_scale");
  std::vector<float> bs = per_channel_scales(ctx.input(4), n, 4, "b_scale");
  const float ys = scalar_scale(ctx, 6, "y_scale");
  std::vector<float> mult(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) mult[size_t(i * n + j)] = as[size_t(i)] * bs[size_t(j)] / ys;
  Tensor& y = ctx.allocate(0, y_zp.dtype(), r.out_shape);
  requantize(r.result, mult, y_zp, y, [&](int64_t i) { return i % (m * n); });
}

// ---- Integer convolution ----------------------------------------------------------------------

struct IntConv {
  Shape out_shape;
  std::vector<int32_t> result;  // [N, M, spatial...]
  int64_t out_channels = 0, out_spatial = 0;
};

// Direct N-D (up to 3 spatial axes) convolution of zero-point-shifted int32 operands; padding
// contributes zeros after the shift, i.e. padded pixels equal the input zero point.
IntConv int_conv(const KernelContext& ctx, const Tensor& x, const std::vector<int32_t>& xi, const Tensor& w,
                 const std::vector<int32_t>& wi, const std::vector<int32_t>* bias) {
  if (x.rank() < 3 || x.rank() > 5) fail("input 0 (x): expected rank 3 to 5 ([N,C,spatial...]), got {}", x.describe());
  if (w.rank() != x.rank()) fail("input (w) {}: expected rank {} like x {}", w.describe(), x.rank(), x.describe());
  const int64_t batch = x.dim(0), channels = x.dim(1), out_channels = w.dim(0), group = ctx.attr_int("group");
  if (group < 1 || channels != w.dim(1) * group || out_channels % group != 0) {
    fail("w {} does not fit x {} with group {}", w.describe(), x.describe(), group);
  }
  Ints kernel = sem::spatial_dims(w.shape());
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != kernel) {
    fail("attribute 'kernel_shape' {} does not match w {}", shape_str(ctx.attr_ints("kernel_shape")), w.describe());
  }
  const sem::Window spatial = sem::resolve_window(ctx, sem::spatial_dims(x.shape()), kernel);
  const sem::Window win = sem::to_3d(spatial);
  IntConv r;
  r.out_shape = {batch, out_channels};
  r.out_shape.insert(r.out_shape.end(), spatial.out.begin(), spatial.out.end());
  r.out_channels = out_channels;
  r.out_spatial = win.out[0] * win.out[1] * win.out[2];
  r.result.assign(size_t(batch * out_channels * r.out_spatial), 0);
  const int64_t icg = channels / group, ocg = out_channels / group;
  const int64_t in_plane = win.in[0] * win.in[1] * win.in[2], kvol = win.kernel[0] * win.kernel[1] * win.kernel[2];
  parallel_for(batch * out_channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / out_channels, oc = nm % out_channels, g = oc / ocg;
      int32_t* out = r.result.data() + nm * r.out_spatial;
      const int32_t b = bias ? (*bias)[size_t(oc)] : 0;
      for (int64_t od = 0; od < win.out[0]; ++od)
        for (int64_t oh = 0; oh < win.out[1]; ++oh)
          for (int64_t ow = 0; ow < win.out[2]; ++ow) {
            int32_t sum = b;
            for (int64_t ic = 0; ic < icg; ++ic) {
              const int32_t* xp = xi.data() + (n * channels + g * icg + ic) * in_plane;
              const int32_t* wp = wi.data() + (oc * icg + ic) * kvol;
              for (int64_t kd = 0; kd < win.kernel[0]; ++kd) {
                const int64_t id = od * win.strides[0] - win.pad_begin[0] + kd * win.dilations[0];
                if (id < 0 || id >= win.in[0]) continue;
                for (int64_t kh = 0; kh < win.kernel[1]; ++kh) {
                  const int64_t ih = oh * win.strides[1] - win.pad_begin[1] + kh * win.dilations[1];
                  if (ih < 0 || ih >= win.in[1]) continue;
                  for (int64_t kw = 0; kw < win.kernel[2]; ++kw) {
                    const int64_t iw = ow * win.strides[2] - win.pad_begin[2] + kw * win.dilations[2];
                    if (iw < 0 || iw >= win.in[2]) continue;
                    sum +=
                        xp[(id * win.in[1] + ih) * win.in[2] + iw] * wp[(kd * win.kernel[1] + kh) * win.kernel[2] + kw];
                  }
                }
              }
            }
            out[(od * win.out[1] + oh) * win.out[2] + ow] = sum;
          }
    }
  });
  return r;
}

// w's zero point: one value, or one per output channel.
std::vector<int32_t> shifted_w(const Tensor& w, const std::vector<int64_t>& zp, size_t index) {
  const int64_t per_channel = w.numel() / std::max<int64_t>(w.dim(0), 1);
  if (zp.size() == 1) return shifted_int32(w, zp, [](int64_t) { return 0; });
  if (int64_t(zp.size()) == w.dim(0)) return shifted_int32(w, zp, [&](int64_t i) { return i / per_channel; });
  fail("input {} (w_zero_point): expected 1 or {} (output channels) values, got {}", index, w.dim(0), zp.size());
}

std::vector<int32_t> shifted_x(const Tensor& x, const std::vector<int64_t>& zp, size_t index) {
  if (zp.size() != 1) fail("input {} (x_zero_point): expected one value, got {}", index, zp.size());
  return shifted_int32(x, zp, [](int64_t) { return 0; });
}

void conv_integer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  check_int8(x, 0, "x");
  check_int8(w, 1, "w");
  std::vector<int32_t> xi = shifted_x(x, zero_points(ctx, 2, x.dtype(), "x_zero_point"), 2);
  std::vector<int32_t> wi = shifted_w(w, zero_points(ctx, 3, w.dtype(), "w_zero_point"), 3);
  IntConv r = int_conv(ctx, x, xi, w, wi, nullptr);
  Tensor& y = ctx.allocate(0, DType::Int32, r.out_shape);
  std::memcpy(y.data<int32_t>(), r.result.data(), r.result.size() * sizeof(int32_t));
}

void qlinear_conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  check_int8(x, 0, "x");
  check_int8(w, 3, "w");
  const Tensor& y_zp = ctx.input(7);
  check_int8(y_zp, 7, "y_zero_point");
  if (y_zp.numel() != 1) fail("input 7 (y_zero_point): expected one value, got {}", y_zp.describe());
  std::vector<int32_t> xi = shifted_x(x, zero_points(ctx, 2, x.dtype(), "x_zero_point"), 2);
  std::vector<int32_t> wi = shifted_w(w, zero_points(ctx, 5, w.dtype(), "w_zero_point"), 5);
  std::vector<int32_t> bias;
  if (ctx.has_input(8)) {
    const Tensor& b = ctx.input(8);
    if (b.dtype() != DType::Int32 || b.numel() != w.dim(0)) {
      fail("input 8 (B): expected int32[{}], got {}", w.dim(0), b.describe());
    }
    bias = b.to_vector<int32_t>();
  }
  IntConv r = int_conv(ctx, x, xi, w, wi, bias.empty() ? nullptr : &bias);
  const float xs = scalar_scale(ctx, 1, "x_scale"), ys = scalar_scale(ctx, 6, "y_scale");
  std::vector<float> mult = per_channel_scales(ctx.input(4), r.out_channels, 4, "w_scale");
  for (float& v : mult) v = xs * v / ys;
  Tensor& y = ctx.allocate(0, y_zp.dtype(), r.out_shape);
  const int64_t spatial = r.out_spatial, oc = r.out_channels;
  requantize(r.result, mult, y_zp, y, [&](int64_t i) { return (i / spatial) % oc; });
}

}  // namespace

INGOT_CPU_KERNEL(QuantizeLinear, quantize_linear).versions(10);
INGOT_CPU_KERNEL(DequantizeLinear, dequantize_linear).versions(10);
INGOT_CPU_KERNEL(DynamicQuantizeLinear, dynamic_quantize_linear).versions(11).dtypes({DType::Float32});
// Typed per variable of ONNX's signatures: activations and weights are 8-bit of either sign,
// QLinearConv's bias int32.
#define INGOT_INT8 DType::UInt8, DType::Int8
INGOT_CPU_KERNEL(MatMulInteger, matmul_integer).versions(10).types("T1", {INGOT_INT8}).types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(QLinearMatMul, qlinear_matmul).versions(10).types("T1", {INGOT_INT8}).types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(ConvInteger, conv_integer).versions(10).types("T1", {INGOT_INT8}).types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(QLinearConv, qlinear_conv)
    .versions(10)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8})
    .types("T4", {DType::Int32});
#undef INGOT_INT8

}  // namespace ingot
