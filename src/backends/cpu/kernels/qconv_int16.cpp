// Int8 products on CPUs without a VNNI dot product (AVX2: AMD Zen 2/3, Intel before Cascade Lake).
//
// oneDNN's int8 kernels there multiply u8 by s8 with vpmaddubsw, which saturates pairs of products in
// int16 (onednn_int8_exact in qlinear.cpp), so Ingot cannot use them. Its exact reference loops
// (int_conv: channels first, im2col rows, a double epilogue per output) made BlazeFace front int8
// 12-15x slower than float32 on an AMD EPYC (Zen 3). Here the operands are widened to int16 with
// their zero points subtracted (each within [-255, 255]) and multiplied with vpmaddwd, which adds
// pairs of int16 products into int32 exactly: 16 multiply-adds an instruction, twice a float32
// FMA's 8, and Zen 3 issues two a clock.
//
// - Matrix products and convolutions of one group: C[m][n] = sum over k of A[m][k] W[k][n], A the
//   rows of X (a convolution's im2col rows, channels last: (kh, kw, c) as the OHWI weights), W packed
//   once per node into panels of 16 columns of int16 pairs [k/2][16][2]. A micro-kernel of 6 rows x
//   16 columns broadcasts a row's (k, k+1) pair and multiplies it with two vectors of the panel: 12
//   int32 accumulators. Blocks of rows (and, where they are few, groups of panels) in parallel.
// - Depthwise convolutions: per output pixel and 16 channels, taps t and t+1 interleaved (unpacklo/
//   hi) against the weights packed the same way, one vpmaddwd per 8 channels and two taps.
// - The requantization per 8 output columns in float32 as oneDNN computes it: (acc + B[c]) x x_scale
//   w_scale[c], the residual, the epilogue steps, a multiplication by 1 / Y_scale, rounding to
//   nearest even and saturation. An output may differ from the float64 reference by one step where
//   float32 lands on the other side of a rounding tie (what the tests allow oneDNN).
#include "backends/cpu/kernels/qconv_int16.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels/onednn_util.h"
#include "core/flags.h"
#include "core/thread_pool.h"

namespace ingot::cpu {

using sem::EpilogueStep;
using sem::QuantizedProductArgs;

namespace {

constexpr int64_t kPanel = 16;  // columns of a packed weight panel: two vectors of int32 sums
constexpr int kRows = 6;        // rows of the micro-kernel: 12 accumulators, 2 weight vectors, a broadcast

std::atomic<int64_t> g_calls{0};

// dst[i] = src[i] - zp as int16, for n bytes of an 8-bit tensor.
void widen(const void* src, bool is_signed, int32_t zp, int16_t* dst, int64_t n) {
  const __m256i z = _mm256_set1_epi16(int16_t(zp));
  int64_t i = 0;
  if (is_signed) {
    const int8_t* s = static_cast<const int8_t*>(src);
    for (; i + 16 <= n; i += 16) {
      const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_sub_epi16(v, z));
    }
    for (; i < n; ++i) dst[i] = int16_t(s[i] - zp);
  } else {
    const uint8_t* s = static_cast<const uint8_t*>(src);
    for (; i + 16 <= n; i += 16) {
      const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_sub_epi16(v, z));
    }
    for (; i < n; ++i) dst[i] = int16_t(s[i] - zp);
  }
}

// An 8-bit tensor's element i as an integer.
int32_t int_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::Int8 ? int32_t(t.data<int8_t>()[i]) : int32_t(t.data<uint8_t>()[i]);
}

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// ---- the requantization -------------------------------------------------------------------------

// The epilogue of QuantizedProductArgs for outputs laid out [rows, n] (channels last, or a matrix
// product's rows): per column the multiplier and bias, then per 8 columns of a row in float32.
class Epilogue {
 public:
  Epilogue(const QuantizedProductArgs& a, int64_t n) : a_(a), n_(n) {
    const int64_t np = round_up(n, kPanel);
    mult_.assign(size_t(np), 0.0f);
    bias_.assign(size_t(np), 0);
    fbias_.assign(size_t(np), 0.0f);
    for (int64_t c = 0; c < n; ++c) {
      mult_[size_t(c)] = float(double(a.x_scale) * double(a.w_scale_of(c)));
      if (a.bias) bias_[size_t(c)] = a.bias->data<int32_t>()[c];
      if (a.float_bias) fbias_[size_t(c)] = a.float_bias->data<float>()[c];
    }
    inv_ys_ = 1.0f / a.y_scale;
  }

  // Outputs of rows [r0, r0 + rows) and columns [c0, c1) from acc (acc[r * ld + c - c0], r counted
  // from r0; c0 and ld multiples of 16, c1 - c0 <= ld).
  void finish(const int32_t* acc, int64_t ld, int64_t r0, int64_t rows, int64_t c0, int64_t c1, Tensor& y) const {
    // The residual's and the output's types chosen once per call, not per vector.
    auto with_output = [&]<class R>(R*) {
      if (a_.y_dtype == DType::UInt8) finish_as<R, uint8_t>(acc, ld, r0, rows, c0, c1, y);
      else if (a_.y_dtype == DType::Int8) finish_as<R, int8_t>(acc, ld, r0, rows, c0, c1, y);
      else finish_as<R, float>(acc, ld, r0, rows, c0, c1, y);
    };
    if (!a_.residual) with_output(static_cast<std::nullptr_t*>(nullptr));
    else if (!a_.residual_quantized) with_output(static_cast<float*>(nullptr));
    else if (a_.residual->dtype() == DType::Int8) with_output(static_cast<int8_t*>(nullptr));
    else with_output(static_cast<uint8_t*>(nullptr));
  }

 private:
  // R: the residual's element type (nullptr_t: none); Y: the output's.
  template <class R, class Y>
  void finish_as(const int32_t* acc, int64_t ld, int64_t r0, int64_t rows, int64_t c0, int64_t c1, Tensor& y) const {
    const __m256i r_zp = _mm256_set1_epi32(a_.r_zp), y_zp = _mm256_set1_epi32(a_.y_zp);
    const __m256 r_scale = _mm256_set1_ps(a_.r_scale), inv_ys = _mm256_set1_ps(inv_ys_);
    const __m256 lo = _mm256_set1_ps(-1e6f), hi = _mm256_set1_ps(1e6f);
    const bool float_bias = a_.float_bias != nullptr;
    Y* out = y.data<Y>();
    const R* res = nullptr;
    if constexpr (!std::is_same_v<R, std::nullptr_t>) res = a_.residual->data<R>();
    // 8 columns from c of row r (cnt of them real: the residual is read for those alone).
    auto real8 = [&](const int32_t* a, int64_t row, int64_t c, int cnt) {
      const __m256i sum = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)),
                                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&bias_[size_t(c)])));
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_loadu_ps(&mult_[size_t(c)]));
      if (float_bias) v = _mm256_add_ps(v, _mm256_loadu_ps(&fbias_[size_t(c)]));
      if constexpr (std::is_same_v<R, float>) {
        if (cnt > 0) v = _mm256_add_ps(v, load8(res + row + c, cnt));
      } else if constexpr (!std::is_same_v<R, std::nullptr_t>) {
        if (cnt > 0) v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(widen8(res + row + c, cnt), r_zp)), r_scale, v);
      }
      return v;
    };
    // Rounded to nearest even (the default MXCSR mode); bounded first so that cvtps never sees a value
    // past int32 (it would return INT_MIN, saturating the wrong way).
    auto quantize = [&](__m256 v) {
      v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, inv_ys), lo), hi);
      return _mm256_add_epi32(_mm256_cvtps_epi32(v), y_zp);
    };
    // 16 columns a step (the acc rows, bias and multipliers are readable to the 16-column boundary).
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = (r0 + r) * n_;
      for (int64_t c = c0; c < c1; c += 16) {
        const int cnt = int(std::min<int64_t>(16, c1 - c));
        const int32_t* a = acc + r * ld + (c - c0);
        __m256 v0 = real8(a, row, c, std::min(cnt, 8)), v1 = real8(a + 8, row, c + 8, cnt - 8);
        for (const EpilogueStep& s : a_.steps) {
          v0 = step(s, v0);
          v1 = step(s, v1);
        }
        if constexpr (std::is_same_v<Y, float>) {
          store8(out + row + c, v0, std::min(cnt, 8));
          if (cnt > 8) store8(out + row + c + 8, v1, cnt - 8);
        } else {
          // packs_epi32 interleaves the two vectors' 128-bit halves: the permute restores column order.
          const __m256i h = _mm256_permute4x64_epi64(_mm256_packs_epi32(quantize(v0), quantize(v1)), 0xd8);
          const __m128i h0 = _mm256_castsi256_si128(h), h1 = _mm256_extracti128_si256(h, 1);
          const __m128i b = std::is_same_v<Y, uint8_t> ? _mm_packus_epi16(h0, h1) : _mm_packs_epi16(h0, h1);
          if (cnt == 16) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + row + c), b);
          } else {
            alignas(16) uint8_t t[16];
            _mm_store_si128(reinterpret_cast<__m128i*>(t), b);
            std::memcpy(out + row + c, t, size_t(cnt));
          }
        }
      }
    }
  }

  static __m256 load8(const float* p, int cnt) {
    if (cnt == 8) return _mm256_loadu_ps(p);
    alignas(32) float t[8] = {};
    std::memcpy(t, p, size_t(cnt) * sizeof(float));
    return _mm256_load_ps(t);
  }

  static void store8(float* p, __m256 v, int cnt) {
    if (cnt == 8) {
      _mm256_storeu_ps(p, v);
      return;
    }
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    std::memcpy(p, t, size_t(cnt) * sizeof(float));
  }

  template <class R>
  static __m256i widen8(const R* p, int cnt) {
    int64_t bytes = 0;
    if (cnt == 8) std::memcpy(&bytes, p, 8);
    else std::memcpy(&bytes, p, size_t(cnt));
    const __m128i b = _mm_cvtsi64_si128(bytes);
    return std::is_same_v<R, int8_t> ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  }

  static __m256 step(const EpilogueStep& s, __m256 v) {
    using K = EpilogueStep::Kind;
    const __m256 zero = _mm256_setzero_ps();
    switch (s.kind) {
      case K::Relu:
        if (s.a == 0) return _mm256_max_ps(v, zero);
        return _mm256_add_ps(_mm256_max_ps(v, zero), _mm256_mul_ps(_mm256_set1_ps(s.a), _mm256_min_ps(v, zero)));
      case K::Linear: return _mm256_fmadd_ps(_mm256_set1_ps(s.a), v, _mm256_set1_ps(s.b));
      case K::Clip: return _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(s.a)), _mm256_set1_ps(s.b));
      case K::HardSwish: {
        const __m256 g = _mm256_fmadd_ps(v, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
        return _mm256_mul_ps(v, _mm256_min_ps(_mm256_max_ps(g, zero), _mm256_set1_ps(1.0f)));
      }
      case K::Abs: return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
      case K::Sqrt: return _mm256_sqrt_ps(v);
      default: {  // Sigmoid, Tanh, Exp: lane by lane
        alignas(32) float t[8];
        _mm256_store_ps(t, v);
        for (float& x : t) x = float(s.apply(double(x)));
        return _mm256_load_ps(t);
      }
    }
  }

  const QuantizedProductArgs& a_;
  int64_t n_;
  std::vector<float> mult_, fbias_;
  std::vector<int32_t> bias_;
  float inv_ys_ = 1.0f;
};

// ---- packed weights -----------------------------------------------------------------------------

class Packed : public Int16Product {
 public:
  explicit Packed(const QuantizedProductArgs& a) : key_(onednn::TensorKey::of(*a.w)), zp_(a.w_zp) {}
  bool packs(const QuantizedProductArgs& a) const override { return key_.matches(*a.w) && zp_ == a.w_zp; }

 private:
  onednn::TensorKey key_;
  std::vector<int32_t> zp_;
};

// W [k][n] as panels of 16 columns of int16 pairs: panel p, pair j, column i, half t at
// ((p * pairs + j) * 16 + i) * 2 + t holds W[2j + t][16p + i] - zp (0 past k or n).
class PackedGemm : public Packed {
 public:
  template <class Weight>  // weight(k, column): the shifted weight
  PackedGemm(const QuantizedProductArgs& a, int64_t k, int64_t n, Weight weight)
      : Packed(a), k(k), kp(round_up(k, 2)), n(n), panels((n + kPanel - 1) / kPanel) {
    const int64_t pairs = kp / 2;
    b.assign(size_t(panels * pairs * kPanel * 2), 0);
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t j = 0; j < pairs; ++j)
        for (int64_t i = 0; i < kPanel && p * kPanel + i < n; ++i)
          for (int64_t t = 0; t < 2 && 2 * j + t < k; ++t)
            b[size_t(((p * pairs + j) * kPanel + i) * 2 + t)] = int16_t(weight(2 * j + t, p * kPanel + i));
  }

  const int64_t k, kp, n, panels;
  std::vector<int16_t> b;
};

// Rows [0, R) of A (row stride lda int16) times one panel (`pairs` pairs) into c (row stride ldc).
template <int R>
void micro_kernel(const int16_t* a, int64_t lda, const int16_t* b, int64_t pairs, int32_t* c, int64_t ldc) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t j = 0; j < pairs; ++j) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j * 32 + 16));
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * j, sizeof pair);
      const __m256i av = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), acc[r][1]);
  }
}

void panel_rows(const int16_t* a, int64_t lda, int64_t rows, const int16_t* b, int64_t pairs, int32_t* c, int64_t ldc) {
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) micro_kernel<kRows>(a + r * lda, lda, b, pairs, c + r * ldc, ldc);
  const int64_t left = rows - r;
  a += r * lda;
  c += r * ldc;
  switch (left) {
    case 1: micro_kernel<1>(a, lda, b, pairs, c, ldc); break;
    case 2: micro_kernel<2>(a, lda, b, pairs, c, ldc); break;
    case 3: micro_kernel<3>(a, lda, b, pairs, c, ldc); break;
    case 4: micro_kernel<4>(a, lda, b, pairs, c, ldc); break;
    case 5: micro_kernel<5>(a, lda, b, pairs, c, ldc); break;
    default: break;
  }
}

// Y [m, n] = epilogue(A W): gather(r0, rows, dst) writes rows [r0, r0 + rows) of A, kp int16 each
// (the pad past k zero). Blocks of rows run in parallel; where there are fewer blocks than twice the
// threads, groups of panels too (each gathering its rows).
template <class Gather>
void gemm(const PackedGemm& w, int64_t m, const Epilogue& e, Tensor& y, Gather gather) {
  const int64_t kp = w.kp, pairs = kp / 2;
  // A block of rows within ~96 KiB (L2), a multiple of the micro-kernel's rows.
  const int64_t block = std::clamp<int64_t>((96 << 10) / (kp * 2) / kRows * kRows, kRows, 16 * kRows);
  const int64_t row_blocks = (m + block - 1) / block;
  const int64_t wanted = 2 * int64_t(num_threads());
  int64_t per_group = w.panels;
  if (row_blocks < wanted) per_group = std::max<int64_t>(1, w.panels * row_blocks / wanted);
  const int64_t groups = (w.panels + per_group - 1) / per_group;
  parallel_for(row_blocks * groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<int16_t> a(size_t(block * kp));
    const int64_t ldc = per_group * kPanel;
    std::vector<int32_t> c(size_t(block * ldc));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t rb = t / groups, g = t % groups;
      const int64_t r0 = rb * block, rows = std::min(block, m - r0);
      const int64_t p0 = g * per_group, p1 = std::min(w.panels, p0 + per_group);
      gather(r0, rows, a.data());
      for (int64_t p = p0; p < p1; ++p)
        panel_rows(a.data(), kp, rows, w.b.data() + p * pairs * kPanel * 2, pairs, c.data() + (p - p0) * kPanel, ldc);
      e.finish(c.data(), ldc, r0, rows, p0 * kPanel, std::min(w.n, p1 * kPanel), y);
    }
  });
}

// ---- depthwise ----------------------------------------------------------------------------------

// Per 16-channel chunk and pair of taps (t, t + 1), the weights as unpacklo/hi_epi16 interleave the
// two taps' inputs: lo holds channels 0-3 and 8-11 of the chunk, hi 4-7 and 12-15, each as (w_t,
// w_t+1). 0 past the channels and taps.
class PackedDepthwise : public Packed {
 public:
  PackedDepthwise(const QuantizedProductArgs& a, int64_t channels, int64_t taps)
      : Packed(a), c(channels), chunks((channels + 15) / 16), taps(taps), pairs((taps + 1) / 2) {
    w.assign(size_t(chunks * pairs * 32), 0);
    auto weight = [&](int64_t ch, int64_t t) {
      return ch < c && t < taps ? int_at(*a.w, ch * taps + t) - a.w_zp_of(ch) : 0;
    };
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t j = 0; j < pairs; ++j) {
        int16_t* lo = w.data() + (k * pairs + j) * 32;
        int16_t* hi = lo + 16;
        for (int64_t lane = 0; lane < 2; ++lane)
          for (int64_t i = 0; i < 4; ++i)
            for (int64_t t = 0; t < 2; ++t) {
              lo[lane * 8 + i * 2 + t] = int16_t(weight(k * 16 + lane * 8 + i, 2 * j + t));
              hi[lane * 8 + i * 2 + t] = int16_t(weight(k * 16 + lane * 8 + 4 + i, 2 * j + t));
            }
      }
  }

  const int64_t c, chunks, taps, pairs;
  std::vector<int16_t> w;
};

// One output row's sums, channels padded to w.chunks x 16: `img` is the image's widened, padded copy
// (rows of `row` int16, pixels of `cp`), `off` the taps' offsets in it. KH, KW: the window when fixed
// at compile time (the loops over taps unroll), 0 for the layer's own.
template <int KH, int KW>
void depthwise_row(const PackedDepthwise& w, const int16_t* img, const int64_t* off, int64_t step, int64_t ow,
                   int32_t* acc, int64_t ld) {
  const int64_t taps = KH ? KH * KW : w.taps, pairs = (taps + 1) / 2;
  for (int64_t ox = 0; ox < ow; ++ox) {
    const int16_t* base = img + ox * step;
    for (int64_t k = 0; k < w.chunks; ++k) {
      __m256i lo = _mm256_setzero_si256(), hi = lo;
      const int16_t* wk = w.w.data() + k * w.pairs * 32;
      const int16_t* bk = base + k * 16;
      for (int64_t j = 0; j < pairs; ++j) {
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bk + off[2 * j]));
        const __m256i x1 = 2 * j + 1 < taps ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bk + off[2 * j + 1]))
                                            : _mm256_setzero_si256();
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1),
                                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + j * 32))));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1),
                                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + j * 32 + 16))));
      }
      int32_t* out = acc + ox * ld + k * 16;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
}

// X widened once into a padded copy (the pads and the channels past C hold 0, X's zero point after
// the shift), so that the taps' loop has no bounds to test; then output rows in parallel.
void depthwise(const PackedDepthwise& w, const sem::QConvGeometry& g, const QuantizedProductArgs& a,
               const Epilogue& e, Tensor& y) {
  const sem::Window& win = g.win;
  const int64_t C = g.channels, H = win.in[0], W = win.in[1], OH = win.out[0], OW = win.out[1];
  const int64_t KH = win.kernel[0], KW = win.kernel[1], cp = w.chunks * 16;
  const int64_t PH = (OH - 1) * win.strides[0] + (KH - 1) * win.dilations[0] + 1;
  const int64_t PW = (OW - 1) * win.strides[1] + (KW - 1) * win.dilations[1] + 1;
  const int64_t row = PW * cp, image = PH * row;
  std::unique_ptr<int16_t[]> padded(new int16_t[size_t(g.batch * image)]);  // every element written below
  const uint8_t* x = static_cast<const uint8_t*>(a.x->raw_data());
  const bool is_signed = a.x->dtype() == DType::Int8;
  parallel_for(g.batch * PH, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / PH, iy = t % PH - win.pad_begin[0];
      int16_t* dst = padded.get() + t * row;
      std::fill(dst, dst + row, int16_t(0));
      if (iy < 0 || iy >= H) continue;
      for (int64_t px = 0; px < PW; ++px) {
        const int64_t ix = px - win.pad_begin[1];
        if (ix >= 0 && ix < W) widen(x + ((n * H + iy) * W + ix) * C, is_signed, a.x_zp, dst + px * cp, C);
      }
    }
  });
  std::vector<int64_t> off(size_t(w.pairs * 2), 0);
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw)
      off[size_t(kh * KW + kw)] = kh * win.dilations[0] * row + kw * win.dilations[1] * cp;
  const int64_t step = win.strides[1] * cp;
  auto rows = KH == 3 && KW == 3   ? &depthwise_row<3, 3>
              : KH == 5 && KW == 5 ? &depthwise_row<5, 5>
                                   : &depthwise_row<0, 0>;
  parallel_for(g.batch * OH, 1, [&](int64_t begin, int64_t end) {
    std::vector<int32_t> acc(size_t(OW * cp));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / OH, oy = t % OH;
      rows(w, padded.get() + n * image + oy * win.strides[0] * row, off.data(), step, OW, acc.data(), cp);
      e.finish(acc.data(), cp, t * OW, OW, 0, C, y);
    }
  });
}

template <class T>
T* packing_of(std::shared_ptr<Int16Product>& cached, const QuantizedProductArgs& a) {
  auto* p = dynamic_cast<T*>(cached.get());
  return p && p->packs(a) ? p : nullptr;
}

}  // namespace

int64_t int16_product_calls() { return g_calls.load(); }

bool int16_products_wanted(bool onednn_exact) {
  const int64_t v = flags::integer("INGOT_CPU_INT8_INT16");
  return v > 0 || (v < 0 && !onednn_exact);
}

bool int16_conv(const sem::QConvGeometry& g, const QuantizedProductArgs& a, std::shared_ptr<Int16Product>& packed,
                Tensor& y) {
  const sem::Window& win = g.win;
  if (!g.nhwc || win.in.size() != 2 || g.channels < 1) return false;  // (no channels: nothing to multiply)
  const bool depthwise_layer = g.group == g.channels && g.out_channels == g.channels;
  if (g.group != 1 && !depthwise_layer) return false;
  const int64_t C = g.channels, M = g.out_channels, KH = win.kernel[0], KW = win.kernel[1];
  const Epilogue e(a, M);
  ++g_calls;
  if (depthwise_layer) {
    auto* w = packing_of<PackedDepthwise>(packed, a);
    if (!w) {
      packed = std::make_shared<PackedDepthwise>(a, C, KH * KW);
      w = static_cast<PackedDepthwise*>(packed.get());
    }
    depthwise(*w, g, a, e, y);
    return true;
  }
  const int64_t K = KH * KW * C;  // W [M, KH, KW, C]: row k of W^T is (kh, kw, c)
  auto* w = packing_of<PackedGemm>(packed, a);
  if (!w) {
    packed = std::make_shared<PackedGemm>(a, K, M,
                                          [&](int64_t k, int64_t oc) { return int_at(*a.w, oc * K + k) - a.w_zp_of(oc); });
    w = static_cast<PackedGemm*>(packed.get());
  }
  const int64_t H = win.in[0], W = win.in[1], OH = win.out[0], OW = win.out[1];
  const uint8_t* x = static_cast<const uint8_t*>(a.x->raw_data());
  const bool is_signed = a.x->dtype() == DType::Int8;
  const int64_t kp = w->kp;
  const bool pointwise = KH == 1 && KW == 1 && win.strides[0] == 1 && win.strides[1] == 1 && win.pad_begin[0] == 0 &&
                         win.pad_begin[1] == 0 && OH == H && OW == W;
  gemm(*w, g.batch * OH * OW, e, y, [&](int64_t r0, int64_t rows, int16_t* dst) {
    if (pointwise && kp == K) {  // A's rows are X's pixels
      widen(x + r0 * C, is_signed, a.x_zp, dst, rows * C);
      return;
    }
    int64_t ox = r0 % OW, oy = (r0 / OW) % OH, n = r0 / (OW * OH);
    for (int64_t r = 0; r < rows; ++r) {
      int16_t* d = dst + r * kp;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t iy = oy * win.strides[0] - win.pad_begin[0] + kh * win.dilations[0];
        for (int64_t kw = 0; kw < KW; ++kw, d += C) {
          const int64_t ix = ox * win.strides[1] - win.pad_begin[1] + kw * win.dilations[1];
          if (iy >= 0 && iy < H && ix >= 0 && ix < W) widen(x + ((n * H + iy) * W + ix) * C, is_signed, a.x_zp, d, C);
          else std::fill(d, d + C, int16_t(0));
        }
      }
      std::fill(d, dst + (r + 1) * kp, int16_t(0));
      if (++ox == OW) {
        ox = 0;
        if (++oy == OH) oy = 0, ++n;
      }
    }
  });
  return true;
}

void int16_matmul(const QuantizedProductArgs& a, int64_t m, int64_t k, int64_t n, std::shared_ptr<Int16Product>& packed,
                  Tensor& y) {
  auto* w = packing_of<PackedGemm>(packed, a);
  if (!w) {
    packed = std::make_shared<PackedGemm>(a, k, n, [&](int64_t i, int64_t j) { return int_at(*a.w, i * n + j) - a.w_zp_of(j); });
    w = static_cast<PackedGemm*>(packed.get());
  }
  const Epilogue e(a, n);
  ++g_calls;
  const uint8_t* x = static_cast<const uint8_t*>(a.x->raw_data());
  const bool is_signed = a.x->dtype() == DType::Int8;
  const int64_t kp = w->kp;
  gemm(*w, m, e, y, [&](int64_t r0, int64_t rows, int16_t* dst) {
    for (int64_t r = 0; r < rows; ++r) {
      widen(x + (r0 + r) * k, is_signed, a.x_zp, dst + r * kp, k);
      std::fill(dst + r * kp + k, dst + (r + 1) * kp, int16_t(0));
    }
  });
}

}  // namespace ingot::cpu
