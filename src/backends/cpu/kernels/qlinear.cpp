// Integer products: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv and Ingot's fused
// QuantizedConv / QuantizedMatMul (dequantize -> product [+ residual] [-> activation] [-> quantize]
// as one kernel; the math is ops/semantics/quantized_args.h's).
//
// The quantized products run on oneDNN's int8 primitives (AVX-512 VNNI and AMX where the CPU has
// them): u8 or s8 activations with a runtime zero point, s8 weights reordered once into oneDNN's
// layout, the int32 bias added to the accumulator, per-channel output scales, the residual as a sum
// post-op (with its own scale and zero point), the activation as an eltwise post-op and the output's
// zero point, all inside the primitive, which writes the 8-bit output once. oneDNN 2.x applies the
// output scale after the bias, so the bias stays in QLinearConv's int32 units. Weights with a zero
// point are shifted to s8 when they fit; geometry oneDNN rejects, weights that do not fit and the
// integer-output ops run the reference loops below (exact int32 accumulation on zero-point-shifted
// operands, then the epilogue in double). On CPUs without a VNNI dot product, where oneDNN's int8
// kernels saturate (onednn_int8_exact), channels-last convolutions of one group or depthwise and the
// matrix products run qconv_int16.cpp's int16 kernels instead (INGOT_CPU_INT8_INT16), the rest the
// reference loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <limits>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <string_view>
#include <vector>

#include <ingot/ops.h>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/kernels/onednn_util.h"
#include "backends/cpu/kernels/qconv_int16.h"
#include "backends/cpu/kernels/qdepthwise.h"
#include "core/broadcast.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"
#include "ops/semantics/conv_geometry.h"
#include "ops/semantics/quantized_args.h"
#include "ops/semantics/window.h"
#include "profiler/hooks.h"

namespace ingot {
namespace {

using dnnl::memory;
using sem::QuantActivation;
using sem::QuantizedProductArgs;

// ---- Reference loops -------------------------------------------------------------------------

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
  if (!r.result.empty()) std::memcpy(y.data<int32_t>(), r.result.data(), r.result.size() * sizeof(int32_t));
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

void qlinear_matmul_reference(KernelContext& ctx) {
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

// out[p] = b + sum over k < kp of rows[p][k] w[k] for np rows of kp int16 values (kp a multiple of
// 16), exact in int32: four rows at a time share each 16 values of w (vpmaddwd: pairs of int16
// products summed into int32).
void dot_rows_int16(const int16_t* rows, int64_t np, const int16_t* w, int64_t kp, int32_t b, int32_t* out) {
  auto hsum = [](__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
  };
  int64_t p = 0;
  for (; p + 4 <= np; p += 4) {
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int16_t* r0 = rows + p * kp;
    for (int64_t k = 0; k < kp; k += 16) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + k)), wv));
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + kp + k)), wv));
      acc2 = _mm256_add_epi32(acc2,
                              _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + 2 * kp + k)), wv));
      acc3 = _mm256_add_epi32(acc3,
                              _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + 3 * kp + k)), wv));
    }
    out[p] = b + hsum(acc0);
    out[p + 1] = b + hsum(acc1);
    out[p + 2] = b + hsum(acc2);
    out[p + 3] = b + hsum(acc3);
  }
  for (; p < np; ++p) {
    __m256i acc = _mm256_setzero_si256();
    for (int64_t k = 0; k < kp; k += 16)
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + p * kp + k)),
                                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k))));
    out[p] = b + hsum(acc);
  }
}

struct IntConv {
  Shape out_shape;
  std::vector<int32_t> result;  // [N, M, spatial...]
  int64_t out_channels = 0, out_spatial = 0;
};

// N-D (up to 3 spatial axes) convolution of zero-point-shifted int32 operands; padding
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
  // The sums as products of int16 matrices (the shifted operands are within [-255, 255]): per image
  // and group, a block of output pixels gathers its windows into rows of K = icg x kvol values
  // (im2col, K padded to 16 with zeros), and each output is the dot product of such a row with the
  // output channel's weights, 16 pairs per vpmaddwd into int32 lanes (exact: no pair sum comes near
  // 2^31). The direct seven-deep loops this replaced made BlazeFace int8 136x slower than float32 on
  // CPUs without VNNI, where every int8 product came here before qconv_int16.cpp.
  const int64_t k = icg * kvol, kp = (k + 15) / 16 * 16;
  std::vector<int16_t> w16(size_t(out_channels * kp), 0);
  for (int64_t oc = 0; oc < out_channels; ++oc)
    for (int64_t i = 0; i < k; ++i) w16[size_t(oc * kp + i)] = int16_t(wi[size_t(oc * k + i)]);
  constexpr int64_t kBlock = 64;  // output pixels a task gathers and multiplies
  bool pointwise = kvol == 1;
  for (size_t i = 0; i < 3; ++i)
    pointwise = pointwise && win.strides[i] == 1 && win.pad_begin[i] == 0 && win.out[i] == win.in[i];
  const int64_t blocks = (r.out_spatial + kBlock - 1) / kBlock;
  parallel_for(batch * group * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<int16_t> cols(size_t(kBlock * kp));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t blk = t % blocks, ng = t / blocks, n = ng / group, g = ng % group;
      const int64_t p0 = blk * kBlock, np = std::min(kBlock, r.out_spatial - p0);
      std::fill(cols.begin(), cols.end(), int16_t(0));
      if (pointwise) {  // a 1x1 window over every pixel: the block's pixels of each input channel
        for (int64_t ic = 0; ic < icg; ++ic) {
          const int32_t* xp = xi.data() + (n * channels + g * icg + ic) * in_plane + p0;
          for (int64_t p = 0; p < np; ++p) cols[size_t(p * kp + ic)] = int16_t(xp[p]);
        }
      } else {
        for (int64_t p = 0; p < np; ++p) {
          const int64_t pix = p0 + p, ow = pix % win.out[2], oh = (pix / win.out[2]) % win.out[1],
                        od = pix / (win.out[2] * win.out[1]);
          int16_t* row = cols.data() + p * kp;
          for (int64_t ic = 0; ic < icg; ++ic) {
            const int32_t* xp = xi.data() + (n * channels + g * icg + ic) * in_plane;
            for (int64_t kd = 0; kd < win.kernel[0]; ++kd) {
              const int64_t id = od * win.strides[0] - win.pad_begin[0] + kd * win.dilations[0];
              if (id < 0 || id >= win.in[0]) continue;
              for (int64_t kh = 0; kh < win.kernel[1]; ++kh) {
                const int64_t ih = oh * win.strides[1] - win.pad_begin[1] + kh * win.dilations[1];
                if (ih < 0 || ih >= win.in[1]) continue;
                int16_t* dst = row + (ic * win.kernel[0] + kd) * win.kernel[1] * win.kernel[2] + kh * win.kernel[2];
                for (int64_t kw = 0; kw < win.kernel[2]; ++kw) {
                  const int64_t iw = ow * win.strides[2] - win.pad_begin[2] + kw * win.dilations[2];
                  if (iw >= 0 && iw < win.in[2]) dst[kw] = int16_t(xp[(id * win.in[1] + ih) * win.in[2] + iw]);
                }
              }
            }
          }
        }
      }
      for (int64_t j = 0; j < ocg; ++j) {
        const int64_t oc = g * ocg + j;
        const int16_t* wrow = w16.data() + oc * kp;
        const int32_t b = bias ? (*bias)[size_t(oc)] : 0;
        int32_t* out = r.result.data() + (n * out_channels + oc) * r.out_spatial + p0;
        dot_rows_int16(cols.data(), np, wrow, kp, b, out);
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
  if (!r.result.empty()) std::memcpy(y.data<int32_t>(), r.result.data(), r.result.size() * sizeof(int32_t));
}

// ---- oneDNN int8 primitives --------------------------------------------------------------------

memory::data_type dnnl_type(DType d) {
  switch (d) {
    case DType::UInt8: return memory::data_type::u8;
    case DType::Int8: return memory::data_type::s8;
    case DType::Int32: return memory::data_type::s32;
    default: return memory::data_type::f32;
  }
}

// Weights as s8 for oneDNN: W - W_zero_point[c] (c: the output channel of each element, `per_channel`
// consecutive elements each), or nothing when a shifted value leaves [-128, 127].
std::optional<std::vector<int8_t>> weights_as_s8(const QuantizedProductArgs& a, int64_t channels,
                                                 std::function<int64_t(int64_t)> channel_of) {
  const int64_t n = a.w->numel();
  std::vector<int8_t> out(static_cast<size_t>(n));
  bool fits = true;
  dispatch<DType::UInt8, DType::Int8>(a.w->dtype(), [&]<class Q>() {
    const Q* w = a.w->data<Q>();
    for (int64_t i = 0; i < n && fits; ++i) {
      const int32_t c = int32_t(channel_of(i));
      const int32_t v = int32_t(w[i]) - a.w_zp_of(c < channels ? c : 0);
      fits = v >= -128 && v <= 127;
      out[size_t(i)] = int8_t(v);
    }
  });
  if (!fits) return std::nullopt;
  return out;
}

// What a plan bakes in besides the shapes: the scales, zero points and epilogue.
struct QuantKey {
  Shape x_shape;
  DType x_dtype = DType::Undefined, y_dtype = DType::Undefined, r_dtype = DType::Undefined;
  float x_scale = 0, y_scale = 0, r_scale = 0;
  int32_t x_zp = 0, y_zp = 0, r_zp = 0;
  std::vector<float> w_scale;
  std::vector<std::tuple<int, float, float>> steps;
  bool operator==(const QuantKey&) const = default;

  static QuantKey of(const QuantizedProductArgs& a) {
    QuantKey k;
    k.x_shape = a.x->shape();
    k.x_dtype = a.x->dtype();
    k.y_dtype = a.y_dtype;
    k.r_dtype = a.residual ? a.residual->dtype() : DType::Undefined;
    // Activation parameters computed per call are runtime arguments of the primitive, not part of it.
    k.x_scale = a.runtime_x ? -1.0f : a.x_scale;
    k.y_scale = a.y_scale;
    k.r_scale = a.r_scale;
    k.x_zp = a.runtime_x ? -1 : a.x_zp;
    k.y_zp = a.y_zp;
    k.r_zp = a.r_zp;
    k.w_scale = a.w_scale;
    for (const sem::EpilogueStep& s : a.steps) k.steps.emplace_back(int(s.kind), s.a, s.b);
    return k;
  }
  // == of(a), without building it (every call looks its plan up: no allocation on that path).
  bool matches(const QuantizedProductArgs& a) const {
    if (x_shape != a.x->shape() || x_dtype != a.x->dtype() || y_dtype != a.y_dtype ||
        r_dtype != (a.residual ? a.residual->dtype() : DType::Undefined) ||
        x_scale != (a.runtime_x ? -1.0f : a.x_scale) || y_scale != a.y_scale || r_scale != a.r_scale ||
        x_zp != (a.runtime_x ? -1 : a.x_zp) || y_zp != a.y_zp || r_zp != a.r_zp || w_scale != a.w_scale ||
        steps.size() != a.steps.size())
      return false;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i] != std::tuple<int, float, float>(int(a.steps[i].kind), a.steps[i].a, a.steps[i].b)) return false;
    }
    return true;
  }
};

// The output scales, post-ops and zero points of one product. Relu commutes with a positive scale,
// so without another activation everything folds into the output scales (and the residual's sum
// scale); HardSwish and Sigmoid need the real value, so the division by Y_scale is a linear post-op
// after them.
// Relu and positive scalings commute with the division by Y_scale: those chains fold it into the
// output scales (and the residual's sum scale); others run on the real value and divide last.
bool homogeneous_steps(const QuantizedProductArgs& a) {
  using K = sem::EpilogueStep::Kind;
  bool homogeneous = !a.float_bias;
  for (const sem::EpilogueStep& s : a.steps)
    homogeneous &= (s.kind == K::Relu && s.a == 0) || (s.kind == K::Linear && s.a > 0 && s.b == 0);
  return homogeneous;
}
float output_divisor(const QuantizedProductArgs& a) {
  return a.quantized_output() && homogeneous_steps(a) ? a.y_scale : 1.0f;
}

dnnl::primitive_attr quant_attr(const QuantizedProductArgs& a, int64_t channels, int channel_dim) {
  using K = sem::EpilogueStep::Kind;
  const bool homogeneous = homogeneous_steps(a);
  const float out_div = output_divisor(a);
  std::vector<float> scales;
  const bool per_channel = a.w_scale.size() > 1;
  for (int64_t c = 0; c < (per_channel ? channels : 1); ++c) scales.push_back(a.x_scale * a.w_scale_of(c) / out_div);
  dnnl::primitive_attr attr;
  if (a.runtime_x) {
    // x_scale * w_scale[c] per call (run_quant_plan); the zero point too.
    attr.set_output_scales(per_channel ? (1 << channel_dim) : 0, {DNNL_RUNTIME_F32_VAL});
  } else {
    attr.set_output_scales(per_channel ? (1 << channel_dim) : 0, scales);
  }
  dnnl::post_ops ops;
  if (a.float_bias) {
    ops.append_binary(dnnl::algorithm::binary_add,
                      memory::desc({1, channels}, memory::data_type::f32, memory::format_tag::ab));
  }
  if (a.residual) {
    // The residual seeds the destination (same element size); a float one into a float output.
    const float rs = a.residual_quantized ? a.r_scale / out_div : 1.0f / out_div;
    ops.append_sum(rs, a.residual_quantized ? a.r_zp : 0, dnnl_type(a.residual->dtype()));
  }
  // Consecutive affine steps (and the final division by Y_scale) as one linear post-op, consecutive
  // clamps as one clamp: oneDNN 2.6's int8 convolutions compute two eltwise post-ops of the same kind
  // in a row wrongly (the second is lost; a unit test caught it). Other such pairs are refused.
  std::vector<sem::EpilogueStep> steps;
  for (const sem::EpilogueStep& s : a.steps) {
    sem::EpilogueStep* prev = steps.empty() ? nullptr : &steps.back();
    if (s.kind == K::Linear && prev && prev->kind == K::Linear) {
      *prev = {K::Linear, prev->a * s.a, prev->b * s.a + s.b};
    } else if (s.kind == K::Clip && prev && prev->kind == K::Clip) {
      const float lo = std::max(prev->a, s.a), hi = std::min(prev->b, s.b);
      const float constant = prev->b < s.a ? s.a : s.b;  // disjoint ranges: a constant
      *prev = lo <= hi ? sem::EpilogueStep{K::Clip, lo, hi} : sem::EpilogueStep{K::Clip, constant, constant};
    } else {
      if (prev && prev->kind == s.kind) throw dnnl::error(dnnl_unimplemented, "two eltwise post-ops of one kind");
      steps.push_back(s);
    }
  }
  if (!homogeneous && a.quantized_output()) {
    // The division by Y_scale goes back through the trailing clamps and ReLUs (a positive scale
    // commutes with them, a clamp's bounds scaled) into the affine step before them, or before them
    // all: oneDNN 2.6's int8 kernels also lose a second linear post-op with another between (a
    // HardSigmoid's affine, its clamp, then the division wrote gates in [0, 1] as the integers 0
    // and 1; `Quantize`'s squeeze-excitation networks caught it on a VNNI/AMX CPU).
    const float inv = 1.0f / a.y_scale;
    size_t k = steps.size();
    while (k > 0 && (steps[k - 1].kind == K::Clip || (steps[k - 1].kind == K::Relu && steps[k - 1].a == 0))) --k;
    for (size_t i = k; i < steps.size(); ++i) {
      if (steps[i].kind == K::Clip) steps[i] = {K::Clip, steps[i].a * inv, steps[i].b * inv};
    }
    if (k > 0 && steps[k - 1].kind == K::Linear) {
      steps[k - 1] = {K::Linear, steps[k - 1].a * inv, steps[k - 1].b * inv};
    } else {
      steps.insert(steps.begin() + long(k), sem::EpilogueStep{K::Linear, inv, 0});
    }
  }
  constexpr float kBound = 1e30f;
  for (const sem::EpilogueStep& s : steps) {
    switch (s.kind) {
      case K::Relu: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, s.a, 0.0f); break;
      case K::HardSwish: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f); break;
      case K::Sigmoid: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f); break;
      case K::Tanh: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f); break;
      case K::Exp: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_exp, 0.0f, 0.0f); break;
      case K::Abs: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_abs, 0.0f, 0.0f); break;
      case K::Sqrt: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_sqrt, 0.0f, 0.0f); break;
      case K::Linear: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, s.a, s.b); break;
      case K::Clip:
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, std::max(s.a, -kBound), std::min(s.b, kBound));
        break;
    }
  }
  attr.set_post_ops(ops);
  if (a.x_zp != 0 || a.runtime_x) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (a.quantized_output() && a.y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  return attr;
}

// One primitive with its weights in oneDNN's layout, for one key; activations are reordered per call
// only where oneDNN picked another layout than ours.
struct QuantPlan {
  QuantKey key;
  onednn::TensorKey w_key, b_key, fb_key;
  dnnl::primitive primitive;
  memory weights, bias;
  memory user_src, user_dst, src, dst;
  dnnl::reorder src_reorder, dst_reorder, residual_reorder;
  bool reorder_src = false, reorder_dst = false;
  memory src_zp, dst_zp;  // one s32 each (runtime zero points)
  memory scales;          // runtime output scales (activation parameters computed per call)
  memory float_bias;      // the binary post-op's [1, N] operand
  // The primitive's arguments: the same memory objects at every call (their data handles change),
  // so built at the first run and kept (a map per call cost a few allocations per node).
  std::unordered_map<int, memory> args;
};

struct QuantState {
  std::vector<std::unique_ptr<QuantPlan>> plans;  // most recent first
  bool unsupported = false;  // oneDNN refused this node's weights or geometry: reference loops
  static constexpr size_t kMaxPlans = 4;
  std::shared_ptr<cpu::Int16Product> int16;  // constant weights packed for the int16 kernels
};

// The node's int16 packing when W is a constant (kept across runs), else `scratch` (packed per call).
std::shared_ptr<cpu::Int16Product>& int16_packing(KernelContext& ctx, std::shared_ptr<cpu::Int16Product>& scratch) {
  return ctx.input_is_constant(3) ? ctx.state<QuantState>().int16 : scratch;
}

int64_t channels_of(const QuantizedProductArgs& a) { return int64_t(a.w_scale.size()); }

// Finishes a plan from its primitive descriptor's layouts: weights reordered once, activation
// memories and reorders, zero-point scalars.
void finish_plan(QuantPlan& plan, const QuantizedProductArgs& a, const memory::desc& user_w, const void* w_data,
                 const memory::desc& w_md, const memory::desc& src_md, const memory::desc& dst_md,
                 const memory::desc& user_src_md, const memory::desc& user_dst_md, const memory::desc& bias_md) {
  dnnl::engine& eng = onednn::engine();
  dnnl::stream stream(eng);
  {
    profiler::detail::PhaseScope phase("oneDNN weight reorder");
    memory user_w_mem(user_w, eng, const_cast<void*>(w_data));
    plan.weights = memory(w_md, eng);
    dnnl::reorder(user_w_mem, plan.weights).execute(stream, user_w_mem, plan.weights);
    stream.wait();
  }
  if (a.bias) {
    plan.bias = memory(bias_md, eng);
    std::memcpy(plan.bias.get_data_handle(), a.bias->raw_data(), a.bias->nbytes());
  }
  plan.user_src = memory(user_src_md, eng, DNNL_MEMORY_NONE);
  plan.user_dst = memory(user_dst_md, eng, DNNL_MEMORY_NONE);
  plan.src = plan.user_src;
  plan.dst = plan.user_dst;
  plan.reorder_src = src_md != user_src_md;
  plan.reorder_dst = dst_md != user_dst_md;
  if (plan.reorder_src) {
    plan.src = memory(src_md, eng);
    plan.src_reorder = dnnl::reorder(plan.user_src, plan.src);
  }
  if (plan.reorder_dst) {
    plan.dst = memory(dst_md, eng);
    plan.dst_reorder = dnnl::reorder(plan.dst, plan.user_dst);
    if (a.residual) plan.residual_reorder = dnnl::reorder(plan.user_dst, plan.dst);
  }
  const memory::desc zp_md({1}, memory::data_type::s32, memory::format_tag::x);
  plan.src_zp = memory(zp_md, eng);
  plan.dst_zp = memory(zp_md, eng);
  *static_cast<int32_t*>(plan.src_zp.get_data_handle()) = a.x_zp;
  *static_cast<int32_t*>(plan.dst_zp.get_data_handle()) = a.y_zp;
  if (a.runtime_x) {
    const int64_t n = a.w_scale.size() > 1 ? channels_of(a) : 1;
    plan.scales = memory(memory::desc({n}, memory::data_type::f32, memory::format_tag::x), eng);
  }
  if (a.float_bias) {
    plan.float_bias = memory(memory::desc({1, a.float_bias->numel()}, memory::data_type::f32, memory::format_tag::ab), eng);
    std::memcpy(plan.float_bias.get_data_handle(), a.float_bias->raw_data(), a.float_bias->nbytes());
  }
}

void run_quant_plan(QuantPlan& plan, const QuantizedProductArgs& a, Tensor& y) {
  dnnl::engine& eng = onednn::engine();
  dnnl::stream stream(eng);
  plan.user_src.set_data_handle(const_cast<void*>(a.x->raw_data()));
  plan.user_dst.set_data_handle(y.raw_data());
  if (a.runtime_x) {
    auto* sc = static_cast<float*>(plan.scales.get_data_handle());
    const int64_t n = int64_t(plan.scales.get_desc().get_size() / sizeof(float));
    const float out_div = output_divisor(a);
    for (int64_t c = 0; c < n; ++c) sc[c] = a.x_scale * a.w_scale_of(c) / out_div;
    *static_cast<int32_t*>(plan.src_zp.get_data_handle()) = a.x_zp;
  }
  if (plan.reorder_src) plan.src_reorder.execute(stream, plan.user_src, plan.src);
  if (a.residual) {
    // The sum post-op accumulates into the destination: the residual goes there first.
    if (plan.reorder_dst) {
      memory user_r(plan.user_dst.get_desc(), eng, const_cast<void*>(a.residual->raw_data()));
      plan.residual_reorder.execute(stream, user_r, plan.dst);
    } else {
      const auto* r = static_cast<const uint8_t*>(a.residual->raw_data());
      auto* out = static_cast<uint8_t*>(y.raw_data());
      const int64_t bytes = int64_t(a.residual->nbytes());
      parallel_for(bytes, 1 << 16, [&](int64_t b, int64_t e) { std::memcpy(out + b, r + b, size_t(e - b)); });
    }
  }
  // (Which arguments exist follows from the plan's key: the same at every call of this plan.)
  std::unordered_map<int, memory>& args = plan.args;
  if (args.empty()) {
    args = {{DNNL_ARG_SRC, plan.src}, {DNNL_ARG_WEIGHTS, plan.weights}, {DNNL_ARG_DST, plan.dst}};
    if (plan.bias) args.emplace(DNNL_ARG_BIAS, plan.bias);
    if (a.x_zp != 0 || a.runtime_x) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, plan.src_zp);
    if (a.runtime_x) args.emplace(DNNL_ARG_ATTR_OUTPUT_SCALES, plan.scales);
    if (a.float_bias) args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, plan.float_bias);
    if (a.quantized_output() && a.y_zp != 0) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, plan.dst_zp);
  }
  plan.primitive.execute(stream, args);
  if (plan.reorder_dst) plan.dst_reorder.execute(stream, plan.dst, plan.user_dst);
  stream.wait();
}

// Whether oneDNN's int8 kernels compute exactly on this CPU. Without a VNNI dot product (AVX2, or
// AVX-512 without VNNI: AMD's Zen 2/3, Intel before Cascade Lake) they multiply u8 by s8 with
// vpmaddubsw, which adds each pair of products into int16 with saturation (255 * 127 * 2 > 2^15;
// oneDNN's "Nuances of int8 computations" documents it): outputs off by many steps, silently (the
// float64-reference tests of QuantizedConv fail on such a CPU). There the reference loops run
// instead (exact, slower).
bool onednn_int8_exact() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool exact = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // CPUID leaf 7: ECX bit 11 AVX512_VNNI (usable with the OS's AVX-512 state); sub-leaf 1 EAX bit 4
    // AVX_VNNI. (Every CPU with AMX has AVX512_VNNI.)
    const bool avx512_vnni =
        __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) && __builtin_cpu_supports("avx512f");
    const bool avx_vnni = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) && __builtin_cpu_supports("avx2");
    return avx512_vnni || avx_vnni;
  }();
  return exact;
#else
  return true;
#endif
}

// The cached plan for this call, built by `build` when missing (nullptr: the reference loops).
// Plans hold reordered weights: kept across runs only while W (and B) are the same constants.
template <class Build>
QuantPlan* find_quant_plan(KernelContext& ctx, const QuantizedProductArgs& a, int bias_index, Build build) {
  auto& state = ctx.state<QuantState>();
  if (state.unsupported || !onednn_int8_exact()) return nullptr;
  auto& plans = state.plans;
  if (!ctx.input_is_constant(3) || (a.bias && !ctx.input_is_constant(size_t(bias_index))) ||
      (a.float_bias && !ctx.input_is_constant(9)))
    plans.clear();
  for (size_t i = 0; i < plans.size(); ++i) {
    QuantPlan& p = *plans[i];
    if (p.key.matches(a) && p.w_key.matches(*a.w) && (a.bias ? p.b_key.matches(*a.bias) : !p.bias) &&
        (a.float_bias ? p.fb_key.matches(*a.float_bias) : !p.float_bias)) {
      std::rotate(plans.begin(), plans.begin() + long(i), plans.begin() + long(i) + 1);
      return plans[0].get();
    }
  }
  if (!plans.empty() && !plans[0]->w_key.matches(*a.w)) plans.clear();
  std::unique_ptr<QuantPlan> plan;
  try {
    profiler::detail::PhaseScope phase("oneDNN int8 plan");
    plan = build();
  } catch (const dnnl::error&) {
    plan = nullptr;
  }
  if (!plan) {
    // Weights and geometry decide; other inputs with the same weights would be refused as well.
    if (ctx.input_is_constant(3)) state.unsupported = true;
    return nullptr;
  }
  plan->key = QuantKey::of(a);
  plan->w_key = onednn::TensorKey::of(*a.w);
  if (a.bias) plan->b_key = onednn::TensorKey::of(*a.bias);
  if (a.float_bias) plan->fb_key = onednn::TensorKey::of(*a.float_bias);
  plans.insert(plans.begin(), std::move(plan));
  if (plans.size() > QuantState::kMaxPlans) plans.pop_back();
  return plans[0].get();
}

// Whether the sum post-op can take this residual: it is reinterpreted in the destination's element size.
bool residual_fits_sum(const QuantizedProductArgs& a) {
  return !a.residual || dtype_size(a.residual->dtype()) == dtype_size(a.y_dtype);
}

// ---- Convolutions ------------------------------------------------------------------------------

// A channels-last activation as oneDNN sees it: logical NC(D)HW dims, channels-last strides.
memory::desc channels_last_desc(const memory::dims& dims, memory::data_type dt) {
  memory::dims strides(dims.size());
  const size_t r = dims.size();
  int64_t stride = 1;
  strides[1] = stride;
  stride *= dims[1];
  for (size_t i = r - 1; i >= 2; --i) {
    strides[i] = stride;
    stride *= dims[i];
  }
  strides[0] = stride;
  return memory::desc(dims, dt, strides);
}

std::unique_ptr<QuantPlan> build_conv_plan(const sem::QConvGeometry& g, const QuantizedProductArgs& a) {
  if (!residual_fits_sum(a)) return nullptr;
  const int64_t per_oc = a.w->numel() / std::max<int64_t>(g.out_channels, 1);
  auto w8 = weights_as_s8(a, g.out_channels, [&](int64_t i) { return i / per_oc; });
  if (!w8) return nullptr;
  dnnl::engine& eng = onednn::engine();
  const Shape x_first = g.nhwc ? sem::channels_first(a.x->shape()) : a.x->shape();
  const Shape y_first = g.nhwc ? sem::channels_first(g.out_shape) : g.out_shape;
  const memory::dims src_dims = onednn::to_dims(x_first), dst_dims = onednn::to_dims(y_first);
  // Weights [g, oc/g, ic/g, k...] (grouped) or [oc, ic, k...]: plain, or with the input channels
  // innermost ([M, k..., C/g], channels last).
  const Ints kernel = g.nhwc ? Ints(a.w->shape().begin() + 1, a.w->shape().end() - 1) : sem::spatial_dims(a.w->shape());
  const int64_t ocg = g.out_channels / g.group, icg = g.channels / g.group, kvol = shape_numel(kernel);
  memory::dims w_dims, w_strides;
  if (g.group > 1) {
    w_dims.push_back(g.group);
    w_strides.push_back(ocg * icg * kvol);
  }
  w_dims.push_back(ocg);
  w_strides.push_back(icg * kvol);
  w_dims.push_back(icg);
  w_strides.push_back(g.nhwc ? 1 : kvol);
  int64_t k_stride = g.nhwc ? icg * kvol : kvol;
  for (int64_t k : kernel) {
    w_dims.push_back(k);
    k_stride /= k;
    w_strides.push_back(k_stride);
  }
  const memory::desc user_w(w_dims, memory::data_type::s8, w_strides);
  const memory::data_type dst_dt = dnnl_type(a.y_dtype), src_dt = dnnl_type(a.x->dtype());
  // Channels last is what oneDNN's int8 convolutions compute on: given so, nothing is reordered.
  const memory::desc user_src = g.nhwc ? channels_last_desc(src_dims, src_dt) : onednn::plain_desc(src_dims, src_dt);
  const memory::desc user_dst = g.nhwc ? channels_last_desc(dst_dims, dst_dt) : onednn::plain_desc(dst_dims, dst_dt);
  const memory::desc src_any = g.nhwc ? user_src : memory::desc(src_dims, src_dt, memory::format_tag::any);
  const memory::desc dst_any = g.nhwc ? user_dst : memory::desc(dst_dims, dst_dt, memory::format_tag::any);
  const memory::desc w_any(w_dims, memory::data_type::s8, memory::format_tag::any);
  const memory::desc b_md({g.out_channels}, memory::data_type::s32, memory::format_tag::x);
  memory::dims strides, dilations, pad_begin, pad_end;
  for (size_t i = 0; i < g.win.in.size(); ++i) {
    strides.push_back(g.win.strides[i]);
    dilations.push_back(g.win.dilations[i] - 1);
    pad_begin.push_back(g.win.pad_begin[i]);
    pad_end.push_back(g.win.pad_end[i]);
  }
  auto d = a.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src_any, w_any, b_md, dst_any,
                                                    strides, dilations, pad_begin, pad_end)
                  : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                    dnnl::algorithm::convolution_direct, src_any, w_any, dst_any,
                                                    strides, dilations, pad_begin, pad_end);
  dnnl::convolution_forward::primitive_desc pd(d, quant_attr(a, g.out_channels, 1), eng);
  // On CPUs with AMX, oneDNN's first choice for a 1x1 int8 convolution is an AMX kernel that costs
  // ~40-60 us more per call than its VNNI one at the sizes of mobile detectors and OCR models (each
  // of BlazeFace's and PP-OCR det's 1x1 layers, measured one by one with ONEDNN_VERBOSE on this
  // machine: docs/QUANTIZATION.md), and so is it for a first layer of 3 input channels; its AMX
  // kernels for larger windows over many channels are the faster ones (3x3 over 96 channels: 2.4x).
  // So those two kinds take oneDNN's next implementation that is not AMX.
  // Among the rest, for 1x1 windows oneDNN 2.6 lists its brgemm kernel (brgconv_1x1) before its older
  // jit_int8_1x1, which was as fast or faster on every int8 1x1 layer of BlazeFace front and back
  // and PP-OCR det on an AMD EPYC with AVX-512 VNNI (48 shapes, ONEDNN_VERBOSE; 24 -> 24 channels at
  // 128x128: 0.139 -> 0.115 ms; 0.52 ms of BlazeFace back's 3.8): 1x1 windows take jit_int8_1x1 where
  // oneDNN offers it.
  auto named = [](const dnnl::primitive_desc& p, std::string_view what) {
    return std::string_view(p.impl_info_str()).find(what) != std::string_view::npos;
  };
  auto first_where = [&](auto wanted) {
    dnnl::convolution_forward::primitive_desc other(d, quant_attr(a, g.out_channels, 1), eng);
    do {
      if (wanted(other)) {
        pd = other;
        return true;
      }
    } while (other.next_impl());
    return false;
  };
  const bool taken = kvol == 1 && first_where([&](const auto& p) { return named(p, "jit_int8_1x1"); });
  if (!taken && (kvol == 1 || icg < 16) && named(pd, "amx")) first_where([&](const auto& p) { return !named(p, "amx"); });
  auto plan = std::make_unique<QuantPlan>();
  plan->primitive = dnnl::convolution_forward(pd);
  finish_plan(*plan, a, user_w, w8->data(), pd.weights_desc(), pd.src_desc(), pd.dst_desc(), user_src, user_dst, b_md);
  return plan;
}

std::vector<int32_t> shifted_w_of(const QuantizedProductArgs& a) {
  std::vector<int64_t> zp(a.w_zp.begin(), a.w_zp.end());
  return shifted_w(*a.w, zp, 5);
}

void quantized_conv_reference(const KernelContext& ctx, const sem::QConvGeometry& g, const QuantizedProductArgs& a,
                              Tensor& y) {
  std::vector<int32_t> xi = shifted_int32(*a.x, {a.x_zp}, [](int64_t) { return 0; });
  std::vector<int32_t> bias;
  if (a.bias) bias = a.bias->to_vector<int32_t>();
  IntConv r = int_conv(ctx, *a.x, xi, *a.w, shifted_w_of(a), bias.empty() ? nullptr : &bias);
  const int64_t spatial = r.out_spatial, oc = r.out_channels;
  // The epilogue (in double) in parallel: it was a quarter of these loops' time.
  parallel_for(int64_t(r.result.size()), 4096, [&](int64_t begin, int64_t end) {
    sem::write_quantized_output(a, r.result, y, [&](int64_t i) { return (i / spatial) % oc; }, begin, end);
  });
}

// QuantizedConv, and QLinearConv (its first nine inputs).
void quantized_conv(KernelContext& ctx) {
  const Tensor& w = ctx.input(3);
  const sem::QConvGeometry g = sem::quantized_conv_geometry(ctx, ctx.input(0), w);
  QuantizedProductArgs a = sem::quantized_product_args(ctx, g.out_channels, 8);
  sem::quantized_residual_args(ctx, g.out_shape, a);
  Tensor& y = ctx.allocate(0, a.y_dtype, g.out_shape);
  if (y.numel() == 0) return;
  if (cpu::int8_depthwise_3x3(g, a, y)) return;
  if (cpu::int16_products_wanted(onednn_int8_exact())) {
    std::shared_ptr<cpu::Int16Product> scratch;
    if (cpu::int16_conv(g, a, int16_packing(ctx, scratch), y)) return;
  }
  if (QuantPlan* plan = find_quant_plan(ctx, a, 8, [&] { return build_conv_plan(g, a); })) {
    run_quant_plan(*plan, a, y);
    return;
  }
  if (g.nhwc) {
    // The channels-first op on transposed copies.
    const size_t rank = a.x->rank();
    const Ints first = sem::to_channels_first_perm(rank);
    std::vector<Tensor> in;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      Tensor t = ctx.has_input(i) ? ctx.input(i) : Tensor();
      if ((i == 0 || i == 3 || i == 9) && t.defined()) t = ops::transpose(t, first);
      in.push_back(t);
    }
    Attributes attrs = ctx.attrs();
    attrs["layout"] = Attribute(std::string("NCHW"));
    Tensor first_y = ops::call("QuantizedConv", in, attrs, 1, kIngotDomain).at(0);
    copy_tensor(ops::transpose(first_y, sem::to_channels_last_perm(rank)), y);
    return;
  }
  quantized_conv_reference(ctx, g, a, y);
}

// ---- Matrix products ---------------------------------------------------------------------------

// A [..., K] (rows flattened) times a constant 2-D B [K, N].
std::unique_ptr<QuantPlan> build_matmul_plan(const QuantizedProductArgs& a, int64_t m, int64_t k, int64_t n) {
  auto w8 = weights_as_s8(a, n, [&](int64_t i) { return i % n; });
  if (!w8) return nullptr;
  dnnl::engine& eng = onednn::engine();
  const memory::data_type src_dt = dnnl_type(a.x->dtype()), dst_dt = dnnl_type(a.y_dtype);
  const memory::desc src_md = onednn::plain_desc({m, k}, src_dt), dst_md = onednn::plain_desc({m, n}, dst_dt);
  const memory::desc user_w = onednn::plain_desc({k, n}, memory::data_type::s8);
  const memory::desc w_any({k, n}, memory::data_type::s8, memory::format_tag::any);
  const memory::desc b_md({1, n}, memory::data_type::s32, memory::format_tag::ab);
  auto d = a.bias ? dnnl::matmul::desc(src_md, w_any, b_md, dst_md) : dnnl::matmul::desc(src_md, w_any, dst_md);
  dnnl::matmul::primitive_desc pd(d, quant_attr(a, n, 1), eng);
  auto plan = std::make_unique<QuantPlan>();
  plan->primitive = dnnl::matmul(pd);
  finish_plan(*plan, a, user_w, w8->data(), pd.weights_desc(), pd.src_desc(), pd.dst_desc(), src_md, dst_md, b_md);
  return plan;
}

void quantized_matmul_reference(const QuantizedProductArgs& a, int64_t m, int64_t n, Tensor& y) {
  std::vector<int32_t> ai = shifted_int32(*a.x, {a.x_zp}, [](int64_t) { return 0; });
  std::vector<int64_t> zp(a.w_zp.begin(), a.w_zp.end());
  std::vector<int32_t> bi = shifted_b(*a.w, zp, 5);
  IntMatMul r = int_matmul(ai, {m, a.x->dim(-1)}, bi, a.w->shape());
  if (a.bias) {
    const int32_t* b = a.bias->data<int32_t>();
    for (size_t i = 0; i < r.result.size(); ++i) r.result[i] += b[i % size_t(n)];
  }
  sem::write_quantized_output(a, r.result, y, [&](int64_t i) { return i % n; });
}

// QuantizedMatMul, and QLinearMatMul with a 2-D B and per-tensor A parameters (others: the general
// reference, which also takes per-row A scales and batched B).
void quantized_matmul(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const bool onnx_op = ctx.def().domain != kIngotDomain;
  if (onnx_op && (w.rank() != 2 || x.rank() < 1 || ctx.input(1).numel() != 1 ||
                  (ctx.has_input(2) && ctx.input(2).numel() != 1))) {
    qlinear_matmul_reference(ctx);
    return;
  }
  if (w.rank() != 2) fail("input 3 (B): expected a 2-D [K, N] weight, got {}", w.describe());
  if (x.rank() < 1 || x.dim(-1) != w.dim(0)) {
    fail("inner dimensions differ: A {} and B {}", x.describe(), w.describe());
  }
  const int64_t k = w.dim(0), n = w.dim(1), m = x.numel() / std::max<int64_t>(k, 1);
  QuantizedProductArgs a = sem::quantized_product_args(ctx, n, onnx_op ? -1 : 8);
  Shape out_shape = x.shape();
  if (x.rank() == 1) out_shape = {n};
  else out_shape.back() = n;
  Tensor& y = ctx.allocate(0, a.y_dtype, out_shape);
  if (y.numel() == 0) return;
  if (k > 0 && cpu::int16_products_wanted(onednn_int8_exact())) {
    std::shared_ptr<cpu::Int16Product> scratch;
    cpu::int16_matmul(a, m, k, n, int16_packing(ctx, scratch), y);
    return;
  }
  if (k > 0) {
    if (QuantPlan* plan = find_quant_plan(ctx, a, 8, [&] { return build_matmul_plan(a, m, k, n); })) {
      run_quant_plan(*plan, a, y);
      return;
    }
  }
  quantized_matmul_reference(a, m, n, y);
}

}  // namespace

// Typed per variable of ONNX's signatures: activations and weights are 8-bit of either sign,
// QLinearConv's bias int32.
#define INGOT_INT8 DType::UInt8, DType::Int8
INGOT_CPU_KERNEL(MatMulInteger, matmul_integer).versions(10).types("T1", {INGOT_INT8}).types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(QLinearMatMul, quantized_matmul).versions(10).types("T1", {INGOT_INT8}).types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(ConvInteger, conv_integer).versions(10).types("T1", {INGOT_INT8}).types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(QLinearConv, quantized_conv)
    .versions(10)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8})
    .types("T4", {DType::Int32});
INGOT_CPU_KERNEL(QuantizedConv, quantized_conv)
    .domain(kIngotDomain)
    .versions(1)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8});
INGOT_CPU_KERNEL(QuantizedMatMul, quantized_matmul)
    .domain(kIngotDomain)
    .versions(1)
    .types("T1", {INGOT_INT8})
    .types("T2", {INGOT_INT8});
#undef INGOT_INT8

}  // namespace ingot
